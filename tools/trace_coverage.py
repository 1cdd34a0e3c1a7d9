"""How much of each trace's GPU time carries a cost after ``augment``: the acceptance figures of the
real-traces work, per trace.

For every device event (kernel, memcpy, memset) of the augmented trace:

- non-collective time with ``kernel_num_gb > 0``, as a share of all non-collective GPU time;
- collective time (kernels named ``nccl*`` / ``rccl*``, or carrying ``comm_op``) with ``busbw_gbps``;
- of that costed time, the share whose cost is only a lower bound (``kernel_cost_bound: "lower"``);
- the same share among the time whose launching op recorded its inputs (leaving out kernels labelled
  ``no_shapes``, ``no_launch_op`` or ``graph_replay``: what the trace itself cannot cost);
- the time split by ``launch_op`` / name of what is left uncosted, the top few.

    .venv/bin/python tools/trace_coverage.py ../shared/traces/*.json.gz ../shared/traces/two_ranks/*.gz
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from inductor_perf.model import events as evs# noqa: E402
from inductor_perf.augment.core import augment_file  # noqa: E402
from inductor_perf.traces.files import load_trace  # noqa: E402


def _is_collective(ev: dict) -> bool:
    name = str(ev.get("name", "")).lower()
    return name.startswith(("nccl", "rccl", "void nccl", "void rccl")) or evs.COMM_OP in evs.event_args(ev)


def coverage(path: str, top: int = 5) -> dict:
    """The coverage figures of one trace (augmented into a temporary file first)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "aug.json")
        augment_file(path, out, engine="full")
        trace = load_trace(out)
    comp = comp_costed = comp_lower = coll = coll_costed = unrecorded = 0.0
    missing: collections.Counter = collections.Counter()
    for ev in trace["traceEvents"]:
        if not isinstance(ev, dict) or ev.get("ph") != "X" or evs.category(ev) not in evs.DEVICE_CATS:
            continue
        dur = evs.number(ev.get("dur")) or 0.0
        args = evs.event_args(ev)
        if _is_collective(ev):
            coll += dur
            if evs.number(args.get(evs.BUSBW_GBPS)) is not None:
                coll_costed += dur
            continue
        comp += dur
        gb = evs.number(args.get(evs.KERNEL_NUM_GB))
        if gb is not None and gb > 0:
            comp_costed += dur
            if args.get(evs.COST_BOUND) == evs.LOWER_BOUND:
                comp_lower += dur
        else:
            why = args.get(evs.NOT_COSTED, "?")
            if why in ("no_shapes", "no_launch_op", "graph_replay"):
                unrecorded += dur
            missing[f"{args.get(evs.LAUNCH_OP) or str(ev.get('name'))[:60]} [{why}]"] += dur
    return {
        "trace": os.path.basename(path),
        "noncollective_us": round(comp), "noncollective_costed_pct": round(100 * comp_costed / comp, 1) if comp else None,
        "lower_bound_pct_of_costed": round(100 * comp_lower / comp_costed, 1) if comp_costed else None,
        "recorded_costed_pct": round(100 * comp_costed / (comp - unrecorded), 1) if comp > unrecorded else None,
        "collective_us": round(coll), "collective_busbw_pct": round(100 * coll_costed / coll, 1) if coll else None,
        "top_uncosted": [(k, round(100 * v / comp, 1)) for k, v in missing.most_common(top)] if comp else [],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = [coverage(t) for t in a.traces]
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'trace':40} {'non-coll us':>12} {'costed %':>9} {'lower %':>8} {'of recorded %':>14} {'coll us':>10} "
          f"{'busbw %':>8}")
    for r in rows:
        print(f"{r['trace']:40} {r['noncollective_us']:>12} {str(r['noncollective_costed_pct']):>9} "
              f"{str(r['lower_bound_pct_of_costed']):>8} "
              f"{str(r['recorded_costed_pct']):>14} {r['collective_us']:>10} {str(r['collective_busbw_pct']):>8}")
        for k, pct in r["top_uncosted"]:
            print(f"    {pct:5.1f}%  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
