"""`make bench`: measure every performance figure of the project side by side and rewrite the generated
part of docs/benchmarks.md (machine, torch version, date, each exact command, each figure's median,
spread and target).

    python bench/run_all.py            # full: 1M-event traces, HTA, the 3M-event summary (~30 min)
    python bench/run_all.py --quick    # < 2 min: 20k-event traces, fewer rounds, no cold compile,
                                       # HTA only when its venv is already cached
    python bench/run_all.py --only offline --no-write   # one group, print only
    python bench/run_all.py --quick --only ranks --no-write   # the cross-rank view on Dask (bench_ranks.py)

Every measurement runs in subprocesses. Offline figures (augment, summary, diff) alternate ours and
the baseline within each round (the order flips every round), so that load from other jobs on this
shared machine falls on both; each figure is the median of the per-round values with its min–max,
and ratios are medians of the per-round (paired) ratios. The in-process benches (step, capture,
compile) interleave their variants themselves (bench_step.py, bench_capture.py, bench_compile.py);
their JSON gives the rounds. Torch benches run with OMP_NUM_THREADS=1: on 2 shared cores, two
intra-op threads stall on each other whenever another job holds a core (measured: 10x swings).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_hta  # noqa: E402
import bench_proc  # noqa: E402
from bench_stats import Figure, caches_seen, figures_table, paired_ratios, replace_generated, spread  # noqa: E402

PY = sys.executable
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
GROUPS = ("accuracy", "step", "capture", "compile", "offline", "big", "ranks")
MODES = {
    "quick": dict(events=20_000, trace_dir="/tmp/ip/bench-quick", offline_rounds=3, step_models=["mlp"],
                  step_rounds=5, block_s=0.01, capture_rounds=3, capture_steps=10, compile_rounds=0, warm_rounds=0,
                  accuracy_models=["mlp"], install_hta=False, big_events=0, rank_events=20_000),
    # 5 offline rounds: augment's ratio to upstream read 9.3x in a 3-round run and 10.4x in a 5-round
    # run minutes later (docs/benchmarks.md, 2026-11-27); one busy round weighs less in a median of 5
    "full": dict(events=1_000_000, trace_dir="/tmp/ip/big", offline_rounds=5,
                 step_models=["mlp", "conv", "block"], step_rounds=30, block_s=0.05, capture_rounds=15,
                 capture_steps=20, compile_rounds=3, warm_rounds=15, accuracy_models=["mlp", "conv", "block"],
                 install_hta=True, big_events=3_000_000, rank_events=200_000),
}


# orjson is a core dependency: the default install has it, and our offline commands run with it.
# --no-orjson measures the pure-Python fallback (platforms without an orjson wheel) instead.
NO_ORJSON = ("import runpy, sys; sys.modules['orjson'] = None; sys.argv[0] = 'inductor-perf'; "
             "runpy.run_module('inductor_perf', run_name='__main__')")
WITH_ORJSON = True


def ours(*args: str) -> list[str]:
    """Our CLI as the default install runs it (orjson importable), or without orjson (--no-orjson)."""
    return [PY, "-m", "inductor_perf", *args] if WITH_ORJSON else [PY, "-c", NO_ORJSON, *args]


def show(cmd: list[str]) -> str:
    """A command as it can be pasted, with the repo root and interpreter shortened."""
    text = shlex.join(cmd).replace(ROOT + "/", "").replace(PY, "python")
    return text if len(text) < 400 else text[:400] + " …"


def env() -> dict:
    e = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    e.pop("INDUCTOR_PERF_TRACE_DIR", None)
    return e


def json_bench(script: str, args: list[str], log: list[str]) -> dict:
    """Run bench/``script`` with ``--json``; return what it wrote (its stdout goes to our stdout)."""
    with tempfile.TemporaryDirectory(prefix="ip_bench_") as d:
        out = os.path.join(d, "out.json")
        cmd = [PY, os.path.join(HERE, script), *args]
        log.append(show(cmd))
        print(f"$ {show(cmd)}", flush=True)
        subprocess.run([*cmd, "--json", out], env=env(), check=True)
        with open(out) as f:
            return json.load(f)


def trace(events: int, trace_dir: str, seed: int = 0) -> str:
    """The generated trace of ``events`` events (bench/gen_trace.py, Kineto layout), made when absent."""
    name = f"trace_{events}.json" if seed == 0 else f"trace_{events}_seed{seed}.json"
    path = os.path.join(trace_dir, name)
    if not os.path.exists(path):
        os.makedirs(trace_dir, exist_ok=True)
        print(f"generating {path}", flush=True)
        subprocess.run([PY, os.path.join(HERE, "gen_trace.py"), str(events), path + ".tmp", "--seed", str(seed)],
                       check=True)
        os.replace(path + ".tmp", path)
    return path


def alternate(cmds: dict[str, list[str]], rounds: int, optional: tuple[str, ...] = (),
              notes: list[str] | None = None) -> dict[str, list[dict]]:
    """Run each named command once per round, the order rotating every round; the measurements per name.

    A command in ``optional`` that fails is dropped (its runs too) with a note; any other failing raises."""
    names = list(cmds)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            if n not in runs:
                continue
            m = bench_proc.measure(cmds[n], env=env())
            print(f"  round {r + 1}/{rounds} {n}: {m['wall_s']:.2f} s, {m['peak_mb']:.0f} MB, rc {m['rc']}",
                  flush=True)
            if m["rc"] != 0 and n in optional and notes is not None:
                notes.append(f"{n} skipped: it failed (rc {m['rc']}): {m['stderr_tail'].strip()[-300:]}")
                print(notes[-1], file=sys.stderr)
                del runs[n]
                continue
            if m["rc"] != 0:
                raise RuntimeError(f"{n} failed (rc {m['rc']}): {show(cmds[n])}\n{m['stderr_tail']}")
            runs[n].append(m)
    return runs


def col(runs: list[dict], key: str) -> list[float]:
    return [r[key] for r in runs]


def offline(cfg: dict, notes: list[str], figs: list[Figure]) -> None:
    """augment vs upstream; summary vs HTA; diff vs summary: on the generated traces, rounds alternated.
    Appends to ``figs`` as each part is measured (a later part failing keeps the earlier ones)."""
    a, b = trace(cfg["events"], cfg["trace_dir"]), trace(cfg["events"], cfg["trace_dir"], seed=1)
    n = cfg["offline_rounds"]
    label = f"{cfg['events']:,}-event trace ({os.path.getsize(a) / 1e6:.0f} MB)"
    out_dir = os.path.join(cfg["trace_dir"], "out")
    os.makedirs(out_dir, exist_ok=True)
    ours_aug = ours("augment", a, "-o", os.path.join(out_dir, "ours.json"))
    upstream = [PY, "-m", "torch._inductor.analysis.profile_analysis", "--augment_trace", a,
                os.path.join(out_dir, "upstream.json"), "float"]
    runs = alternate({"ours": ours_aug, "upstream": upstream}, n)
    figs += [
        Figure("Offline, " + label, "augment: wall", "s", spread(col(runs["ours"], "wall_s")),
               spread(col(runs["upstream"], "wall_s")), "upstream profile_analysis",
               spread(paired_ratios(col(runs["upstream"], "wall_s"), col(runs["ours"], "wall_s"))),
               "speedup upstream/ours", (">=", 10), target_source="issue", commands=[show(ours_aug), show(upstream)]),
        Figure("Offline, " + label, "augment: peak RSS", "MB", spread(col(runs["ours"], "peak_mb")),
               spread(col(runs["upstream"], "peak_mb")), "upstream",
               spread(paired_ratios(col(runs["ours"], "peak_mb"), col(runs["upstream"], "peak_mb"))),
               "ours/upstream", ("<=", 1.0), target_source="issue")]
    summary = ours("summary", a)
    diff = ours("diff", a, b)
    cmds = {"summary": summary, "diff": diff}
    ok, note = bench_hta.ensure(install=cfg["install_hta"])
    notes.append(note)
    if ok:
        cmds["hta"] = bench_hta.command(a)
    runs = alternate(cmds, n, optional=("hta",), notes=notes)
    ok = "hta" in runs
    sec = "Offline, " + label
    at = len(figs)
    figs.append(Figure(sec, "diff A B: wall", "s", spread(col(runs["diff"], "wall_s")),
                       spread(col(runs["summary"], "wall_s")), "one summary",
                       spread(paired_ratios(col(runs["diff"], "wall_s"), col(runs["summary"], "wall_s"))),
                       "diff/summary", ("<=", 2), target_source="issue", commands=[show(diff)],
                       note=f"B is the same generator with --seed 1 ({os.path.basename(b)})"))
    if ok:
        hta_cmd = [bench_hta.PYTHON, "-c", "<bench_hta.CHILD>", a]
        figs.insert(at, Figure(sec, "summary: wall", "s", spread(col(runs["summary"], "wall_s")),
                              spread(col(runs["hta"], "wall_s")), "HTA load + temporal breakdown",
                              spread(paired_ratios(col(runs["hta"], "wall_s"), col(runs["summary"], "wall_s"))),
                              "speedup HTA/ours", (">=", 10), target_source="issue",
                              commands=[show(summary), show(hta_cmd)]))
        figs.insert(at + 1, Figure(sec, "summary: peak RSS", "MB", spread(col(runs["summary"], "peak_mb")),
                              spread(col(runs["hta"], "peak_mb")), "HTA",
                              spread(paired_ratios(col(runs["summary"], "peak_mb"), col(runs["hta"], "peak_mb"))),
                              "ours/HTA", ("<=", 0.5), target_source="issue",
                              note="HTA runs `TraceAnalysis(trace_files={0: path})` + "
                                   "`get_temporal_breakdown(visualize=False)` (bench/bench_hta.py)"))
    else:
        figs.insert(at, Figure(sec, "summary: wall", "s", spread(col(runs["summary"], "wall_s")),
                              commands=[show(summary)], note=note))
        figs.insert(at + 1, Figure(sec, "summary: peak RSS", "MB", spread(col(runs["summary"], "peak_mb"))))


def big(cfg: dict) -> list[Figure]:
    """The summary of the 3M-event trace: its peak memory (one run)."""
    path = trace(cfg["big_events"], cfg["trace_dir"])
    cmd = ours("summary", path)
    m = alternate({"summary": cmd}, 1)["summary"]
    sec = f"Offline, {cfg['big_events']:,}-event trace ({os.path.getsize(path) / 1e6:.0f} MB)"
    return [Figure(sec, "summary: peak RSS", "MB", spread(col(m, "peak_mb")), target=("<=", 1000),
                   target_on="ours", target_source="issue: 1 GB", commands=[show(cmd)]),
            Figure(sec, "summary: wall", "s", spread(col(m, "wall_s")))]


def ranks(cfg: dict, log: list[str]) -> list[Figure]:
    """The cross-rank view's map and reduce (bench/bench_ranks.py): 4 and 16 synthetic ranks, a Dask
    cluster of 1 then 2 one-thread workers on loopback, the reduce of 1,000 digests. One run."""
    j = json_bench("bench_ranks.py", ["--events", str(cfg["rank_events"]), "--ranks", "4", "16"], log)
    sec = f"Cross-rank view: map on Dask, reduce ({j['events']:,} kernel events per rank, {j['trace_mb']:.1f} MB gz)"
    per, dk, red = j["cpu_per_rank_s"], j["dask"], j["reduce"]
    return [
        Figure(sec, "map: CPU-s per rank, 16 ranks", "s", spread([per["16"]]), spread([per["4"]]), "4 ranks",
               spread([per["16"] / per["4"]]), "16/4", ("<=", 1.1), target_source="issue", commands=[log[-1]],
               note="one process (workers=1); a linear map costs the same per rank for any N"),
        Figure(sec, "16 ranks: wall, 2 Dask workers", "s", spread([dk["2"]["wall_s"]]), spread([dk["1"]["wall_s"]]),
               "1 worker", spread([dk["efficiency"]]), "efficiency T1/(2 T2)",
               note=f"load {j['load_start']:.1f} at the start, {j['load_end']:.1f} at the end: other jobs share the cores"),
        Figure(sec, "worker peak RSS after 16 ranks twice", "MB",
               spread([max(dk["2"]["worker_peak_bytes_after_twice"]) / 1e6]),
               spread([max(dk["2"]["worker_peak_bytes"]) / 1e6]), "after 16 ranks once",
               spread([max(dk["2"]["worker_peak_bytes_after_twice"]) / max(dk["2"]["worker_peak_bytes"])]),
               "twice/once", ("<=", 1.05), target_source="issue",
               note=f"a worker holds one rank at a time; after 4 ranks: "
                    f"{max(dk['2']['worker_peak_bytes_after_small']) / 1e6:.0f} MB (the allocator's arenas fill over the first ranks)"),
        Figure(sec, f"reduce of {red['digests']:,} digests: wall", "s", spread([red["reduce_s"]])),
        Figure(sec, f"reduce of {red['digests']:,} digests: peak RSS over the process before them, per rank", "kB",
               spread([red["bytes_per_rank"] / 1e3]),
               note=f"held digests {red['held_per_rank'] / 1e3:.0f} kB per rank; a digest pickles to "
                    f"{j['digest_bytes'][0] / 1e3:.1f} kB"),
    ]


def step(cfg: dict, log: list[str]) -> list[Figure]:
    j = json_bench("bench_step.py", ["--models", *cfg["step_models"], "--rounds", str(cfg["step_rounds"]),
                                     "--block-s", str(cfg["block_s"])], log)
    figs = []
    for case, res in j["results"].items():
        base, ours = res["rounds_s"]["inductor"], res["rounds_s"]["inductor_perf"]
        figs.append(Figure("Step time, no profiler (CPU)", case, "µs", spread([t * 1e6 for t in ours]),
                           spread([t * 1e6 for t in base]), "inductor", spread(paired_ratios(ours, base)),
                           "inductor_perf/inductor", ("<=", 1.01), target_source="docs",
                           commands=[log[-1]], note="" if j.get("tagging") else "tagging was OFF"))
    return figs


def capture(cfg: dict, log: list[str]) -> list[Figure]:
    j = json_bench("bench_capture.py", ["--rounds", str(cfg["capture_rounds"]), "--steps", str(cfg["capture_steps"])],
                   log)
    base, ours = j["rounds_us"]["inductor"], j["rounds_us"]["inductor_perf"]
    return [Figure("Capture (CPU MLP, training steps inside torch.profiler)", "step time inside the window", "µs",
                   spread(ours), spread(base), "inductor under plain torch.profiler", spread(paired_ratios(ours, base)),
                   "inductor_perf/inductor", ("<=", 1.05), target_source="docs", commands=[log[-1]],
                   note=f"after the window, join + augment + summary + write: {j['after_window_ms']:.0f} ms, once")]


def compile_(cfg: dict, log: list[str]) -> list[Figure]:
    j = json_bench("bench_compile.py", ["--rounds", str(cfg["compile_rounds"])], log)
    sec = "Compile (CPU, forward + backward; block: transformer block, embed 64; deep: four of them)"
    r = j["rounds_s"]
    figs = [Figure(sec, "block: cold compile", "s", spread(r["inductor_perf"]), spread(r["inductor"]), "inductor",
                   spread(j["round_ratios"]), "inductor_perf/inductor", ("<=", 1.05), target_source="docs",
                   commands=[log[-1]], note="fresh process, empty TORCHINDUCTOR_CACHE_DIR; timed from the "
                   "torch.compile() call through the first forward + backward")]
    for model in ("block", "deep"):
        w = json_bench("bench_compile.py", ["--warm-only", "--rounds", str(cfg["warm_rounds"]), "--model", model],
                       log)
        figs.append(Figure(sec, f"{model}: warm compile", "s", spread(w["rounds_s"]["inductor_perf"]),
                           spread(w["rounds_s"]["inductor"]), "inductor", spread(w["round_ratios"]),
                           "inductor_perf/inductor", ("<=", 1.05), target_source="docs", commands=[log[-1]],
                           note="a fresh process over the cache a cold process of the same backend filled, "
                           "timed as the cold one; what torch's counters said: " + caches_seen(w["caches"])))
    return figs


def accuracy(cfg: dict, log: list[str]) -> list[Figure]:
    j = json_bench("bench_accuracy.py", ["--models", *cfg["accuracy_models"]], log)
    sec = "Accuracy (CPU, torch.compile backend=\"inductor_perf\")"
    figs = []
    for name, r in j["flops"].items():
        for part in ("fwd", "bwd"):
            ours, ref = r[f"ours_{part}"], r[f"ref_{part}"]
            figs.append(Figure(sec, f"{name} {part} matmul FLOPs", "", spread([ours]), spread([ref]),
                               "FlopCounterMode", spread([ours / ref]), "ours/reference", exact=True,
                               commands=[log[-1]], note=r["note"] if part == "bwd" else ""))
    for case, r in j["bytes"].items():
        figs.append(Figure(sec, f"bytes: {case}", "B", spread([r["ours"]]), spread([r["hand"]]), "hand",
                           spread([r["ours"] / r["hand"]]), "ours/hand", exact=True, note=r["how"]))
    return figs


def render(mode: str, figs: list[Figure], notes: list[str], started: dict, ended: dict, seconds: float) -> str:
    tv = bench_proc.torch_version(PY)
    lines = [
        "## Figures (generated)", "",
        f"Written by `{'make bench-quick' if mode == 'quick' else 'make bench'}` (bench/run_all.py, mode "
        f"**{mode}**) on {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} in "
        f"{seconds / 60:.1f} min.", "",
        f"Machine: {started['cpu']}, {started['cores']} cores, {started['ram_gb']} GB RAM, {started['os']}; "
        f"Python {started['python']}, torch {tv}. Load average (1/5/15 min) at the start "
        f"{'/'.join(map(str, started['load']))}, at the end {'/'.join(map(str, ended['load']))} "
        "(the machine is shared with other jobs: compare figures taken at similar load).", "",
        "Each figure is the median of paired, interleaved rounds with its min–max and number of rounds; a "
        "ratio is the median of the per-round ratios. Peak RSS: the larger of the process tree's summed "
        "RSS (sampled every 0.1 s) and the largest single process's peak (wait4); MB = 10^6 bytes. "
        "Targets marked \"issue\" are the acceptance targets of the streaming-summary issue (on the "
        "1M-event trace); \"docs\" are the project's standing targets below.", ""]
    if mode == "quick":
        lines += ["**Quick mode**: small traces and few rounds, to check that the bench runs; the "
                  "offline targets are stated for the 1M-event trace and are not met or missed here.", ""]
    lines += [f"* {n}" for n in notes] + ([""] if notes else [])
    return "\n".join(lines + figures_table(figs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="under 2 minutes: small traces, few rounds")
    ap.add_argument("--only", nargs="+", choices=GROUPS, help="run these groups only")
    ap.add_argument("--no-write", action="store_true", help="print the generated part, leave the doc alone")
    ap.add_argument("--doc", default=DOC)
    ap.add_argument("--no-orjson", action="store_true",
                    help="run our offline commands with orjson made unimportable (the pure-Python fallback); "
                         "default: the default install, which has orjson")
    ap.add_argument("--rounds", type=int, help="rounds of each offline pairing (default: 5; quick: 3)")
    args = ap.parse_args(argv)
    global WITH_ORJSON
    WITH_ORJSON = not args.no_orjson
    mode = "quick" if args.quick else "full"
    cfg = dict(MODES[mode])
    if args.rounds:
        cfg["offline_rounds"] = args.rounds
    groups = args.only or [g for g in GROUPS if not (g == "compile" and not cfg["compile_rounds"])
                           and not (g == "big" and not cfg["big_events"])]
    started, t0 = bench_proc.machine(), datetime.datetime.now()
    figs: list[Figure] = []
    notes: list[str] = [
        "our offline commands run as the default install does: with orjson (a core dependency)" if WITH_ORJSON
        else "our offline commands run without orjson (--no-orjson: `sys.modules['orjson'] = None`, the "
        "pure-Python fallback)"]
    log: list[str] = []
    for g in groups:
        print(f"== {g}", flush=True)
        try:
            if g == "offline":
                offline(cfg, notes, figs)
            else:
                figs += {"accuracy": lambda: accuracy(cfg, log), "step": lambda: step(cfg, log),
                         "capture": lambda: capture(cfg, log), "compile": lambda: compile_(cfg, log),
                         "big": lambda: big(cfg), "ranks": lambda: ranks(cfg, log)}[g]()
        except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
            notes.append(f"{g}: FAILED to measure: {str(e).splitlines()[0][:300]}")
            print(notes[-1], file=sys.stderr)
    if mode == "quick":
        notes.append("not run in quick mode: cold/warm compile (~20 s per backend and round here), the "
                     "3M-event summary")
    if mode == "quick":
        for f in figs:
            f.applies = f.target_source != "issue"
    text = render(mode, figs, notes, started, bench_proc.machine(), (datetime.datetime.now() - t0).total_seconds())
    print(text)
    if not args.no_write:
        with open(args.doc) as f:
            doc = f.read()
        with open(args.doc, "w") as f:
            f.write(replace_generated(doc, text))
        print(f"rewrote the generated part of {args.doc}", file=sys.stderr)
    return 1 if any("FAILED" in n for n in notes) else 0


if __name__ == "__main__":
    sys.exit(main())
