"""HolisticTraceAnalysis's idle time breakdown of the shared real GPU traces, as the fixture that
tests/unit/summary/test_idle_split_hta.py checks our ``idle_by_stream`` against.

HTA runs in its own throwaway venv (bench/bench_hta.py makes it under ~/.cache/inductor_perf-bench/hta),
in a subprocess per trace set; it is never imported here. Each set gets a temporary directory of
symlinks to the traces (HTA loads a directory, one file per rank, the rank from ``distributedInfo``),
and is loaded twice: with HTA's default ``include_last_profiler_step=False`` (it drops the kernels
launched in the last ProfilerStep) and with ``True`` (the whole trace, as our table counts).

    python bench/hta_idle.py                 # rewrite tests/fixtures/hta/idle_breakdown.json
    python bench/hta_idle.py --table         # and print the comparison table with ours (docs/summary.md)

The real traces are read in place from ../shared/traces (or $INDUCTOR_PERF_SHARED_TRACES), the H100
captures from tests/fixtures/gpu.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_hta  # noqa: E402

TRACES = os.environ.get("INDUCTOR_PERF_SHARED_TRACES", os.path.join(ROOT, "..", "shared", "traces"))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "hta", "idle_breakdown.json")
BASES = {"shared": TRACES, "fixtures": os.path.join(ROOT, "tests", "fixtures")}
"""Where a set's files are: the shared real traces (read in place), or this repo's H100 captures."""
SETS = {
    "a100_ranks8_r3_control": ("shared", ["a100_ranks8_r3_control.json.gz"]),
    "v100_ranks2_r1_test": ("shared", ["v100_ranks2_r1_test.json.gz"]),
    "two_ranks": ("shared", ["two_ranks/sampled_rank-0.json.gz", "two_ranks/sampled_rank-1.json.gz"]),
    "mi250_minitoy_train_rocm6": ("shared", ["mi250_minitoy_train_rocm6.json.gz"]),
    "h100_gpt_bf16": ("fixtures", ["gpu/gpt_bf16.trace.json.gz"]),
    "h100_gpt_cudagraphs": ("fixtures", ["gpu/gpt_cudagraphs.trace.json.gz"]),
    "h100_resnet_block": ("fixtures", ["gpu/resnet_block.trace.json.gz"]),
    "h100_sanity": ("fixtures", ["gpu/sanity.trace.json.gz"]),
}
ENV = {"HTA_DISABLE_NS_ROUNDING": "1"}
"""Without it HTA rounds fractional-µs starts up and ends down to whole µs, which moves every gap."""
CALL = ("TraceAnalysis(trace_dir=DIR, include_last_profiler_step=LAST)"
        ".get_idle_time_breakdown(ranks=<every rank>, visualize=False)")

# Prints {"ranks": {rank: file name}, "rows": [{rank, stream, idle_category, idle_time}]}.
CHILD = r"""
import json, logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=sys.argv[2] == "1")
ranks = a.t.get_ranks()
df, _ = a.get_idle_time_breakdown(ranks=ranks, visualize=False)
rows = [{"rank": int(r["rank"]), "stream": int(r["stream"]), "idle_category": str(r["idle_category"]),
         "idle_time": float(r["idle_time"])} for r in df.to_dict("records")]
