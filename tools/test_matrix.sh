#!/usr/bin/env bash
# The torch-version matrix: for each release line other than the default set-up's (2.13, which
# `make test` covers), a cached venv with that torch and a tier of tests that proves the version
# works. `make test-matrix` and .ci/run call this.
#
#   tools/test_matrix.sh [VERSION ...]      default: every version in MATRIX below
#
# Venvs live under ${INDUCTOR_PERF_CI_CACHE:-~/.cache/inductor_perf-ci}/torch-X.Y (torch-X.Y-pyA.B for a
# release run on another Python than $PY, see PYTHON_OF) and are built once (the CUDA builds of torch
# weigh ~5 GB and take ~80 s to install; they run without a GPU). Each run
# re-points the venv's editable install at this checkout. MATRIX_JOBS (default 2) versions run at
# once; each one's output is printed whole when it ends. Exit status: non-zero if any version failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# The longest tiers first: versions run MATRIX_JOBS at a time, the next starting as soon as one ends.
MATRIX=(2.11.0 2.15.0 2.12.1 2.14.1)
# The ends of the range (the oldest release we support, which the GPU machines run, and the newest)
# run the whole tier; the releases between them run the core tier, which checks every internal we hook.
FULL=(2.11.0 2.15.0)
# The core tier: the unit tests that touch torch (dtype names, formulas against flop_counter, the
# meta-kernel costs, the fork with torch's threads alive, the lazy import), the internals the backend
# checks, the newer/older-torch behaviour, the backend and tagging (fwd+bwd FLOPs against
# FlopCounterMode, split reductions by hand). The trace-analysis unit tests read JSON only: make test
# covers them once.
CORE=(
  tests/unit/test_compat.py
  tests/unit/costs/test_op_meta.py
  tests/unit/costs/test_op_costs.py
  tests/unit/devices/test_devices.py
  tests/unit/tagging/test_tags.py
  tests/unit/devices/test_calibrate.py
  tests/unit/test_lean_import.py
  tests/unit/augment/test_fuzz_trace.py
  tests/unit/augment/test_augment.py
  tests/unit/comparison/test_diff.py
  tests/unit/augment/test_fast_path.py::test_cold_cache_costs_the_same_in_both_engines
  tests/unit/augment/test_fast_path.py::test_fast_path_never_imports_torch
  tests/unit/augment/test_fast_path.py::test_worker_forked_while_another_thread_runs
  tests/unit/augment/test_fast_path.py::test_worker_loads_no_module
  tests/integration/test_internals.py
  tests/integration/test_torch_future.py
  tests/integration/test_backend.py
  tests/integration/test_tags_flops.py
  tests/integration/test_tags_split.py
)
# The whole tier adds the rest of tagging, the env-var capture, dynamic shapes, the caches (the FX graph
# cache, and the AOTAutograd cache serving a warm restart with its tags) and compare.
REST=(
  tests/integration/test_tags_bytes.py
  tests/integration/test_tags_zoo.py
  tests/integration/test_tags_params.py
  tests/integration/test_capture.py
  tests/integration/test_dynamic.py
  tests/integration/test_caches.py
  tests/integration/test_aot_cache.py
  tests/integration/test_compare.py
  tests/integration/test_tags_threads.py
  tests/integration/test_one_truth.py
)
# The oldest release also trains the real architectures of make test (GPT-2, BERT): a tied weight's
# gradient is compiled differently there (it lost its module on torch 2.11 while 2.13 kept it).
# It runs on Python 3.12, as the GPU machines do, and so also runs what needs 3.12's sys.monitoring with
# torch: the sync-call marks through Dynamo, Inductor and the env-var capture (skipped on 3.11).
OLDEST=2.11.0
OLDEST_EXTRA=(tests/integration/test_real_models.py tests/integration/test_sync_lines.py
              tests/unit/capture/test_sync_calls.py)
# Releases run on another Python than $PY: version -> Python (python3.12 on PATH, else pyenv's 3.12.x;
# with neither, $PY, and a warning).
declare -A PYTHON_OF=([2.11.0]=3.12)
# Slow and about our own file handling, not about torch: make test covers them.
DESELECT=(
  --deselect tests/integration/test_capture.py::test_two_runs_do_not_clobber
  --deselect tests/integration/test_capture.py::test_unwritable_directory_warns_and_training_goes_on
)
# The Dask / S3 tests (marker "dask": a cluster and an S3 server on loopback) are torch-free and need
# dask, s3fs and moto, which the matrix venvs do not install: make test runs them once. The tiers above
# name no such file; this keeps one from coming in with a file added later. (-m replaces pyproject's
# addopts -m, so its exclusions are repeated here.)
MARKERS="not models and not browser and not dask"
CACHE="${INDUCTOR_PERF_CI_CACHE:-$HOME/.cache/inductor_perf-ci}"
PY="${PY:-python3}"
JOBS="${MATRIX_JOBS:-2}"
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=("${MATRIX[@]}")
LOGS="$(mktemp -d)"
trap 'rm -rf "$LOGS"' EXIT

