"""What ``diff`` counts, and where: backward ops on the autograd thread, kernels as the summary counts
them for ``--by kernel``, every row's time counted once (never a compiled region on top of its own
kernels), ``(unattributed)`` never below zero, FLOP and Peak from the costed events.

Expected numbers: hand arithmetic on the hand-made traces below; for real traces, sums computed here
from the JSON directly (the autograd thread's op durations, the device events' durations inside the
steps); for our own captures (tests/fixtures/captures, made by make_capture_pair.py), the kernel
events inside each compiled graph's marker, summed from the JSON.
"""

from __future__ import annotations

import gzip
import html
import json
import os
from pathlib import Path

import pytest

from inductor_perf.comparison.runner import diff_files, diff_traces
from inductor_perf.model.events import GRAD_ACCUM, OUTSIDE_MODEL
from inductor_perf.report.units import fmt_time_us

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
CAPTURES = [str(FIXTURES / "captures" / f"run{n}.trace.json.gz") for n in (1, 2)]
TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES", ROOT / ".." / "shared" / "traces"))
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def ev(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": dict(args)}


def launch(ts: float, corr: int, tid: int = 1) -> dict:
    return ev("cudaLaunchKernel", ts, 1, cat="cuda_runtime", tid=tid, correlation=corr)


def kernel(name: str, ts: float, dur: float, corr: int, cat: str = "kernel", **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"correlation": corr, **args}}


