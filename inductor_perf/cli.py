"""``inductor-perf`` command line. ``main(argv) -> int``; the exit code is 0 on success, 1 on a
user error (one line on stderr, never a traceback), 2 on bad usage (argparse). The command itself
(the console script, ``python -m inductor_perf``) is :func:`run`."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import sys
import threading
import warnings
from typing import Any, Sequence

from .errors import InductorPerfError

log = logging.getLogger(__name__)


# --- devices / calibrate (device table) ----------------------------------------------------------
def _add_devices(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list the device table, or show the detected device")
    p.add_argument("--current", action="store_true", help="show the detected device and where its peaks come from")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_devices)
    p = sub.add_parser("calibrate", help="measure this machine's GEMM TFLOP/s and memory bandwidth, and cache them")
    p.add_argument("--seconds", type=float, default=5.0, help="time budget (default 5)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.set_defaults(func=_cmd_calibrate)


def _cmd_devices(args: argparse.Namespace) -> int:
    import json

    from .devices import resolve as devices

    if args.current:
        import torch

        found = [("cpu", 0, devices.resolve_device("cpu"))]
        # is_available() asks the driver without creating a CUDA context.
        if torch.cuda.is_available():
            found += [("cuda", i, devices.resolve_device("cuda", i)) for i in range(torch.cuda.device_count())]
        if args.json:
            print(json.dumps([{"device": f"{t}:{i}", "spec": _round_floats(s.to_dict()) if s else None}
                              for t, i, s in found], indent=2, allow_nan=False))
            return 0
        tf32 = devices.tf32_enabled()
        for t, i, s in found:
            if s is None:
                print(f"{t}:{i}: not in the device table (see docs/devices.md to add it)")
                continue
            print(f"{t}:{i}: {s.name}  [peaks: {s.peak_source}]")
            for k, v in s.peak_tflops.items():
                print(f"    {devices.dtype_name(k):<16} {v:>10.3f} {'TOPS' if k == devices.I8 else 'TFLOP/s'}")
            print(f"    {'bandwidth':<16} {s.mem_bandwidth_gbs:>10.1f} GB/s")
            if t == "cuda" and devices.TF32 in s.peak_tflops:
                print(f"    float32 matmuls use the {'tf32' if tf32 else 'float32'} roof (TF32 {'on' if tf32 else 'off'})")
            print(f"    source: {s.source_url}")
            print(f"    note:   {s.source_note}")
        return 0
    rows = devices.table_rows()
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, allow_nan=False))
        return 0

    def cell(r: "devices.DeviceSpec", key: object) -> str:
        v = r.peak_tflops.get(key)  # type: ignore[call-overload]
        return f"{v:,.1f}" if v is not None else "-"

    header = f"{'device':<44} {'bf16':>8} {'fp16':>8} {'fp32':>7} {'tf32':>7} {'GB/s':>7}  source"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.name:<44} {cell(r, devices.BF16):>8} {cell(r, devices.F16):>8} {cell(r, devices.F32):>7} "
              f"{cell(r, devices.TF32):>7} {r.mem_bandwidth_gbs:>7,.0f}  {r.peak_source}: {r.source_url}")
    print("\nDense TFLOP/s (values published only with 2:4 sparsity are halved). "
          "`inductor-perf devices --current` shows this machine.")
    return 0


def _round_floats(obj: object, digits: int = 6) -> object:
    """Computed peaks carry float noise (0.16615295999999996); JSON readers want 0.166153."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: _round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_round_floats(v, digits) for v in obj]
    return obj


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from .devices import calibrate, resolve as devices

    m = calibrate.calibrate(args.device, args.seconds)
    path = calibrate.save(m)
    devices.clear_device_cache()
    for name, v in m.gemm_tflops.items():
        print(f"GEMM {name:<10} {v:10.4f} TFLOP/s")
    print(f"memory bandwidth  {m.mem_bandwidth_gbs:10.1f} GB/s (best of copy and add)")
    for level, gbps, cap, _ in m.cache_roofs():
        print(f"{level} read         {gbps:10.1f} GB/s (working sets up to {cap / 1024:,.0f} KiB)")
    print(f"cached in {path}; used for peak_source 'measured' from now on")
    return 0


