"""costs.from_tags.costs_from_tags on hand-built traces: which event gets which call site's cost."""

from __future__ import annotations

from inductor_perf.model.events import nest_columns, nest_threads, new_columns
from inductor_perf.model.markers import marker_name
from inductor_perf.costs.from_tags import costs_from_tags
from inductor_perf.model.tags import GraphTags, KernelTag, NodeInfo


def _tag(name: str, profiler_name: str, call_index: int, flops, *, device: str = "cpu",
         kind: str = "generated") -> KernelTag:
    return KernelTag(graph_id=0, is_backward=False, kernel_name=name, kind=kind, call_index=call_index,
                     nodes=(NodeInfo("n", "aten.mm.default", None, ((4, 4),), ("float32",)),),
                     flops=flops, matmul_flops=flops, bytes_read=100, bytes_written=50, source="m.py:3",
                     stack_trace=None, module_path="fc", profiler_name=profiler_name, device=device)


def _x(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args) -> dict:
    ev = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if args:
        ev["args"] = args
    return ev


def _graph(kernels, instance_id: int = 7, **kw) -> GraphTags:
    return GraphTags(instance_id=instance_id, graph_id=0, is_backward=False, kernels=list(kernels), **kw)


def test_kth_event_of_a_name_gets_kth_call_site():
    g = _graph([_tag("k", "aten::mm", 0, 10), _tag("g", "graph_0_cpp_fused_0", 1, 3),
                _tag("k", "aten::mm", 2, 20)])
    events = [
        _x(marker_name(7, False), 0, 100),
        _x("aten::mm", 10, 10),
        _x("aten::copy_", 12, 2),          # nested inside the first mm: not a kernel of ours
        _x("graph_0_cpp_fused_0", 30, 5),
        _x("aten::mm", 50, 10),
        _x("aten::mm", 150, 10),           # outside the marker
    ]
    costs, stats = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert {i: c.flops for i, c in costs.items()} == {1: 10, 3: 3, 4: 20}
    assert stats.events_tagged == 3 and stats.unmatched_call_sites == 0


def test_same_name_nested_in_itself_counts_once():
    g = _graph([_tag("k", "aten::addmm", 0, 10)])
    events = [_x(marker_name(7, False), 0, 100), _x("aten::addmm", 10, 20), _x("aten::addmm", 12, 5)]
    costs, _ = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert list(costs) == [1]


def test_markers_on_other_threads_do_not_take_events():
    g = _graph([_tag("k", "aten::mm", 0, 10)])
    events = [_x(marker_name(7, False), 0, 100, tid=1), _x("aten::mm", 10, 10, tid=2)]
    costs, stats = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert costs == {} and stats.unmatched_call_sites == 1


def test_unknown_and_untagged_graphs_are_counted():
    events = [_x(marker_name(1, False), 0, 10), _x(marker_name(2, False), 20, 10)]
    graphs = {2: _graph([], instance_id=2, tagged=False, error="boom")}
    costs, stats = costs_from_tags({"traceEvents": events}, graphs.get)
    assert costs == {}
    assert stats.markers == 2 and stats.markers_unknown_graph == 1 and stats.untagged_graphs == 1
    assert len(stats.warnings()) == 2


def test_symbolic_costs_use_the_marker_sizes():
    g = _graph([_tag("k", "aten::mm", 0, "2*s0*64")])
    events = [_x(marker_name(7, False, {"s0": 8}), 0, 100), _x("aten::mm", 10, 10)]
    costs, _ = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert costs[1].flops == 2 * 8 * 64


def test_symbolic_costs_without_sizes_are_reported_not_guessed():
    g = _graph([_tag("k", "aten::mm", 0, "2*s0*64")])
    events = [_x(marker_name(7, False), 0, 100), _x("aten::mm", 10, 10)]
    costs, stats = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert costs == {} and stats.symbolic_unresolved == 1