files = {str(r): __import__("os").path.basename(a.t.trace_files[r]) for r in ranks}
print(json.dumps({"ranks": files, "rows": rows}))
"""


def run_set(base: str, files: list[str], include_last: bool) -> dict:
    """HTA's breakdown of one trace set: {"ranks": {rank: relative path}, "streams": [...]}, one entry
    per (rank, stream) with the µs of each category HTA reports (a category without any gap on the
    stream is absent from HTA's table: 0 here)."""
    with tempfile.TemporaryDirectory(prefix="hta_idle_") as d:
        for f in files:
            os.symlink(os.path.abspath(os.path.join(BASES[base], f)), os.path.join(d, os.path.basename(f)))
        r = subprocess.run([bench_hta.PYTHON, "-c", CHILD, d, "1" if include_last else "0"],
                           capture_output=True, text=True, timeout=1200, env={**os.environ, **ENV})
    if r.returncode != 0:
        raise SystemExit(f"HTA failed on {files}: {r.stderr.strip().splitlines()[-1:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    by_name = {os.path.basename(f): f for f in files}
    streams: dict[tuple[int, int], dict] = {}
    for row in got["rows"]:
        s = streams.setdefault((row["rank"], row["stream"]), {
            "rank": row["rank"], "stream": row["stream"], "host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0})
        s[row["idle_category"]] = row["idle_time"]
    return {"ranks": {k: by_name[v] for k, v in got["ranks"].items()},
            "streams": [streams[k] for k in sorted(streams)]}


def make() -> dict:
    ok, note = bench_hta.ensure()
    if not ok:
        raise SystemExit(note)
    sets = {}
    for name, (base, files) in SETS.items():
        whole, default = run_set(base, files, True), run_set(base, files, False)
        assert whole["ranks"] == default["ranks"]
        sets[name] = {"base": base, "ranks": whole["ranks"], "whole_trace": whole["streams"],
                      "hta_default": default["streams"]}
    return {
        "made_by": "python bench/hta_idle.py (HTA in its own venv, bench/bench_hta.py)",
        "hta": f"HolisticTraceAnalysis {bench_hta.version()}",
        "python": platform.python_version(),
        "env": ENV,
        "call": CALL + " with consecutive_kernel_delay left at its default (30)",
        "whole_trace": "include_last_profiler_step=True",
        "hta_default": "include_last_profiler_step=False (HTA's default)",
        "units": "µs of idle time per category; HTA rounds them to 0.01",
        "traces": "a set's files are relative to its base: shared = ../shared/traces (its README says where "
                  "they come from), fixtures = tests/fixtures (gpu/README.md)",
        "sets": sets,
    }


def ours(path: str) -> dict[str, dict]:
    """Our ``idle_by_stream`` of one trace by stream tid, both engines (they must agree)."""
    sys.path.insert(0, ROOT)
    from inductor_perf.summary.files import summarize_file

    full = summarize_file(path, engine="full").summary.to_dict()["idle_by_stream"]
    streamed = summarize_file(path, engine="stream").summary.to_dict()["idle_by_stream"]
    if full != streamed:
        raise SystemExit(f"{path}: the two summary engines disagree on idle_by_stream")
    return {r["stream"].split("/")[1]: r for r in full}


def table(fixture: dict) -> str:
    """The markdown comparison table: per stream, HTA (whole trace / its default) against ours."""
    out = ["| trace | rank/stream | HTA host_wait / kernel_wait / other (µs), whole trace | ours host_wait / "
           "launch_delay / other (µs) | ours idle / HTA idle | HTA default (last step dropped) |",
           "|---|---|---|---|---|---|"]
    for name, s in fixture["sets"].items():
        mine = {rank: ours(os.path.join(BASES[s["base"]], f)) for rank, f in s["ranks"].items()}
        dflt = {(h["rank"], h["stream"]): h for h in s["hta_default"]}
        for h in s["whole_trace"]:
            o = mine[str(h["rank"])].get(str(h["stream"]))
            d = dflt.get((h["rank"], h["stream"]))
            hta_idle = h["host_wait"] + h["kernel_wait"] + h["other"]
            fig = (f"{o['host_wait_us']:.0f} / {o['launch_delay_us']:.0f} / {o['other_us']:.0f}" if o else "no row")
            ratio = f"{o['idle_us'] / hta_idle:.4f}" if o and hta_idle else "-"
            dtxt = f"{d['host_wait']:.0f} / {d['kernel_wait']:.0f} / {d['other']:.0f}" if d else "no row"
            out.append(f"| {name} | {h['rank']}/{h['stream']} | {h['host_wait']:.0f} / {h['kernel_wait']:.0f} / "
                       f"{h['other']:.0f} | {fig} | {ratio} | {dtxt} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=FIXTURE, help="the fixture to write (default: %(default)s)")
    p.add_argument("--table", action="store_true", help="also print the comparison table with ours")
    a = p.parse_args()
    fixture = make()
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {a.out} ({fixture['hta']})")
    if a.table:
        print(table(fixture))


if __name__ == "__main__":
    main()
