# The commands the README names. Each sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test fidelity mutation lint format typecheck bench collect clean deploy-check screenshots vendor-plotly core-ext clean-core-ext

# A virtualenv with the requirement files (requirements-dev.txt includes the other two); rebuilt when one changes.
$(VENV)/.installed: requirements.txt requirements-build.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## make demo: the demo on the embedded default (SQLite, in-process channel layer and tasks), DEBUG on
## (the only place it is on by default: docs/security.md). PORT=N: its port (8000); FD=N: serve an inherited
## bound TCP socket instead (how tests/test_demo_ctrl_c.py holds its port)
demo: $(VENV)/.installed
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --no-input -v 0
	$(PY) manage.py demo $(if $(FD),--fd $(FD),--port $(PORT))

## make test: ruff, mypy --strict (make typecheck), the import contracts (lint-imports: the rooms' arrows run one
## way, pyproject.toml [tool.importlinter]), the deploy/ checks, then pytest (PostgreSQL / Redis tests
## run when DATABASE_URL / REDIS_URL are set). -ra prints the reason of every skip; with PODLIFE_CI=1
## (.ci/run) a skip fails (tests/ci_skips.py). The tests run in a new random order each time (pytest-randomly;
## its first lines say "Using --randomly-seed=N"): SEED=N repeats that order, SEED=off keeps file order.
## WORKERS=2 runs them in two parallel workers (pytest-xdist), each with its own test database and Redis
## database (README.md).
test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo
	$(MAKE) --no-print-directory deploy-check
	$(PY) -m pytest -ra $(PYTEST_ORDER) $(if $(WORKERS),-p xdist -n $(WORKERS))

PYTEST_ORDER = $(if $(filter off,$(SEED)),-p no:randomly,$(if $(SEED),-p randomly --randomly-seed=$(SEED)))

## make fidelity: how many facts of the real corpus (tests/fixtures/real/*/facts.toml) hold through the
## project's own commands; exits 1 when fewer hold than tests/fixtures/real/fidelity-score records.
## RATCHET=update records a higher score (docs/fidelity.md).
fidelity: $(VENV)/.installed
	$(PY) tools/fidelity.py $(if $(filter update,$(RATCHET)),--update)

## make mutation: mutation testing (mutmut) of the code that decides what a user sees (pyproject.toml
## [tool.mutmut]): per area, killed / total mutants and the survivors. A seeded sample of SAMPLE lines
## (default 15, SEED=S) runs in 7-11 min; FULL=1 mutates every line (a release's run: hours). Exits 1 when
## a line of the default sample recorded in tools/mutation-score has a mutant fewer killed (a line new to
## the sample, edited or added, is not compared); RATCHET=update records the sample (docs/testing.md).
mutation: $(VENV)/.installed
	$(PY) tools/mutation.py $(if $(FULL),--full) $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(SEED),--seed $(SEED)) $(if $(filter update,$(RATCHET)),--update)

## make deploy-check: render every deploy/ overlay (kubectl kustomize), validate it against the Kubernetes
## 1.28-1.32 schemas and the pod-security checks, lint the Containerfile (docs/deploy.md)
deploy-check: $(VENV)/.installed
	$(PY) .ci/deploy_check.py

## make collect KUBECONFIG=PATH: watch the kubeconfig's current context in the foreground, no broker
collect: $(VENV)/.installed
	$(PY) manage.py migrate --no-input -v 0
	$(PY) manage.py collect --kubeconfig $${KUBECONFIG:-$$HOME/.kube/config}

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## make typecheck: mypy --strict (with django-stubs) on the whole product: collectors, timelines, alerts,
## podlife_site, their migrations excepted (pyproject.toml [tool.mypy])
typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