def test_gpu_cost_moves_to_device_kernels_by_correlation_and_splits_by_duration():
    g = _graph([_tag("triton_poi_fused_add_0", "triton_poi_fused_add_0", 0, 1000, device="cuda")])
    events = [
        _x(marker_name(7, False), 0, 100),
        _x("triton_poi_fused_add_0", 10, 20),
        _x("cuLaunchKernel", 12, 3, cat="cuda_driver", correlation=41),
        _x("cuLaunchKernel", 20, 3, cat="cuda_driver", correlation=42),
        _x("triton_poi_fused_add_0", 200, 30, tid=7, cat="kernel", correlation=41),
        _x("triton_poi_fused_add_0", 240, 10, tid=7, cat="kernel", correlation=42),
    ]
    costs, stats = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert set(costs) == {4, 5}
    # 1000 FLOPs split 30:10 by duration; the parts add up exactly.
    assert costs[4].flops == 750 and costs[5].flops == 250
    assert costs[4].bytes_read + costs[5].bytes_read == 100
    assert stats.device_events_tagged == 2


def test_no_markers_no_costs():
    costs, stats = costs_from_tags({"traceEvents": [_x("aten::mm", 0, 1)]}, {}.get)
    assert costs == {} and stats.markers == 0


def test_gpu_stream_copy_of_a_marker_is_not_a_second_graph_call():
    g = _graph([_tag("triton_poi_fused_add_0", "triton_poi_fused_add_0", 0, 1000, device="cuda")])
    events = [
        _x(marker_name(7, False), 0, 100, cat="user_annotation"),
        _x(marker_name(7, False), 150, 100, tid=7, cat="gpu_user_annotation"),
        _x("triton_poi_fused_add_0", 10, 20),
        _x("cuLaunchKernel", 12, 3, cat="cuda_driver", correlation=41),
        _x("triton_poi_fused_add_0", 200, 30, tid=7, cat="kernel", correlation=41),
    ]
    costs, stats = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert list(costs) == [4] and costs[4].flops == 1000
    assert stats.markers == 1 and stats.unmatched_call_sites == 0 and stats.warnings() == []


def test_memset_launched_beside_a_gemm_gets_none_of_its_flops():
    # cuBLAS zeroing a workspace inside aten::mm: the GEMM kernel takes the whole cost.
    g = _graph([_tag("extern_kernels.mm", "aten::mm", 0, 1000, device="cuda", kind="extern")])
    events = [
        _x(marker_name(7, False), 0, 100),
        _x("aten::mm", 10, 20),
        _x("cudaMemsetAsync", 11, 2, cat="cuda_runtime", correlation=5),
        _x("cuLaunchKernel", 14, 3, cat="cuda_driver", correlation=6),
        _x("Memset (Device)", 200, 1, tid=7, cat="gpu_memset", correlation=5),
        _x("nvjet_sm90_gemm", 210, 30, tid=7, cat="kernel", correlation=6),
    ]
    costs, _ = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert set(costs) == {5} and costs[5].flops == 1000


def test_cuda_graph_replay_kernels_take_their_call_sites_by_position():
    # mode="reduce-overhead": one cudaGraphLaunch inside the marker; its device kernels (same
    # correlation) run in capture order. Triton kernels are matched by name, the GEMM and the
    # split-K reduce between them go to the one extern site between, the memset to nobody.
    g = _graph([_tag("triton_poi_a", "triton_poi_a", 0, 10, device="cuda"),
                _tag("extern_kernels.mm", "aten::mm", 1, 1000, device="cuda", kind="extern"),
                _tag("triton_poi_b", "triton_poi_b", 2, 20, device="cuda"),
                _tag("triton_poi_a", "triton_poi_a", 3, 30, device="cuda")])
    events = [
        _x(marker_name(7, False), 0, 100),
        _x("aten::_foreach_copy_", 5, 10),
        _x("cudaGraphLaunch", 20, 30, cat="cuda_runtime", correlation=9),
        _x("Memset (Unknown)", 300, 1, tid=7, cat="gpu_memset", correlation=9),
        _x("triton_poi_a", 302, 5, tid=7, cat="kernel", correlation=9),
        _x("gemm_main", 310, 30, tid=7, cat="kernel", correlation=9),
        _x("gemm_splitk_reduce", 341, 10, tid=7, cat="kernel", correlation=9),
        _x("triton_poi_b", 352, 5, tid=7, cat="kernel", correlation=9),
        _x("triton_poi_a", 360, 5, tid=7, cat="kernel", correlation=9),
        _x("triton_poi_a", 400, 5, tid=7, cat="kernel", correlation=99),  # an eager launch elsewhere
    ]
    costs, stats = costs_from_tags({"traceEvents": events}, {7: g}.get)
    assert {i: c.flops for i, c in costs.items()} == {4: 10, 5: 750, 6: 250, 7: 20, 8: 30}
    assert stats.graph_replay_kernels == 5 and stats.unmatched_call_sites == 0


