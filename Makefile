# The two commands of the README. Both create .venv on first use.
# torch is installed first, pinned to 2.13.0: on a machine without torch an unpinned
# requirement would pull a CUDA build with several GB of packages.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test setup test-matrix test-models

# numpy: without it torch warns "Failed to initialize NumPy" at import, before anything of ours.
$(BIN)/.installed: pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0 numpy
	$(BIN)/pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

setup: $(BIN)/.installed

demo: $(BIN)/.installed
	INDUCTOR_PERF_TRACE_DIR=inductor_perf_out $(BIN)/python examples/demo.py

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q -ra

# The rest of the real-model tier (T5, Mixtral; make test runs GPT-2 and BERT): marker "models".
test-models: $(BIN)/.installed
	$(BIN)/python -m pytest -q -ra -m models tests/integration/test_real_models.py

# The torch-version tier on 2.11, 2.12, 2.14 and 2.15, each in a cached venv (tools/test_matrix.sh).
test-matrix:
	tools/test_matrix.sh