## make bench: every benchmark; each prints its ratio against a baseline measured in the same run.
## Meaningful on PostgreSQL (DATABASE_URL); bench/live.py also needs REDIS_URL and Chromium (its user-facing
## parts PostgreSQL) and exits 1 when one of its goals is missed (last, so the others all print);
## bench/firstdraw.py and bench/axis_values.py Chromium, bench/load.py PostgreSQL and REDIS_URL;
## bench/scale.py (fleet scale, ~15 min) PostgreSQL, its fleet run Redis; bench/scale_pages.py PostgreSQL
## (and Chromium for its first frame). The lifecycle core is compiled first (make core-ext), as the image
## ships it, where a C compiler is there; without one the benchmarks say they ran it as plain Python.
bench: $(VENV)/.installed
	@if command -v cc >/dev/null 2>&1; then $(MAKE) --no-print-directory core-ext; else echo "make bench: no C compiler (cc), the lifecycle core runs as plain Python"; fi
	$(PY) bench/ingest.py
	$(PY) bench/watch.py
	@case "$$DATABASE_URL" in postgres*) $(PY) bench/storage.py;; *) echo "bench/storage.py skipped: it measures PostgreSQL's disk";; esac
	$(PY) bench/derive.py
	$(PY) bench/export.py
	$(PY) bench/window_peak.py
	$(PY) bench/audit.py
	@if [ -x /usr/bin/chromium ]; then $(PY) bench/firstdraw.py && $(PY) bench/firstdraw.py --page node; else echo "bench/firstdraw.py skipped: /usr/bin/chromium is absent"; fi
	@if [ -x /usr/bin/chromium ]; then $(PY) bench/axis_values.py; else echo "bench/axis_values.py skipped: /usr/bin/chromium is absent"; fi
	@case "$$DATABASE_URL" in postgres*) if [ -n "$$REDIS_URL" ]; then $(PY) bench/load.py; else echo "bench/load.py skipped: REDIS_URL is not set"; fi;; *) echo "bench/load.py skipped: needs PostgreSQL (DATABASE_URL)";; esac
	@case "$$DATABASE_URL" in postgres*) PODLIFE_BENCH_REDIS_URL="$$REDIS_URL" $(PY) bench/scale.py $$([ -n "$$REDIS_URL" ] || echo --fleet 0);; *) echo "bench/scale.py skipped: it measures PostgreSQL partitions";; esac
	@case "$$DATABASE_URL" in postgres*) $(PY) bench/scale_pages.py;; *) echo "bench/scale_pages.py skipped: needs PostgreSQL";; esac
	@if [ -n "$$REDIS_URL" ]; then $(PY) bench/live.py; else echo "bench/live.py skipped: REDIS_URL is not set"; fi

## make screenshots: retake docs/screenshots/*.png (the pictures in docs/dashboard.md) through the browser tests
screenshots: $(VENV)/.installed
	PODLIFE_SCREENSHOTS=1 $(PY) -m pytest -q tests/web/test_browser_gantt.py -k screenshot

clean: clean-core-ext
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .grimp_cache .import_linter_cache var/screenshots

## make core-ext: compile the lifecycle core's hot modules with mypyc, in place (tools/compile_core.py; needs a
## C compiler and the Python headers): about 57 % less CPU in the core, the same timelines. Rebuilt when one of
## their sources, or observation.py or record.py (compiled against), changes (a stale copy refuses to import);
## make clean-core-ext goes back to plain Python.
CORE_EXT_SOURCES := $(addprefix timelines/lifecycle/,timeline.py derive.py facts.py findings.py worker.py resolve.py audit_evidence.py cluster_objects.py observation.py record.py)
core-ext: timelines/lifecycle/_compiled.sha256

timelines/lifecycle/_compiled.sha256: $(VENV)/.installed $(CORE_EXT_SOURCES) tools/compile_core.py
	$(PY) tools/compile_core.py

clean-core-ext:
	rm -rf timelines/lifecycle/*.so timelines/lifecycle/_compiled.sha256 var/core-ext

## make vendor-plotly: refresh the partial plotly.js bundle (static/vendor/, docs/dashboard.md) from the npm
## registry at the plotly.js version of the installed plotly package (tests/web/test_views.py checks they match),
## its remote defaults pointed at this site (dashboard/plotly_bundles.py).
vendor-plotly: $(VENV)/.installed
	set -e; version=$$($(PY) -c 'from dashboard.plotly_bundles import FULL_PATH, version_of; print(version_of(FULL_PATH))'); \
	tmp=$$(mktemp -d); cd $$tmp && npm pack --silent plotly.js-basic-dist-min@$$version >/dev/null && tar xzf *.tgz; \
	cd - >/dev/null; cp $$tmp/package/plotly-basic.min.js $$tmp/package/LICENSE $$tmp/package/package.json static/vendor/plotly.js-basic-dist-min/; \
	$(PY) -c 'from dashboard.plotly_bundles import localize_vendored; localize_vendored()'; \
	rm -rf $$tmp; echo "static/vendor/plotly.js-basic-dist-min: plotly.js $$version"