def test_replay_with_a_missing_triton_kernel_guesses_nothing_for_it():
    from inductor_perf.costs.from_tags import align_replay

    tags = [_tag("triton_a", "triton_a", 0, 1, device="cuda"),
            _tag("mm", "aten::mm", 1, 1, device="cuda", kind="extern"),
            _tag("mm2", "aten::mm", 2, 1, device="cuda", kind="extern"),
            _tag("triton_b", "triton_b", 3, 1, device="cuda")]
    # two extern sites but three non-Triton kernels between: ambiguous, so both stay unmatched
    got = align_replay(tags, ["triton_a", "g1", "g2", "g3", "triton_b", "triton_zzz"])
    assert [(t.kernel_name, pos) for t, pos in got] == [("triton_a", [0]), ("triton_b", [4])]


def test_nest_threads_parents_order_and_partial_overlaps():
    # Thread A: op 0 [0, 10) holds op 1 [2, 5), which holds runtime call 2 [3, 4); op 3 [10, 11)
    # starts where op 0 ends, so it is top-level; op 4 [4, 9) starts inside op 1 but ends after it.
    # Thread B: two events that start together, the longer encloses the shorter.
    a = [(10.0, -1.0, 3), (0.0, -10.0, 0), (3.0, -1.0, 2), (2.0, -3.0, 1), (4.0, -5.0, 4)]
    b = [(5.0, -1.0, 6), (5.0, -2.0, 5)]
    threads = {("p", "A"): list(a), ("p", "B"): list(b)}
    order, parent = nest_threads(threads)
    assert [i for _, _, i in order[("p", "A")]] == [0, 1, 2, 4, 3]
    assert [i for _, _, i in order[("p", "B")]] == [5, 6]
    # slack None: a partial overlap (op 4) still nests under the open op 1
    assert parent == {1: 0, 2: 1, 4: 1, 6: 5}
    assert threads == {("p", "A"): a, ("p", "B"): b}  # pure: the input is left as it was
    # only some events enclose (a join passes its CPU scopes): runtime call 2 encloses nothing
    assert nest_threads({0: [(0.0, -10.0, 0), (1.0, -5.0, 2), (2.0, -1.0, 7)]}, encloses={0})[1] == {2: 0, 7: 0}
    # with a slack, op 4 must end within op 1 (+ slack) to be its child: it goes to op 0 instead
    assert nest_threads({("p", "A"): a}, slack=1e-6)[1] == {1: 0, 2: 1, 4: 0}


def _columns(items):
    """Events as a join indexes them: in index order, as (ts, -dur, index) columns."""
    cols = new_columns()
    for ts, negdur, i in sorted(items, key=lambda t: t[2]):
        cols[0].append(ts)
        cols[1].append(negdur)
        cols[2].append(i)
    return cols


