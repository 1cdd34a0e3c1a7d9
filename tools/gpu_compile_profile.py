"""Where a cold compile's time goes, backend="inductor" against "inductor_perf".

Each round runs bench/bench_compile.py's child once per variant (fresh process, empty Inductor and
Triton caches) with BENCH_COMPILE_PROFILE set and Python's -X importtime on. The child reports:
- the seconds of its torch.compile() call and of the whole timed region (that call and the first
  forward + backward);
- each answer of Inductor's "is the compile pool ready?", with its time: until the first yes, a
  Triton kernel is compiled in the compiling process, one after another;
- the modules imported inside the timed region, before and after torch.compile() returned (from
  -X importtime, whose figures are the imports' own wall time);
- the commands the compiling process ran (subprocess.run / check_call / check_output: Triton's C
  compiler runs, ptxas), each with its start and duration;
- Dynamo's compile_times table.
Variants: plain Inductor, Inductor with its compile_fx imported before the timer ("import_first"),
ours, and ours with tagging off. With --cprofile the timed region also runs under cProfile
(.pstats per run; its per-function times inside Dynamo's compile are unreliable: functions show
cumulative time with no calls counted, so read them as hints only).

    python3 tools/gpu_compile_profile.py OUT_DIR --device cuda --rounds 2
    python3 tools/gpu_compile_profile.py OUT_DIR --report-only      # again, from OUT_DIR's files
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pstats
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import bench_compile

VARIANTS = (("inductor", ""), ("inductor", "import_first"), ("inductor_perf", ""), ("inductor_perf", "no_tagging"))
MARKS = ("BENCH_TIMER_START", "BENCH_COMPILE_CALLED", "BENCH_TIMER_END")


def _name(backend: str, variant: str) -> str:
    return f"{backend}+{variant}" if variant else backend


def imports_by_phase(stderr: str) -> dict[str, list[tuple[float, str]]]:
    """Top-level imports (seconds, module) of -X importtime's lines, split at the child's marks:
    "compile_call" (inside torch.compile()) and "first_call" (the first forward + backward)."""
    phase, out = None, {"compile_call": [], "first_call": []}
    for line in stderr.splitlines():
        if line in MARKS:
            phase = {"BENCH_TIMER_START": "compile_call", "BENCH_COMPILE_CALLED": "first_call"}.get(line)
            continue
        if phase is None or not line.startswith("import time:"):
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue  # the header line
        name = parts[2].rstrip()
        if name.startswith(" ") and not name.startswith("  "):  # depth 1: a top-level import
            out[phase].append((int(parts[1]) / 1e6, name.strip()))
    return out


def _seconds(path: str, own: bool) -> dict[str, float]:
    """Seconds per function (file:line(name)) of one .pstats file: its own time, or cumulative."""
    stats = pstats.Stats(path).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    return {f"{os.path.basename(f)}:{ln}({fn})": tt if own else ct
            for (f, ln, fn), (_, _, tt, ct, _) in stats.items()}


def report(out: str, top: int = 12) -> str:
    runs: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        with open(path) as f:
            rec = json.load(f)
        runs.setdefault(rec["name"], []).append(rec)
    lines = [f"{'variant':<28}{'seconds':>9}{'compile()':>11}{'imports in':>12}{'imports in':>12}"
             f"{'in-process':>12}{'pool ready':>12}",
             f"{'':<28}{'':>9}{'call s':>11}{'compile() s':>12}{'1st call s':>12}{'kernels':>12}{'at s':>12}"]
    for name, recs in runs.items():
        for r in recs:
            answers = r.get("pool_answers", [])
            before = sum(1 for _, ok in answers if not ok)
            ready = next((t for t, ok in answers if ok), None)
            imp = r.get("imports", {})
            lines.append(f"{name:<28}{r['seconds']:>9.2f}{r.get('torch_compile_call_s', float('nan')):>11.2f}"
                         f"{sum(s for s, _ in imp.get('compile_call', [])):>12.2f}"
                         f"{sum(s for s, _ in imp.get('first_call', [])):>12.2f}"
                         f"{before:>12}{ready if ready is not None else '-':>12}")
    for name, recs in runs.items():
        r = recs[0]
        cmds = r.get("commands", [])
        if cmds:
            called = r.get("torch_compile_call_s", 0.0)
            lines += ["", f"{name} (round {r['round'] + 1}): {len(cmds)} commands run by the compiling process, "
                      f"{sum(d for _, d, _ in cmds):.2f} s in all ({sum(d for t, d, _ in cmds if t < called):.2f} s "
                      f"inside torch.compile()); the longest:"]
            lines += [f"{d:>9.3f} s  at {t:6.2f} s  {c}" for t, d, c in sorted(cmds, key=lambda c: -c[1])[:top]]
        for phase in ("compile_call", "first_call"):
            mods = sorted(r.get("imports", {}).get(phase, []), reverse=True)[:top]
            if mods:
                lines += ["", f"{name} (round {r['round'] + 1}), top-level imports in {phase}:"]
                lines += [f"{s:>9.3f} s  {m}" for s, m in mods]
    for own, what in ((False, "cumulative"), (True, "own")):
        secs = {}
        for name, recs in runs.items():
            per = [_seconds(r["pstats"], own) for r in recs if os.path.exists(r.get("pstats", ""))]
            if per:
                keys = set().union(*per)
                secs[name] = {k: statistics.median(p.get(k, 0.0) for p in per) for k in keys}
        if "inductor" in secs and "inductor_perf" in secs:
            a, b = secs["inductor"], secs["inductor_perf"]
            diff = sorted(((b.get(k, 0.0) - a.get(k, 0.0), k) for k in set(a) | set(b)), key=lambda d: -abs(d[0]))
            lines += ["", f"cProfile, {what} seconds, median over rounds: the {3 * top} largest differences",
                      f"{'inductor_perf - inductor':>24}{'inductor':>10}{'ours':>10}  function"]
            lines += [f"{d:>24.3f}{a.get(k, 0.0):>10.3f}{b.get(k, 0.0):>10.3f}  {k}" for d, k in diff[:3 * top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cprofile", action="store_true", help="also run the timed region under cProfile")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if not args.report_only:
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"
        if args.cprofile:
            os.environ["BENCH_COMPILE_CPROFILE"] = "1"
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for backend, variant in order:
                name = _name(backend, variant)
                prefix = os.path.join(args.out, f"{name}_r{r}")
                os.environ["BENCH_COMPILE_PROFILE"] = prefix
                with tempfile.TemporaryDirectory(prefix="compile_profile_") as cache:
                    got = bench_compile._child(backend, args.device, "block", cache, variant,
                                               stderr_path=prefix + ".stderr")
                with open(prefix + ".stderr") as f:
                    got["imports"] = imports_by_phase(f.read())
                got.update(name=name, round=r, pstats=prefix + ".pstats")
                with open(prefix + ".json", "w") as f:
                    json.dump(got, f)
                print(f"round {r + 1}: {name} {got['seconds']:.2f} s (torch.compile() "
                      f"{got['torch_compile_call_s']:.2f} s)", file=sys.stderr, flush=True)
        for k in ("BENCH_COMPILE_PROFILE", "BENCH_COMPILE_CPROFILE", "PYTHONPROFILEIMPORTTIME"):
            os.environ.pop(k, None)
    text = report(args.out)
    with open(os.path.join(args.out, "report.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
