# npu-sim: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
DEMO_GRAPH ?= examples/ds_cnn_kws_int8.tosa

.PHONY: demo test lint bench conformance golden clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e ".[test]"
	touch $(VENV)/.installed $@

demo: $(VENV)/.installed
	$(VENV)/bin/npu-sim run $(DEMO_GRAPH) --hw edge --random-inputs 0 -o demo_out

# Lint and types first, then the whole suite; pytest's "no tests collected" (exit 5) is not a failure.
test: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not conformance" --nbmake tests notebooks; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

# ruff (pyproject.toml: lint rules, complexity at most 15) and mypy (npu_sim, scheduler, reports).
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

conformance: $(VENV)/.installed-test
	$(PY) -m pytest -q -m conformance tests/conformance

# Regenerates tests/golden/cycles.json (the pinned cycle figures) and prints what moved.
golden: $(VENV)/.installed-test
	$(PY) -m tests.golden.figures

bench: $(VENV)/.installed-test
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
