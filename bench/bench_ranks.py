"""The cross-rank view as a map and a reduce (inductor_perf.ranks): what the map costs per rank, how it
scales on a Dask cluster, what a worker and the reduce hold.

    python bench/bench_ranks.py --events 20000 --ranks 4 16 --json out.json       # make bench's ranks group
    python bench/bench_ranks.py --events 1000000 --ranks 8 --serial-ranks 1 --no-dask --workers 8  # 16 cores

Ranks: synthetic GPU traces (bench/ranks_bench.py's ``make_trace``: ``--events`` kernels in 10 steps, an
all-reduce every 50, the last rank late), written once per run in a temporary folder.

1. **CPU-seconds per rank**, for each N of ``--ranks``: the map of N ranks in one process (``workers=1``),
   this process's CPU time divided by N. Linear map: the same figure for every N.
2. **Dask**, for the largest N: a real ``dask scheduler`` and 1, then 2, ``dask worker`` processes
   (``--nthreads 1``) on loopback; the wall time of ``ranks_view(files, executor=client.get_executor())``
   with each, the parallel efficiency T1 / (2 x T2), and each worker's peak RSS (``VmHWM``) after
   the smallest N, the largest N, and (2 workers) the largest N once more: a worker holds one rank at
   a time, so its peak stops growing (it grows over the first ranks as the allocator's arenas fill).
   ``--no-dask``: the local process pool of ``--workers`` processes instead (no Dask needed).
3. **The reduce** of ``--digests`` digests (default 1,000) in a fresh process: the digests of the two
   synthetic ranks, copied with rewritten rank numbers, unpickled there as they arrive from workers;
   the time of ``view_of`` and the process's peak RSS over its RSS before the digests, per rank, and a
   digest's pickled size.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

REDUCE_CHILD = r"""
import gc, pickle, sys, time
def status(key):  # VmRSS now, VmHWM the peak: this process's own (ru_maxrss keeps the forking parent's)
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
def rss():
    return status("VmRSS")
from inductor_perf.ranks.digest import view_of
blobs = pickle.load(open(sys.argv[1], "rb"))   # [pickled digest of rank 0, of rank 1]
n = int(sys.argv[2])
gc.collect()
base = rss()
digests = []
for r in range(n):
    d = pickle.loads(blobs[r % 2])
    d.summary.distributed = dict(d.summary.distributed, rank=r, world_size=n)
    d.file = f"rank{r}.json.gz"
    digests.append(d)
held = rss()
t0 = time.perf_counter()
view = view_of(digests)
reduce_s = time.perf_counter() - t0
assert view.ranks_present == list(range(n)), view.ranks_present[:5]
peak = status("VmHWM")
print(__import__("json").dumps({"reduce_s": reduce_s, "base_bytes": base, "held_bytes": held - base,
      "peak_bytes": peak, "peak_over_base_bytes": peak - base, "straggler": view.straggler.rank if view.straggler else None}))
