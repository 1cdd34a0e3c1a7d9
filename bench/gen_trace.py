"""Write a synthetic GPU-shaped torch.profiler trace of about N events.

Shaped like a Kineto export of a CUDA run recorded with ``record_shapes=True``: per step, CPU ops
with ``Input Dims`` / ``Input type`` / ``Concrete Inputs`` (aten::linear > aten::addmm, aten::mm,
aten::bmm, aten::convolution > aten::cudnn_convolution, aten::add), a ``cudaLaunchKernel`` runtime
event per kernel, the device kernel with ``correlation`` and ``External id``, and the ac2g flow pair
linking them.

The default layout is the text torch.profiler's Kineto writer produces (torch 2.13): one member
per line, indented, the args object on a line of its own after a lone comma, ``Input Strides``
recorded beside ``Input Dims``; 1M events is then about 325 MB. ``--layout compact`` writes each
event as one compact JSON object (about 227 MB).

Upstream's ``profile_analysis --augment_trace`` needs: ``deviceProperties`` entries with ``id`` and
``name``; an ``args`` dict on every kernel; every kernel's ``External id`` present on exactly one
``cpu_op`` (it raises on duplicates and on a kernel whose id has no op); and ``Concrete Inputs`` on
ops it has formulas for. The generator satisfies all of these.

    .venv/bin/python bench/gen_trace.py 1000000 /tmp/big.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys

PID, TID, GPU_PID, STREAM = 4242, 4242, 0, 7


def _kernel_args(corr: int, ext: int) -> dict:
    return {"queued": 0, "device": 0, "context": 1, "stream": STREAM, "correlation": corr,
            "registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.2,
            "warps per SM": 8.0, "grid": [132, 1, 1], "block": [256, 1, 1],
            "est. achieved occupancy %": 25, "External id": ext}


def _strides(dims: list) -> list:
    """Contiguous strides of a shape."""
    out, step = [], 1
    for d in reversed(dims):
        out.append(step)
        step *= d
    return out[::-1]


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
COMM_STREAM = 9
OPS_PER_STEP = 1000
OPS_PER_ALLREDUCE = 50


def _rank_events(i: int, start: float, gpu_ts: float, corr: int, ext: int, rank: int, world: int) -> list:
    """With ``--world-size``: before op ``i``, a ``ProfilerStep#N`` range every :data:`OPS_PER_STEP`
    ops, and every :data:`OPS_PER_ALLREDUCE` ops an all-reduce of 1 MiB (its launch, and the NCCL
    kernel with the args Kineto records for one) on a stream of its own, alongside the compute. The
    last rank arrives late: its all-reduce takes 100 µs, the others' 500 µs (they wait for it)."""
    out = []
    if i % OPS_PER_STEP == 0:
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i // OPS_PER_STEP}", "pid": PID,
                    "tid": TID, "ts": round(start, 3), "dur": OPS_PER_STEP * 80.0 - 1, "args": {}})
    if i % OPS_PER_ALLREDUCE == OPS_PER_ALLREDUCE - 1:
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                    "ts": round(start + 70, 3), "dur": 4.0, "args": {"External id": ext, "cbid": 211,
                                                                    "correlation": corr}})
        out.append({"ph": "X", "cat": "kernel", "name": NCCL, "pid": GPU_PID, "tid": COMM_STREAM,
                    "ts": round(gpu_ts, 3), "dur": 100.0 if rank == world - 1 else 500.0,
                    "args": {**_kernel_args(corr, ext), "stream": COMM_STREAM, "Collective name": "allreduce",
                             "In msg nelems": 262144, "Out msg nelems": 262144, "dtype": "Float",
                             "Group size": world}})
    return out