def gpu_training_step() -> dict:
    """One 100 µs step of an eager GPU run recorded by compare() (module ranges), with torch's
    autograd engine on its own thread (tid 2), as on a GPU.

    main (tid 1): aten::mm 3-13 (seq 5) in module fc, launching gemm_fwd; aten::sum 20-25 (seq 6)
    outside any module, launching reduce; aten::copy_ 50-55 (beside the backward); aten::item 68-75,
    whose DtoH copy names it only by External id (its launch is not in the trace).
    autograd (tid 2): SumBackward0 30-34 (seq 6), MmBackward0 40-60 (seq 5) launching gemm_bwd,
    AccumulateGrad 62-65.
    device: gemm_fwd 6-16 (2 GFLOP at 40 % of peak), reduce 22-24, gemm_bwd 45-65 (4 GFLOP at 20 %),
    the copy 70-71, and a kernel 80-90 whose launch is nowhere (correlation 999)."""
    main = [ev("ProfilerStep#1", 0, 100, cat="user_annotation"),
            ev("## inductor_perf module=fc ##", 2, 12),
            ev("aten::mm", 3, 10, **{"Sequence number": 5, "External id": 11}), launch(4, 101),
            ev("aten::sum", 20, 5, **{"Sequence number": 6, "External id": 12}), launch(21, 102),
            ev("aten::copy_", 50, 5, **{"External id": 14}),
            ev("aten::item", 68, 7, **{"External id": 13})]
    autograd = [ev("autograd::engine::evaluate_function: SumBackward0", 30, 4, tid=2, **{"Sequence number": 6}),
                ev("autograd::engine::evaluate_function: MmBackward0", 40, 20, tid=2, **{"Sequence number": 5}),
                ev("MmBackward0", 41, 18, tid=2, **{"Sequence number": 5}),
                ev("aten::mm", 42, 16, tid=2), launch(43, 103, tid=2),
                ev("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 62, 3, tid=2)]
    device = [kernel("gemm_fwd", 6, 10, 101, kernel_flop=2e9, achieved_flops_pct=40.0),
              kernel("reduce", 22, 2, 102),
              kernel("gemm_bwd", 45, 20, 103, kernel_flop=4e9, achieved_flops_pct=20.0),
              kernel("Memcpy DtoH (Device -> Pageable)", 70, 1, 104, cat="gpu_memcpy", **{"External id": 13}),
              kernel("stray", 80, 10, 999)]
    return {"traceEvents": main + autograd + device}


def test_backward_on_the_autograd_thread_is_attributed_by_hand():
    c = diff_traces(gpu_training_step(), gpu_training_step(), by="module")
    # the autograd thread's ops: MmBackward0 (seq 5 -> aten::mm in fc) 20, SumBackward0 (seq 6 ->
    # aten::sum, outside the model) 4, AccumulateGrad 3
    assert c.row("fc", "backward").a_us == pytest.approx(20.0)
    assert c.row(OUTSIDE_MODEL, "backward").a_us == pytest.approx(4.0)
    assert c.row(GRAD_ACCUM, "backward").a_us == pytest.approx(3.0)
    assert c.row("fc").a_us == pytest.approx(10.0)
    assert c.row(OUTSIDE_MODEL).a_us == pytest.approx(5 + 5 + 7)  # sum, copy_, item
    # rows 10 + 17 + 20 + 4 + 3 = 54; copy_ (50-55) ran beside MmBackward0 (40-60): 5 µs covered once
    assert c.a.attributed_us == pytest.approx(54.0) and c.a.overlap_us == pytest.approx(5.0)
    assert c.a.unattributed_us == pytest.approx(100.0 - 49.0)


def optimizer_step() -> dict:
    """One 200 µs step on thread 1 whose optimizers record torch.optim's ranges:

    - forward: aten::mm 10-30 (no range around it);
    - ``Optimizer.step#SGD.step`` 100-150: aten::add_ 105-115 and 120-130, and a kernel launched in
      no op at 140 (correlation 201, multi_tensor_apply 141-149 on the device);
    - ``Optimizer.zero_grad#SGD.zero_grad`` 160-170: aten::zero_ 161-165;
    - a compiled optimizer step, ``Optimizer.step#Adam.step`` 172-198 around its Torch-Compiled
      Region 173-197, graph marker 174-196 (a forward graph) and kernel graph_3_cpp_fused__foreach_add_0 175-190.

    By hand: forward 20 µs (the mm); optimizer 20 (two add_) + 4 (zero_) + 15 (the compiled kernel)
    = 39 µs; by kernel, the one device kernel (8 µs) is the optimizer's."""
    return {"traceEvents": [
        ev("ProfilerStep#1", 0, 200, cat="user_annotation"),
        ev("aten::mm", 10, 20),
        ev("Optimizer.step#SGD.step", 100, 50, cat="user_annotation"),
        ev("aten::add_", 105, 10), ev("aten::add_", 120, 10), launch(140, 201),
        ev("Optimizer.zero_grad#SGD.zero_grad", 160, 10, cat="user_annotation"),
        ev("aten::zero_", 161, 4),
        ev("Optimizer.step#Adam.step", 172, 26, cat="user_annotation"),
        ev("Torch-Compiled Region: 1/0", 173, 24),
        ev("## inductor_perf graph=3 fwd ##", 174, 22, cat="user_annotation"),
        ev("graph_3_cpp_fused__foreach_add_0", 175, 15),
        kernel("multi_tensor_apply_kernel", 141, 8, 201)]}


def test_the_optimizers_work_is_a_phase_of_its_own_by_hand():
    c = diff_traces(optimizer_step(), optimizer_step(), by="op")
    assert c.phase_total("forward") == (pytest.approx(20.0), pytest.approx(20.0))
    assert c.phase_total("optimizer") == (pytest.approx(39.0), pytest.approx(39.0))
    assert c.row("aten::add_", "optimizer").a_count == 2 and c.row("aten::add_") is None
    assert [r.phase for r in c.rows] == sorted((r.phase for r in c.rows), key=["forward", "optimizer"].index)
    k = diff_traces(optimizer_step(), optimizer_step(), by="kernel")
    assert [(r.phase, r.key, r.a_us) for r in k.rows] == [("optimizer", "multi_tensor_apply_kernel", 8.0)]
    text = c.to_text()
    assert "Optimizer (torch.optim's step and zero_grad)" in text and "optimizer total" in text


def test_the_page_shows_the_comparison_as_the_text_does():
    """Every table cell of the text (the phases, the totals) is on the page, and the page has no
    phase table the text lacks."""
    from inductor_perf.report.html_tables import comparison_html

    for c in (diff_traces(optimizer_step(), gpu_training_step(), by="op"),
              diff_traces(gpu_training_step(), gpu_training_step(), by="kernel")):
        page, text = comparison_html(c), c.to_text()
        titles = [ln for ln in text.splitlines() if ln.startswith(("Forward", "Backward", "Optimizer", "Other",
                                                                    "Totals"))]
        assert titles and [t for t in titles if f"<h3>{html.escape(t, quote=True)}</h3>" not in page] == []
        assert page.count("<h3>") == len(titles) + ("Fusion map" in text)
        for r in c.rows:
            assert f">{html.escape(fmt_time_us(r.a_us))}<" in page
        assert f">{html.escape(fmt_time_us(c.a.unattributed_us))}<" in page
        assert c._repr_html_() == page  # a notebook cell shows the same


def test_flop_and_peak_come_from_the_launched_kernels_by_hand():
    c = diff_traces(gpu_training_step(), gpu_training_step(), by="module")
    fwd, bwd = c.row("fc"), c.row("fc", "backward")
    assert (fwd.flops, fwd.achieved_pct) == (pytest.approx(2e9), pytest.approx(40.0))
    assert (bwd.flops, bwd.achieved_pct) == (pytest.approx(4e9), pytest.approx(20.0))
    assert c.row(OUTSIDE_MODEL).flops is None  # reduce and the copy carry no cost: unknown, not 0


def test_by_kernel_rows_are_device_kernels_by_hand():
    c = diff_traces(gpu_training_step(), gpu_training_step(), by="kernel")
    got = {(r.phase, r.key): r.a_us for r in c.rows}
    assert got == {("forward", "gemm_fwd"): 10.0, ("forward", "reduce"): 2.0,
                   ("forward", "Memcpy DtoH (Device -> Pageable)"): 1.0,  # by its External id: aten::item
                   ("backward", "gemm_bwd"): 20.0, ("other", "stray"): 10.0}
    assert c.a.time == "device" and c.row("gemm_fwd").flops == pytest.approx(2e9)
    # 43 µs of kernels, none at once: the device is idle the other 57 µs of the step
    assert c.a.attributed_us == pytest.approx(43.0) and c.a.unattributed_us == pytest.approx(57.0)
    assert any("launched from no thread of the step" in n for n in c.notes)
    assert "Other (device events launched" in c.to_text()


def compiled_call_cut_by_step_marks() -> dict:
    """Two steps (0-44, 44-100) whose mark is placed inside a compiled call, as the env-var capture
    places it: the Torch-Compiled Region (40-70) and its graph call (42-68) begin in step 0, the
    marker (45-65) with its one kernel (46-64, 18 µs) in step 1. The next call's region starts at 95
    and runs past the last step (to 200): only its 5 µs inside the steps count."""
    return {"traceEvents": [
        ev("ProfilerStep#0", 0, 44, cat="user_annotation"), ev("ProfilerStep#1", 44, 56, cat="user_annotation"),
        ev("Torch-Compiled Region: 0/0", 40, 30), ev("## Call CompiledFxGraph fabc ##", 42, 26, cat="user_annotation"),
        ev("## inductor_perf graph=1 fwd ##", 45, 20),
        ev("graph_0_cpp_fused_relu_0", 46, 18, module_path="fc", kernel_flop=1000, eager_ops="aten::relu"),
        ev("Torch-Compiled Region: 0/0", 95, 105)]}


@pytest.mark.parametrize("by", ["module", "op", "kernel"])
def test_a_compiled_region_is_not_counted_on_top_of_its_kernels(by):
    c = diff_traces(compiled_call_cut_by_step_marks(), compiled_call_cut_by_step_marks(), by=by)
    assert c.a.step_us == pytest.approx(50.0)  # (44 + 56) / 2 steps
    kernel_row = c.row("graph_0_cpp_fused_relu_0" if by == "kernel" else "fc" if by == "module" else "aten::relu")
    assert kernel_row.a_us == pytest.approx(9.0)  # 18 µs over 2 steps
    region = [r for r in c.rows if r.key in ("Torch-Compiled Region: 0/0", OUTSIDE_MODEL)]
    # the first region holds the marker: a container; the second counts its 5 µs inside the steps
    # (no kernel of the summary's: not a row of --by kernel)
    assert [r.a_us for r in region] == ([] if by == "kernel" else [pytest.approx(2.5)])
    assert c.a.unattributed_us == pytest.approx(50.0 - c.a.attributed_us) and c.a.unattributed_us >= 0


def test_unattributed_is_never_negative_when_threads_overlap():
    """No step marks: one step spanning the events (0-10); two threads' ops run at once."""
    t = {"traceEvents": [ev("aten::mm", 0, 10), ev("aten::add", 0, 10, tid=2)]}
    c = diff_traces(t, t, by="op")
    assert c.a.step_us == pytest.approx(10.0) and c.a.attributed_us == pytest.approx(20.0)
    assert c.a.overlap_us == pytest.approx(10.0) and c.a.unattributed_us == pytest.approx(0.0)
    text = c.to_text()
    assert "ran beside each other" in text and "-10.0 µs" in text


# --- our own captures --------------------------------------------------------------------------------
def _load(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _steps(t: dict) -> list[tuple[float, float]]:
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in t["traceEvents"]
                  if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))


def _inside(ts: float, dur: float, windows: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(ts + dur, b) - max(ts, a)) for a, b in windows)


