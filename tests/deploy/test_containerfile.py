"""The Containerfile cannot be built here (no registry for its base image), so its every path and
command is checked against the checkout, and its build-time commands are run against it."""

from __future__ import annotations

import fnmatch
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands
from dockerfile_parse import DockerfileParser

from .conftest import ROOT, find

CONTAINERFILE = ROOT / "Containerfile"


@pytest.fixture(scope="module")
def parsed() -> DockerfileParser:
    return DockerfileParser(fileobj=io.BytesIO(CONTAINERFILE.read_bytes()))


def instructions(parsed: DockerfileParser, kind: str) -> list[str]:
    return [i["value"] for i in parsed.structure if i["instruction"] == kind]


def stages(parsed: DockerfileParser) -> list[list[dict]]:
    out: list[list[dict]] = []
    for i in parsed.structure:
        if i["instruction"] == "FROM":
            out.append([])
        if out:
            out[-1].append(i)
    return out


def requirement_names() -> set[str]:
    names = set()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(re.split(r"[\[=<>]", line)[0].lower())
    return names


def test_base_is_a_pinned_debian_python_3_11(parsed):
    (arg,) = [a for a in instructions(parsed, "ARG") if a.startswith("PYTHON_IMAGE=")]
    image = arg.split("=", 1)[1]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?", image), image
    assert instructions(parsed, "FROM") == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]


