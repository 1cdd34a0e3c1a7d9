"""Cost of our markers inside a profiling window: step time under torch.profiler for
backend="inductor" vs backend="inductor_perf" (same C++ kernel profiling on both), interleaved.

    python bench/bench_capture.py [--rounds 7] [--steps 20]

Prints medians and the ratio; docs/benchmarks.md records a run. Also times the after-the-window
processing (join + augment + summary + write) of one captured trace.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 64),
                         nn.GELU(), nn.Linear(64, 10))


def profiled_step_time(fn, x, steps: int) -> float:
    from torch.profiler import profile

    with profile(record_shapes=True):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn(x).sum().backward()
        t = (time.perf_counter() - t0) / steps
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    x = torch.randn(32, 64)
    plain = torch.compile(make_model(), backend="inductor", options={"cpp.enable_kernel_profile": True})
    ours = torch.compile(make_model(), backend="inductor_perf", options={"inductor_perf.kernel_profile": True})
    for fn in (plain, ours):
        for _ in range(3):
            fn(x).sum().backward()
    times = {"inductor": [], "inductor_perf": []}
    for _ in range(args.rounds):
        for name, fn in (("inductor", plain), ("inductor_perf", ours)):
            times[name].append(profiled_step_time(fn, x, args.steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"step time inside a torch.profiler window, median of {args.rounds} rounds x {args.steps} steps")
    for k, v in med.items():
        print(f"  {k:14s} {v * 1e6:9.1f} us")
    print(f"  ratio inductor_perf / inductor: {med['inductor_perf'] / med['inductor']:.3f}")

    from torch.profiler import profile

    from inductor_perf.capture import process_trace

    with tempfile.TemporaryDirectory() as d:
        with profile(record_shapes=True) as p:
            for _ in range(args.steps):
                ours(x).sum().backward()
        raw = os.path.join(d, "raw.json")
        p.export_chrome_trace(raw)
        t0 = time.perf_counter()
        res = process_trace(raw, os.path.join(d, "out"))
        dt = time.perf_counter() - t0
    print(f"after the window: join + augment + summary + write of {args.steps} steps "
          f"({res.events_tagged} kernel events): {dt * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
