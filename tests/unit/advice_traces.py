"""Hand-built traces for the advisor's tests: each pattern placed at known microseconds, so that
every saving is hand arithmetic (the comments add it up)."""

from __future__ import annotations

from typing import Any

HOST = {"pid": 1, "tid": 1}
DEVICE = {"pid": 0, "tid": 7}
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def ev(name: str, cat: str, ts: float, dur: float, where: dict, **args: Any) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, **where, "args": dict(args)}


def kernel(name: str, ts: float, dur: float, **args: Any) -> dict:
    return ev(name, "kernel", ts, dur, DEVICE, **args)


def host(name: str, ts: float, dur: float, cat: str = "cpu_op") -> dict:
    return ev(name, cat, ts, dur, HOST)


def gpu_trace() -> dict:
    """A GPU window [0, 350] (first kernel start to last kernel end) whose 200 µs of idle are:

    - 10..110: the host in a DataLoader next(): input_wait 100;
    - 120..130, 140..160, 170..190: the host in a compiled-graph call (120..200) launching k3, k4, k5:
      launch gaps 10 + 20 + 20 = 50;
    - 250..300: after a cudaStreamSynchronize (200..252, inside the python frame train.py(42), 199..253)
      that waited for k6 (200..250), until k7 at 300: the sync's drain 50; of it, 252..300 is outside
      the sync, the loader and the compiled call: eager idle 48 (1 under the python frame, 47 under no
      host event).

    And a pageable host-to-device copy of 40 µs (310..350)."""
    return {"traceEvents": [
        kernel("k1", 0, 10),
        host(LOADER, 10, 100, "user_annotation"),
        kernel("k2", 110, 10),
        host("## Call CompiledFxGraph abc", 120, 80, "user_annotation"),
        kernel("k3", 130, 10), kernel("k4", 160, 10), kernel("k5", 190, 10),
        kernel("k6", 200, 50),
        host("train.py(42): step", 199, 54, "python_function"),
        ev("cudaStreamSynchronize", "cuda_runtime", 200, 52, HOST),
        kernel("k7", 300, 10),
        ev("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 310, 40, DEVICE),
    ]}


def stepped_loader_trace() -> dict:
    """Two steps, 0..200 and 200..600 (median 300 µs), each waiting on the data loader: 100 µs in the
    first (0..100), 300 in the second (200..500); kernels fill the rest. input_wait per step:
    (100 + 300) / 2 = 200 µs, 66.67 % of the median step."""
    return {"traceEvents": [
        host("ProfilerStep#1", 0, 200, "user_annotation"), host(LOADER, 0, 100, "user_annotation"),
        kernel("k1", 100, 100),
        host("ProfilerStep#2", 200, 400, "user_annotation"), host(LOADER, 200, 300, "user_annotation"),
        kernel("k2", 500, 100),
    ]}


def cpu_optimizer_trace(params: int = 100, fused: bool = False, gb: float | None = None) -> dict:
    """A CPU trace: one AdamW step of 1000 µs (0..1000) updating ``params`` parameters one at a time,
    5 ops each (mul_, add_, lerp_, sqrt, addcdiv_: 1.5 µs each, one after another). With ``fused``, one
    ``aten::_foreach_add_`` is among them. ``gb``: each op carries that many GB moved (a cost)."""
    events = [host("Optimizer.step#AdamW.step", 0, 1000, "user_annotation")]
    t = 1.0
    for p in range(params):
        for op in ("aten::mul_", "aten::add_", "aten::lerp_", "aten::sqrt", "aten::addcdiv_"):
            name = "aten::_foreach_add_" if fused and p == 0 and op == "aten::add_" else op
            events.append(ev(name, "cpu_op", t, 1.5, HOST, **({"kernel_num_gb": gb, "kernel_flop": 0} if gb else {})))
            t += 1.9
    return {"traceEvents": events}