# --- augment / summary / diff (offline traces) ---------------------------------------------------
def _add_offline(sub: argparse._SubParsersAction) -> None:
    from .traces.engines import ENGINES, LARGE_TRACE_BYTES

    large = f"{LARGE_TRACE_BYTES / 1e6:.0f} MB"
    p = sub.add_parser("augment", help="add FLOPs, bytes, achieved %% and roofline args to a trace's kernel events")
    p.add_argument("trace", help="input trace (.json or .json.gz)")
    p.add_argument("-o", "--output", help="output path (default: <input stem>.augmented.json[.gz])")
    p.set_defaults(func=_cmd_augment)
    p = sub.add_parser("summary", help="utilization summary of a trace, or of every trace in a directory")
    p.add_argument("trace", help="trace file or directory")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="stream: one pass in bounded memory (GPU traces); full: load the whole trace; "
                        f"auto (default): stream files of {large} of JSON or more")
    p.add_argument("--per-rank", action="store_true",
                   help="a directory of several traces: each one's own summary instead of the cross-rank view")
    p.add_argument("--dask", metavar="ADDRESS", default=None,
                   help="a directory of several traces: summarize the ranks on the Dask cluster whose scheduler "
                        "is at ADDRESS (tcp://host:8786, or a scheduler file; default: $INDUCTOR_PERF_DASK, else "
                        "local processes); needs pip install 'inductor-perf[dask]'")
    p.set_defaults(func=_cmd_summary)
    p = sub.add_parser("advise", help="what to fix first: a trace's findings, largest saving per step first "
                                      "(a directory of ranks: each rank's)")
    p.add_argument("trace", help="trace file, a capture directory, or a directory of ranks' traces")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--engine", choices=ENGINES, default="auto", help="as for summary")
    p.set_defaults(func=_cmd_advise)
    p = sub.add_parser("report", help="a self-contained HTML page (roofline chart and the summary's tables) "
                                      "of a trace, or of every trace in a directory")
    p.add_argument("trace", help="trace file (.json or .json.gz, raw or augmented) or directory")
    p.add_argument("-o", "--output", help="output path (default: <input stem>.report.html beside the input)")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("diff", help="compare two traces (eager vs compiled, or two compiled runs)")
    p.add_argument("a", help="baseline trace (.json or .json.gz: eager, or a compiled run)")
    p.add_argument("b", help="trace to compare with it; speedup = A's time / B's, row by row")
    p.add_argument("--by", choices=("module", "line", "op", "kernel"), default="module",
                   help="what rows are: nn.Module path (default), source line, eager op group, or kernel "
                        "name (two compiled runs of the same code)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="stream: read each trace in windows, two large ones at once (two processes); "
                        "full: load each trace whole, one after the other; auto (default): stream files "
                        f"of {large} of JSON or more")
    p.add_argument("--html", metavar="PATH", default=None,
                   help="also write the report page of B with this comparison on it (the tables of the text)")
    p.set_defaults(func=_cmd_diff)


def _cmd_augment(args: argparse.Namespace) -> int:
    from .augment.core import augment_file, default_output_path

    out = args.output or default_output_path(args.trace)
    stats = augment_file(args.trace, out, progress=True)
    print(f"inductor-perf: wrote {out}: {stats.summary_line()}", file=sys.stderr)
    return 0


