"""The streaming summary's finish and the idle attribution, against references outside the code
under test: a digest's sums (``summary.stream.finish._achieved_sums``) against the per-kernel
``roofline.point.inline_pcts`` / ``roof_figures`` summed one kernel at a time (the arithmetic ``args_for`` writes
into an augmented trace); the idle tables' shortcut for a gap outside every event of its thread
(``_Attributor.outside``) against the general walk (``_Attributor.attribute``) and a hand-worked trace;
the command's exit without teardown (``cli.run``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from engine_inputs import FIXTURES, GPU_FIXTURES, ROOT, SHARED, TRACES

from inductor_perf.summary import idle as summary_idle
from inductor_perf.augment.args import roof_figures
from inductor_perf.roofline.point import INLINE_RANGE, binding_roof, inline_pcts
from inductor_perf.roofline.point import (
    DEFAULT_LATENCY_BYTES,
    DEFAULT_LATENCY_PCT,
    DEFAULT_LATENCY_US,
)
from inductor_perf.summary.core import summarize
from inductor_perf.summary.stream.finish import _achieved_sums


def _one_by_one(durs, flops, nbytes, peak, bw, roof, inline):
    """What the finish summed before digests were summed at once: each kernel's figures, added in order."""
    time = fp = fp_time = bp = bp_time = 0.0
    bounds: dict[str, float] = {}
    for dur in durs:
        if inline and INLINE_RANGE[0] <= dur <= INLINE_RANGE[1]:
            fpct, bpct, bound = inline_pcts(flops, nbytes, dur, peak, bw, roof)
        else:
            fpct, bpct, bound = roof_figures(flops, nbytes, dur, peak, bw)
        time += dur
        if fpct is not None:
            fp, fp_time = fp + fpct * dur, fp_time + dur
        if bpct is not None:
            bp, bp_time = bp + bpct * dur, bp_time + dur
        bounds[bound] = bounds.get(bound, 0.0) + dur
    return time, fp, fp_time, bp, bp_time, bounds


PEAK, BW = 989.0, 3350.0  # H100 SXM dense bf16 TFLOP/s, HBM GB/s
# A kernel is latency-bound when its binding roof's % is under DEFAULT_LATENCY_PCT (25) and it is short
# (< DEFAULT_LATENCY_US, 10 µs) or moves little (< DEFAULT_LATENCY_BYTES, 1 MiB). 2 MiB moved in d µs is
# 100 * (2,097,152 / d / 1e3) / 3350 = 62.6 / d % of HBM: latency-bound for 2.5 < d < 10 only.
MIB2 = 2 * DEFAULT_LATENCY_BYTES
CASES = {
    # (flops, bytes, durations)
    "all memory-bound": (0, MIB2, [1.0, 20.0, 40.0]),  # 62.6 %; 3.1 % but long; 1.6 % but long
    "all latency (tiny work)": (1000, 64, [5.0, 7.5, 1.6]),
    "latency first, then memory": (0, MIB2, [5.0, 1.0, 40.0]),
    "memory first, then latency": (0, MIB2, [1.0, 5.0, 40.0]),
    "compute-bound GEMM": (2 * 4096**3, 3 * 4096**2 * 2, [150.0, 160.0, 1e5]),
    "nothing done (no roof)": (0, 0, [1.0, 2.0]),
    "a duration under the inline range": (1000, 10**6, [1.0, INLINE_RANGE[0] / 10, 3.0]),
}


@pytest.mark.parametrize("case", CASES)
def test_digest_sums_equal_the_kernels_summed_one_by_one(case):
    flops, nbytes, durs = CASES[case]
    roof = binding_roof(flops, nbytes, PEAK, BW)
    got = _achieved_sums(list(durs), flops, nbytes, PEAK, BW, roof, True)
    want = _one_by_one(durs, flops, nbytes, PEAK, BW, roof, True)
    assert got[:5] == pytest.approx(want[:5], rel=1e-12)
    assert list(got[5]) == list(want[5])  # the same bounds, first seen first (ties in the rows go by it)
    assert got[5] == pytest.approx(want[5], rel=1e-12)


def test_digest_sums_split_the_bounds_by_hand():
    """The mixed cases by hand (see MIB2): only the 5 µs kernel is latency-bound."""
    assert DEFAULT_LATENCY_PCT == 25.0 and DEFAULT_LATENCY_US == 10.0  # the premises of MIB2's note
    mem = binding_roof(0, MIB2, PEAK, BW)
    assert mem == "memory"
    first = _achieved_sums([5.0, 1.0, 40.0], 0, MIB2, PEAK, BW, mem, True)
    second = _achieved_sums([1.0, 5.0, 40.0], 0, MIB2, PEAK, BW, mem, True)
    assert first[5] == {"latency": 5.0, "memory": 41.0} and list(first[5]) == ["latency", "memory"]
    assert list(second[5]) == ["memory", "latency"]
    assert first[0] == 46.0 and first[3] == pytest.approx(3 * 100 * (MIB2 / 1e3) / BW)  # % x µs = bytes / BW
    assert _achieved_sums([1.0, 20.0], 0, MIB2, PEAK, BW, mem, True)[5] == {"memory": 21.0}
    assert _achieved_sums([5.0, 7.5], 0, MIB2, PEAK, BW, mem, True)[5] == {"latency": 12.5}


