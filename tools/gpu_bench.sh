#!/usr/bin/env bash
# The overhead benches on CUDA (tools/gpu_check.sh's bench phase): results as text and JSON in $B.
set -uo pipefail
cd "$(dirname "$0")/.."
B="${B:-/tmp/inductor_perf_bench}"
mkdir -p "$B"
for b in ${BENCHES:-step capture compile}; do
  case "$b" in
    step)    timeout "${STEP_S:-150}" python3 bench/bench_step.py --device cuda --rounds "${STEP_ROUNDS:-24}" --json "$B/step.json" ;;
    capture) timeout "${CAPTURE_S:-120}" python3 bench/bench_capture.py --device cuda --json "$B/capture.json" ;;
    compile) timeout "${COMPILE_S:-200}" python3 bench/bench_compile.py --device cuda --rounds "${COMPILE_ROUNDS:-4}" \
               --budget-s "${COMPILE_BUDGET_S:-150}" --json "$B/compile.json" ;;
    # not in the default set: the warm compile (one cold fill per backend, then paired fresh processes
    # over the filled caches: AOTAutograd, FX graph and Triton cache hits; target <= 1.05)
    warm)    timeout "${WARM_S:-240}" python3 bench/bench_compile.py --device cuda --warm-only \
               --rounds "${WARM_ROUNDS:-6}" --budget-s "${WARM_BUDGET_S:-120}" --json "$B/warm.json" ;;
    # not in the default set: cold compiles of Inductor and of our backend with one switch off at a time
    bisect)  timeout "${BISECT_S:-300}" python3 tools/gpu_compile_bisect.py --device cuda --rounds 4 \
               --budget-s "${BISECT_BUDGET_S:-240}" --json "$B/bisect.json" ;;
  esac 2>"$B/$b.err" | tee "$B/$b.txt"
done
