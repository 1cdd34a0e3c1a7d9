# The two commands of the README. Both create .venv on first use.
# torch is installed first, pinned to 2.13.0: on a machine without torch an unpinned
# requirement would pull a CUDA build with several GB of packages.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test setup test-matrix test-models test-browser bench bench-quick

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

# The real-browser tier (tests/browser, marker "browser"): our pages opened in headless Chromium, which
# must log no error and fetch nothing. Chromium comes from apt when missing (Debian's `chromium`,
# ~25 s and ~460 MB on disk). Without it this target fails: CI must never pass the tier by skipping it
# (INDUCTOR_PERF_REQUIRE_BROWSER=1 turns the tests' skip into a failure).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)
HAS_CHROMIUM = $(BIN)/python -c "import sys; sys.path.insert(0, 'tools'); import browser_check as b; sys.exit(b.find_chromium() is None)"

test-browser: $(BIN)/.installed
	@$(HAS_CHROMIUM) || ! command -v apt-get >/dev/null || { \
	  echo "test-browser: Chromium not found: installing Debian's chromium with apt-get (~25 s, ~460 MB)"; \
	  $(SUDO) apt-get install -y -q chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -q >/dev/null 2>&1 && \
	  $(SUDO) apt-get install -y -q chromium >/dev/null 2>&1; } || true; }
	@$(HAS_CHROMIUM) || { echo "test-browser: FAILED: no Chromium (not on PATH, and apt-get install -y chromium did not work)"; exit 1; }
	INDUCTOR_PERF_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q -ra -m browser tests/browser

# Every performance figure side by side (bench/run_all.py): rewrites the generated part of docs/benchmarks.md
# with machine, torch version, date and commands. Full: ~30 min, 1M/3M-event traces in /tmp/ip/big, HTA in a
# throwaway venv (~/.cache/inductor_perf-bench/hta). QUICK=1 or bench-quick: under 2 minutes, small traces.
bench: $(BIN)/.installed
	$(BIN)/python bench/run_all.py $(if $(QUICK),--quick)

bench-quick: $(BIN)/.installed
	$(BIN)/python bench/run_all.py --quick