def test_final_stage_runs_as_a_non_root_user_without_build_tools(parsed):
    final = stages(parsed)[-1]
    users = [i["value"] for i in final if i["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert users[-1] == "10001:10001"
    runs = " ".join(i["value"] for i in final if i["instruction"] == "RUN")
    for tool in ("apt-get install", "gcc", "build-essential", "pip install"):
        assert tool not in runs
    assert "pip uninstall --yes pip setuptools wheel" in runs
    copies = [i["value"] for i in final if i["instruction"] == "COPY"]
    assert copies == ["--from=build /opt/venv /opt/venv", "--from=build /app /app"]


def run_words(stage: list[dict]) -> list[list[str]]:
    """Each command of a stage's RUN lines (split at ``&&``), as words."""
    return [
        shlex.split(part)
        for i in stage
        if i["instruction"] == "RUN"
        for part in i["value"].split("&&")
        if part.strip()
    ]


def pins(path: Path) -> dict[str, str]:
    """NAME -> VERSION of a requirement file's ``NAME==VERSION`` lines, following its ``-r`` includes."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            for name, version in pins(path.parent / line[3:].strip()).items():
                assert name not in out, f"{name} pinned twice ({path.name})"
                out[name] = version
        elif "==" in line:
            name, version = line.split("==")
            assert name.lower() not in out, f"{name} pinned twice ({path.name})"
            out[name.lower()] = version
    return out


def in_build_context(name: str) -> bool:
    """Whether .dockerignore lets the checkout's ``name`` into the build context (its last match decides)."""
    included = True
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        pattern = line.removeprefix("!").rstrip("/")
        if fnmatch.fnmatch(name, pattern) or name.startswith(f"{pattern}/"):
            included = line.startswith("!")
    return included


def test_build_stage_compiles_the_core_with_a_compiler_before_the_bytecode(parsed):
    """The image ships the mypyc-compiled core (docs/deploy.md): the build stage installs gcc, then runs
    tools/compile_core.py with the build virtualenv's Python on the copied sources, before compileall."""
    build = stages(parsed)[0]
    order = [(i["instruction"], i["value"]) for i in build]
    runs = [v for k, v in order if k == "RUN"]
    apt = next(v for v in runs if "apt-get install" in v)
    assert apt.index("apt-get update") < apt.index("apt-get install")
    assert "--no-install-recommends gcc libc6-dev" in apt and "rm -rf /var/lib/apt/lists/*" in apt
    commands = run_words(build)
    (compile_argv,) = [w for w in commands if "tools/compile_core.py" in w]
    assert compile_argv == ["/opt/build-venv/bin/python", "tools/compile_core.py"]
    (compileall,) = [w for w in commands if "compileall" in w]
    assert commands.index(compile_argv) < commands.index(compileall)
    at = {value: n for n, value in enumerate(order)}
    compiled = next(n for n, (k, v) in enumerate(order) if k == "RUN" and "compile_core.py" in v)
    assert at[("RUN", apt)] < compiled and order[0][1] == "${PYTHON_IMAGE} AS build"
    # What the script reads is in place first: the sources, mypy's config (its Django plugin), the script.
    for copied in ("timelines /app/timelines", "pyproject.toml /app/pyproject.toml"):
        assert at[("COPY", copied)] < compiled
    assert at[("COPY", "tools/compile_core.py /app/tools/compile_core.py")] < compiled
    assert (ROOT / "pyproject.toml").read_text().count("mypy_django_plugin") == 1
    # mypy's Django plugin imports the settings: the build virtualenv sees the app's, after its own packages.
    (pth,) = [w for w in commands if w[0] == "echo"]
    assert pth == [
        "echo",
        "/opt/venv/lib/python3.11/site-packages",
        ">",
        "/opt/build-venv/lib/python3.11/site-packages/podlife-runtime.pth",
    ]


def test_build_stage_installs_the_build_pins_make_core_ext_uses(parsed):
    """mypy, django-stubs and setuptools come from requirements-build.txt, the file requirements-dev.txt
    includes (make typecheck and make core-ext): no version of them is written in the Containerfile."""
    build = stages(parsed)[0]
    copied = dict(i["value"].split() for i in build if i["instruction"] == "COPY")
    installs = [w for w in run_words(build) if w[:2] == ["/opt/build-venv/bin/pip", "install"]]
    assert installs == [
        [
            "/opt/build-venv/bin/pip",
            "install",
            "--no-cache-dir",
            "--only-binary=:all:",
            "-r",
            copied["requirements-build.txt"],
        ]
    ]
    build_pins = pins(ROOT / "requirements-build.txt")
    assert set(build_pins) == {"mypy", "django-stubs", "django-stubs-ext", "setuptools"}
    dev_pins = pins(ROOT / "requirements-dev.txt")  # raises if requirements-dev.txt pins one of them again
    assert {name: dev_pins[name] for name in build_pins} == build_pins
    assert "-r requirements-build.txt" in (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert not re.search(r"(mypy|django-stubs|setuptools)[=<>~]", CONTAINERFILE.read_text())
    # The mypy make typecheck runs here is the one the image compiles with.
    from importlib.metadata import version

    for name in ("mypy", "django-stubs", "django-stubs-ext"):
        assert version(name) == build_pins[name], f"{name}: run make to reinstall .venv"
    # And the Makefile reinstalls .venv when the build pins change.
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^\$\(VENV\)/\.installed:.*\brequirements-build\.txt\b", makefile, re.M)


def test_build_stage_leaves_only_the_compiled_modules_in_app(parsed):
    """The compile step removes what it needed and made besides the .so files and their stamp (mypyc's C
    sources and objects under compile_core.BUILD, the script, mypy's config) in the same RUN, so /app,
    which the final stage copies, holds none of it; a compiled copy from the checkout never gets in."""
    spec = importlib.util.spec_from_file_location("podlife_compile_core", ROOT / "tools" / "compile_core.py")
    assert spec and spec.loader
    compile_core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compile_core)
    build = stages(parsed)[0]
    run = next(i["value"] for i in build if i["instruction"] == "RUN" and "compile_core.py" in i["value"])
    removed = next(shlex.split(p) for p in run.split("&&") if p.split()[:2] == ["rm", "-rf"])[2:]
    made = {
        compile_core.BUILD.relative_to(ROOT),
        Path("tools"),
        Path("pyproject.toml"),
        Path(".mypy_cache"),
    }
    assert {Path(r).relative_to("/app") for r in removed} == made
    assert compile_core.STAMP.parent == ROOT / "timelines" / "lifecycle"  # kept: beside the sources
    for name in (
        "timelines/lifecycle/derive.cpython-311-x86_64-linux-gnu.so",
        "timelines/lifecycle/_compiled.sha256",
    ):
        assert not in_build_context(name), f"{name} is in the build context"
    assert in_build_context("timelines/lifecycle/derive.py")
    final = " ".join(i["value"] for i in stages(parsed)[-1])
    assert "build-venv" not in final and "compile_core" not in final


def test_every_copied_path_exists_and_is_in_the_build_context(parsed):
    allowed = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    for value in instructions(parsed, "COPY"):
        if value.startswith("--from="):
            continue
        *sources, _dest = value.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such path in the checkout"
            assert any(fnmatch.fnmatch(source, a) for a in allowed), f"{source} is excluded by .dockerignore"


def test_every_app_package_is_copied(parsed):
    """A Django app left out of the image would fail at start: every installed app's folder is copied."""
    from django.conf import settings

    copied = {v.split()[0] for v in instructions(parsed, "COPY") if not v.startswith("--from=")}
    local = {app.split(".")[0] for app in settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()}
    assert local <= copied, f"not copied: {local - copied}"
    assert {"manage.py", "podlife_site", "templates", "static", "requirements.txt"} <= copied


def test_commands_exist(parsed, rendered):
    """Every executable the image and deploy/ start is installed by requirements.txt or Python itself,
    every module they name exists, every manage.py command is one Django knows."""
    installed = requirement_names()
    run_lines = " && ".join(instructions(parsed, "RUN"))
    commands = [
        shlex.split(part.strip().lstrip("&").strip()) for part in run_lines.split("&&") if part.strip()
    ]
    commands.append(json.loads(instructions(parsed, "CMD")[0]))
    for overlay in ("overlays/external", "overlays/all-in-one"):
        for obj in rendered[overlay]:
            if obj["kind"] in {"Deployment", "Job"} and obj["metadata"]["name"].startswith("podlife-"):
                spec = obj["spec"]["template"]["spec"]
                for c in [*spec.get("initContainers", []), *spec["containers"]]:
                    commands.append(c["command"] + c.get("args", []))
    known = set(get_commands())
    seen = set()
    for argv in commands:
        argv = [a for a in argv if not re.fullmatch(r"[A-Z_]+=.*", a)]  # VAR=value prefixes
        exe = Path(argv[0]).name
        seen.add(exe)
        if exe in {"uvicorn", "celery"}:
            assert exe in installed, f"{exe} is not in requirements.txt"
        if exe == "uvicorn":
            module = argv[1].split(":")[0]
            assert importlib.util.find_spec(module), module
        if exe == "celery":
            assert argv[1:3] == ["-A", "podlife_site"] and importlib.util.find_spec("podlife_site.celery")
        if "manage.py" in argv:
            assert (ROOT / "manage.py").is_file()
            command = argv[argv.index("manage.py") + 1]
            assert command in known, f"manage.py {command}: no such command"
        if exe == "sh":
            for inner in argv[2].split(";"):
                if "manage.py" in inner:
                    words = shlex.split(inner.replace("until", "").strip())
                    assert words[words.index("manage.py") + 1] in known
    assert {"uvicorn", "celery", "python", "sh", "test"} <= seen
    # The plotly bundle the build checks for is where the installed package keeps it.
    import plotly

    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert plotly_js.is_file() and "site-packages/plotly/package_data/plotly.min.js" in run_lines


def test_build_time_collectstatic_runs_against_the_checkout(parsed, tmp_path):
    """The RUN line's collectstatic, with its own environment, works on this code (dry run)."""
    run = next(v for v in instructions(parsed, "RUN") if "collectstatic" in v)
    part = next(p for p in run.split("&&") if "collectstatic" in p)
    words = shlex.split(part)
    env = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=.*", w))
    argv = [w for w in words if not re.fullmatch(r"[A-Z_]+=.*", w)]
    assert argv[0] == "/opt/venv/bin/python" and argv[1] == "manage.py"
    clean = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY"}
    }
    done = subprocess.run(
        [sys.executable, *argv[1:], "--dry-run"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert env["DEBUG"] == "0" and len(env["SECRET_KEY"]) >= 32


def test_hadolint_finds_nothing(deploy_check):
    assert deploy_check.containerfile_problems() == []


def test_web_runs_the_image_default_command(parsed, rendered):
    cmd = json.loads(instructions(parsed, "CMD")[0])
    web = find(rendered["overlays/external"], "Deployment", "podlife-web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert cmd[:2] == container["command"] == ["uvicorn", "podlife_site.asgi:application"]
    assert "8000" in cmd and "--port=8000" in container["args"]