"""


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def write_rank(path: str, r: int, n: int, events: int) -> str:
    from ranks_bench import make_trace

    with gzip.open(path, "wt", compresslevel=1) as f:
        json.dump(make_trace(r, n, events), f)
    return path


def write_ranks(folder: str, n: int, events: int) -> list[str]:
    """The ``n`` synthetic rank files, written by up to one process per core."""
    import concurrent.futures as cf

    with cf.ProcessPoolExecutor(max_workers=min(n, os.cpu_count() or 1)) as pool:
        return list(pool.map(write_rank, [os.path.join(folder, f"rank{r}.json.gz") for r in range(n)], range(n),
                             [n] * n, [events] * n))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dask_cluster(workers: int):
    """A scheduler and ``workers`` one-thread workers on loopback; yields a connected Client."""
    from distributed import Client

    port = free_port()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    dask = [sys.executable, "-m", "dask"]
    procs = [subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", "127.0.0.1:0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        procs += [subprocess.Popen([*dask, "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1", "--nworkers", "1",
                                    "--no-dashboard", "--host", "127.0.0.1"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the Dask scheduler did not start")
            time.sleep(0.2)
        with Client(f"tcp://127.0.0.1:{port}", timeout="30s") as client:
            client.wait_for_workers(workers, timeout=90)
            yield client
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


def _peak_rss() -> int:
    """This process's peak RSS (VmHWM: its own, where ru_maxrss also keeps what the process it was
    forked from held before its exec)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def worker_peaks(client) -> list[int]:
    return sorted(client.run(_peak_rss).values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000, help="kernel events per rank (default 20000)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[4, 16], help="numbers of ranks (default 4 16)")
    ap.add_argument("--serial-ranks", type=int, nargs="+", help="numbers of ranks of the one-process CPU figure "
                    "(default: --ranks)")
    ap.add_argument("--digests", type=int, default=1000, help="digests the reduce is timed on (default 1000)")
    ap.add_argument("--no-dask", action="store_true", help="the local process pool instead of a Dask cluster")
    ap.add_argument("--workers", type=int, default=2, help="with --no-dask: the pool's processes (default 2)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    from inductor_perf.ranks.digest import digest
    from inductor_perf.ranks.files import cross_rank_files, ranks_view

    out: dict = {"events": a.events, "cores": os.cpu_count(), "load_start": os.getloadavg()[0], "cpu_per_rank_s": {}}
    with tempfile.TemporaryDirectory(prefix="bench_ranks_") as d:
        biggest = max(a.ranks)
        files = write_ranks(d, biggest, a.events)
        out["trace_mb"] = os.path.getsize(files[0]) / 1e6
        for n in sorted(a.serial_ranks or a.ranks):
            c0, t0 = cpu_s(), time.perf_counter()
            cross_rank_files(files[:n], workers=1)
            wall, cpu = time.perf_counter() - t0, cpu_s() - c0
            out["cpu_per_rank_s"][str(n)] = cpu / n
            out.setdefault("serial_wall_s", {})[str(n)] = wall
            print(f"{n} ranks in one process: {wall:.2f} s wall, {cpu:.2f} CPU-s, {cpu / n:.3f} CPU-s per rank", flush=True)
        if a.no_dask:
            c0, t0 = cpu_s(), time.perf_counter()
            cross_rank_files(files, workers=a.workers)
            out["pool"] = {"workers": a.workers, "wall_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0}
            print(f"{biggest} ranks, local pool of {a.workers}: {out['pool']['wall_s']:.2f} s wall", flush=True)
        else:
            out["dask"] = {}
            for w in (1, 2):
                with dask_cluster(w) as client:
                    small = min(a.ranks)
                    ranks_view(files[:small], executor=client.get_executor())
                    peak_small = worker_peaks(client)
                    t0 = time.perf_counter()
                    ranks_view(files, executor=client.get_executor())
                    wall = time.perf_counter() - t0
                    out["dask"][str(w)] = {"wall_s": wall, "worker_peak_bytes": worker_peaks(client),
                                           "worker_peak_bytes_after_small": peak_small}
                    if w == 2:  # the same ranks again: a bounded worker's peak moves no further
                        ranks_view(files, executor=client.get_executor())
                        out["dask"]["2"]["worker_peak_bytes_after_twice"] = worker_peaks(client)
                    print(f"{biggest} ranks on {w} Dask worker(s): {wall:.2f} s wall; worker peak RSS "
                          f"{[round(p / 1e6) for p in out['dask'][str(w)]['worker_peak_bytes']]} MB after {biggest} ranks "
                          f"(after {small} ranks first: {[round(p / 1e6) for p in peak_small]} MB)", flush=True)
            print(f"after the {biggest} ranks again on 2 workers: worker peak RSS "
                  f"{[round(p / 1e6) for p in out['dask']['2']['worker_peak_bytes_after_twice']]} MB", flush=True)
            out["dask"]["efficiency"] = out["dask"]["1"]["wall_s"] / (2 * out["dask"]["2"]["wall_s"])
            print(f"parallel efficiency, 2 workers: {out['dask']['efficiency']:.2f}", flush=True)
        import pickle

        blobs = [pickle.dumps(digest(f)) for f in files[:2]]
        out["digest_bytes"] = [len(b) for b in blobs]
        bp = os.path.join(d, "digests.pkl")
        with open(bp, "wb") as f:
            pickle.dump(blobs, f)
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-c", REDUCE_CHILD, bp, str(a.digests)], env=env, capture_output=True,
                              text=True, check=True)
        red = json.loads(proc.stdout)
        out["reduce"] = dict(red, digests=a.digests, bytes_per_rank=red["peak_over_base_bytes"] / a.digests,
                             held_per_rank=red["held_bytes"] / a.digests)
        print(f"reduce of {a.digests} digests: {red['reduce_s']:.2f} s, peak RSS {red['peak_bytes'] / 1e6:.0f} MB "
              f"({red['peak_over_base_bytes'] / 1e6:.0f} MB over the process before them: "
              f"{out['reduce']['bytes_per_rank'] / 1e3:.0f} kB per rank; held digests "
              f"{out['reduce']['held_per_rank'] / 1e3:.0f} kB per rank); a digest pickles to "
              f"{out['digest_bytes'][0] / 1e3:.1f} kB", flush=True)
    out["load_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
