"""The profiling window: from an env var (automatic) or a context manager (explicit), per process.

Automatic: with ``INDUCTOR_PERF_TRACE_DIR`` set, the first compile arms a session
(:mod:`inductor_perf.capture.auto`). A *step* is a call of the root compiled frame; the profiler
starts one step before the ``INDUCTOR_PERF_STEPS`` recorded steps (a warm-up step, dropped) and
stops after them outside any compiled call, so the recorded steps are whole: forward, backward, and
whatever the loop does in between.

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

import contextlib
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from .. import config as env
from ..model.tags import REGISTRY, GraphTags
from ..tagging import instrument
from .outputs import OUTPUT_SUFFIXES, release, reserve_base
from .sync_calls import SyncCalls

log = logging.getLogger(__name__)


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
    device: Any = field(default=None, repr=False)
    """The device row the figures are measured against (the page's roofs); None when unknown."""

    def _repr_html_(self) -> str:
        """In a notebook, the capture shows as its report page (:func:`report.html.notebook_html`)."""
        from ..report.html import notebook_html

        return notebook_html(self.summary, self.device, self.warnings)


def process_trace(raw_path: str, base: str, *, extra_warnings: list[str] | None = None,
                  trace: dict | None = None, compile_window: tuple[float, float, bool] | None = None,
                  unprofiled_us: list[float] | None = None) -> CaptureResult:
    """Join, augment, summarize and write one raw Kineto trace (``trace``: the file's events loaded
    and shaped already by the caller). Raises on I/O errors.

    The trace records the device row its figures are measured against (:data:`devices.props.RECORD_KEY`),
    and it is summarized by the one path ``inductor-perf summary`` takes
    (:func:`summary.files.summarize_trace`: eager ops costed from their recorded shapes, the device
    read back from the trace), so the summary written here and that of the written file are one.
    The block also records the process's graph breaks and frame compiles (:mod:`.compile_log`;
    ``compile_window``: :meth:`_Window.compile_window`), and ``unprofiled_us``'s median as
    ``unprofiled_step_us`` (with ``unprofiled_steps``, their number): the step without the profiler,
    which the advisor's savings are stated against (:func:`inductor_perf.advice.per_step.unprofiled`)."""
    from ..advice.advise import attach
    from ..augment.core import augment_trace
    from ..devices.props import RECORD_KEY, device_record
    from ..devices.resolve import run_device, run_device_type
    from ..costs.from_tags import costs_from_tags
    from ..report.text import format_summary
    from ..summary.files import summarize_trace
    from ..traces.files import load_trace, save_trace, write_atomic
    from .compile_log import COMPILE_LOG

    trace = trace if trace is not None else load_trace(raw_path)
    costs, jstats = costs_from_tags(trace, REGISTRY.get)
    on_gpu = run_device_type(trace) == "cuda"
    device, why = run_device(trace, (i for i, _ in jstats.per_marker_counts), REGISTRY)
    augmented, _ = augment_trace(trace, _tf32_costs(costs, on_gpu), device, device_events_only=on_gpu)
    augmented[RECORD_KEY] = device_record(device, None if device is not None else why)
    compiled = COMPILE_LOG.record(compile_window)
    if compiled is not None:
        augmented[RECORD_KEY]["compile"] = compiled
    if unprofiled_us:
        augmented[RECORD_KEY]["unprofiled_step_us"] = round(statistics.median(unprofiled_us), 3)
        augmented[RECORD_KEY]["unprofiled_steps"] = len(unprofiled_us)
    costed = summarize_trace(augmented, label=os.path.basename(base))
    augmented, summary = costed.trace, attach(costed.summary)
    if summary.costs_note:  # eager ops costed from their shapes: the written trace carries the costs
        augmented[RECORD_KEY]["costs_note"] = summary.costs_note
    warnings = list(extra_warnings or []) + jstats.warnings()
    result = CaptureResult(summary=summary, warnings=warnings, events_tagged=len(costs), device=costed.device)
    text = format_summary(summary, "text")
    if warnings:
        text += "\n\nNotes:\n" + "\n".join(f"- {w}" for w in warnings)
    result.summary_text = text
    payload = summary.to_dict()
    payload["capture"] = {"warnings": warnings, "events_tagged": len(costs),
                          "markers": jstats.markers, "unmatched_call_sites": jstats.unmatched_call_sites}
    # the record before the events: a streaming reader takes the rest of the file after the events
    # array for the events' end, and the record's lists of objects there would end the stream
    augmented = {RECORD_KEY: augmented[RECORD_KEY], **{k: v for k, v in augmented.items() if k != RECORD_KEY}}
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
    from ..report.html import write_report

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

    from ..devices.resolve import tf32_enabled

    if not tf32_enabled():
        return costs
    return {i: replace(c, dtype="tf32") if c.matmul_flops > 0 and str(c.dtype).removeprefix("torch.") == "float32"
            else c for i, c in costs.items()}


# Kineto's status lines ("USDT:... profiler_start", "STAGE:... Completed Stage: Warm Up"), which it
# writes to stderr at every profiler start and stop whatever KINETO_LOG_LEVEL says; its complaint when
# started from another thread than the one it first registered on (the capture says itself which
# threads its trace lacks); and torch's note at turning CPU collection off (_Window.close). Once a
# process group is up, torch starts its own log lines with the rank ("[rank1]:[W1128 ...").
_KINETO_STATUS = re.compile(rb"^(?:\[rank\d+\]:)?(?:(?:USDT|STAGE):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] "
                            rb"|ERROR: External init callback must run in same thread as registerClient "
                            rb"|\[W\d{4} [\d:.]+ profiler_kineto\.cpp:\d+\] Toggling CPU activity )")


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
    finish_waiting_windows()
    with _without_kineto_status():
        prof.__enter__()
    try:
        yield prof
    finally:
        with _without_kineto_status():
            prof.__exit__(None, None, None)


class _Window:
    """A torch.profiler run whose trace ends up processed in ``out_dir``.

    Its steps are ``ProfilerStep#N`` ranges it opens itself (a profiler without a schedule records
    none): :meth:`open_step` ends the open one, counting it as a whole step, and opens the next. A
    range still open at :meth:`stop` is a partial step and is dropped from the trace
    (:func:`~inductor_perf.capture.window.shape_window`). The profiler records only the thread that
    started it (``owner``); :meth:`note_thread` remembers the others that ran graphs meanwhile.
    """

    def __init__(self, out_dir: str, name: str | None) -> None:
        self.out_dir = out_dir
        self.name = name
        self.prof: Any = None
        self.activities: list[Any] = []
        self.steps = 0
        """Whole steps recorded: step ranges ended by the next step's start."""
        self.step_range: Any = None
        self.collecting = False
        """The profiler records events (False before the start and once :meth:`close` ended the window)."""
        self.owner: tuple[int, str] | None = None
        """(native id, name) of the thread that started the profiler: the one it records."""
        self.owner_ident: int | None = None
        """Its ``threading.get_ident()`` (cheaper to read than the native id)."""
        self.threads: dict[int, tuple[int, str]] = {}
        """Threads that ran compiled graphs while the profiler recorded: ident -> (native id, name)."""
        self.notes: list[str] = []
        self.result: CaptureResult | None = None
        self.started_wall = 0.0
        self.steps_wall: list[float] = []
        """Wall-clock (s) times of the recorded steps: the first one's start, the last whole one's
        start and its end (what the compile record's ``in_window`` refers to, :meth:`compile_window`)."""
        self._open_wall = 0.0
        self.sync_calls = SyncCalls()
        """Marks the user's calls that can wait for the GPU (:mod:`.sync_calls`) while collecting."""
        self.unprofiled_us: list[float] = []
        """Durations (µs) of whole steps that ran just before the profiler started, without it (the
        env-var session's warm-up steps after the first): the trace records their median."""

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

        self.activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.activities.append(ProfilerActivity.CUDA)
        try:
            # record_shapes lets offline tools recompute extern FLOPs; with_stack is off: it slows
            # profiled steps a lot and our tags already carry the user's source lines.
            # acc_events=True: torch 2.11 and 2.12 warn "Profiler clears events at the end of each
            # cycle" at every first start without it (a UserWarning of theirs, raised because of us, that
            # kills a script run with -W error); with one cycle and no events() call it changes nothing.
            self.prof = profile(activities=self.activities, record_shapes=True, acc_events=True)
            with _without_kineto_status():
                self.prof.__enter__()
        except Exception as e:
            self.prof = None
            return self._fail("could not start the profiler (%s)", e)
        # a GPU: give the syncs outside compiled code their lines (or a device test given explicitly)
        if len(self.activities) > 1 or self.sync_calls.on_device is not None:
            self.sync_calls.start()
        self.started_wall = time.time()
        self.owner = (threading.get_native_id(), threading.current_thread().name)
        self.owner_ident = threading.get_ident()
        self.collecting = True
        return True

    def note_thread(self) -> None:
        """Remember the calling thread as one that ran a compiled graph while the profiler recorded."""
        ident = threading.get_ident()  # pthread_self: no system call, unlike the native id
        if ident not in self.threads:
            t = threading.current_thread()
            self.threads[ident] = (t.native_id or threading.get_native_id(), t.name)

    def open_step(self) -> None:
        """End the open ``ProfilerStep#N`` range (a whole step) and open the next: the summary's
        per-step view and the cross-rank view (:mod:`inductor_perf.ranks.view`) read them."""
        self.end_step()
        if self.collecting:
            self._open_wall = time.time()
            if not self.steps_wall:
                self.steps_wall = [self._open_wall]
            self.step_range = torch.autograd.profiler.record_function(f"ProfilerStep#{self.steps}")
            self.step_range.__enter__()

    def end_step(self) -> None:
        """End the open ``ProfilerStep#N`` range, counting it as a whole step."""
        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
            self.step_range = None
            self.steps += 1
            self.steps_wall[1:] = [self._open_wall, time.time()]

    @property
    def running(self) -> bool:
        return self.prof is not None

    @property
    def waiting(self) -> bool:
        """Ended by :meth:`close`, and waiting for a point outside that call to stop."""
        return self.prof is not None and not self.collecting

    def close(self) -> bool:
        """End the recorded window here, inside the compiled call that begins the next step, without
        stopping the profiler: the last step range ends and collection goes off. Stopping here would
        cut the ranges this call is in (torch warns of each, and leaves them unfinished); they close
        normally with the profiler still on, and :meth:`stop` may then run at any point of this
        thread outside the call. False when collection could not be turned off (then stop now)."""
        self.end_step()
        self.sync_calls.stop()
        try:
            if len(self.activities) > 1 and not torch.cuda.is_current_stream_capturing():
                torch.cuda.synchronize()  # the last step's device work is recorded before collection ends
            with _without_kineto_status():
                self.prof.toggle_collection_dynamic(False, _toggled(self.activities))
        except Exception as e:
            log.debug("inductor_perf: could not turn profiler collection off (%s)", e)
            return False
        self.collecting = False
        return True

    def discard(self) -> None:
        """Stop the profiler and write nothing."""
        prof, self.prof = self.prof, None
        self.step_range = None
        self.collecting = False
        self.sync_calls.stop()
        if prof is not None:
            with contextlib.suppress(Exception), _without_kineto_status():
                prof.__exit__(None, None, None)

    def stop(self, note: str | None = None, *, align_to_calls: bool = False) -> CaptureResult | None:
        """Stop the profiler and write the window's files. ``align_to_calls``: the step boundaries were
        marked inside compiled calls (the env-var session); see :func:`inductor_perf.capture.window.shape_window`."""
        prof, self.prof = self.prof, None
        if prof is None:
            return None
        base = None
        try:
            partial = self.step_range is not None
            if partial:  # a partial step: its range is dropped from the trace
                self.step_range.__exit__(None, None, None)
                self.step_range = None
            self.collecting = False
            self.sync_calls.stop()
            with _without_kineto_status():
                prof.__exit__(None, None, None)
            base = reserve_base(self.out_dir, self.name)
            fd, raw = tempfile.mkstemp(dir=self.out_dir, prefix=".raw-", suffix=".json")
            os.close(fd)
            try:
                prof.export_chrome_trace(raw)
                trace, lost = self._shaped(raw, align_to_calls, partial)
                result = process_trace(raw, base, extra_warnings=self.notes + ([note] if note else []) + lost,
                                       trace=trace,
                                       compile_window=self.compile_window(align_to_calls),
                                       unprofiled_us=self.unprofiled_us)
            finally:
                if os.path.exists(raw):
                    os.unlink(raw)
                release(base)
            result.steps = self.steps
            self.result = result
            page = "/.report.html" if result.report_path else ""
            print(f"inductor_perf: wrote {result.trace_path} and {os.path.basename(base)}"
                  f".summary.txt/.json{page} ({result.events_tagged} kernel events tagged)", file=sys.stderr)
            from ..ranks.after_capture import after_capture

            after_capture(self.out_dir, base, self.started_wall)  # rank 0 of several: the cross-rank view
            return result
        except Exception as e:  # full disk, unwritable dir, a bad trace: warn, never raise
            if base is not None:  # no partial set of files: remove what was written
                for ext in OUTPUT_SUFFIXES:
                    try:
                        os.unlink(base + ext)
                    except OSError:
                        pass
            self._fail("could not write the profile to %s (%s: %s)", self.out_dir, type(e).__name__, e)
            return self.result

    def compile_window(self, align_to_calls: bool) -> tuple[float, float, bool] | None:
        """(start, end, by_end): the wall-clock span in which a compile ran inside the recorded steps.
        A step here opens at ``p.step()``, and a compile inside it starts after that. With the env-var
        session (``align_to_calls``) a step opens inside the call that begins it, after that call's
        compile: a compile of a recorded step then ends after the profiler's start (the warm-up step's
        call) and before the last step opened (a later one belongs to the call after the window)."""
        if len(self.steps_wall) < 3:
            return None
        first, last_open, last_end = self.steps_wall[:3]
        return (self.started_wall, last_open, True) if align_to_calls else (first, last_end, False)

    def _shaped(self, raw: str, align_to_calls: bool, partial: bool) -> tuple[dict, list[str]]:
        """The raw trace made the window (:func:`inductor_perf.capture.window.shape_window`), and a note naming
        the threads that ran graphs but are not in it (also logged, once)."""
        from .window import marker_threads, shape_window, unrecorded_threads
        from ..traces.files import load_trace

        trace = load_trace(raw)
        _ignore_cut_ranges(trace)
        lost = unrecorded_threads(marker_threads(trace), dict(self.threads.values()), self.owner)
        shape = shape_window(trace, align_to_calls=align_to_calls, drop_partial=partial)
        log.debug("inductor_perf: %d step(s) kept, %d event(s) outside them dropped, step boundaries moved "
                  "back to their calls' starts by %s us", shape.steps, shape.dropped_events, shape.moved_boundaries)
        if lost:
            log.warning("inductor_perf: %s", lost)
        return trace, [lost] if lost else []


def _ignore_cut_ranges(trace: dict) -> None:
    """A range still open when the profiler stopped makes torch warn, when it ends, with its name and
    "(Triggered internally at ...collection.cpp...)": ignore exactly those warnings. The window stops
    after the compiled call it ended in has returned, so only a range of the user's own around more
    than that call can be open (``with record_function("train_step"):`` around forward and
    backward); the trace drops it, as it belongs to the step after the window."""
    names = {e.get("name") for e in trace.get("traceEvents") or ()
             if isinstance(e, dict) and isinstance(e.get("args"), dict) and e["args"].get("finished") is False}
    for name in sorted(n for n in names if isinstance(n, str)):
        log.debug("inductor_perf: the range %r was open when the profiler stopped", name)
        warnings.filterwarnings("ignore", message=re.escape(name) + r" \(Triggered internally at .*collection\.cpp",
                                category=UserWarning)


def _toggled(activities: list[Any]) -> list[Any]:
    """The activities :meth:`_Window.close` turns off: the host's only. Turning CUDA collection off
    flushes CUPTI's buffers, and the Kineto of torch 2.11 then loses them: the trace kept no device
    kernel and no runtime call at all (seen on an H200 with the env-var capture; Kineto's fix,
    pytorch/kineto#1362, came later). Device work left on records until :meth:`stop`, and
    :func:`~inductor_perf.capture.window.shape_window` drops what the host launched after the window."""
    from torch.profiler import ProfilerActivity

    return [a for a in activities if a == ProfilerActivity.CPU]


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


def install(session: Any) -> None:
    """Make ``session`` the one graph calls report to; the one it covers comes back at
    :func:`uninstall` (an explicit ``profile()`` block inside an env-var capture)."""
    instrument.CALL_HOOK.install(session)


def uninstall(session: Any) -> None:
    instrument.CALL_HOOK.uninstall(session)


def finish_waiting_windows() -> None:
    """Stop and write an env-var window that has ended and only waits for a safe point to stop
    (see :class:`~inductor_perf.capture.auto.AutoCapture`), when it belongs to this thread: a
    profiler about to start here, outside any compiled call, would find it still running."""
    for session in instrument.CALL_HOOK.sessions():
        finish = getattr(session, "finish_waiting", None)
        if finish is not None:
            finish()


class profile:
    """Profile a block of code and write an augmented trace and summary to ``out_dir``.

    ``out_dir`` defaults to ``$INDUCTOR_PERF_TRACE_DIR`` or ``./inductor_perf_out``. Call
    ``step()`` at the end of each step: step N (``ProfilerStep#N`` in the trace, a row of the
    summary's Steps table) runs from the block's start, or the previous ``step()``, to that call.
    What the block runs after its last ``step()`` stays in the trace but is not a step. There is no
    warm-up: the block is the window, so the first step also carries the profiler's start-up (its
    first ops run slower); open the block one step early and read the steps after the first to avoid
    it. After the block, ``result`` holds the paths and the summary text.

    >>> with inductor_perf.profile("out") as p:  # doctest: +SKIP
    ...     loss = model(x).sum(); loss.backward(); p.step()
    """

    def __init__(self, out_dir: str | os.PathLike | None = None, *, name: str | None = None) -> None:
        out = out_dir if out_dir is not None else (env.get_str(env.TRACE_DIR) or "inductor_perf_out")
        self._window = _Window(os.fspath(out), name)
        self.result: CaptureResult | None = None

    def before_call(self, graph: GraphTags) -> None:
        """The block is the window: graph calls only say which threads ran graphs in it."""
        if self._window.collecting:
            self._window.note_thread()

    def __enter__(self) -> "profile":
        finish_waiting_windows()
        install(self)
        if self._window.start():
            self._window.open_step()
        return self

    def step(self) -> None:
        """End one step (``ProfilerStep#N`` in the trace) and begin the next."""
        if self._window.running:
            self._window.open_step()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        uninstall(self)
        note = f"the block raised {exc_type.__name__}; the trace ends there" if exc_type else None
        result = self._window.stop(note=note)
        # Always a result: when nothing was written, its warnings say why.
        self.result = result or self._window.result or CaptureResult(warnings=["nothing was captured"])
        return None
