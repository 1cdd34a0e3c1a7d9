"""Augment one large synthetic trace with inductor-perf and with upstream's profile_analysis, side by
side, each in its own subprocess; print wall time, peak RSS and the ratios.

    .venv/bin/python bench/bench_augment.py --events 1000000 --dir /tmp/bench

Peak RSS comes from ``/usr/bin/time -v`` when present, else from getrusage(RUSAGE_CHILDREN) of a
fresh wrapper process per command (ru_maxrss is a maximum over all waited-for children, so each
command gets its own wrapper).

inductor-perf runs as ``python -c`` calling the CLI's ``main`` in-process (what the console script
does), so that it can also report its own peak RSS and that of the worker it forked
(``AugmentStats.worker_maxrss_kb`` of what ``augment_file`` returned, from wait4): its peak RSS is
the SUM of the parent's and the worker's peaks. /usr/bin/time alone would report the largest of them (Linux folds waited-for
children into the child's ru_maxrss as a maximum, not a sum). A forked worker's RSS counts the pages
it shares copy-on-write with the parent, so the sum over-counts what the two used together.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

_WRAPPER = (
    "import resource, subprocess, sys, json;"
    "rc = subprocess.call(sys.argv[1:]);"
    "print(json.dumps({'rc': rc, 'maxrss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}),"
    " file=sys.stderr)"
)


_OURS = (
    "import json, resource, sys\n"
    "from inductor_perf import cli\n"
    "from inductor_perf.augment import core as augment\n"
    "runs, real = [], augment.augment_file\n"
    "def kept(*a, **k):\n"  # the CLI imports augment_file when it runs: it gets this one
    "    runs.append(real(*a, **k))\n"
    "    return runs[-1]\n"
    "augment.augment_file = kept\n"
    "rc = cli.main(sys.argv[1:])\n"
    "me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "workers = [s.worker_maxrss_kb for s in runs if s.worker_maxrss_kb is not None]\n"
    "print('inductor-perf-rss: ' + json.dumps({'parent_kb': me, 'workers_kb': workers}), file=sys.stderr)\n"
    "sys.exit(rc)\n"
)
_RSS_LINE = re.compile(r"inductor-perf-rss: (\{.*\})")


def measure(cmd: list[str]) -> dict:
    """Run ``cmd``; return rc, wall seconds, peak RSS in MB and the tail of stderr. When the command
    reports its own and its workers' peaks (``_OURS``), peak RSS is their sum."""
    t0 = time.perf_counter()
    if shutil.which("time") and os.path.exists("/usr/bin/time"):
        p = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
        rss_kb = int(m.group(1)) if m else -1
        rc = p.returncode
        err = p.stderr.split("\tCommand being timed")[0]
    else:
        p = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        last = p.stderr.strip().splitlines()[-1]
        info = json.loads(last)
        rc, rss_kb, err = info["rc"], info["maxrss_kb"], p.stderr
    out = {"rc": rc, "wall_s": wall, "peak_rss_mb": rss_kb / 1024, "stderr_tail": err.strip()[-400:]}
    m = _RSS_LINE.search(p.stderr)
    if m:
        own = json.loads(m.group(1))
        out["parent_rss_mb"] = own["parent_kb"] / 1024
        out["workers_rss_mb"] = [kb / 1024 for kb in own["workers_kb"]]
        out["peak_rss_mb"] = out["parent_rss_mb"] + sum(out["workers_rss_mb"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/inductor_perf_bench")
    ap.add_argument("--layout", choices=("kineto", "compact"), default="kineto",
                    help="text layout of the generated trace (bench/gen_trace.py)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of inductor-perf (the median is reported; upstream runs once)")
    ap.add_argument("--skip-upstream", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    suffix = "" if a.layout == "compact" else f"_{a.layout}"
    src = os.path.join(a.dir, f"gen_{a.events}{suffix}.json")
    if not os.path.exists(src):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_trace.py"), str(a.events), src,
                        "--layout", a.layout], check=True)
    size_mb = os.path.getsize(src) / 1e6
    ours_out = os.path.join(a.dir, "ours.augmented.json")
    up_out = os.path.join(a.dir, "upstream.augmented.json")
    load_before = os.getloadavg()[0]
    ours_runs = [measure([sys.executable, "-c", _OURS, "augment", src, "-o", ours_out])
                 for _ in range(max(1, a.rounds))]
    ours_runs.sort(key=lambda r: r["wall_s"])
    runs = {"inductor-perf augment": ours_runs[len(ours_runs) // 2]}
    if not a.skip_upstream:
        runs["upstream profile_analysis"] = measure(
            [sys.executable, "-m", "torch._inductor.analysis.profile_analysis", "--augment_trace", src, up_out,
             "float"])
    try:
        import orjson  # noqa: F401
        fast = "orjson"
    except ImportError:
        fast = "json (orjson not installed)"
    print(f"trace: {src} ({size_mb:.0f} MB, {a.events} events requested)")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, parser {fast}")
    print(f"load average (1 min) before: {load_before:.2f}, after: {os.getloadavg()[0]:.2f} "
          f"(the machine is shared: compare runs at similar load)")
    walls = ", ".join(f"{r['wall_s']:.2f}" for r in ours_runs)
    print(f"inductor-perf runs (wall s, sorted): {walls}; the median run is shown")
    print(f"{'command':28s} {'rc':>3s} {'wall s':>8s} {'peak RSS MB':>12s}")
    for name, r in runs.items():
        print(f"{name:28s} {r['rc']:3d} {r['wall_s']:8.2f} {r['peak_rss_mb']:12.0f}")
        if "parent_rss_mb" in r:
            workers = " + ".join(f"{w:.0f}" for w in r["workers_rss_mb"]) or "none"
            print(f"  peak RSS = parent {r['parent_rss_mb']:.0f} + workers {workers} MB")
        if r["rc"] != 0:
            print(f"  stderr: {r['stderr_tail']}")
    if len(runs) == 2:
        ours, up = runs["inductor-perf augment"], runs["upstream profile_analysis"]
        print(f"speedup (upstream wall / ours): {up['wall_s'] / ours['wall_s']:.1f}x; "
              f"peak RSS ours / upstream: {ours['peak_rss_mb'] / up['peak_rss_mb']:.2f}")
    return 0 if all(r["rc"] == 0 for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
