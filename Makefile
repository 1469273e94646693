# The commands the README names. Each sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test lint format typecheck bench collect clean deploy-check

# A virtualenv with both requirement files; rebuilt when either changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## make demo: the demo on the embedded default (SQLite, in-process channel layer and tasks), DEBUG on
## (the only place it is on by default: docs/security.md)
demo: $(VENV)/.installed
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --no-input -v 0
	$(PY) manage.py demo --port $(PORT)

## make test: ruff, mypy --strict (make typecheck), the deploy/ checks, then pytest (PostgreSQL / Redis tests
## run when DATABASE_URL / REDIS_URL are set). -ra prints the reason of every skip; with PODLIFE_CI=1
## (.ci/run) a skip fails (tests/ci_skips.py).
test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(MAKE) --no-print-directory deploy-check
	$(PY) -m pytest -ra
	@# With PostgreSQL as the main database, prove the storage tests on the embedded SQLite default too
	@# (the PostgreSQL-only ones among them ran above: deselected here, not skipped).
	@if [ -n "$$DATABASE_URL" ]; then \
		echo "== storage tests again on SQLite =="; \
		DATABASE_URL= $(PY) -m pytest -q -ra -m "both_databases and not postgres"; \
	fi

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

## make typecheck: mypy --strict (with django-stubs) on the pure packages, the demo cluster, the store, the derive
## stage, the read layer and the live push (pyproject.toml [tool.mypy])
typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

## make bench: every benchmark; each prints its ratio against a baseline measured in the same run.
## Meaningful on PostgreSQL (DATABASE_URL); bench/live.py also needs REDIS_URL and Chromium,
## bench/firstdraw.py Chromium; bench/scale_pages.py PostgreSQL (and Chromium for its first frame).
bench: $(VENV)/.installed
	$(PY) bench/ingest.py
	$(PY) bench/watch.py
	$(PY) bench/derive.py
	$(PY) bench/export.py
	$(PY) bench/audit.py
	@if [ -x /usr/bin/chromium ]; then $(PY) bench/firstdraw.py; else echo "bench/firstdraw.py skipped: /usr/bin/chromium is absent"; fi
	@if [ -n "$$REDIS_URL" ]; then $(PY) bench/live.py; else echo "bench/live.py skipped: REDIS_URL is not set"; fi
	@case "$$DATABASE_URL" in postgres*) $(PY) bench/scale_pages.py;; *) echo "bench/scale_pages.py skipped: needs PostgreSQL";; esac

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache var/screenshots
