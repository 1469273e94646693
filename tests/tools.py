"""External tools some tests drive (kubectl, Chromium): where they are missing, a local run skips with the
reason, while CI (``CI`` or ``PODLIFE_REQUIRE_TOOLS`` set, as ``.ci/run`` does) fails: a test that needs a
tool must never pass silently by not running."""

from __future__ import annotations

import os
import shutil

import pytest

OFF = ("", "0", "false", "no")


def tools_required() -> bool:
    """True when a missing tool is a failure, not a skip: in CI, or with PODLIFE_REQUIRE_TOOLS=1."""
    return any(os.environ.get(v, "").strip().lower() not in OFF for v in ("PODLIFE_REQUIRE_TOOLS", "CI"))


def require_tool(name: str) -> str:
    """The path of ``name`` on PATH; otherwise fail (CI) or skip (a developer's machine) naming it."""
    path = shutil.which(name)
    if path:
        return path
    if tools_required():
        pytest.fail(
            f"{name} is not on PATH, and this run requires every tool its tests drive (CI or "
            f"PODLIFE_REQUIRE_TOOLS is set): install {name}",
            pytrace=False,
        )
    pytest.skip(f"{name} is not installed (with PODLIFE_REQUIRE_TOOLS=1 or CI set this fails instead)")
