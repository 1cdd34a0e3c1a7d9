"""Pure tests of the trace-vs-trace comparison on small hand-made traces.

Every expected number is hand arithmetic on the event durations written below.
"""

from __future__ import annotations

import json

import pytest

from inductor_perf.comparison.rows import compare_units
from inductor_perf.comparison.runner import diff_files, diff_traces
from inductor_perf.comparison.units import trace_units
from inductor_perf.model.events import GRAD_ACCUM, OUTSIDE_MODEL, UNATTRIBUTED
from inductor_perf.model.tags import aten_op_name as op_name
from inductor_perf.errors import InductorPerfError
from inductor_perf.traces.files import save_trace


def ev(name: str, ts: float, dur: float, cat: str = "cpu_op", **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": dict(args)}


def eager_trace() -> dict:
    """One step (0..100 µs): forward in module fc (linear 10 µs with a nested addmm), relu in module
    act (5 µs), loss sum outside the model (3 µs), backward: AddmmBackward0 (seq 7 -> fc, 12 µs),
    SumBackward0 (seq 9 -> outside model, 2 µs), AccumulateGrad (1 µs)."""
    return {"traceEvents": [
        ev("## inductor_perf step=0 ##", 0, 100),
        ev("## inductor_perf phase=forward ##", 1, 40),
        ev("## inductor_perf module= ##", 2, 38),
        ev("## inductor_perf module=fc ##", 3, 12),
        ev("aten::linear", 4, 10, **{"Sequence number": 6}),
        ev("aten::addmm", 5, 8, **{"Sequence number": 7}),
        ev("## inductor_perf module=act ##", 20, 7),
        ev("aten::relu", 21, 5, **{"Sequence number": 8}),
        ev("## inductor_perf phase=loss ##", 45, 5),
        ev("aten::sum", 46, 3, **{"Sequence number": 9}),
        ev("## inductor_perf phase=backward ##", 52, 40),
        ev("autograd::engine::evaluate_function: SumBackward0", 53, 2, **{"Sequence number": 9}),
        ev("autograd::engine::evaluate_function: AddmmBackward0", 60, 12, **{"Sequence number": 7}),
        ev("AddmmBackward0", 60.5, 11, **{"Sequence number": 7}),
        ev("aten::mm", 61, 5),
        ev("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 80, 1),
    ]}


def compiled_trace() -> dict:
    """One step (0..50 µs): the forward graph runs addmm (4 µs, fc) and a fused relu kernel (1 µs,
    act) inside the graph marker; the compiled region has 2 µs of its own (prologue)."""
    return {"traceEvents": [
        ev("## inductor_perf step=0 ##", 0, 50),
        ev("## inductor_perf phase=forward ##", 1, 20),
        ev("Torch-Compiled Region: 0/0", 2, 18),
        ev("AOTDispatcher Runtime Wrapper Prologue", 3, 2),
        ev("## inductor_perf graph=1 fwd ##", 6, 10),
        ev("aten::addmm", 7, 4, module_path="fc", kernel_flop=2000, achieved_flops_pct=10.0,
           source="m.py:5", eager_ops="aten::addmm"),
        ev("graph_0_cpp_fused_relu_0", 12, 1, module_path="act", kernel_flop=100, source="m.py:6",
           eager_ops="aten::relu"),
        ev("## inductor_perf phase=loss ##", 25, 3),
        ev("aten::sum", 25.5, 2, **{"Sequence number": 20}),
    ]}


def test_module_rows_by_hand() -> None:
    c = diff_traces(eager_trace(), compiled_trace(), by="module")
    fc = c.row("fc")
    assert fc is not None
    # the nested addmm is not counted again: 10 µs, one op
    assert fc.a_us == pytest.approx(10.0) and fc.a_count == 1
    assert fc.b_us == pytest.approx(4.0) and fc.b_count == 1
    assert fc.speedup == pytest.approx(2.5)
    assert fc.flops == 2000
    act = c.row("act")
    assert act is not None and act.a_us == pytest.approx(5.0) and act.b_us == pytest.approx(1.0)
    assert act.fusion == ["aten::relu → graph_0_cpp_fused_relu_0"]
    out = c.row(OUTSIDE_MODEL)
    assert out is not None and out.a_us == pytest.approx(3.0) and out.b_us == pytest.approx(2.0)


def test_backward_ops_follow_sequence_numbers_to_forward_modules() -> None:
    c = diff_traces(eager_trace(), compiled_trace(), by="module")
    assert c.row("fc", "backward").a_us == pytest.approx(12.0)  # AddmmBackward0, seq 7 -> addmm in fc
    assert c.row(OUTSIDE_MODEL, "backward").a_us == pytest.approx(2.0)  # SumBackward0 -> loss sum
    assert c.row(GRAD_ACCUM, "backward").a_us == pytest.approx(1.0)


def test_totals_add_up_to_step_time() -> None:
    c = diff_traces(eager_trace(), compiled_trace(), by="module")
    # eager units: 10 + 5 + 3 + 2 + 12 + 1 = 33 of a 100 µs step
    assert c.a.step_us == pytest.approx(100.0)
    assert c.a.attributed_us == pytest.approx(33.0)
    assert c.a.unattributed_us == pytest.approx(67.0)
    # compiled: prologue 2 + addmm 4 + relu 1 + sum 2 = 9 of 50
    assert c.b.attributed_us == pytest.approx(9.0)
    assert c.b.step_us == pytest.approx(50.0)
    assert sum(r.b_us for r in c.rows) == pytest.approx(c.b.attributed_us)
    assert c.speedup == pytest.approx(2.0)
    assert UNATTRIBUTED in c.to_text()


def test_runtime_overhead_row_for_compiled_region_own_events() -> None:
    c = diff_traces(eager_trace(), compiled_trace(), by="module")
    r = c.row("(runtime overhead)")
    assert r is not None and r.b_us == pytest.approx(2.0) and r.a_us == 0


def test_diff_with_itself_is_all_equal(tmp_path) -> None:
    p = tmp_path / "e.json"
    save_trace(eager_trace(), p, inputs=())
    for by in ("module", "op", "kernel"):
        c = diff_files(p, p, by=by)
        assert c.rows
        for r in c.rows:
            assert r.delta_us == 0
            assert r.a_count == r.b_count
            assert r.speedup == (1.0 if r.a_us > 0 else None)
        assert c.speedup == 1.0


def test_by_op_groups_fused_ops_with_their_eager_ops() -> None:
    comp = compiled_trace()
    comp["traceEvents"][6]["args"]["eager_ops"] = "aten::relu, aten::add"
    eager = eager_trace()
    eager["traceEvents"].insert(8, ev("aten::add", 28.5, 0.5))
    c = diff_traces(eager, comp, by="op")
    row = c.row("aten::add + aten::relu")
    assert row is not None
    assert row.a_us == pytest.approx(5.5) and row.a_count == 2  # relu 5 + add 0.5
    assert row.b_us == pytest.approx(1.0) and row.b_count == 1
    # aten::linear joins aten::addmm's row through its child op
    mm = c.row("aten::addmm")
    assert mm is not None and mm.a_us == pytest.approx(10.0) and mm.b_us == pytest.approx(4.0)


def test_no_module_info_falls_back_to_op_with_a_note() -> None:
    plain = {"traceEvents": [ev("aten::mm", 0, 5), ev("aten::relu", 6, 1)]}
    c = diff_traces(plain, plain, by="module")
    assert c.by == "op"
    assert any("no module info" in n for n in c.notes)
    assert {r.key for r in c.rows} == {"aten::mm", "aten::relu"}
    # no step marks: the step is the span of the ops, 0..7 µs
    assert c.a.step_us == pytest.approx(7.0)


def test_profiler_steps_are_used_when_ours_are_absent() -> None:
    t = {"traceEvents": [ev("ProfilerStep#3", 0, 20, cat="user_annotation"), ev("aten::mm", 1, 5),
                         ev("ProfilerStep#4", 20, 30, cat="user_annotation"), ev("aten::mm", 21, 7)]}
    u = trace_units(t)
    assert u.steps_from == "ProfilerStep" and u.steps == 2
    c = compare_units(u, u, by="op")
    assert c.row("aten::mm").a_us == pytest.approx(6.0)  # (5 + 7) / 2 steps
    assert c.a.step_us == pytest.approx(25.0)


def test_json_is_strict_and_complete() -> None:
    c = diff_traces(eager_trace(), compiled_trace())
    d = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    assert d["by"] == "module"
    fc = next(r for r in d["rows"] if r["key"] == "fc" and r["phase"] == "forward")
    assert fc["speedup"] == pytest.approx(fc["a_us"] / fc["b_us"])
    # a row present on one side only has no speedup (None, not Infinity)
    assert any(r["speedup"] is None for r in d["rows"])
    md = c.to_markdown()
    assert "| Module | A | B |" in md


def test_bad_grouping_is_a_user_error() -> None:
    with pytest.raises(InductorPerfError, match="expected one of"):
        diff_traces(eager_trace(), eager_trace(), by="kernels")


def test_op_name_spelling() -> None:
    assert op_name("aten.native_layer_norm.default") == "aten::native_layer_norm"
    assert op_name("aten::mm") == "aten::mm"
    assert op_name("getitem") == "getitem"


def test_by_line_gives_eager_ops_the_line_of_the_compiled_node_of_the_same_module_and_op() -> None:
    c = diff_traces(eager_trace(), compiled_trace(), by="line")
    assert c.by == "line"
    # aten::linear in fc -> its child aten::addmm -> the compiled addmm of module fc, line m.py:5
    r = c.row("m.py:5")
    assert r is not None and r.a_us == pytest.approx(10.0) and r.b_us == pytest.approx(4.0)
    assert c.row("m.py:6").a_us == pytest.approx(5.0)  # relu in act
    # eager ops in modules: linear, relu and AddmmBackward0; the compiled trace has no backward
    # kernels to take a line from, so 2 of 3 get one
    assert any("2 of 3" in n for n in c.notes)
    assert c.row("(no source info)", "backward").a_us == pytest.approx(12.0)


def test_compare_refuses_non_cpu_models_with_a_clear_error():
    import pytest
    import torch

    import inductor_perf
    from inductor_perf.errors import InductorPerfError

    model = torch.nn.Linear(2, 2).to("meta")
    with pytest.raises(InductorPerfError, match="supports CPU models"):
        inductor_perf.compare(model, (torch.randn(1, 2, device="meta"),))


def test_a_fused_kernel_counts_in_its_tags_module_and_names_the_others() -> None:
    """compare() reads the kernel's tag from its cost: the row is the tag's module_path (decided in
    tagging), even where another module has more of the kernel's nodes; the fusion map names the
    other modules of its non-view nodes."""
    from inductor_perf.comparison.runner import _kernel_infos
    from inductor_perf.model.event_cost import EventCost
    from inductor_perf.model.tags import KernelTag, NodeInfo

    def node(name: str, target: str, module: str) -> NodeInfo:
        return NodeInfo(name=name, target=target, original_aten=None, shapes=((4,),), dtypes=("float32",),
                        module_path=module, source=f"m.py:{len(name)}")

    nodes = (node("lnb", "aten.native_layer_norm_backward.default", "ln2"),
             node("s", "aten.sum.dim_IntList", "ln2"),
             node("gelub", "aten.gelu_backward.default", "mlp.1"),
             node("v", "aten.view.default", "blk"))
    tag = KernelTag(graph_id=0, is_backward=True, kernel_name="cpp_fused_1", kind="generated", call_index=1,
                    nodes=nodes, flops=10, matmul_flops=0, bytes_read=8, bytes_written=8, source="m.py:9",
                    stack_trace=None, module_path="mlp.1", profiler_name="graph_0_cpp_fused_1")
    trace = compiled_trace()
    trace["traceEvents"].append(ev("graph_0_cpp_fused_1", 14, 1, module_path="mlp.1"))
    i = len(trace["traceEvents"]) - 1
    infos = _kernel_infos({i: EventCost(flops=10, matmul_flops=0, bytes_read=8, bytes_written=8,
                                        module_path="mlp.1", tag=tag, cost_source="tag")})
    assert infos[i]["module"] == "mlp.1"  # most nodes are ln2's, but tagging chose mlp.1
    assert infos[i]["also_modules"] == ("ln2",)  # the view of blk is no work of blk's
    units = trace_units(trace, kernel_info=infos.get)
    (u,) = [u for u in units.units if u.name == "graph_0_cpp_fused_1"]
    assert u.module == "mlp.1" and u.source == "m.py:9"
    c = compare_units(trace_units(eager_trace()), units, by="module")
    assert c.row("mlp.1").fusion == ["aten::gelu_backward, aten::native_layer_norm_backward, aten::sum → "
                                     "graph_0_cpp_fused_1 (also nodes of ln2)"]
