"""Cold compile time: backend="inductor" vs backend="inductor_perf".

Each round starts one fresh process per backend, each with its own empty TORCHINDUCTOR_CACHE_DIR,
so nothing is cached (FX graph cache, AOTAutograd cache, compiled C++). The child times the first
forward+backward call of a small transformer block (that call compiles both graphs); importing
torch is outside the timed region. Backends alternate which goes first in a round so that drift
in machine load falls on both equally.

    .venv/bin/python bench/bench_compile.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import torch

sys.path.insert(0, sys.argv[2])
from models import Block  # bench/models.py

torch.manual_seed(0)
model, x = Block(e=64), torch.randn(4, 32, 64)
compiled = torch.compile(model, backend=sys.argv[1])
t0 = time.perf_counter()
compiled(x).sum().backward()
dt = time.perf_counter() - t0
print("JSON:" + json.dumps({"seconds": dt}))
"""

BACKENDS = ("inductor", "inductor_perf")


def one(backend: str) -> float:
    """Seconds of one cold compile (forward + backward) in a fresh process and cache."""
    with tempfile.TemporaryDirectory(prefix="bench_compile_") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        env.pop("INDUCTOR_PERF_TRACE_DIR", None)
        proc = subprocess.run([sys.executable, "-c", CHILD, backend, os.path.dirname(os.path.abspath(__file__))],
                              env=env, capture_output=True,
                              text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("JSON:"):
            return float(json.loads(line[5:])["seconds"])
    raise RuntimeError(f"{backend} child failed:\n{proc.stderr[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    ratios: list[float] = []
    for r in range(args.rounds):
        order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        got = {b: one(b) for b in order}
        for b in BACKENDS:
            times[b].append(got[b])
        ratios.append(got["inductor_perf"] / got["inductor"])
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{b} {got[b]:.2f} s" for b in order),
              file=sys.stderr)
    med = {b: statistics.median(v) for b, v in times.items()}
    print(f"{'backend':<16}{'median s':>10}{'min s':>8}{'max s':>8}")
    for b in BACKENDS:
        print(f"{b:<16}{med[b]:>10.2f}{min(times[b]):>8.2f}{max(times[b]):>8.2f}")
    print(f"ratio of medians inductor_perf/inductor: {med['inductor_perf'] / med['inductor']:.3f}")
    print(f"median of per-round ratios:             {statistics.median(ratios):.3f}  "
          f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