def _optimizer_scalar_adds(t: dict, steps: list[tuple[float, float]]) -> int:
    """The ``aten::add_`` ops on 0-d tensors inside torch.optim's ``Optimizer.step#`` ranges and the steps."""
    evs = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    ranges = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in evs if str(e["name"]).startswith("Optimizer.step#")]
    return sum(1 for e in evs if e["name"] == "aten::add_" and e.get("cat") == "cpu_op"
               and e.get("args", {}).get("Input Dims", [None])[0] == []
               and any(a <= e["ts"] and e["ts"] + e["dur"] <= b and tid == e["tid"] for a, b, tid in ranges)
               and any(a <= e["ts"] < b for a, b in steps))


def _marker_kernels_us(t: dict) -> float:
    """Time of the cpu_ops directly inside our compiled-graph markers (the kernels), inside the steps."""
    evs = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    markers = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in evs if e["name"].startswith("## inductor_perf graph=")]
    total, steps = 0.0, _steps(t)
    for a, b, tid in markers:
        inside = sorted((e for e in evs if e["tid"] == tid and a < e["ts"] and e["ts"] + e["dur"] <= b),
                        key=lambda e: (e["ts"], -e["dur"]))
        end = a
        for e in inside:  # the outermost ones only
            if e["ts"] >= end:
                total += _inside(e["ts"], e["dur"], steps)
                end = e["ts"] + e["dur"]
    return total


