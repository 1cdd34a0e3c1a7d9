"""Step time of a compiled model with no profiler running: inductor vs inductor_perf.

All variants are compiled in one process and timed in interleaved blocks (the order rotates every
round), so machine-load drift falls on every variant alike. Reports the median per-step time of
each variant and its ratio to plain inductor. The tiny model's step is an inference forward (the
case where a per-call wrapper shows most); the medium model's step is forward + backward.

Variants:
  inductor              backend="inductor"
  inductor_perf         backend="inductor_perf" with defaults (kernel_profile="auto": off here,
                        since no capture is configured; markers on, gated on the profiler flag)
  inductor_perf+kprof   options={"inductor_perf.kernel_profile": True} (named CPU kernels)

    .venv/bin/python bench/bench_step.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.pop("INDUCTOR_PERF_TRACE_DIR", None)  # "auto" must mean off for the default row

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import Block  # noqa: E402  (bench/models.py: the block the benches share)


class Tiny(nn.Module):
    """Per-call overhead dominates: an inference forward of about 100 us."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 32), nn.Linear(32, 32)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


VARIANTS = {
    "inductor": dict(backend="inductor"),
    "inductor_perf": dict(backend="inductor_perf"),
    "inductor_perf+kprof": dict(backend="inductor_perf", options={"inductor_perf.kernel_profile": True}),
}
SIZES = {
    # name: (model, input, steps per timed block, training step?)
    "tiny": (Tiny, lambda: torch.randn(8, 32), 200, False),
    "medium": (Block, lambda: torch.randn(4, 32, 128, requires_grad=True), 20, True),
}


def block_time(step, x, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        step(x)
    return (time.perf_counter() - t0) / steps


def bench_size(name: str, rounds: int) -> dict[str, float]:
    factory, make_input, steps, training = SIZES[name]
    x = make_input()
    fns = {}
    for variant, kw in VARIANTS.items():
        torch.manual_seed(0)
        model = factory()
        compiled = torch.compile(model, **kw)

        def step(inp, compiled=compiled, model=model):
            compiled(inp).sum().backward()
            model.zero_grad(set_to_none=True)

        def infer(inp, compiled=compiled):
            with torch.no_grad():
                compiled(inp)

        step = step if training else infer

        for _ in range(5):  # compile + warm up
            step(x)
        fns[variant] = step
    per: dict[str, list[float]] = {v: [] for v in VARIANTS}
    names = list(VARIANTS)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for v in order:
            per[v].append(block_time(fns[v], x, steps))
    return {v: statistics.median(ts) for v, ts in per.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    args = ap.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} interleaved rounds")
    print(f"{'model':<8}{'variant':<22}{'median us/step':>16}{'ratio':>8}")
    for size in args.sizes:
        med = bench_size(size, args.rounds)
        for v, t in med.items():
            print(f"{size:<8}{v:<22}{t * 1e6:>16.1f}{t / med['inductor']:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