def test_nest_columns_nests_as_the_tuples_do():
    # The same threads as above, hand-checked there: op 4 nests under op 1 (no slack), B's longer
    # event encloses the shorter one that starts with it, and a runtime call (2) encloses nothing.
    a = [(10.0, -1.0, 3), (0.0, -10.0, 0), (3.0, -1.0, 2), (2.0, -3.0, 1), (4.0, -5.0, 4)]
    b = [(5.0, -1.0, 6), (5.0, -2.0, 5)]
    cols = {("p", "A"): _columns(a), ("p", "B"): _columns(b)}
    assert nest_columns(cols, {0, 1, 3, 4, 5, 6}) == {1: 0, 2: 1, 4: 1, 6: 5}
    assert nest_columns({0: _columns([(0.0, -10.0, 0), (1.0, -5.0, 2), (2.0, -1.0, 7)])}, {0}) == {2: 0, 7: 0}
    # Random threads with ties in start and duration, out-of-order starts and zero durations:
    # the columns give what the tuples give.
    import random

    rnd = random.Random(7)
    for _ in range(200):
        threads, i, encloses = {}, 0, set()
        for t in range(rnd.randint(1, 3)):
            items = []
            for _ in range(rnd.randint(0, 30)):
                items.append((float(rnd.randint(0, 20)), -float(rnd.choice([0, 1, 2, 5, 10])), i))
                if rnd.random() < 0.7:
                    encloses.add(i)
                i += 1
            threads[t] = items
        assert nest_columns({t: _columns(v) for t, v in threads.items()}, encloses) == nest_threads(threads, encloses)[1]


# --- costs.from_shapes: one op's cost over its kernels, and the labels of device events --------------------
from inductor_perf.model import events as evs# noqa: E402
from inductor_perf.costs.placing import split_shares  # noqa: E402
from inductor_perf.costs.from_shapes import costs_and_labels  # noqa: E402


def _launch(op_name, kernels, *, op_args=None, outer=None, copies=()):
    """``outer`` > ``op_name`` > one cudaLaunchKernel per kernel (name, dur); then the kernels."""
    events = []
    if outer is not None:
        events.append(_x(outer[0], 0.0, 1000.0, **outer[1]))
    events.append(_x(op_name, 1.0, 900.0, **(op_args or {})))
    for j, _k in enumerate(list(kernels) + list(copies)):
        events.append(_x("cudaLaunchKernel", 2.0 + j, 0.5, cat="cuda_runtime", correlation=100 + j))
    for j, (name, dur) in enumerate(kernels):
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 1000.0 + 10 * j,
                       "dur": dur, "args": {"correlation": 100 + j}})
    for j, nbytes in enumerate(copies, start=len(kernels)):
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
                       "ts": 1000.0 + 10 * j, "dur": 2.0, "args": {"correlation": 100 + j, "bytes": nbytes}})
    return {"traceEvents": events}


