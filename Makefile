# Every target creates and uses .venv itself: `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The demo needs neither Spark nor the test tools: `make demo` on a fresh clone installs
# statectl alone (`.`, ~250 MB), `make test` adds the extras (`.[spark,dev]`, ~1.2 GB) to the
# same venv (after which the demo's step has nothing left to do).
DEMO_STAMP := $(VENV)/.installed-demo
# Real Flink for the restore tests and the Flink benchmarks, in a venv of its own: apache-flink
# 2.3.0 pins apache-beam 2.61, which needs pyarrow < 17 and numpy < 2.2, while pyspark 4 (our
# `spark` extra) needs pyarrow >= 18. Only Flink's jars and PyFlink run from it (~840 MB, ~30 s).
FLINK_VERSION := 2.3.0
FLINK_VENV    := .venv-flink
FLINK_STAMP   := $(FLINK_VENV)/.installed-$(FLINK_VERSION)

# RocksDB's own tools for the SST reader's differential tests (sst_dump, ldb) and its C library
# (written through ctypes: merges and single deletions); from Debian, installed when missing.
ROCKSDB_DEBS := librocksdb-dev rocksdb-tools

.PHONY: demo test test-pure test-slow test-flink-versions bench json-docs lint venv flink-venv system-deps clean

venv: $(STAMP)

# The install builds statectl's compiled decoder (setup.py: formats/flink/read/cdecoder*.c, an
# optional extension: without a C compiler it is left out and statectl decodes in pure Python;
# `statectl --version` says which); a changed C file builds it again.
CDECODER := $(wildcard formats/flink/read/cdecoder*.c formats/flink/read/cdecoder.h)

$(STAMP): pyproject.toml setup.py $(CDECODER)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,dev]'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml setup.py $(CDECODER)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(DEMO_STAMP)

flink-venv: $(FLINK_STAMP)

$(FLINK_STAMP):
	rm -rf $(FLINK_VENV)
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLINK_VENV)/bin/python -m pip install --quiet apache-flink==$(FLINK_VERSION)
	touch $(FLINK_STAMP)

system-deps:
	@if ! command -v sst_dump >/dev/null 2>&1 || ! ldconfig -p | grep -q librocksdb; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing $(ROCKSDB_DEBS) (apt-get)"; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(ROCKSDB_DEBS) >/dev/null; \
	fi

# Tests run on every core (pytest-xdist; TEST_WORKERS=0 runs them in this process): the
# longest ones (Flink restores, Spark, the kill trials) are spread over the workers.
TEST_WORKERS ?= auto

test: lint $(FLINK_STAMP) system-deps
	STATECTL_FLINK_VENV=$(FLINK_VENV) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# The whole suite without the compiled decoder (the Python readers alone, as on a machine
# without a C compiler); tests/test_speedups.py compares both on every fixture in `make test`.
test-pure: lint $(FLINK_STAMP) system-deps
	STATECTL_PURE_PYTHON=1 STATECTL_FLINK_VENV=$(FLINK_VENV) $(PY) -m pytest -q \
	  -n $(TEST_WORKERS) --dist worksteal

test-slow: $(STAMP) $(FLINK_STAMP) system-deps
	STATECTL_FLINK_VENV=$(FLINK_VENV) $(PY) -m pytest -q -m slow

# Flink 1.15 to 2.2 (besides 1.20 and 2.3, which `make test` covers) load, and 1.17 to 2.2
# restore, what statectl writes for them: each release's jars are installed on first use
# (`pip install --no-deps apache-flink-libraries==X`, ~300-400 MB each, cached in
# ~/.cache/statectl-flink). STATECTL_FLINK_RELEASES=1.18.1,2.0.2 narrows it.
test-flink-versions: $(STAMP) $(FLINK_STAMP)
	STATECTL_FLINK_VENV=$(FLINK_VENV) $(PY) -m pytest -q -m flink_versions \
	  tests/test_flink_releases.py tests/test_flink_release_restore.py

demo: $(DEMO_STAMP)
	$(PY) -m cli.demo

bench: $(STAMP) $(FLINK_STAMP)
	STATECTL_FLINK_VENV=$(FLINK_VENV) $(PY) bench/flink_big.py
	STATECTL_FLINK_VENV=$(FLINK_VENV) $(PY) bench/run.py

json-docs: $(STAMP)
	$(PY) docs/schema/render.py

lint: $(STAMP)
	$(VENV)/bin/ruff check statecore formats cli tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(FLINK_VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache build
	find formats -name 'cdecoder*.so' -delete
