"""Per-call cost of the marker wrapper around a compiled graph's callable, measured in isolation
(no profiler running, no capture armed): wrapped no-op vs bare no-op, interleaved rounds.

    python bench/bench_marker_overhead.py [--calls 200000] [--rounds 15]

A step-time ratio on a shared 2-core machine has about ±2% noise; this isolates the absolute
nanoseconds our wrapper adds per graph call, which divided by a step's graph calls bounds the
overhead on any model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from inductor_perf.tagging.instrument import wrap_callable
from inductor_perf.model.tags import GraphTags


def noop(inputs):
    return inputs


def per_call_ns(fn, calls: int) -> float:
    args = [1]
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(args)
    return (time.perf_counter_ns() - t0) / calls


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    wrapped = wrap_callable(noop, GraphTags(instance_id=1, graph_id=0, is_backward=False))
    bare, ours = [], []
    for _ in range(args.rounds):
        bare.append(per_call_ns(noop, args.calls))
        ours.append(per_call_ns(wrapped, args.calls))
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"bare call {b:.1f} ns, wrapped call {o:.1f} ns: the wrapper adds {o - b:.1f} ns per graph call")
    for step_us, graphs in ((40, 1), (100, 2), (2450, 2)):
        print(f"  a {step_us} us step with {graphs} graph call(s): +{(o - b) * graphs / (step_us * 1e3) * 100:.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
