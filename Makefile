# Every target creates and uses .venv itself: `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow bench lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,dev]'
	touch $(STAMP)

test: lint
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

demo: $(STAMP)
	$(PY) -m cli.demo

bench: $(STAMP)
	$(PY) bench/run.py

lint: $(STAMP)
	$(VENV)/bin/ruff check statecore formats cli tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