def generate(n_events: int, seed: int = 0, rank: int | None = None, world: int | None = None):
    """Yield the events of a trace with about ``n_events`` events (with ``world``: rank ``rank`` of
    ``world``, see :func:`_rank_events`)."""
    rnd = random.Random(seed)
    ops = 0
    ts = 4_392_959_154_510.635  # µs, as Kineto writes them
    gpu_ts = ts + 500.0
    ext = 0
    corr = 0
    emitted = 0

    def op(name: str, t: float, dur: float, e: int, dims, types, concrete) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": round(t, 3),
                "dur": round(dur, 3), "args": {"External id": e, "Record function id": 0, "Ev Idx": e,
                                               "Input Dims": dims, "Input type": types,
                                               "Input Strides": [_strides(d) for d in dims],
                                               "Concrete Inputs": concrete, "Sequence number": e}}

    while emitted < n_events:
        kind = rnd.choice(("linear", "mm", "bmm", "conv", "add"))
        m = rnd.choice((128, 256, 512, 1024))
        k = rnd.choice((256, 512, 768, 1024))
        nn_ = rnd.choice((256, 512, 1024, 4096))
        dt = rnd.choice(("float", "c10::BFloat16", "c10::Half"))
        events = []
        start = ts
        if kind == "linear":
            ext += 1
            outer = op("aten::linear", start, 40.0, ext, [[m, k], [nn_, k], [nn_]], [dt] * 3, ["", "", ""])
            ext += 1
            inner = op("aten::addmm", start + 5, 30.0, ext, [[nn_], [m, k], [k, nn_], [], []],
                       [dt] * 3 + ["Scalar"] * 2, ["", "", "", "1", "1"])
            events += [outer, inner]
            launch_at, launch_ext, kname = start + 20, ext, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
        elif kind == "mm":
            ext += 1
            events.append(op("aten::mm", start, 30.0, ext, [[m, k], [k, nn_]], [dt] * 2, ["", ""]))
            launch_at, launch_ext, kname = start + 15, ext, "ampere_sgemm_128x64_nn"
        elif kind == "bmm":
            ext += 1
            b = rnd.choice((4, 8, 16))
            events.append(op("aten::bmm", start, 30.0, ext, [[b, m, k], [b, k, nn_]], [dt] * 2, ["", ""]))
            launch_at, launch_ext, kname = start + 15, ext, "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64"
        elif kind == "conv":
            c_in, c_out, hw = rnd.choice((3, 64, 128)), rnd.choice((64, 128, 256)), rnd.choice((28, 56, 112))
            x, w = [8, c_in, hw, hw], [c_out, c_in, 3, 3]
            ext += 1
            events.append(op("aten::convolution", start, 60.0, ext, [x, w, [], [], [], [], [], [], []],
                             [dt, dt, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                             ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]))
            ext += 1
            events.append(op("aten::cudnn_convolution", start + 5, 50.0, ext, [x, w, [], [], [], [], [], [], []],
                             [dt, dt, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
                             ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"]))
            launch_at, launch_ext, kname = start + 30, ext, "sm80_xmma_fprop_implicit_gemm_indexed_f32f32_tf32f32"
        else:
            ext += 1
            events.append(op("aten::add", start, 20.0, ext, [[m, nn_], [m, nn_], []], [dt, dt, "Scalar"],
                             ["", "", "1"]))
            launch_at, launch_ext, kname = start + 10, ext, \
                "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
        corr += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                       "ts": round(launch_at, 3), "dur": 4.0,
                       "args": {"External id": launch_ext, "cbid": 211, "correlation": corr}})
        gpu_ts = max(gpu_ts, launch_at + 5)
        kdur = round(rnd.uniform(5, 200), 3)
        events.append({"ph": "X", "cat": "kernel", "name": kname, "pid": GPU_PID, "tid": STREAM,
                       "ts": round(gpu_ts, 3), "dur": kdur, "args": _kernel_args(corr, launch_ext)})
        events.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": round(launch_at, 3), "cat": "ac2g",
                       "name": "ac2g"})
        events.append({"ph": "f", "id": corr, "pid": GPU_PID, "tid": STREAM, "ts": round(gpu_ts, 3), "cat": "ac2g",
                       "name": "ac2g", "bp": "e"})
        gpu_ts += kdur + 1
        if world:
            corr += 1
            ext += 1
            events += _rank_events(ops, start, gpu_ts, corr, ext, rank or 0, world)
            ops += 1
        ts = start + 80
        emitted += len(events)
        yield from events


def header(rank: int | None = None, world: int | None = None) -> dict:
    dist = {"distributedInfo": {"backend": "nccl", "rank": rank or 0, "world_size": world}} if world else {}
    return {**dist, "schemaVersion": 1, "deviceProperties": [{
        "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045477376, "computeMajor": 9,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
        "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132}],
        "record_shapes": 1, "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000}


def kineto_text(ev: dict) -> str:
    """``ev`` laid out as Kineto's JSON writer lays out an event."""
    members = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in ev.items() if k != "args")
    if "args" not in ev:
        return "  {\n" + members + "\n  }"
    args = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in ev["args"].items())
    return "  {\n" + members + '\n    ,\n    "args": {\n      ' + args + "\n    }\n  }"


def write(n_events: int, path: str, seed: int = 0, layout: str = "kineto", rank: int | None = None,
          world: int | None = None) -> int:
    """Stream the trace to ``path``; returns the number of events written."""
    if layout == "kineto":
        text = kineto_text
    elif layout == "compact":
        def text(ev: dict) -> str:
            return json.dumps(ev, separators=(",", ":"))
    else:
        raise ValueError(f"layout must be 'kineto' or 'compact', not {layout!r}")
    count = 0
    with open(path, "w") as f:
        h = json.dumps(header(rank, world))
        f.write(h[:-1] + ', "traceEvents": [\n')
        for ev in generate(n_events, seed, rank, world):
            if count:
                f.write(",\n")
            f.write(text(ev))
            count += 1
        f.write("\n]}\n")
    return count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("events", type=int)
    p.add_argument("output")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", choices=("kineto", "compact"), default="kineto",
                   help="Kineto's indented text (default) or one compact object per event")
    p.add_argument("--world-size", type=int, default=None,
                   help="a rank of a distributed run: distributedInfo, ProfilerStep ranges, all-reduces")
    p.add_argument("--rank", type=int, default=0, help="with --world-size: this trace's rank (default 0)")
    a = p.parse_args(argv)
    n = write(a.events, a.output, a.seed, a.layout, a.rank, a.world_size)
    print(f"wrote {n} events to {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
