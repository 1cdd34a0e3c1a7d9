"""Time one ``inductor-perf`` command run from several checkouts of the code, in paired rounds.

    git archive a6d4a4b inductor_perf | tar -x -C /tmp/before
    python bench/bench_checkouts.py --rounds 5 before=/tmp/before after=. \\
        -- summary --engine stream --format json /tmp/ip/big/trace_1000000.json

Each round runs the command once from each checkout (``PYTHONPATH`` = that folder, which holds an
``inductor_perf`` package, from a neutral working directory, so a path in the command must be
absolute; its output discarded), the order rotating every round so that load from other jobs on a
shared machine falls on all of them. Measured by
``bench_proc.measure``: wall time, CPU time (user + system, the command's and its reaped children's:
less moved by other jobs than the wall time on a busy machine) and peak RSS of the process tree (forked
workers count). Prints each round, then per checkout the medians with their min–max, and the medians
of the per-round ratios to the first checkout (paired: each ratio is of two runs of one round).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_proc  # noqa: E402


def _arm(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not os.path.isdir(os.path.join(path, "inductor_perf")):
        raise argparse.ArgumentTypeError(f"{text}: expected NAME=FOLDER, a folder that holds inductor_perf/")
    return name, os.path.abspath(path)


def _spread(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 usage="%(prog)s [--rounds N] NAME=FOLDER... -- INDUCTOR_PERF_ARGS...")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("arms", nargs="+", type=_arm, metavar="NAME=FOLDER")
    cut = argv.index("--") if "--" in argv else len(argv)
    args, command = ap.parse_args(argv[:cut]), argv[cut + 1:]
    if not command:
        ap.error("give the inductor-perf arguments after --")
    names = [n for n, _ in args.arms]
    runs: dict[str, list[dict]] = {n: [] for n in names}
    print("machine:", bench_proc.machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="ip_checkouts_") as neutral:
        os.chdir(neutral)
        for r in range(args.rounds):
            k = r % len(args.arms)
            for name, path in args.arms[k:] + args.arms[:k]:
                env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
                env.pop("INDUCTOR_PERF_TRACE_DIR", None)
                m = bench_proc.measure([sys.executable, "-m", "inductor_perf", *command], env=env)
                if m["rc"] != 0:
                    print(f"{name} failed (rc {m['rc']}): {m['stderr_tail']}", file=sys.stderr)
                    return 1
                runs[name].append(m)
                print(f"round {r + 1}/{args.rounds} {name}: {m['wall_s']:.2f} s, {m['cpu_s']:.2f} s CPU, "
                      f"{m['peak_mb']:.0f} MB", flush=True)
    print("load average at the end:", [round(x, 2) for x in os.getloadavg()])
    first = runs[names[0]]
    for name in names:
        wall, cpu, peak = ([m[k] for m in runs[name]] for k in ("wall_s", "cpu_s", "peak_mb"))
        ratio = [m["wall_s"] / f["wall_s"] for m, f in zip(runs[name], first)]
        cpu_ratio = [m["cpu_s"] / f["cpu_s"] for m, f in zip(runs[name], first)]
        print(f"{name}: wall {_spread(wall, 2)} s, CPU {_spread(cpu, 2)} s, peak RSS {_spread(peak, 0)} MB; "
              f"/ {names[0]}: wall {_spread(ratio, 3)}, CPU {_spread(cpu_ratio, 3)} (n={len(wall)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
