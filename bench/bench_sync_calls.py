"""What the sync-call marks (inductor_perf/capture/sync_calls.py) cost a step of Python code: a step of
many distinct call sites (generated functions, a few calls each) and a few listed calls on "device"
tensors, timed with the marks on against off in paired rounds. The first step after the marks start
(every call site reports once, then is switched off) is timed apart from the steps after it.

    python3.12 bench/bench_sync_calls.py [--sites 6000] [--syncs 4] [--rounds 11]
    python3.12 bench/bench_sync_calls.py --compiled [--rounds 11]     # needs torch

Python 3.12 or newer (sys.monitoring). Torch is not needed: ``list.copy`` stands for ``.item()`` and a
one-element list for a tensor on the GPU; with torch importable the ranges are torch's
``_RecordFunctionFast`` (no profiler on: the range is entered and left, nothing recorded), else a no-op.

``--compiled`` times a real training step instead: eight ``Linear(256)`` layers compiled with
``backend="inductor_perf"``, SGD, a batch copied with ``.to()`` and the loss read with ``.item()`` each
step, on the CPU, the marks' device test being "cpu" (so those two calls get torch's ranges, as a GPU
tensor's would). The step is compiled before the first round.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from inductor_perf.capture.sync_calls import SyncCalls  # noqa: E402


def make_step(sites: int, syncs: int):
    """A fresh step function (new code objects: no site has reported yet) with ``sites`` call sites."""
    per = 3
    lines = []
    for i in range(sites // per):
        lines += [f"def f{i}(x):", "    a = len(x)", "    b = abs(a)", "    return max(a, b)"]
    lines += ["def step(x):", "    t = 0"]
    lines += [f"    t += f{i}(x)" for i in range(sites // per)]
    lines += ["    x.copy()" for _ in range(syncs)]  # the listed calls: each a marked range
    lines += ["    return t"]
    scope: dict = {}
    exec(compile("\n".join(lines), "<step>", "exec"), scope)
    return scope["step"]


def recorder():
    try:
        import torch

        return torch._C._profiler._RecordFunctionFast, "torch _RecordFunctionFast"
    except ImportError:
        return (lambda name: contextlib.nullcontext()), "a no-op range (no torch)"


def compiled_step():
    """The ``--compiled`` step (module docstring) and the marks' device test."""
    import torch

    from inductor_perf.capture.sync_calls import tensor_on

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fn = torch.compile(model, backend="inductor_perf")
    host = torch.randn(32, 256, dtype=torch.float64)

    def step(_x):
        loss = fn(host.to(torch.float32)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(3):
        step(None)
    return step, tensor_on("cpu")


def timed(fn, x) -> float:
    t0 = time.perf_counter_ns()
    fn(x)
    return (time.perf_counter_ns() - t0) / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", type=int, default=6000)
    ap.add_argument("--syncs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--steps", type=int, default=20, help="steps after the first, per round")
    ap.add_argument("--compiled", action="store_true", help="time a compiled training step (needs torch)")
    args = ap.parse_args()
    if sys.version_info < (3, 12):
        print("bench_sync_calls: needs Python 3.12 or newer (sys.monitoring)", file=sys.stderr)
        return 2
    record, what = recorder()
    x = [0]
    first = {"off": [], "on": []}
    later = {"off": [], "on": []}
    if args.compiled:
        step, on_cpu = compiled_step()
    for r in range(args.rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            if args.compiled:
                marks = SyncCalls(on_device=on_cpu)
            else:
                step = make_step(args.sites, args.syncs)
                marks = SyncCalls({id(list.copy): "copy"}, lambda t: isinstance(t, list) and len(t) == 1, record)
            if mode == "on" and not marks.start():
                print("bench_sync_calls: no free sys.monitoring tool id", file=sys.stderr)
                return 2
            try:
                first[mode].append(timed(step, x))
                later[mode].append(statistics.median(timed(step, x) for _ in range(args.steps)))
            finally:
                marks.stop()
    if args.compiled:
        import torch

        print(f"Python {sys.version.split()[0]}, torch {torch.__version__}; a compiled 8 x Linear(256) SGD step "
              f"with one .to() and one .item() marked; {args.rounds} paired rounds (medians)")
    else:
        print(f"Python {sys.version.split()[0]}; {args.sites} call sites and {args.syncs} marked calls a step; "
              f"ranges: {what}; {args.rounds} paired rounds (medians)")
    # (--compiled: one step; its sites stay switched off for the tool id across rounds, so no first step)
    for name, got in ((("steps", later),) if args.compiled else (("first step", first), ("later steps", later))):
        off, on = statistics.median(got["off"]), statistics.median(got["on"])
        ratios = [b / a for a, b in zip(got["off"], got["on"])]
        print(f"  {name}: off {off:,.1f} µs, on {on:,.1f} µs; on/off {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f}); +{on - off:,.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