MM = {"Input Dims": [[30, 70], [70, 50]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}
MM_FLOPS = 2 * 30 * 70 * 50  # 210,000
MM_BYTES = (30 * 70 + 70 * 50) * 4, 30 * 50 * 4  # read 22,400, written 6,000


def test_split_by_duration_sums_exactly():
    trace = _launch("aten::mm", [("a", 3.0), ("b", 1.5), ("c", 0.0), ("d", 2.5)], op_args=MM)
    costs, labels, stats = costs_and_labels(trace)
    ks = [5, 6, 7, 8]
    assert sorted(costs) == ks and stats.ops_with_several_kernels == 1
    assert sum(costs[k].flops for k in ks) == MM_FLOPS
    assert sum(costs[k].matmul_flops for k in ks) == MM_FLOPS
    assert sum(costs[k].bytes_read for k in ks) == MM_BYTES[0]
    assert sum(costs[k].bytes_written for k in ks) == MM_BYTES[1]
    # 3 : 1.5 : 0 : 2.5 of 210,000 -> 90,000, 45,000, 0, 75,000 (exact here)
    assert [costs[k].flops for k in ks] == [90_000, 45_000, 0, 75_000]
    assert all(labels[k] == {evs.LAUNCH_OP: "aten::mm"} for k in ks)


def test_split_shares_by_hand():
    assert split_shares(10, [1, 1, 1]) == [4, 3, 3]
    assert split_shares(7, [0, 5]) == [0, 7]
    assert split_shares(5, [2, 1]) == [3, 2]  # 3.33 + 1.67: the 1 left goes to the larger remainder
    assert sum(split_shares(10**15 + 7, [3, 7, 11, 13])) == 10**15 + 7


def test_all_durations_zero_split_evenly():
    trace = _launch("aten::mm", [("a", 0.0), ("b", 0.0)], op_args=MM)
    costs, _, _ = costs_and_labels(trace)
    assert [costs[3].flops, costs[4].flops] == [105_000, 105_000]


def test_labels_say_who_launched_and_why_not_costed():
    # a costed op nested in another: launch_op is the op the cost came from
    trace = _launch("aten::mm", [("gemm", 5.0)], op_args=MM, outer=("aten::matmul", {}))
    costs, labels, _ = costs_and_labels(trace)
    assert labels[3] == {evs.LAUNCH_OP: "aten::mm"} and costs[3].flops == MM_FLOPS
    # an op without a formula
    _c, labels, _ = costs_and_labels(_launch("mylib::fused_thing", [("relu_kernel", 1.0)]))
    assert labels[2] == {evs.LAUNCH_OP: "mylib::fused_thing", evs.NOT_COSTED: "unknown_op"}
    # an aten op that torch's shape rules could cost, recorded without shapes
    _c, labels, _ = costs_and_labels(_launch("aten::relu", [("relu_kernel", 1.0)]))
    assert labels[2] == {evs.LAUNCH_OP: "aten::relu", evs.NOT_COSTED: "no_shapes"}
    # a matmul without recorded shapes, inside an op without a formula: the innermost op named
    _c, labels, _ = costs_and_labels(_launch("aten::mm", [("gemm", 1.0)], outer=("MyModule", {})))
    assert labels[3] == {evs.LAUNCH_OP: "aten::mm", evs.NOT_COSTED: "no_shapes"}


def test_kernel_without_launching_op_is_labelled():
    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "replayed", "pid": 0, "tid": 7, "ts": 1.0,
                              "dur": 1.0, "args": {"correlation": 5}}]}
    costs, labels, stats = costs_and_labels(trace)
    assert costs == {} and labels == {0: {evs.NOT_COSTED: "no_launch_op"}} and stats.kernels_without_launch == 1


def test_copies_carry_their_own_bytes_not_the_ops():
    # a copy op whose only device event is the copy: the copy keeps its own bytes, the op puts
    # nothing on it and nothing on the CPU op
    copy_args = {"Input Dims": [[1024], [1024], []], "Input type": ["float", "float", "Scalar"],
                 "Concrete Inputs": ["", "", "False"]}
    trace = _launch("aten::copy_", [], op_args=copy_args, copies=[4096])
    costs, labels, _ = costs_and_labels(trace)
    assert list(costs) == [2] and (costs[2].bytes_read, costs[2].bytes_written) == (4096, 4096)
    assert costs[2].flops == 0 and labels[2] == {evs.LAUNCH_OP: "aten::copy_"}
    # an op with arithmetic whose only device event in the trace is a copy (a sampled trace that
    # lost the GEMM beside its memset): the op keeps its FLOPs on the CPU op
    trace = _launch("aten::mm", [], op_args=MM, copies=[4096])
    costs, _, _ = costs_and_labels(trace)
    on_op = [i for i, c in costs.items() if trace["traceEvents"][i].get("cat") == "cpu_op"]
    assert len(on_op) == 1 and costs[on_op[0]].flops == MM_FLOPS and costs[2].flops == 0
    # with a kernel beside the copy, the op's cost goes on the kernel alone
    trace = _launch("aten::mm", [("gemm", 4.0)], op_args=MM, copies=[4096])
    costs, _, _ = costs_and_labels(trace)
    assert costs[3].flops == MM_FLOPS and costs[4].bytes_read == 4096 and costs[4].flops == 0