declare -A PY_FOR=() VENV_FOR=()
resolve() {  # VERSION: the interpreter its venv is built with (PY_FOR) and the venv (VENV_FOR). A Python
  # of PYTHON_OF that is missing falls back to $PY, saying so (its 3.12-only tests then skip)
  local v="$1" want="${PYTHON_OF[$1]:-}" cand
  PY_FOR[$v]="$PY"; VENV_FOR[$v]="$CACHE/torch-${v%.*}"
  [ -z "$want" ] && return 0
  for cand in "$(command -v "python$want" 2>/dev/null)" "$HOME"/.pyenv/versions/"$want".*/bin/python; do
    if [ -x "$cand" ] && "$cand" -c "import sys, venv; assert sys.version.startswith('$want.')" 2>/dev/null; then
      PY_FOR[$v]="$cand"; VENV_FOR[$v]="$CACHE/torch-${v%.*}-py$want"
      return 0
    fi
  done
  echo "== torch $v: WARNING: no Python $want (python$want on PATH, or pyenv's ~/.pyenv/versions/$want.*):" \
       "its tier runs on $("$PY" --version), and what needs $want is skipped"
}

prepare() {  # VERSION: build its venv once, point it at this checkout; one at a time
  local v="$1" venv py
  resolve "$v"
  venv="${VENV_FOR[$v]}" py="${PY_FOR[$v]}"
  if [ ! -f "$venv/.ready-$v" ]; then
    echo "== torch $v: building $venv with $("$py" --version) (once; ~5 GB)"
    rm -rf "$venv"
    # PIP_CONSTRAINT=/dev/null: a machine's pip configuration may pin torch to the releases it keeps
    # on disk (a global `constraint = ...` capping torch at 2.14.1 refused 2.15.0); the matrix asks
    # for exact releases, so it overrides that one setting and keeps the rest (indexes, find-links).
    "$py" -m venv "$venv" \
      && PIP_CONSTRAINT=/dev/null "$venv/bin/pip" install -q --disable-pip-version-check "torch==$v" \
           "pytest>=7" "hypothesis>=6" "orjson>=3.9" "msgspec>=0.18" "typing-extensions>=4.8" "matplotlib>=3.7" "setuptools>=70.1,<82" \
           "transformers>=4.40" \
      || { echo "$v: venv build failed"; return 1; }
    touch "$venv/.ready-$v"
  fi
  # The entry point that registers backend="inductor_perf" needs an installed distribution;
  # --no-deps keeps the venv's torch.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e . >/dev/null \
    || { echo "$v: pip install -e . failed"; return 1; }
  # Core dependencies added after a venv was built (matplotlib: the report page's chart; msgspec: the
  # streaming summary's windows).
  "$venv/bin/python" -c "import matplotlib" 2>/dev/null \
    || "$venv/bin/pip" install -q --disable-pip-version-check "matplotlib>=3.7" \
    || { echo "$v: pip install matplotlib failed"; return 1; }
  "$venv/bin/python" -c "import msgspec" 2>/dev/null \
    || "$venv/bin/pip" install -q --disable-pip-version-check "msgspec>=0.18" \
    || { echo "$v: pip install msgspec failed"; return 1; }
  "$venv/bin/python" -c "import transformers" 2>/dev/null \
    || "$venv/bin/pip" install -q --disable-pip-version-check "transformers>=4.40" \
    || { echo "$v: pip install transformers failed"; return 1; }
}

tier() {  # VERSION: run the tier in its venv
  local v="$1" venv="${VENV_FOR[$1]}" t0 rc
  t0=$(date +%s)
  local tier=("${CORE[@]}") name=core
  if [[ " ${FULL[*]} " == *" $v "* ]]; then tier+=("${REST[@]}"); name=whole; fi
  if [ "$v" = "$OLDEST" ]; then tier+=("${OLDEST_EXTRA[@]}"); name="whole + real models + sync lines"; fi
  name="$name, $("$venv/bin/python" --version)"
  echo "== torch $v: $name tier"
  "$venv/bin/python" -m pytest -q -ra -p no:cacheprovider --durations=8 -m "$MARKERS" "${DESELECT[@]}" "${tier[@]}"
  rc=$?
  echo "$v ($name tier): pytest exit $rc, $(( $(date +%s) - t0 )) s" > "$LOGS/$v.result"
  return $rc
}

status=0
declare -A running=()  # pid -> version
reap() {  # wait for one running tier to end, print its output (wait -n -p: bash 5.1 or later)
  local pid rc
  wait -n -p pid "${!running[@]}"
  rc=$?
  [ "$rc" -eq 0 ] || status=1
  cat "$LOGS/${running[$pid]}.log"
  unset "running[$pid]"
}
for v in "${versions[@]}"; do
  while [ ${#running[@]} -ge "$JOBS" ]; do reap; done
  t0=$(date +%s)
  if ! prepare "$v"; then
    status=1; echo "$v: set-up failed" > "$LOGS/$v.result"; continue
  fi
  echo "== torch $v: set-up $(( $(date +%s) - t0 )) s"
  tier "$v" > "$LOGS/$v.log" 2>&1 &
  running[$!]=$v
done
while [ ${#running[@]} -gt 0 ]; do reap; done
echo "== matrix summary"
for v in "${versions[@]}"; do
  echo "   $(cat "$LOGS/$v.result" 2>/dev/null || echo "$v: no result")"
done
exit $status