@pytest.mark.parametrize("by", ["module", "op", "kernel"])
def test_two_captures_of_ours(by):
    c = diff_files(*CAPTURES, by=by)
    for side, path in ((c.a, CAPTURES[0]), (c.b, CAPTURES[1])):
        t = _load(path)
        steps = _steps(t)
        assert side.steps == len(steps) == 2
        assert side.step_us == pytest.approx(sum(b - a for a, b in steps) / 2)
        assert 0 <= side.unattributed_us <= side.step_us
        assert side.attributed_us - side.overlap_us + side.unattributed_us == pytest.approx(side.step_us)
    if by == "module":
        # the compiled kernels' rows (the model's modules) hold exactly the kernels inside the markers
        model = sum(r.a_us for r in c.rows if r.key in ("fc1", "fc2", ""))
        assert model * 2 == pytest.approx(_marker_kernels_us(_load(CAPTURES[0])), rel=1e-9)


def test_by_kernel_on_cpu_traces_is_the_summarys_kernels():
    """--by kernel of a CPU trace lists what the summary counts as kernels (graph_<N>_* events, aten ops
    inside compiled-graph calls), not CPU ops such as the compiled region or Dynamo's cache lookup."""
    from inductor_perf.summary.files import summarize_file

    for path in CAPTURES + [str(FIXTURES / "mlp_cpu_compiled.trace.json")]:
        c = diff_files(path, path, by="kernel")
        s = summarize_file(path).summary
        n = max(c.a.steps, 1)
        rows: dict[str, float] = {}
        for r in c.rows:
            rows[r.key] = rows.get(r.key, 0.0) + r.a_count * n
        kernels = {k.name: k.count for k in s.all_kernels}
        assert not [k for k in rows if k.startswith(("Torch", "CompiledFunction", "## ", "autograd::"))]
        if not c.a.steps:  # no step marks: every kernel of the trace, with its calls
            assert rows == pytest.approx(kernels)
        else:  # kernels inside the steps only
            assert set(rows) <= set(kernels) and all(rows[k] <= kernels[k] for k in rows)


# --- real GPU traces -----------------------------------------------------------------------------------
def _shared(name: str) -> Path:
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{TRACES} lacks {name} (the shared real traces are not checked in)")
    return p


def _outermost(evs: list[dict]) -> list[dict]:
    """The events of one thread not inside another of them."""
    out, end = [], float("-inf")
    for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def _backward_us(t: dict) -> tuple[float, float, int]:
    """(the autograd thread's outermost ops' time, the main thread's outermost autograd nodes' time
    (AccumulateGrad of CPU tensors runs there), both inside the ProfilerStep windows; the steps)."""
    evs = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    steps = _steps(t)
    (main,) = {e["tid"] for e in evs if str(e["name"]).startswith("ProfilerStep#")}
    (tid,) = {e["tid"] for e in evs if str(e["name"]).startswith("autograd::engine::evaluate_function")} - {main}
    ops = {k: [e for e in evs if e["tid"] == k and e.get("cat") == "cpu_op"] for k in (main, tid)}
    autograd = sum(_inside(e["ts"], e["dur"], steps) for e in _outermost(ops[tid]))
    on_main = sum(_inside(e["ts"], e["dur"], steps) for e in _outermost(ops[main])
                  if e["name"].startswith("autograd::engine::evaluate_function"))
    return autograd, on_main, len(steps)


