"""The profiling window: from an env var (automatic) or a context manager (explicit), per process.

Automatic: with ``INDUCTOR_PERF_TRACE_DIR`` set, the first compile arms a session. A *step* is
counted at each call of the root compiled frame, whichever of its compiled variants runs (see
:class:`AutoCapture`); after ``INDUCTOR_PERF_SKIP`` steps (compile and warm-up) the profiler starts right before
that call, and it stops right before the call that begins step ``SKIP + INDUCTOR_PERF_STEPS``, so
the recorded steps are whole: forward, backward, and whatever the loop does in between.

Explicit::

    with inductor_perf.profile("out") as p:
        for batch in loader:
            train_step(batch)
            p.step()
    print(p.result.summary_text)

Either way the trace is joined to the compile-time tags, augmented, summarized, and written as
``<dir>/<name>.trace.json.gz``, ``<name>.summary.txt``, ``<name>.summary.json`` and the page
``<name>.report.html`` (roofline and tables), atomically; one line on stderr says where. Nothing
here may break the user's run: every failure is a warning.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import json
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from . import config as env
from . import markers
from .tags import REGISTRY, GraphTags

log = logging.getLogger(__name__)

DEFAULT_SKIP_STEPS = 3
DEFAULT_RECORD_STEPS = 2


@dataclass
class CaptureResult:
    """What a finished capture wrote and found."""

    trace_path: str | None = None
    summary_txt_path: str | None = None
    summary_json_path: str | None = None
    report_path: str | None = None
    """The HTML page (roofline and tables); None when it could not be written (a warning says why)."""
    summary: Any = None
    summary_text: str = ""
    warnings: list[str] = field(default_factory=list)
    events_tagged: int = 0
    steps: int = 0


def _rank() -> tuple[int | None, int | None]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    rank = os.environ.get("RANK")
    world = os.environ.get("WORLD_SIZE")
    return (int(rank) if rank and rank.isdigit() else None,
            int(world) if world and world.isdigit() else None)


_OUTPUT_SUFFIXES = (".trace.json.gz", ".summary.txt", ".summary.json", ".report.html")


def _reserve_base(out_dir: str, name: str | None) -> str:
    """``<dir>/<name>`` that no other run uses, reserved with an exclusive lock file.

    Names carry the rank when there is one (also a name the user chose), and by default host, pid
    and time. The reservation (``.<name>.lock``, created with O_EXCL) closes the window between
    choosing a name and writing the files, in which another process could pick the same name;
    :func:`_release` removes it once the files are written.
    """
    rank, _ = _rank()
    if name is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        host = socket.gethostname().split(".")[0] or "host"
        name = f"{host}_pid{os.getpid()}" + (f"_rank{rank}" if rank is not None else "") + f"_{stamp}"
    elif rank is not None:
        name = f"{name}_rank{rank}"
    base = os.path.join(out_dir, name)
    n = 1
    candidate = base
    while True:
        if not any(os.path.exists(candidate + ext) for ext in _OUTPUT_SUFFIXES):
            try:
                fd = os.open(_lock_path(candidate), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.close(fd)
                return candidate
            except FileExistsError:
                pass
        n += 1
        candidate = f"{base}_{n}"


def _lock_path(base: str) -> str:
    head, tail = os.path.split(base)
    return os.path.join(head, f".{tail}.lock")


def _release(base: str) -> None:
    try:
        os.unlink(_lock_path(base))
    except OSError:
        pass


def process_trace(raw_path: str, base: str, *, extra_warnings: list[str] | None = None) -> CaptureResult:
    """Join, augment, summarize and write one raw Kineto trace. Raises on I/O errors.

    The trace records the device row its figures are measured against (:data:`device_props.RECORD_KEY`),
    and it is summarized by the one path ``inductor-perf summary`` takes
    (:func:`summary_files.summarize_trace`: eager ops costed from their recorded shapes, the device
    read back from the trace), so the summary written here and that of the written file are one."""
    from .augment import augment_trace
    from .device_props import RECORD_KEY, device_record
    from .devices import resolve_device
    from .tag_join import costs_from_tags
    from .report import format_summary
    from .summary_files import summarize_trace
    from .trace_format import load_trace, save_trace, write_atomic

    trace = load_trace(raw_path)
    costs, jstats = costs_from_tags(trace, REGISTRY.get)
    on_gpu = any(isinstance(e, dict) and e.get("cat") == "kernel" for e in trace.get("traceEvents", ()))
    device, why = None, "no peaks known for this device"
    try:
        # peaks given with options={"inductor_perf.device": ...} when the graphs called here were compiled
        override = REGISTRY.device_override(i for i, _ in jstats.per_marker_counts)
        device = resolve_device("cuda" if on_gpu else "cpu", override=override)
    except Exception as e:  # peaks are optional: the trace is still useful without them
        log.warning("inductor_perf: could not determine device peaks (%s)", e)
        why = f"could not determine device peaks: {e}"
    augmented, _ = augment_trace(trace, _tf32_costs(costs, on_gpu), device, device_events_only=on_gpu)
    augmented[RECORD_KEY] = device_record(device, None if device is not None else why)
    costed = summarize_trace(augmented, label=os.path.basename(base))
    augmented, summary = costed.trace, costed.summary
    if summary.costs_note:  # eager ops costed from their shapes: the written trace carries the costs
        augmented[RECORD_KEY]["costs_note"] = summary.costs_note
    warnings = list(extra_warnings or []) + jstats.warnings()
    result = CaptureResult(summary=summary, warnings=warnings, events_tagged=len(costs))
    text = format_summary(summary, "text")
    if warnings:
        text += "\n\nNotes:\n" + "\n".join(f"- {w}" for w in warnings)
    result.summary_text = text
    payload = summary.to_dict()
    payload["capture"] = {"warnings": warnings, "events_tagged": len(costs),
                          "markers": jstats.markers, "unmatched_call_sites": jstats.unmatched_call_sites}
    result.trace_path = base + ".trace.json.gz"
    result.summary_txt_path = base + ".summary.txt"
    result.summary_json_path = base + ".summary.json"
    save_trace(augmented, result.trace_path, inputs=[raw_path])
    write_atomic(result.summary_txt_path, lambda f: f.write((text + "\n").encode()), inputs=[raw_path])
    write_atomic(result.summary_json_path,
                 lambda f: f.write((json.dumps(payload, indent=1, allow_nan=False) + "\n").encode()),
                 inputs=[raw_path])
    result.report_path = _write_page(augmented, base, costed.device, summary, result.warnings)
    return result


def _write_page(trace: dict, base: str, device: Any, summary: Any, warnings: list[str]) -> str | None:
    """``<base>.report.html`` from the summary already made; a failure warns once (the log and
    ``warnings``) and costs none of the other outputs."""
    from .report_html import write_report

    path = base + ".report.html"
    try:
        return write_report(trace, path, device=device, summary=summary, title=os.path.basename(base))
    except Exception as e:  # the trace and summaries are written: the page is a bonus
        log.warning("inductor_perf: could not write the report page %s (%s: %s)", path, type(e).__name__, e)
        warnings.append(f"no report page: {type(e).__name__}: {e}")
        return None


def _tf32_costs(costs: dict[int, Any], on_gpu: bool) -> dict[int, Any]:
    """``costs`` with the roof of the float32 matmuls that ran on TF32 tensor cores named: on a GPU
    with torch's TF32 switch on now (``allow_tf32``, ``set_float32_matmul_precision``), their
    ``dtype`` becomes "tf32", which the trace's ``kernel_dtype`` args record, so that the summary's
    headline dtype, every per-kernel roof and any later reading of the trace use the TF32 peak."""
    if not on_gpu:
        return costs
    from dataclasses import replace

    from .devices import tf32_enabled

    if not tf32_enabled():
        return costs
    return {i: replace(c, dtype="tf32") if c.matmul_flops > 0 and str(c.dtype).removeprefix("torch.") == "float32"
            else c for i, c in costs.items()}


# Kineto's status lines ("USDT:... profiler_start", "STAGE:... Completed Stage: Warm Up"), which it
# writes to stderr at every profiler start and stop whatever KINETO_LOG_LEVEL says.
_KINETO_STATUS = re.compile(rb"^(?:USDT|STAGE):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] ")


@contextlib.contextmanager
def _without_kineto_status() -> Iterator[None]:
    """Run the block with fd 2 going to a temporary file, then write what it caught back to stderr
    less Kineto's status lines: the user asked for a trace, not for the profiler's chatter. Nothing
    else is lost (other output of the block comes out after it). Passes through untouched when fd 2
    cannot be redirected."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        catch = tempfile.TemporaryFile()
        os.dup2(catch.fileno(), 2)
    except (OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        catch.seek(0)
        kept = [line for line in catch.read().splitlines(keepends=True) if not _KINETO_STATUS.match(line)]
        catch.close()
        if kept:
            with contextlib.suppress(OSError):
                os.write(2, b"".join(kept))


@contextlib.contextmanager
def quiet_profile(prof: Any) -> Iterator[Any]:
    """``with prof:`` for a torch.profiler.profile, less Kineto's status lines at its start and stop."""
    with _without_kineto_status():
        prof.__enter__()
    try:
        yield prof
    finally:
        with _without_kineto_status():
            prof.__exit__(None, None, None)


class _Window:
    """A torch.profiler run whose trace ends up processed in ``out_dir``."""

    def __init__(self, out_dir: str, name: str | None, mark_steps: bool = False) -> None:
        self.out_dir = out_dir
        self.name = name
        self.prof: Any = None
        self.steps = 0
        self.result: CaptureResult | None = None
        self.step_range: Any = None
        """The open ``ProfilerStep#N`` range (a profiler without a schedule records none itself)."""
        self.started_wall = 0.0
        self.mark_steps = mark_steps

    def _fail(self, message: str, *args: Any) -> bool:
        """Warn, and leave a result that says why nothing was written."""
        log.warning("inductor_perf: " + message, *args)
        text = message % args if args else message
        self.result = CaptureResult(warnings=[text], summary_text=f"inductor_perf: nothing written: {text}")
        return False

    def start(self) -> bool:
        if torch.autograd.profiler._is_profiler_enabled:
            return self._fail("a profiler is already running; not starting another "
                              "(no inductor_perf trace for this window)")
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            if not os.access(self.out_dir, os.W_OK):
                raise PermissionError(f"directory {self.out_dir!r} is not writable")
        except OSError as e:
            return self._fail("cannot write traces to %s (%s); capture is off", self.out_dir, e)
        _warn_unnamed_kernels()
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            activities.append(ProfilerActivity.CUDA)
        try:
            # record_shapes lets offline tools recompute extern FLOPs; with_stack is off: it slows
            # profiled steps a lot and our tags already carry the user's source lines.
            self.prof = profile(activities=activities, record_shapes=True)
            with _without_kineto_status():
                self.prof.__enter__()
        except Exception as e:
            self.prof = None
            return self._fail("could not start the profiler (%s)", e)
        self.started_wall = time.time()
        self.mark_step()
        return True

    def mark_step(self) -> None:
        """Close the open ``ProfilerStep#N`` range and open the next (none once stopped): the
        summary's per-step view and the cross-rank view (:mod:`.ranks`) read them. Only where the
        window knows where steps begin (the env-var session); an explicit block's ``step()`` marks
        ends, after which a last range would be a partial step."""
        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
            self.step_range = None
        if self.prof is not None and self.mark_steps:
            self.step_range = torch.autograd.profiler.record_function(f"ProfilerStep#{self.steps}")
            self.step_range.__enter__()

    @property
    def running(self) -> bool:
        return self.prof is not None

    def stop(self, note: str | None = None) -> CaptureResult | None:
        prof, self.prof = self.prof, None
        if prof is None:
            return None
        base = None
        try:
            self.mark_step()  # closes the last step range: self.prof is None now
            with _without_kineto_status():
                prof.__exit__(None, None, None)
            base = _reserve_base(self.out_dir, self.name)
            fd, raw = tempfile.mkstemp(dir=self.out_dir, prefix=".raw-", suffix=".json")
            os.close(fd)
            try:
                prof.export_chrome_trace(raw)
                result = process_trace(raw, base, extra_warnings=[note] if note else None)
            finally:
                if os.path.exists(raw):
                    os.unlink(raw)
                _release(base)
            result.steps = self.steps
            self.result = result
            page = "/.report.html" if result.report_path else ""
            print(f"inductor_perf: wrote {result.trace_path} and {os.path.basename(base)}"
                  f".summary.txt/.json{page} ({result.events_tagged} kernel events tagged)", file=sys.stderr)
            from .capture_ranks import after_capture

            after_capture(self.out_dir, base, self.started_wall)  # rank 0 of several: the cross-rank view
            return result
        except Exception as e:  # full disk, unwritable dir, a bad trace: warn, never raise
            if base is not None:  # no partial set of files: remove what was written
                for ext in _OUTPUT_SUFFIXES:
                    try:
                        os.unlink(base + ext)
                    except OSError:
                        pass
            self._fail("could not write the profile to %s (%s: %s)", self.out_dir, type(e).__name__, e)
            return self.result


class AutoCapture:
    """The env-var session: counts steps at graph calls and opens one window.

    A step is one call of the root compiled frame - the Dynamo frame of the first forward graph the
    process runs - whichever of its compiled variants ran: a recompile of that frame (a guard on a
    config attribute, the automatic-dynamic recompile at the second shape) gets new graphs, and
    each variant's first forward graph counts. Graphs of other frames (the pieces after a graph
    break, nested compiled functions) and backward graphs never count. Without Dynamo's frame id
    (an older or newer torch that does not say) the first forward graph alone counts.
    """

    def __init__(self, out_dir: str, skip_steps: int, record_steps: int) -> None:
        self.window = _Window(out_dir, None, mark_steps=True)
        self.skip_steps = skip_steps
        self.record_steps = record_steps
        self.anchor: Any = None
        """The root frame's id, or ("graph", instance id) when the frame is not known."""
        self.entries: dict[Any, int] = {}
        """Per compile of the root frame, the forward graph each call of it begins with."""
        self.steps_seen = 0
        self.calls_seen = 0
        self.done = False
        self._lock = threading.Lock()

    def _is_step_start(self, graph: GraphTags) -> bool:
        if graph.is_backward:
            return False
        frame = graph.frame_id if graph.frame_id is not None else ("graph", graph.instance_id)
        if self.anchor is None:
            self.anchor = frame
        if frame != self.anchor:
            return False
        # One compile can make several forward graphs (DDPOptimizer splits it): the first one called
        # is where each call of that variant begins.
        key = graph.compile_id if graph.compile_id is not None else graph.instance_id
        return self.entries.setdefault(key, graph.instance_id) == graph.instance_id

    def before_call(self, graph: GraphTags) -> None:
        if self.done:
            return
        with self._lock:
            self.calls_seen += 1
            if not self._is_step_start(graph):
                return
            self.steps_seen += 1
            if self.steps_seen == self.skip_steps + 1:
                if not self.window.start():
                    self.done = True
                    uninstall(self)
            elif self.window.running:
                self.window.steps += 1  # one more whole step recorded
                if self.window.steps >= self.record_steps:
                    self.done = True
                    self.window.stop()
                    uninstall(self)
                else:
                    self.window.mark_step()

    def seen(self) -> str:
        """What the session saw, for the message when no window opened."""
        variants = len(self.entries)
        graphs = len(REGISTRY.graphs())
        return (f"{self.steps_seen} step(s) (calls of the root compiled frame, {variants} compiled "
                f"variant(s) of it: {max(variants - 1, 0)} recompile(s)), {self.calls_seen} compiled-graph "
                f"call(s) in all, {graphs} graph(s) compiled")

    def at_exit(self) -> None:
        if self.window.running:
            self.window.steps += 1
            self.window.stop(note=f"the program ended inside the window: {self.window.steps} "
                                  f"of {self.record_steps} step(s) recorded, the last one may be partial")
        elif not self.done:
            log.warning("inductor_perf: %s is set but nothing was captured: saw %s; the window opens "
                        "after %d step(s). Lower %s (or run more steps), or use inductor_perf.profile() "
                        "with p.step() to mark steps yourself", env.TRACE_DIR, self.seen(),
                        self.skip_steps, env.SKIP_STEPS)
        self.done = True


def _warn_unnamed_kernels() -> None:
    """C++ kernels only appear by name in traces when their graph was compiled with kernel
    profiling; say so when a window opens over graphs compiled before it without it."""
    graphs = [g for g in REGISTRY.graphs()
              if not g.kernel_profile and any(k.kind == "generated" and k.device == "cpu" for k in g.kernels)]
    if graphs:
        log.warning("inductor_perf: %d graph(s) were compiled before this capture without C++ kernel "
                    "names, so their generated kernels will not be costed in the trace; compile with "
                    "options={'inductor_perf.kernel_profile': True} or open the capture before the "
                    "first call", len(graphs))


_install_lock = threading.Lock()


def install(session: Any) -> None:
    """Make ``session`` the one graph calls report to; the one it covers comes back at
    :func:`uninstall` (an explicit ``profile()`` block inside an env-var capture)."""
    markers.CALL_HOOK.install(session)


def uninstall(session: Any) -> None:
    markers.CALL_HOOK.uninstall(session)


def capture_requested() -> bool:
    """True when compiles should name their CPU kernels in traces (a capture is configured)."""
    return bool(env.get_str(env.TRACE_DIR)) or markers.CALL_HOOK.active()


def ensure_auto_capture() -> AutoCapture | None:
    """Arm the env-var session once per process (called by the backend at compile time)."""
    out_dir = env.get_str(env.TRACE_DIR)
    if not out_dir:
        return None
    with _install_lock:
        current = markers.CALL_HOOK.session
        if isinstance(current, AutoCapture) or markers.CALL_HOOK.auto_armed:
            return current if isinstance(current, AutoCapture) else None
        try:
            skip = env.get_int(env.SKIP_STEPS, DEFAULT_SKIP_STEPS)
            steps = env.get_int(env.RECORD_STEPS, DEFAULT_RECORD_STEPS, minimum=1)
        except ValueError as e:
            log.warning("inductor_perf: %s; using the defaults", e)
            skip, steps = DEFAULT_SKIP_STEPS, DEFAULT_RECORD_STEPS
        session = AutoCapture(out_dir, skip, steps)
        markers.CALL_HOOK.auto_armed = True
        install(session)
        atexit.register(session.at_exit)
        return session


class profile:
    """Profile a block of code and write an augmented trace and summary to ``out_dir``.

    ``out_dir`` defaults to ``$INDUCTOR_PERF_TRACE_DIR`` or ``./inductor_perf_out``. Call
    ``step()`` at the end of each training step to mark step boundaries in the trace. After the
    block, ``result`` holds the paths and the summary text.

    >>> with inductor_perf.profile("out") as p:  # doctest: +SKIP
    ...     loss = model(x).sum(); loss.backward(); p.step()
    """

    def __init__(self, out_dir: str | os.PathLike | None = None, *, name: str | None = None) -> None:
        out = out_dir if out_dir is not None else (env.get_str(env.TRACE_DIR) or "inductor_perf_out")
        self._window = _Window(os.fspath(out), name)
        self.result: CaptureResult | None = None

    def before_call(self, graph: GraphTags) -> None:
        """Graph calls inside the block need nothing: the block is the window."""

    def __enter__(self) -> "profile":
        install(self)
        self._window.start()
        return self

    def step(self) -> None:
        """Mark the end of one step (shows as ProfilerStep#N in the trace)."""
        self._window.steps += 1
        if self._window.prof is not None:
            try:
                self._window.prof.step()
            except Exception as e:
                log.debug("profiler step failed: %s", e)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        uninstall(self)
        note = f"the block raised {exc_type.__name__}; the trace ends there" if exc_type else None
        result = self._window.stop(note=note)
        # Always a result: when nothing was written, its warnings say why.
        self.result = result or self._window.result or CaptureResult(warnings=["nothing was captured"])
        return None
