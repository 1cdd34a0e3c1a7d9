"""Write what the offline pipeline makes of a fixed set of inputs, to compare two versions of the code.

    python tools/same_outputs.py OUTDIR [--events N]
    # on two checkouts, then: cmp each pair (tools/same_outputs.py --compare A B)

Inputs: synthetic GPU traces from bench/gen_trace.py (both layouts, plain and ``.gz``), augmented by
the full load and by the streaming path; the CPU fixtures and the real traces in ../shared/traces
(full load); the GPU captures in tests/fixtures/gpu, whose join is redone from their tags. For each
it writes the augmented trace and the JSON summary. Refactors that promise "same outputs" are
checked with ``--compare``: it lists every file that differs (``cmp``), and exits 1 if any does.
The inputs are this script's checkout's; the code is the ``inductor_perf`` that PYTHONPATH finds, of
either layout (stage subpackages, or the flat modules before them), so one copy of the script can
measure two checkouts: ``PYTHONPATH=/other/checkout python tools/same_outputs.py OUTDIR``.
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"


def _bench_traces(work: Path, events: int) -> list[Path]:
    out = []
    for layout in ("kineto", "compact"):
        plain = work / f"bench_{layout}.json"
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_trace.py"), str(events), str(plain),
                        "--layout", layout], check=True, stdout=subprocess.DEVNULL)
        gz = plain.with_name(plain.name + ".gz")
        with open(plain, "rb") as src, gzip.GzipFile(gz, "wb", compresslevel=1, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        out += [plain, gz]
    return out


# Where each function lives: the stage subpackages, else the flat modules of the layout before them
# (68e4f53 and earlier), so that this script can run against either checkout (PYTHONPATH picks it).
_HOMES = {
    "format_summary": ("inductor_perf.report.text", "inductor_perf.report"),
    "summarize": ("inductor_perf.summary.core", "inductor_perf.summary"),
    "load_trace": ("inductor_perf.traces.files", "inductor_perf.trace_format"),
    "save_trace": ("inductor_perf.traces.files", "inductor_perf.trace_format"),
    "augment_trace": ("inductor_perf.augment.core", "inductor_perf.augment"),
    "augment_file": ("inductor_perf.augment.core", "inductor_perf.augment"),
    "lookup_device": ("inductor_perf.devices.resolve", "inductor_perf.devices"),
    "GraphTags": ("inductor_perf.model.tags", "inductor_perf.tags"),
    "costs_from_tags": ("inductor_perf.costs.from_tags", "inductor_perf.tag_join"),
}


def _api(name: str):
    """The function (or class) ``name`` of the inductor_perf on the path, whichever layout it has."""
    import importlib

    new, old = _HOMES[name]
    try:
        module = importlib.import_module(new)
    except ModuleNotFoundError as e:
        if not (e.name and new.startswith(e.name)):  # a dependency missing, not the layout
            raise
        module = importlib.import_module(old)
    return getattr(module, name)


def _summary(trace_path: Path, dst: Path) -> None:
    summary = _api("summarize")(_api("load_trace")(str(trace_path)))
    dst.write_text(_api("format_summary")(summary, "json"))


def _gpu_rejoin(case: Path, dst: Path) -> None:
    trace = _api("load_trace")(str(case))
    with gzip.open(str(case).replace(".trace.", ".tags."), "rt") as f:
        graphs = {g["instance_id"]: _api("GraphTags").from_dict(g) for g in json.load(f)}
    costs, _ = _api("costs_from_tags")(trace, graphs.get)
    new, _ = _api("augment_trace")(trace, costs, _api("lookup_device")("NVIDIA H100 80GB HBM3"))
    _api("save_trace")(new, str(dst), inputs=[str(case)])


def make(outdir: Path, events: int) -> None:
    augment_file = _api("augment_file")
    outdir.mkdir(parents=True, exist_ok=True)
    work = outdir / "inputs"
    work.mkdir(exist_ok=True)
    for src in _bench_traces(work, events):
        for fast in (False, True):
            gz = ".json.gz" if src.suffix == ".gz" else ".json"  # a .gz input is written as .gz
            dst = outdir / f"{src.name.split('.')[0]}.{'fast' if fast else 'full'}{gz}"
            augment_file(src, dst, fast=fast)
            print(dst.name, flush=True)
    others = sorted((ROOT / "tests" / "fixtures").glob("*.json*")) + sorted(SHARED.glob("**/*.json.gz"))
    for src in others:
        dst = outdir / f"{src.name.split('.')[0]}.augmented.json"
        augment_file(src, dst, fast=False)
        _summary(dst, dst.with_suffix(".summary.json"))
        print(dst.name, flush=True)
    for case in sorted((ROOT / "tests" / "fixtures" / "gpu").glob("*.trace.json.gz")):
        dst = outdir / f"gpu_{case.name.split('.')[0]}.rejoined.json"
        _gpu_rejoin(case, dst)
        _summary(dst, dst.with_suffix(".summary.json"))
        print(dst.name, flush=True)
    shutil.rmtree(work)


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    bad = 0
    for name in names:
        pa, pb = a / name, b / name
        if not pa.exists() or not pb.exists():
            print(f"only in {'B' if not pa.exists() else 'A'}: {name}")
            bad += 1
        elif not filecmp.cmp(pa, pb, shallow=False):
            print(f"differs: {name}")
            bad += 1
    print(f"{len(names) - bad} of {len(names)} files identical")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--events", type=int, default=170_000)
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args(argv)
    if args.compare:
        return compare(Path(args.compare[0]), Path(args.compare[1]))
    if not args.outdir:
        ap.error("OUTDIR is required unless --compare is given")
    make(Path(args.outdir), args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