class _Ticker:
    """Refreshes augment's stage line (:class:`augment.stream.progress.Progress`: stderr, terminal only, after 2 s)
    twice a second from a thread, for commands whose long steps report no fraction (summary, diff);
    the line is cleared at the end."""

    EVERY = 0.5

    def __init__(self) -> None:
        from .augment.stream.progress import Progress

        self.stage = ""
        self.show = Progress(True)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_Ticker":
        if self.show.enabled:
            self._thread = threading.Thread(target=self._run, name="inductor-perf-progress", daemon=True)
            self._thread.start()
        return self

    def set(self, stage: str) -> None:
        """Show ``stage`` from now on (a callback for the long steps)."""
        self.stage = stage

    def _run(self) -> None:
        while not self._stop.wait(self.EVERY):
            if self.stage:
                self.show(self.stage)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.show.done()


def _cmd_summary(args: argparse.Namespace) -> int:
    import json

    from .advice.advise import attach
    from .report.text import format_summary
    from .summary.files import summarize_path, trace_files
    from .summary.stream.engine import left_to_exit

    single = len(trace_files(args.trace)) == 1
    if not single and not args.per_rank:
        return _cmd_summary_ranks(args)
    # one trace, then the process ends: its state is left to that
    keep = left_to_exit() if single and _ENDS_WITH_COMMAND else contextlib.nullcontext([])
    with _Ticker() as tick, keep as kept:
        summaries = [attach(ct.summary) for ct in summarize_path(args.trace, stage=tick.set, engine=args.engine)]
    _LEFT_TO_EXIT.extend(kept)
    if args.format == "json":
        docs = [s.to_dict() for s in summaries]
        print(json.dumps(docs[0] if single else docs, indent=2, allow_nan=False, sort_keys=True))
    else:
        print("\n".join(format_summary(s, args.format) for s in summaries), end="")
    return 0


def _cmd_advise(args: argparse.Namespace) -> int:
    """``advise TRACE|DIR``: each trace's findings (one trace: its list; several, the ranks of a job or
    the runs of a folder: each one's, under its label)."""
    import json

    from .advice.advise import attach
    from .report.findings import format_findings
    from .summary.files import summarize_path

    with _Ticker() as tick:
        found = [(ct.summary.label, attach(ct.summary).findings)
                 for ct in summarize_path(args.trace, stage=tick.set, engine=args.engine)]
    if args.format == "json":
        doc = found[0][1] if len(found) == 1 else [{"label": lab, "findings": f} for lab, f in found]
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print("\n".join(format_findings(f, args.format, label=lab) for lab, f in found), end="")
    return 0


def _cmd_summary_ranks(args: argparse.Namespace) -> int:
    """``summary DIR`` of several traces: one cross-rank view when they are the ranks of one job,
    else a table of the runs and a view per set of ranks (:func:`inductor_perf.ranks.view.split_runs`)."""
    from . import config as env
    from .ranks.executors import dask_executor
    from .ranks.files import folder_files
    from .report.ranks import format_folder
    from .summary.files import trace_files

    files = trace_files(args.trace)
    address = args.dask or env.get_str(env.DASK)
    with contextlib.ExitStack() as stack:
        executor = stack.enter_context(dask_executor(address)) if address else None
        tick = stack.enter_context(_Ticker())
        view = folder_files(args.trace, files, stage=tick.set, executor=executor)
    print(format_folder(view, args.format), end="")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .report.html import default_report_path, write_report

    out = args.output or default_report_path(args.trace)
    with _Ticker() as tick:
        write_report(args.trace, out, stage=tick.set)
    print(f"inductor-perf: wrote {out}", file=sys.stderr)
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    import os

    from .comparison.runner import diff_files
    from .traces.files import output_target

    if args.html:
        output_target(args.html, [args.a, args.b])  # before the work: never over an input
    with _Ticker() as tick:
        tick.stage = f"comparing {os.path.basename(args.a)} and {os.path.basename(args.b)}"
        result = diff_files(args.a, args.b, by=args.by, engine=args.engine)
    _print_block(result.format(args.format))
    if args.html:
        _write_comparison_page(args.b, args.html, result)
    return 0


def _write_comparison_page(trace: str, out: str, result: object) -> None:
    """The report page of ``trace`` (side B) with the comparison ``result`` on it."""
    from .report.html import write_report

    with _Ticker() as tick:
        write_report(trace, out, comparison=result, stage=tick.set)
    print(f"inductor-perf: wrote {out}", file=sys.stderr)