def test_digest_sums_without_device_peaks():
    """No peaks (no device row): no achieved %, every bound unknown, as roof_figures says."""
    got = _achieved_sums([1.0, 2.0], 100, 100, None, None, None, False)
    assert got == _one_by_one([1.0, 2.0], 100, 100, None, None, None, False)
    assert got[1:5] == (0.0, 0.0, 0.0, 0.0) and list(got[5]) == ["unknown"]


# --- a gap outside every event of its thread -----------------------------------------------------------
def X(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_gap_outside_the_launching_threads_events_is_its_own(monkeypatch):
    # Thread 1: "step" [0, 12], launches [1, 1.5] (corr 1), [11, 11.5] (2), [11.5, 11.7] (3).
    # Kernels: k1 [2, 10], k2 [30, 40], k3 [50, 60]; thread 9 records the step [0, 70] (the window)
    # and runs "late" [55, 70] in it.
    # Gaps, each on thread 1 (the launcher of the kernel after it, or before it for the trailing one):
    #   leading [0, 2]:  step 1.5, cudaLaunchKernel 0.5
    #   [10, 30]:        step [10, 12] less the launches inside (0.5 + 0.2) = 1.3, launches 0.7, nothing 18
    #   [40, 50]:        thread 1 has no event: (no host event) 10   <- outside every event
    #   trailing [60, 70]: likewise 10 (thread 9's "late" is another thread's)   <- outside
    trace = {"traceEvents": [
        X("step", 0, 12, cat="user_annotation"),
        X("cudaLaunchKernel", 1, 0.5, cat="cuda_runtime", correlation=1),
        X("cudaLaunchKernel", 11, 0.5, cat="cuda_runtime", correlation=2),
        X("cudaLaunchKernel", 11.5, 0.2, cat="cuda_runtime", correlation=3),
        X("ProfilerStep#1", 0, 70, cat="user_annotation", tid=9),
        X("late", 55, 15, tid=9),
        X("k1", 2, 8, cat="kernel", pid=0, tid=7, correlation=1),
        X("k2", 30, 10, cat="kernel", pid=0, tid=7, correlation=2),
        X("k3", 50, 10, cat="kernel", pid=0, tid=7, correlation=3),
    ]}
    said = []
    outside = summary_idle._Attributor.outside
    monkeypatch.setattr(summary_idle._Attributor, "outside", lambda self, a, b: said.append(outside(self, a, b)) or said[-1])
    s = summarize(trace)
    assert said == [False, False, True, True]  # the two gaps below take the shortcut
    assert s.idle_us == pytest.approx(42)
    idle = {r.host: (r.idle_us, r.gaps) for r in s.idle_by_host}
    # a row counts each innermost event a gap's time went to: the two launches in [10, 30] count twice
    assert idle == {"(no host event)": (pytest.approx(38), 3), "step": (pytest.approx(2.8), 2),
                    "cudaLaunchKernel": (pytest.approx(1.2), 3)}
    gaps = {g.start_us: g for g in s.gaps}
    assert sorted(gaps) == [0, 10, 40, 60]
    for start in (40, 60):
        g = gaps[start]
        assert (g.dur_us, g.host_innermost, g.host_outermost) == (10, "(no host event)", None)
    assert (gaps[10].host_innermost, gaps[10].host_outermost) == ("(no host event)", "step")
    assert (gaps[0].host_innermost, gaps[0].host_outermost) == ("step", "step")


def _summaries(path):
    from inductor_perf.summary.files import summarize_file

    return summarize_file(str(path), engine="full").summary.to_dict()


@pytest.mark.parametrize("name", GPU_FIXTURES + SHARED)
def test_outside_shortcut_gives_the_general_walks_tables(name, monkeypatch):
    """Every fixture and shared trace: the same summary with the shortcut as with every gap walked."""
    path = FIXTURES / "gpu" / name if name in GPU_FIXTURES else TRACES / name
    if not path.exists():
        pytest.skip(f"{path} absent (the shared real traces are not checked in)")
    calls = []
    outside = summary_idle._Attributor.outside
    monkeypatch.setattr(summary_idle._Attributor, "outside", lambda self, a, b: calls.append(1) or outside(self, a, b))
    fast = _summaries(path)
    monkeypatch.setattr(summary_idle._Attributor, "outside", lambda self, a, b: False)
    walked = _summaries(path)
    assert calls, "the shortcut was asked"
    assert fast == walked


# --- the command's exit ----------------------------------------------------------------------------------
def _run(args):
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('exit handler ran', file=sys.stderr))\n"
            "class Teardown:\n"
            "    def __del__(self):\n"
            "        print('interpreter teardown', file=sys.stderr)\n"
            "held = Teardown()\n"
            "from inductor_perf import cli\n"
            f"sys.argv = ['inductor-perf'] + {args!r}\n"
            "cli.run()\n"
            "print('not reached')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          check=False)


