#!/usr/bin/env bash
# The torch-version matrix: for each release line other than the default set-up's (2.13, which
# `make test` covers), a cached venv with that torch and a tier of tests that proves the version
# works. `make test-matrix` and .ci/run call this.
#
#   tools/test_matrix.sh [VERSION ...]      default: every version in MATRIX below
#
# Venvs live under ${INDUCTOR_PERF_CI_CACHE:-~/.cache/inductor_perf-ci}/torch-X.Y and are built once
# (the CUDA builds of torch weigh ~5 GB and take ~80 s to install; they run without a GPU). Each run
# re-points the venv's editable install at this checkout. Exit status: non-zero if any version failed.
set -uo pipefail
cd "$(dirname "$0")/.."

MATRIX=(2.11.0 2.12.1 2.14.1 2.15.0)
# The tier: the pure unit tests (dtype names, formulas against flop_counter), the internals the
# backend checks, the future-torch fallback, tagging (fwd+bwd FLOPs against FlopCounterMode), the
# env-var capture, dynamic shapes, the caches, and compare. ~4 min a version on two cores.
TIER=(
  tests/unit
  tests/integration/test_internals.py
  tests/integration/test_torch_future.py
  tests/integration/test_backend.py
  tests/integration/test_tags_flops.py
  tests/integration/test_tags_bytes.py
  tests/integration/test_tags_zoo.py
  tests/integration/test_capture.py
  tests/integration/test_dynamic.py
  tests/integration/test_caches.py
  tests/integration/test_compare.py
)
CACHE="${INDUCTOR_PERF_CI_CACHE:-$HOME/.cache/inductor_perf-ci}"
PY="${PY:-python3}"
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=("${MATRIX[@]}")

status=0
summary=()
for v in "${versions[@]}"; do
  mm="${v%.*}"
  venv="$CACHE/torch-$mm"
  t0=$(date +%s)
  if [ ! -f "$venv/.ready-$v" ]; then
    echo "== torch $v: building $venv (once; ~5 GB)"
    rm -rf "$venv"
    if ! { "$PY" -m venv "$venv" \
        && "$venv/bin/pip" install -q --disable-pip-version-check "torch==$v" \
             "pytest>=7" "hypothesis>=6" "orjson>=3.9" "typing-extensions>=4.8" "setuptools>=70.1,<82"; }; then
      echo "== torch $v: could not build the venv"; status=1; summary+=("$v: venv build failed"); continue
    fi
    touch "$venv/.ready-$v"
  fi
  # Point the venv at this checkout (the entry point that registers backend="inductor_perf" needs
  # an installed distribution); --no-deps keeps its torch.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e . >/dev/null \
    || { echo "== torch $v: pip install -e . failed"; status=1; summary+=("$v: install failed"); continue; }
  t1=$(date +%s)
  echo "== torch $v: tier"
  "$venv/bin/python" -m pytest -q -ra -p no:cacheprovider --durations=12 "${TIER[@]}"
  rc=$?
  t2=$(date +%s)
  [ $rc -ne 0 ] && status=1
  summary+=("$v: pytest exit $rc, tests $((t2 - t1)) s, set-up $((t1 - t0)) s")
done
echo "== matrix summary"
printf '   %s\n' "${summary[@]}"
exit $status