# --- compare (eager vs compiled of a user file) --------------------------------------------------
def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="profile eager and compiled runs of a model file and compare them module by module")
    p.add_argument("file", help="Python file defining make_model() and make_inputs()")
    p.add_argument("--by", choices=("module", "line", "op"), default="module",
                   help="what rows are: nn.Module path (default), source line or eager op group")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--no-backward", action="store_true", help="forward only")
    p.add_argument("--steps", type=int, default=3, help="profiled steps per side (default 3)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up steps per side (default 2)")
    p.add_argument("--trace-dir", default=None, help="also save both traces here (for 'inductor-perf diff')")
    p.add_argument("--html", metavar="PATH", default=None,
                   help="also write the report page of the compiled run with this comparison on it")
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    import tempfile

    from .comparison.runner import compare_file
    from .traces.files import output_target

    # Compiling dominates the first run (tens of seconds on a small CPU): say what is happening.
    print(f"inductor-perf: profiling eager and compiled runs of {args.file} "
          f"({args.warmup} warm-up + {args.steps} profiled steps each; the compile comes first)...",
          file=sys.stderr)
    with contextlib.ExitStack() as stack:
        trace_dir = args.trace_dir
        if args.html:
            output_target(args.html, [args.file])
            if trace_dir is None:  # the page is made from the compiled run's trace
                trace_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="inductor_perf_compare_"))
        result = compare_file(args.file, by=args.by, backward=not args.no_backward,
                              steps=args.steps, warmup=args.warmup, trace_dir=trace_dir)
        _print_block(result.format(args.format))
        if args.html:
            _write_comparison_page(os.path.join(trace_dir, "compiled.trace.json.gz"), args.html, result)
    return 0


def _print_block(text: str) -> None:
    print(text, end="" if text.endswith("\n") else "\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inductor-perf",
        description="Make torch.compile performance visible: per-kernel FLOPs, bytes, achieved % of "
                    "peak, roofline bound, source line and module, for traces of compiled and eager runs.",
        epilog="To capture a run: INDUCTOR_PERF_TRACE_DIR=out python train.py (with "
               "torch.compile(model, backend=\"inductor_perf\")). Docs: README.md.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_devices(sub)
    _add_offline(sub)
    _add_compare(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # torch warns on import when NumPy is absent; the CLI needs no NumPy, so keep stderr to our
    # own one-line messages.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    # The CLI may configure logging; the library never does.
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="inductor-perf: %(levelname)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except InductorPerfError as e:
        print(f"inductor-perf: error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"inductor-perf: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("inductor-perf: interrupted", file=sys.stderr)
        return 130


_ENDS_WITH_COMMAND = False
"""Set by :func:`run`: this process ends as soon as its command returns."""
_LEFT_TO_EXIT: list[Any] = []
"""What a command left to the process's end (:func:`inductor_perf.summary.stream.engine.left_to_exit`):
when not empty, :func:`run` ends the process without the interpreter's teardown."""


def run() -> None:
    """The ``inductor-perf`` command: :func:`main`, and the process's exit. A summary of one large
    trace leaves its state to the process's end
    (:func:`inductor_perf.summary.stream.engine.leave_to_exit`): then, once the output is flushed and
    the exit handlers have run, the process ends without the interpreter's teardown, and the OS takes
    that memory back whole, where freeing it object by object cost 0.1-0.2 s on a 1M-event trace. Any
    other command exits as usual."""
    global _ENDS_WITH_COMMAND
    _ENDS_WITH_COMMAND = True
    code = main()
    if not _LEFT_TO_EXIT:
        sys.exit(code)
    try:
        sys.stdout.flush()
    except OSError:  # a closed pipe (``| head``): the output was cut, as the reader wanted
        code = code or 1
    atexit._run_exitfuncs()  # the handlers a normal exit runs (logging's flush, finalizers)
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