@pytest.mark.parametrize("engine", ["stream", "full"])
def test_run_flushes_and_keeps_the_exit_code(engine):
    """A streamed summary ends without the interpreter's teardown, a loaded one with it; both print
    the whole document, run the exit handlers and exit 0."""
    fixture = str(FIXTURES / "gpu" / GPU_FIXTURES[0])
    ok = _run(["summary", fixture, "--format", "json", "--engine", engine])
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["kernel_count"] > 0  # the whole document, flushed
    assert "not reached" not in ok.stdout and "exit handler ran" in ok.stderr
    assert ("interpreter teardown" in ok.stderr) == (engine == "full")


def test_run_exit_codes_of_errors():
    bad = _run(["summary", str(ROOT / "no-such-trace.json")])
    assert bad.returncode == 1 and bad.stderr.startswith("inductor-perf: error:")
    assert "exit handler ran" in bad.stderr
    assert _run(["summary"]).returncode == 2  # argparse's own exit


def test_large_state_kept_only_for_the_command(monkeypatch, capsys, tmp_path):
    from inductor_perf import cli
    from inductor_perf.summary.files import summarize_file
    from inductor_perf.summary.stream import engine as summary_stream

    path = str(FIXTURES / "gpu" / GPU_FIXTURES[0])
    with summary_stream.left_to_exit() as kept:
        summarize_file(path, engine="stream")
    assert len(kept) == 1 and kept[0].kernels  # the pass's state, for the process's end to drop
    summarize_file(path, engine="stream")  # outside the block: nothing kept
    left: list = []
    monkeypatch.setattr(cli, "_LEFT_TO_EXIT", left)
    assert cli.main(["summary", path, "--engine", "stream"]) == 0  # main() alone: a library caller
    assert len(kept) == 1 and left == []
    monkeypatch.setattr(cli, "_ENDS_WITH_COMMAND", True)  # as run() sets it
    assert cli.main(["summary", path, "--engine", "stream"]) == 0
    assert len(left) == 1 and left[0].kernels
    summarize_file(path, engine="stream")  # the command's block is closed: a later summary keeps nothing
    assert len(left) == 1
    two = tmp_path / "two"  # several traces, each summary printed: none is kept
    two.mkdir()
    for name in GPU_FIXTURES[:2]:
        shutil.copy(FIXTURES / "gpu" / name, two / name)
    assert cli.main(["summary", str(two), "--per-rank", "--engine", "stream"]) == 0
    assert len(left) == 1
    capsys.readouterr()


def test_top_unions_are_the_top_rows_busy_time():
    """The rows' busy time the streaming finish computes before waiting for its helper
    (``summary.core.top_unions``), on hand-placed intervals: only the ``top`` rows by time, each its
    members' intervals merged."""
    from types import SimpleNamespace as NS

    from inductor_perf.summary.core import top_unions

    def ev(ts, dur):
        return NS(ts=ts, dur=dur, end=ts + dur)

    k1, k2, k3, k4 = ev(0.0, 10.0), ev(5.0, 10.0), ev(30.0, 2.0), ev(20.0, 5.0)
    a, b = [k1, k2, k3], [k4]  # by name: a [0, 15) + [30, 32) = 17 us of 22; b 5 us
    m1, m2 = [k1, k4], [k2, k3]  # by module: m1 [0, 10) + [20, 25) = 15; m2 [5, 15) + [30, 32) = 12
    every = [k1, k2, k3, k4]  # one line row of all four (a trace without source lines): [0, 15) + [20, 25) + [30, 32)
    totals = NS(kernels={"a": NS(time=22.0, members=a), "b": NS(time=5.0, members=b)},
                modules={"m1": NS(time=15.0, members=m1), "m2": NS(time=12.0, members=m2)},
                lines={"(no source)": NS(time=27.0, members=every)})
    assert top_unions(totals, 1) == {id(a): 17.0, id(m1): 15.0, id(every): 22.0}  # b, m2: not top-1 rows
    assert top_unions(totals, 5) == {id(a): 17.0, id(b): 5.0, id(m1): 15.0, id(m2): 12.0, id(every): 22.0}
