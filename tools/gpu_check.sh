#!/usr/bin/env bash
# Everything we check on a GPU machine, in one call, logs and fixtures under $OUT.
#
#   OUT=/tmp/gpu tools/gpu_check.sh [PHASE ...]     phases: tests zoo ncu bench integration
#                                                   (default: all, in that order); on demand:
#                                                   models (transformers on CUDA, tools/gpu_models.py),
#                                                   advisor (tests/integration/test_advisor_calibration_gpu.py),
#                                                   pick (each test of PICK_TESTS), profile
#                                                   (where a cold compile's time goes)
#   INTEGRATION_JOBS=8 ... integration              the integration tier, 8 test files at a time
#                                                   (default: half the cores)
#
# The machine has torch (CUDA) and triton installed and no package registry: this installs us from
# the working tree with --no-index (see CONTRIBUTING.md, "Testing on a GPU machine"), plus any
# wheel found in .whl/ (orjson). DEADLINE_S (default 560) bounds the whole run: each phase gets
# what is left, so the final archive ($OUT/gpu_check.tgz: every log, table and trace) is always
# written (MAX_<PHASE>=seconds caps one phase). A short digest of each phase goes to stdout and $OUT/digest.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/inductor_perf_gpu}"
W="$OUT/work"
mkdir -p "$W" "$W/ncu"
START=$(date +%s)
DEADLINE_S="${DEADLINE_S:-560}"
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(tests zoo ncu bench integration)
export PYTHONUNBUFFERED=1

left() { echo $(( DEADLINE_S - ($(date +%s) - START) - 15 )); }
say() { echo "== $(date +%T) +$(( $(date +%s) - START ))s $*" | tee -a "$OUT/digest.txt"; }
finish() {
  # one archive per phase folder (files come back only up to 16 MiB each, 8 in all)
  say "archiving"
  for d in "$W"/*/; do
    [ -d "$d" ] && tar czf "$OUT/$(basename "$d").tgz" -C "$W" "$(basename "$d")" 2>/dev/null
  done
  tar czf "$OUT/logs.tgz" -C "$W" --exclude='./*/*' . 2>/dev/null
  ls -la "$OUT" >> "$OUT/digest.txt"
  rm -rf "$W"
}
trap finish EXIT

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_properties(0))"
  ncu --version | tail -1
  nproc
} > "$W/env.txt" 2>&1
cat "$W/env.txt" | tee -a "$OUT/digest.txt"

if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$W/install.log" 2>&1 \
  || { say "install FAILED"; cat "$W/install.log"; exit 1; }
python3 -c "import inductor_perf, orjson; print('installed', inductor_perf.__file__)" | tee -a "$OUT/digest.txt"

