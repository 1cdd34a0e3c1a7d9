"""Time the cross-rank summary of R synthetic ranks against one rank's summary.

    python bench/ranks_bench.py --ranks 8 --events 1000000 [--workers N] [--full]
    python bench/ranks_bench.py --dir /tmp/i15/r8x1m   # rank files already written

Each rank's trace: ``--events`` GPU kernel events (a GEMM and an elementwise kernel, with an
all-reduce every 50 kernels, costed args on the collectives), in 10 ProfilerStep ranges; the last
rank runs its GEMMs 20 % longer. With ``--dir``: the ``*.json`` / ``*.json.gz`` traces of that
folder instead, e.g. raw Kineto-shaped ranks from ``bench/gen_trace.py N DIR/rank<R>.json
--world-size W --rank R``. Prints the wall time of one rank's plain summary (as ``inductor-perf
summary FILE`` makes it: the full summary, streamed when large) and of the cross-rank view of all
ranks (worker processes: one per rank up to the cores; light per-rank summaries, or full ones with
``--full``), and the straggler found.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time

from inductor_perf.ranks.files import cross_rank_files
from inductor_perf.summary.files import summarize_file, trace_files


def make_trace(rank: int, ranks: int, n: int) -> dict:
    ev, t = [], 1.7e15
    steps = 10
    per_step = n // steps
    for s in range(steps):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                   "ts": t, "dur": per_step * 12.0 + 10, "args": {}})
        for i in range(per_step):
            if i % 50 == 49:
                dur = 40.0 if rank == ranks - 1 else 200.0
                ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0,
                           "tid": 9, "ts": t, "dur": dur, "args": {"comm_op": "all_reduce", "comm_bytes": 1 << 20,
                                                                   "group_size": ranks}})
            else:
                gemm = i % 2 == 0
                dur = (8.0 * (1.2 if rank == ranks - 1 else 1.0)) if gemm else 3.0
                ev.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn" if gemm else "triton_poi_add_0",
                           "pid": 0, "tid": 7, "ts": t, "dur": dur, "args": {"kernel_flop": 1000}})
            t += 12.0
        t += 10
    return {"traceEvents": ev, "distributedInfo": {"rank": rank, "world_size": ranks, "backend": "nccl"}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--dir", default=None, help="time the traces of this folder instead of synthetic ones")
    ap.add_argument("--full", action="store_true", help="full per-rank summaries (before the light pass)")
    a = ap.parse_args()
    if a.dir:
        files = trace_files(a.dir)
    else:
        d = tempfile.mkdtemp(prefix="ranks_bench_")
        files = []
        for r in range(a.ranks):
            p = os.path.join(d, f"rank{r}.json.gz")
            with gzip.open(p, "wt", compresslevel=1) as f:
                json.dump(make_trace(r, a.ranks, a.events), f)
            files.append(p)
    light = not a.full
    one, one_cpu = _timed(lambda: summarize_file(files[0], engine="auto"))  # `inductor-perf summary FILE`
    one_light, one_light_cpu = _timed(lambda: summarize_file(files[0], engine="auto", light=light))
    view = None

    def run() -> None:
        nonlocal view
        view = cross_rank_files(files, workers=a.workers, light=light)
    many, many_cpu = _timed(run)
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, {len(files)} ranks ({a.dir or f'{a.events:,} events'}, "
          f"{'light' if light else 'full'} per-rank summaries): one rank {one:.2f} s ({one_cpu:.1f} s CPU; "
          f"{'light' if light else 'again'} {one_light:.2f} s, {one_light_cpu:.1f} s CPU), cross-rank {many:.2f} s "
          f"({many_cpu:.1f} s CPU): {many / one:.2f}x wall, {many_cpu / one_cpu:.2f}x CPU; straggler "
          f"{view.straggler.rank if view and view.straggler else None}")


def _timed(fn) -> tuple[float, float]:
    """(wall s, CPU s of this process and its finished children) of ``fn()``: the CPU time does not
    grow with other jobs' load as the wall time does."""
    t0, c0 = time.perf_counter(), os.times()
    fn()
    t1, c1 = time.perf_counter(), os.times()
    cpu = sum(getattr(c1, f) - getattr(c0, f) for f in ("user", "system", "children_user", "children_system"))
    return t1 - t0, cpu


if __name__ == "__main__":
    main()