@pytest.mark.parametrize("name", ["v100_ranks2_r1_test.json.gz", "a100_ranks8_r3_control.json.gz"])
def test_shared_gpu_trace_backward_and_kernels(name):
    path = str(_shared(name))
    t = _load(path)
    autograd_us, on_main_us, n = _backward_us(t)
    assert autograd_us > 100e3  # the v100 trace: 188 ms over its 6 steps, of 258 ms in the whole trace
    c = diff_files(path, path, by="op")
    assert c.phase_total("backward")[0] * n == pytest.approx(autograd_us + on_main_us, rel=1e-9)
    assert 0 <= c.a.unattributed_us and c.a.attributed_us - c.a.overlap_us + c.a.unattributed_us == pytest.approx(c.a.step_us)
    costed = [r for r in c.rows if r.flops]
    assert costed and any(r.phase == "backward" for r in costed)
    # Every costed row has its peak share but one: the optimizer's step counters, `long` scalars
    # added to on the CPU (1 FLOP each, no kernel, no roof for a CPU op of a GPU trace): unknown.
    counters = _optimizer_scalar_adds(t, steps=_steps(t))
    assert counters > 0
    assert [(r.phase, r.key, r.flops, r.a_count) for r in costed if r.achieved_pct is None] == [
        ("optimizer", "aten::add_", pytest.approx(counters / n), pytest.approx(counters / n))]
    k = diff_files(path, path, by="kernel")
    steps = _steps(t)
    device = sum(_inside(e["ts"], e["dur"], steps) for e in t["traceEvents"]
                 if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS and e.get("dur", 0) > 0)
    assert k.a.attributed_us * n == pytest.approx(device, rel=1e-9)
    names = {e["name"] for e in t["traceEvents"] if e.get("cat") in DEVICE_CATS}
    assert {r.key for r in k.rows} <= names and k.a.time == "device" and 0 <= k.a.unattributed_us


def test_unattributed_never_negative_on_random_traces():
    """Random steps (adjacent or apart, epoch-clock starts), ops on the main and the autograd thread
    that overlap each other and the step bounds: what no row covers is never below zero, and rows -
    overlap + unattributed is the step time."""
    import random

    rnd = random.Random(7)
    for _ in range(200):
        t0 = rnd.choice([0.0, 1.7e15 + rnd.random() * 1e9])
        evs, ts = [], t0
        for k in range(rnd.randint(1, 4)):
            d = round(rnd.uniform(10, 1000), 3)
            evs.append(ev(f"ProfilerStep#{k}", ts, d, cat="user_annotation"))
            ts += d + rnd.choice([0.0, 0.0, round(rnd.uniform(0, 50), 3)])
        for _ in range(rnd.randint(1, 12)):
            a = t0 + rnd.uniform(-50, ts - t0 + 50)
            tid = rnd.choice([1, 2])
            name = "autograd::engine::evaluate_function: MmBackward0" if tid == 2 else "aten::mm"
            evs.append(ev(name, round(a, 3), round(rnd.uniform(0, 300), 3), tid=tid))
        c = diff_traces({"traceEvents": evs}, {"traceEvents": evs}, by="op")
        assert 0.0 <= c.a.unattributed_us <= c.a.step_us
        assert c.a.overlap_us >= -1e-9
        assert c.a.attributed_us - c.a.overlap_us + c.a.unattributed_us == pytest.approx(c.a.step_us)


def test_adjacent_steps_fully_covered_leave_exactly_zero():
    """Steps that touch (each ends where the next begins), on the epoch clock, wholly covered by one
    op each: nothing is left over, not even float rounding below zero."""
    t0 = 1_700_000_000_123_456.789
    evs, ts = [], t0
    for k, d in enumerate((333.333, 777.777, 123.456)):
        evs += [ev(f"ProfilerStep#{k}", ts, d, cat="user_annotation"), ev("aten::mm", ts, d)]
        ts += d
    c = diff_traces({"traceEvents": evs}, {"traceEvents": evs}, by="op")
    assert c.a.unattributed_us == 0.0 and c.a.overlap_us == pytest.approx(0.0, abs=1e-9)