for phase in "${phases[@]}"; do
  t=$(left)
  cap_var="MAX_${phase^^}"  # e.g. MAX_ZOO=240 caps one phase
  cap="${!cap_var:-}"
  [ -n "$cap" ] && [ "$cap" -lt "$t" ] && t=$cap
  if [ "$t" -lt 20 ]; then say "$phase: skipped, no time left"; continue; fi
  say "$phase (up to ${t}s)"
  case "$phase" in
    tests)
      timeout "$t" python3 -m pytest -q -ra -m gpu -p no:cacheprovider tests/integration/test_gpu.py ${PYTEST_GPU_ARGS:-} \
        --tb=short -p no:logging > "$W/pytest_gpu.log" 2>&1
      grep -E "^(E |FAILED|ERROR|tests/.*Error)|passed|failed" "$W/pytest_gpu.log" | head -60 | tee -a "$OUT/digest.txt" ;;
    zoo)
      ZOO_TIMEOUT=${ZOO_TIMEOUT:-$(( t / 4 ))} timeout "$t" python3 tools/gpu_zoo.py "$W/zoo" ${ZOO_CASES:-} 2>&1 \
        | tee -a "$OUT/digest.txt" ;;
    models)
      # transformers' GPT-2, Llama, Mixtral (tiny configs, bf16 autocast): tags and matmul FLOPs
      MODELS_TIMEOUT=${MODELS_TIMEOUT:-$(( t / 3 ))} timeout "$t" python3 tools/gpu_models.py "$W/models" ${MODELS_CASES:-} 2>&1 \
        | tee -a "$OUT/digest.txt" ;;
    advisor)
      # the advisor's GPU kinds against measured fixes (tests/integration/test_advisor_calibration_gpu.py
      # on bench/advisor_calibration_gpu.py's cases: each captured with INDUCTOR_PERF_TRACE_DIR in a child
      # process, then timed in paired rounds; each prints its docs/advisor.md row, and fails outside
      # 0.5-2x or below rank 3). ADVISOR_CASES="sync memcpy": those cases only.
      mkdir -p "$W/advisor"
      sel=(); [ -n "${ADVISOR_CASES:-}" ] && sel=(-k "$(echo ${ADVISOR_CASES} | sed 's/ / or /g')")
      ADVISOR_CALIBRATION_VERBOSE=1 timeout "$t" python3 -m pytest -q -s -ra -p no:cacheprovider --tb=short \
        tests/integration/test_advisor_calibration_gpu.py "${sel[@]}" > "$W/advisor/advisor.log" 2>&1
      grep -E "^\| |^(E |FAILED|ERROR)|passed|failed|skipped" "$W/advisor/advisor.log" | head -40 \
        | tee -a "$OUT/digest.txt" ;;
    ncu)
      timeout "$t" python3 tools/gpu_ncu.py "$W/ncu" ${NCU_CASES:-} > "$W/ncu/ncu.log" 2>&1
      tail -60 "$W/ncu/ncu.log" | tee -a "$OUT/digest.txt" ;;
    bench)
      mkdir -p "$W/bench"
      B="$W/bench" timeout "$t" bash -c "${BENCH_CMD:-tools/gpu_bench.sh}" > "$W/bench/bench.log" 2>&1
      tail -60 "$W/bench/bench.log" | tee -a "$OUT/digest.txt" ;;
    pick)
      # PICK_TESTS (pytest node ids, space-separated): each in its own pytest, all at once. Ten
      # seconds before the phase's deadline every python child still running a test's script.py is
      # sent SIGABRT; PYTHONFAULTHANDLER makes it print its threads' stacks into the test's log.
      mkdir -p "$W/pick"
      export PYTHONFAULTHANDLER=1
      pids=(); i=0
      for node in ${PICK_TESTS:-}; do
        i=$((i + 1))
        ( timeout -s INT "$t" python3 -m pytest -q -ra -p no:cacheprovider "$node" --tb=short --durations=5 \
            > "$W/pick/$i.log" 2>&1
          echo "$node: rc=$? $(tail -1 "$W/pick/$i.log")" | tee -a "$OUT/digest.txt" ) &
        pids+=($!)
      done
      ( sleep $(( t - 10 )); pkill -ABRT -f "script.py" ) >/dev/null 2>&1 & killer=$!
      [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
      pkill -P "$killer" sleep 2>/dev/null; kill "$killer" 2>/dev/null
      unset PYTHONFAULTHANDLER
      grep -hE "^(E |FAILED|ERROR)|Fatal Python|File .*line" "$W"/pick/*.log | head -80 | tee -a "$OUT/digest.txt" ;;
    profile)
      # where a cold compile's time goes (tools/gpu_compile_profile.py: imports, commands, pool answers;
      # PROFILE_ARGS=--cprofile adds cProfile)
      mkdir -p "$W/profile"
      timeout "$t" python3 tools/gpu_compile_profile.py "$W/profile" --device cuda --rounds "${PROFILE_ROUNDS:-2}" \
        ${PROFILE_ARGS:-} > "$W/profile/profile.log" 2>&1
      head -100 "$W/profile/profile.log" | tee -a "$OUT/digest.txt" ;;
    integration)
      # one pytest per test file, INTEGRATION_JOBS (default: half the cores) at a time: in one process
      # the tier never ended within a call there. Each stops at the phase's deadline, with its own
      # log. No -p no:logging here: the tier's caplog tests need that plugin.
      mkdir -p "$W/integration"
      export IT_END=$(( $(date +%s) + t )) IT_DIR="$W/integration" IT_ARGS="${INTEGRATION_ARGS:-}"
      ls tests/integration/test_*.py | xargs -P "${INTEGRATION_JOBS:-$(( ($(nproc) + 1) / 2 ))}" -I{} bash -c '
        f={}; n=$(basename "$f" .py); rem=$(( IT_END - $(date +%s) ))
        if [ "$rem" -lt 10 ]; then echo "$n: not started, no time left"; exit 0; fi
        timeout "$rem" python3 -m pytest -q -ra -p no:cacheprovider "$f" $IT_ARGS --tb=short \
          > "$IT_DIR/$n.log" 2>&1
        echo "$n: rc=$? $(tail -1 "$IT_DIR/$n.log")"' | tee -a "$OUT/digest.txt"
      grep -hE "^(E |FAILED|ERROR)" "$W"/integration/*.log | head -60 | tee -a "$OUT/digest.txt" ;;
    *) say "unknown phase $phase" ;;
  esac
done
