"""Bisect the cold-compile gap between backend="inductor" and "inductor_perf" on one device.

Each round compiles the transformer block of bench/bench_compile.py cold (fresh process, empty
Inductor and Triton caches) once per variant, in an order that rotates from round to round:

    inductor                      plain Inductor
    inductor+no_autograd_cache    plain Inductor with the AOTAutograd cache off (as our compiles ran
                                  until tagging/aot_cache.py served its hits)
    inductor_perf                 ours
    inductor_perf+no_markers      ours without the record_function markers in the wrapper
    inductor_perf+no_tagging      ours with INDUCTOR_PERF_DISABLE_TAGGING=1 (the compile workers started,
                                  our torch check, then compile_fx as Inductor calls it)

    python3 tools/gpu_compile_bisect.py --device cuda --budget-s 200 --json OUT/bisect.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import bench_compile

CASES = (("inductor", ""), ("inductor", "no_autograd_cache"), ("inductor_perf", ""),
         ("inductor_perf", "no_markers"), ("inductor_perf", "no_tagging"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=None, help="start no round past this many seconds")
    ap.add_argument("--json", metavar="PATH", help="rewritten after every round")
    args = ap.parse_args(argv)
    names = [f"{b}+{v}" if v else b for b, v in CASES]
    times: dict[str, list[float]] = {n: [] for n in names}
    start, longest = time.perf_counter(), 0.0
    for r in range(args.rounds):
        if args.budget_s is not None and r > 0 and time.perf_counter() - start + longest > args.budget_s:
            print(f"stopping after {r} rounds (budget)", file=sys.stderr)
            break
        t0 = time.perf_counter()
        order = list(range(len(CASES)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            b, v = CASES[i]
            with tempfile.TemporaryDirectory(prefix="bisect_") as cache:
                times[names[i]].append(bench_compile._child(b, args.device, "block", cache, v)["seconds"])
        longest = max(longest, time.perf_counter() - t0)
        print(f"round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.2f}" for n in names), file=sys.stderr, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": args.device, "rounds_s": times}, f, indent=1)
    base = statistics.median(times["inductor"])
    print(f"{'variant':<30}{'median s':>10}{'/inductor':>11}  rounds")
    for n in names:
        med = statistics.median(times[n])
        print(f"{n:<30}{med:>10.2f}{med / base:>11.3f}  {', '.join(f'{x:.2f}' for x in times[n])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
