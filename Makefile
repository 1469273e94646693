# The commands the README names. Each sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test lint format typecheck bench collect clean

# A virtualenv with both requirement files; rebuilt when either changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## make demo: the demo on the embedded default (SQLite, in-process channel layer and tasks)
demo: $(VENV)/.installed
	$(PY) manage.py migrate --no-input -v 0
	$(PY) manage.py demo --port $(PORT)

## make test: ruff, mypy --strict (make typecheck), then pytest (PostgreSQL / Redis tests run when DATABASE_URL /
## REDIS_URL are set)
test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest
	@# With PostgreSQL as the main database, prove the storage tests on the embedded SQLite default too.
	@if [ -n "$$DATABASE_URL" ]; then \
		echo "== storage tests again on SQLite =="; \
		DATABASE_URL= $(PY) -m pytest -q -m both_databases; \
	fi

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
## Meaningful on PostgreSQL (DATABASE_URL); bench/live.py also needs REDIS_URL and Chromium.
bench: $(VENV)/.installed
	$(PY) bench/ingest.py
	$(PY) bench/watch.py
	$(PY) bench/derive.py
	$(PY) bench/export.py
	@if [ -n "$$REDIS_URL" ]; then $(PY) bench/live.py; else echo "bench/live.py skipped: REDIS_URL is not set"; fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache var/screenshots
