"""Collectives (costs.comm) and copies on small hand-made traces, then on the real traces of
../shared/traces: message sizes, nccl-tests' bus bandwidth, the roofs, both engines alike."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from inductor_perf.costs import comm as cc
from inductor_perf.model.event_cost import CommCost
from inductor_perf.model import events as evs
from inductor_perf.augment.stream import engine as stream
from inductor_perf.augment.stream.progress import Progress
from inductor_perf.augment.core import augment_file, augment_trace
from inductor_perf.costs.from_shapes import costs_and_labels

TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES",
                             Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"))


def device(hbm=1000.0, host=None, link=None):
    return SimpleNamespace(name="X", mem_bandwidth_gbs=hbm, host_link_gbs=host, interconnect_gbs=link,
                           peak_tflops={}, matmul_peak_tflops={})


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def comm_trace(kernel_name="ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", kernel_args=None,
               rpc_args=None, annotation=None, dist=None, dur=100.0):
    """c10d op > record_param_comms > nccl:<x> annotation > cudaLaunchKernel -> the kernel."""
    events = [_x("cpu_op", "c10d::allreduce_", 0.0, 50.0),
              _x("cpu_op", "record_param_comms", 1.0, 40.0, **(rpc_args or {}))]
    if annotation is not None:
        events.append(_x("user_annotation", annotation[0], 2.0, 30.0, **annotation[1]))
    events.append(_x("cuda_runtime", "cudaLaunchKernel", 3.0, 5.0, correlation=7))
    events.append(_x("kernel", kernel_name, 60.0, dur, pid=0, tid=21, correlation=7, **(kernel_args or {})))
    trace = {"traceEvents": events}
    if dist is not None:
        trace["distributedInfo"] = dist
    return trace, len(events) - 1


def _comm_args(trace, dev=None):
    costs, labels, _stats = costs_and_labels(trace)
    new, _ = augment_trace(trace, costs, dev, device_events_only=True, labels=labels)
    return new["traceEvents"][-1]["args"]


# --- bus factors, by hand ------------------------------------------------------------------------
def test_bus_factors_for_eight_ranks():
    # nccl-tests PERFORMANCE.md: 2(n-1)/n = 14/8, (n-1)/n = 7/8, 1
    want = {"all_reduce": 1.75, "all_gather": 0.875, "reduce_scatter": 0.875, "all_to_all": 0.875,
            "broadcast": 1.0, "reduce": 1.0, "send_recv": 1.0}
    for op, f in want.items():
        assert CommCost(op, 1, 8, "kernel").bus_factor == f
    assert CommCost("barrier", 1, 8, "kernel").bus_factor is None
    assert CommCost("all_reduce", 1, None, "kernel").bus_factor is None


@pytest.mark.parametrize("name, op", [
    ("nccl:all_reduce", "all_reduce"), ("nccl:_all_gather_base", "all_gather"),
    ("nccl:_reduce_scatter_base", "reduce_scatter"), ("nccl:all_to_all", "all_to_all"),
    ("alltoall_base", "all_to_all"), ("allgather_into_tensor_coalesced", "all_gather"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "all_reduce"),
    ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
    ("ncclKernel_Reduce_RING_LL_Sum_half", "reduce"), ("ncclKernel_Broadcast_RING_LL_Sum_int8_t", "broadcast"),
    ("nccl:barrier", None)])
def test_collective_names(name, op):
    assert cc.normalize_op(name) == op


def test_collective_kernel_names():
    assert cc.is_comm_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)")
    assert cc.is_comm_kernel("void ncclDevKernel_Generic(ncclDevComm*)")
    assert cc.is_comm_kernel("rcclGenericKernel")
    assert not cc.is_comm_kernel("void at::native::vectorized_elementwise_kernel<4>")
    assert not cc.is_comm_kernel("triton_poi_fused_nccl_like_0")


# --- where the size comes from -------------------------------------------------------------------
def test_size_from_the_kernels_own_args():
    trace, k = comm_trace(kernel_args={"Collective name": "allreduce", "In msg nelems": 1_000_000,
                                       "Out msg nelems": 1_000_000, "Group size": 8, "dtype": "Float"})
    a = _comm_args(trace, device(link=300.0))
    # S = 4e6 B in 100 µs: algbw 40 GB/s, busbw 40 * 14/8 = 70 GB/s, 70/300 of the link
    assert a[evs.COMM_OP] == "all_reduce" and a[evs.COMM_BYTES] == 4_000_000 and a[evs.GROUP_SIZE] == 8
    assert a[evs.ALGBW_GBPS] == pytest.approx(40.0) and a[evs.BUSBW_GBPS] == pytest.approx(70.0)
    assert a[evs.ACHIEVED_BANDWIDTH_PCT] == pytest.approx(100 * 70 / 300)
    assert a[evs.MEMORY_ROOF] == "interconnect"
    assert evs.KERNEL_NUM_GB not in a  # its HBM traffic is not S


def test_size_from_record_param_comms_all_gather():
    # all_gather: Out msg nelems = n x In; S is the gathered output
    trace, k = comm_trace("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)",
                          rpc_args={"Collective name": "_allgather_base", "In msg nelems": 1000,
                                    "Out msg nelems": 4000, "Group size": 4, "dtype": "BFloat16"})
    a = _comm_args(trace)
    assert a[evs.COMM_OP] == "all_gather" and a[evs.COMM_BYTES] == 8000 and a[evs.GROUP_SIZE] == 4
    assert a[evs.BUSBW_GBPS] == pytest.approx(8000 / 100e3 * 3 / 4)
    assert a[evs.LAUNCH_OP] == "record_param_comms"
    assert evs.ACHIEVED_BANDWIDTH_PCT not in a  # no device: no roof


def test_size_from_nccl_annotation_with_world_size():
    # a SendRecv kernel inside nccl:all_to_all is an all_to_all; Input Dims [[8, 1024, 8816]] float
    trace, k = comm_trace("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
                          annotation=("nccl:all_to_all", {"Input Dims": [[8, 1024, 8816]], "Input type": ["float"]}),
                          dist={"backend": "nccl", "rank": 3, "world_size": 8})
    a = _comm_args(trace)
    s = 8 * 1024 * 8816 * 4
    assert a[evs.COMM_OP] == "all_to_all" and a[evs.COMM_BYTES] == s and a[evs.GROUP_SIZE] == 8
    assert a[evs.ALGBW_GBPS] == pytest.approx(s / 100e3)
    assert a[evs.BUSBW_GBPS] == pytest.approx(s / 100e3 * 7 / 8)
    assert a[evs.LAUNCH_OP] == "nccl:all_to_all"


def test_annotation_all_gather_input_is_one_chunk():
    trace, _ = comm_trace("ncclKernel_AllGather_RING_LL_Sum_int8_t",
                          annotation=("nccl:_all_gather_base", {"Input Dims": [[1000]], "Input type": ["signed char"]}),
                          dist={"world_size": 128, "pg_config": [{"pg_name": "0", "pg_size": 16, "ranks": list(range(16))}]})
    a = _comm_args(trace)
    # the only process group says 16 ranks, more than world_size: S = 16 x 1000 B
    assert a[evs.GROUP_SIZE] == 16 and a[evs.COMM_BYTES] == 16_000


def test_group_size_picks_the_named_process_group():
    dist = {"world_size": 8, "pg_config": [{"pg_name": "0", "pg_size": 8}, {"pg_name": "3", "ranks": [0, 1]}]}
    assert cc.group_from_trace(dist, "3") == (2, "pg_config")
    assert cc.group_from_trace(dist, None) == (8, "world_size")
    assert cc.group_from_trace(None, None) == (None, None)


def test_collective_without_size_is_labelled():
    trace, k = comm_trace(dist={"world_size": 2})
    costs, labels, stats = costs_and_labels(trace)
    assert k not in costs and stats.collectives_unsized == 1
    assert labels[k] == {evs.LAUNCH_OP: "record_param_comms", evs.COMM_OP: "all_reduce", evs.NOT_COSTED: "no_shapes"}


def test_collective_ops_cost_goes_nowhere_else():
    # the launching c10d op's own cost (none here) never lands on the CPU op: the kernel carries S
    trace, k = comm_trace(kernel_args={"Collective name": "broadcast", "In msg nelems": 10, "Out msg nelems": 10,
                                       "Group size": 2, "dtype": "Long"})
    costs, _labels, _ = costs_and_labels(trace)
    assert list(costs) == [k] and costs[k].comm.nbytes == 80 and costs[k].comm.bus_factor == 1.0


# --- memcpy / memset -----------------------------------------------------------------------------
def copy_trace(name, cat="gpu_memcpy", runtime_args=None, **copy_args):
    events = [_x("cpu_op", "aten::copy_", 0.0, 20.0),
              _x("cuda_runtime", "cudaMemcpyAsync", 1.0, 5.0, correlation=9, **(runtime_args or {})),
              _x(cat, name, 30.0, 10.0, pid=0, tid=7, correlation=9, **copy_args)]
    return {"traceEvents": events}


@pytest.mark.parametrize("name, read, written, roof, bw", [
    ("Memcpy DtoD (Device -> Device)", 1000, 1000, "hbm", 1000.0),
    ("Memcpy HtoD (Pinned -> Device)", 0, 1000, "host_link", 25.0),
    ("Memcpy DtoH (Device -> Pageable)", 1000, 0, "host_link", 25.0),
    ("Memcpy PtoP (Device -> Device)", 1000, 0, "interconnect", 300.0),
])
def test_memcpy_bytes_and_roof(name, read, written, roof, bw):
    trace = copy_trace(name, bytes=1000)
    costs, labels, _ = costs_and_labels(trace)
    new, _ = augment_trace(trace, costs, device(hbm=1000.0, host=25.0, link=300.0), device_events_only=True,
                           labels=labels)
    a = new["traceEvents"][2]["args"]
    assert (a[evs.KERNEL_BYTES_READ], a[evs.KERNEL_BYTES_WRITTEN], a[evs.MEMORY_ROOF]) == (read, written, roof)
    # (read + written) B in 10 µs against the roof's GB/s
    assert a[evs.ACHIEVED_GBPS] == pytest.approx((read + written) / 10e3)
    assert a[evs.ACHIEVED_BANDWIDTH_PCT] == pytest.approx(100 * (read + written) / 10e3 / bw)
    assert a[evs.LAUNCH_OP] == "aten::copy_"


def test_host_copy_without_host_link_has_no_pct():
    trace = copy_trace("Memcpy HtoD (Pinned -> Device)", bytes=1000)
    costs, labels, _ = costs_and_labels(trace)
    new, _ = augment_trace(trace, costs, device(hbm=1000.0), device_events_only=True, labels=labels)
    a = new["traceEvents"][2]["args"]
    assert a[evs.KERNEL_BYTES_WRITTEN] == 1000 and evs.ACHIEVED_BANDWIDTH_PCT not in a  # never the HBM roof


def test_memset_and_old_capitalised_category():
    trace = copy_trace("Memset (Device)", cat="Memset", bytes=64)
    costs, _, stats = costs_and_labels(trace)
    c = costs[2]
    assert (c.bytes_read, c.bytes_written, c.memory_roof) == (0, 64, "hbm") and stats.copies_costed == 1


def test_rocm_copy_size_from_the_runtime_call():
    trace = copy_trace("Memcpy HtoD (Host -> Device)", runtime_args={"size": "2560", "kind": "1"}, kind="HtoD")
    costs, _, _ = costs_and_labels(trace)
    assert costs[2].bytes_written == 2560 and costs[2].memory_roof == "host_link"
    # kind from the runtime's hipMemcpyKind code when the event does not say it
    trace = copy_trace("Memcpy", runtime_args={"size": "100", "kind": "3"})
    costs, _, _ = costs_and_labels(trace)
    assert (costs[2].bytes_read, costs[2].bytes_written) == (100, 100)


def test_copy_without_size_is_labelled():
    trace = copy_trace("Memcpy DtoH (Device -> Pageable)")
    costs, labels, stats = costs_and_labels(trace)
    assert costs == {} and stats.copies_unsized == 1
    assert labels[2] == {evs.LAUNCH_OP: "aten::copy_", evs.NOT_COSTED: "no_shapes"}


# --- the real traces -----------------------------------------------------------------------------
def _real(name):
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{p} absent (the shared real traces are not checked in)")
    return str(p)


def _load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


def _collective_coverage(trace):
    total = with_bw = 0.0
    for ev in trace["traceEvents"]:
        if isinstance(ev, dict) and evs.category(ev) == "kernel" and cc.is_comm_kernel(ev.get("name")):
            dur = evs.number(ev.get("dur")) or 0.0
            total += dur
            if evs.number(evs.event_args(ev).get(evs.BUSBW_GBPS)) is not None:
                with_bw += dur
    return with_bw / total


@pytest.mark.parametrize("workers", [False, True], ids=["one_process", "two_processes"])
@pytest.mark.parametrize("name", ["a100_ranks8_r3_control.json.gz", "v100_ranks2_r1_test.json.gz",
                                  "two_ranks/sampled_rank-0.json.gz", "two_ranks/sampled_rank-1.json.gz",
                                  "mi250_minitoy_train_rocm6.json.gz"])
def test_real_traces_collectives_and_engines(name, workers, tmp_path, monkeypatch):
    src = _real(name)
    monkeypatch.setattr(stream, "LARGE_TRACE_BYTES", 0 if workers else 1 << 62)
    full, fast = str(tmp_path / "full.json"), str(tmp_path / "fast.json")
    s_full = augment_file(src, full, engine="full")
    s_fast = stream.augment_file_stream(src, fast, None, Progress(False))  # no fallback
    assert s_fast is not None
    s_fast.worker_maxrss_kb, s_fast.stage_marks = None, ()
    a, b, raw = _load(full), _load(fast), _load(src)
    assert a == b and s_full == s_fast
    assert len(a["traceEvents"]) == len(raw["traceEvents"])  # the event count unchanged
    if "mi250" not in name:
        assert _collective_coverage(a) >= 0.90
    # every device event with a launching op found says which; every uncosted one says why
    for ev in a["traceEvents"]:
        if isinstance(ev, dict) and ev.get("ph") == "X" and evs.category(ev) in evs.DEVICE_CATS:
            args = evs.event_args(ev)
            costed = evs.KERNEL_NUM_GB in args or evs.COMM_BYTES in args
            assert costed or args.get(evs.NOT_COSTED) in evs.NOT_COSTED_REASONS


def test_real_trace_all_to_all_size_by_hand():
    trace = _load(_real("a100_ranks8_r3_control.json.gz"))
    costs, labels, _ = costs_and_labels(trace)
    evs_ = trace["traceEvents"]
    sized = [(evs_[i], c.comm) for i, c in costs.items() if c.comm is not None]
    # the forward all_to_all's annotation: Input Dims [[8, 1024, 8816]] float, world_size 8
    fwd = [c for _e, c in sized if c.nbytes == 8 * 1024 * 8816 * 4]
    assert fwd and all(c.op == "all_to_all" and c.group_size == 8 and c.size_source == "nccl_annotation"
                       for c in fwd)


def test_rocm_trace_memcpy_size_on_runtime():
    trace = _load(_real("mi250_minitoy_train_rocm6.json.gz"))
    costs, _, _ = costs_and_labels(trace)
    copies = [(e, costs.get(i)) for i, e in enumerate(trace["traceEvents"]) if evs.category(e) == "gpu_memcpy"]
    assert copies and all(c is not None and c.bytes_written == 2560 and c.memory_roof == "host_link"
                          for _e, c in copies)  # hipMemcpyWithStream "size": "2560"


def test_several_kernels_of_one_collective_share_its_size():
    trace, k = comm_trace("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
                          annotation=("nccl:all_to_all", {"Input Dims": [[1000]], "Input type": ["float"]}),
                          dist={"world_size": 4}, dur=30.0)
    evs_ = trace["traceEvents"]
    evs_.insert(-1, _x("cuda_runtime", "cudaLaunchKernel", 10.0, 5.0, correlation=8))
    evs_.append(_x("kernel", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", 200.0, 10.0, pid=0, tid=21, correlation=8))
    costs, _, _ = costs_and_labels(trace)
    # S = 4000 B over 30 µs + 10 µs: 3000 and 1000, each at the group's 4000 B / 40 µs
    assert [costs[i].comm.nbytes for i in (len(evs_) - 2, len(evs_) - 1)] == [3000, 1000]
