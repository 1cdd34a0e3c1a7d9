"""The env-var session: with ``INDUCTOR_PERF_TRACE_DIR`` set, the first compile arms an
:class:`AutoCapture`, which counts steps at graph calls and opens one profiling window
(:class:`~inductor_perf.capture.session._Window`) over ``INDUCTOR_PERF_STEPS`` whole steps after
``INDUCTOR_PERF_SKIP`` steps of compile and warm-up. What counts as a step, when the window opens,
and where it ends are here; writing its files is :mod:`inductor_perf.capture.session`'s."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from typing import Any

import torch

from .. import config as env
from ..model.tags import REGISTRY, GraphTags
from ..tagging import instrument
from .session import _Window, install, uninstall

log = logging.getLogger(__name__)

DEFAULT_SKIP_STEPS = 3
DEFAULT_RECORD_STEPS = 2


class AutoCapture:
    """The env-var session: counts steps at graph calls and opens one window.

    A step is one call of the root compiled frame - the Dynamo frame of the first forward graph the
    process runs - whichever of its compiled variants ran: a recompile of that frame (a guard on a
    config attribute, the automatic-dynamic recompile at the second shape) gets new graphs, and
    each variant's first forward graph counts. Graphs of other frames (the pieces after a graph
    break, nested compiled functions) and backward graphs never count. Without Dynamo's frame id
    (an older or newer torch that does not say) the first forward graph alone counts.

    With ``skip`` steps to skip and ``record`` to record, the window runs so (n: the step that
    begins at this call):

    - n < skip: no profiler; each step's start time is kept, and the steps between the first (it
      compiles) and the profiler's that compiled no graph give the un-profiled step time the trace records
      (``unprofiled_step_us``: the advisor's savings are shares of it, docs/advisor.md);
    - n = skip: the profiler starts. This step is its warm-up, traced and then dropped: the first
      ops a profiler sees run several times slower, which would understate the first recorded step.
      With skip 0 there is none (a note says the first step carries the start-up);
    - n = skip+1 ... skip+record: each call ends the step range before it and opens the next;
    - n = skip+record+1: the last range ends and collection goes off (:meth:`_Window.close`), inside
      this call; stopping the profiler here would cut the ranges the call runs in;
    - the profiler stops and the files are written at the first point outside that call, on the
      profiler's thread: the next graph call once the call has returned (usually the step's
      backward), the next step, a profiler about to start on that thread
      (``inductor_perf.profile()``, ``compare()``: :meth:`finish_waiting`), or the program's end.
      Every range of the call has closed by then, so torch has nothing to warn about; they belong
      to step skip+record+1 and are dropped from the trace.

    Once the profiler runs, only the steps of its thread move the window (it records no other).
    """

    def __init__(self, out_dir: str, skip_steps: int, record_steps: int) -> None:
        self.window = _Window(out_dir, None)
        self.skip_steps = skip_steps
        self.record_steps = record_steps
        self.anchor: Any = None
        """The root frame's id, or ("graph", instance id) when the frame is not known."""
        self.entries: dict[Any, int] = {}
        """Per compile of the root frame, the forward graph each call of it begins with."""
        self.steps_seen = 0
        self.starts: list[tuple[float, int]] = []
        """(perf_counter(), graphs compiled so far) at the start of each step before the profiler's (for
        the un-profiled step time, from the steps that compiled nothing)."""
        self.calls_seen = 0
        self.done = False
        self._hook: Any = None
        """The profile hook (``sys.setprofile``) that stops the window when the call it ended in returns."""
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
            window = self.window
            if window.collecting:
                window.note_thread()
            start = self._is_step_start(graph)
            if window.owner_ident is not None and threading.get_ident() != window.owner_ident:
                return  # once the profiler runs, only the steps of the thread it records count
            if window.waiting:
                if start and _outside_backward():
                    self._finish()
                    window.stop(align_to_calls=True)
            elif start:
                self.steps_seen += 1
                self._advance(self.steps_seen)

    def _advance(self, n: int) -> None:
        window, skip, record = self.window, self.skip_steps, self.record_steps
        if not window.running:
            self.starts.append((time.perf_counter(), REGISTRY.issued()))
            if n == max(skip, 1):
                window.unprofiled_us = unprofiled_steps(self.starts)
        if n == skip and skip >= 1:
            if not window.start():
                self._finish()
        elif n == skip + 1:
            if not window.running:
                if not window.start():
                    self._finish()
                    return
                window.notes.append(f"{env.SKIP_STEPS}=0: no warm-up step, so the first recorded step "
                                    "includes the profiler's start-up (its first ops run slower)")
            window.open_step()
        elif n <= skip + record:
            window.open_step()
        elif window.close():  # n == skip + record + 1
            self._stop_when_call_returns()
        else:
            self._finish()
            window.stop(align_to_calls=True)  # no way to end collection: stop here after all

    def _stop_when_call_returns(self) -> None:
        """Stop the window as soon as the compiled call it ended in returns to the caller's code: a
        profile hook on this thread (``sys.setprofile``) for the rest of that call, which waits for
        the return of its outermost frame of Dynamo's entry code. Not when another profile function
        is set (cProfile): the window then stops at the next step, or the program's end."""
        frame = _dynamo_entry_frame()
        if frame is None or sys.getprofile() is not None:
            return

        def hook(f: Any, event: str, arg: Any) -> None:
            if f is frame and event == "return":
                try:
                    sys.setprofile(None)
                    self.finish_waiting()
                except Exception as e:  # never into the user's code
                    log.debug("inductor_perf: stopping the window failed (%s)", e)

        self._hook = hook
        sys.setprofile(hook)

    def finish_waiting(self) -> None:
        """Stop and write the window if it has ended and waits to stop, on its own thread: called
        from outside any compiled call, where every range open when collection went off has closed."""
        if self.done:
            return
        with self._lock:
            window = self.window
            if window.waiting and window.owner_ident == threading.get_ident() and _outside_backward():
                self._finish()
                window.stop(align_to_calls=True)

    def _finish(self) -> None:
        self.done = True
        if self._hook is not None and sys.getprofile() is self._hook:
            sys.setprofile(None)
        self._hook = None
        uninstall(self)

    def seen(self) -> str:
        """What the session saw, for the message when no window opened."""
        variants = len(self.entries)
        graphs = len(REGISTRY.graphs())
        return (f"{self.steps_seen} step(s) (calls of the root compiled frame, {variants} compiled "
                f"variant(s) of it: {max(variants - 1, 0)} recompile(s)), {self.calls_seen} compiled-graph "
                f"call(s) in all, {graphs} graph(s) compiled")

    def at_exit(self) -> None:
        window = self.window
        with self._lock:
            if window.waiting:  # the window is complete
                self._stop_at_exit()
            elif window.running and window.step_range is not None:
                window.end_step()
                self._stop_at_exit(f"the program ended inside the window: {window.steps} of "
                                   f"{self.record_steps} step(s) recorded, the last one may be partial")
            elif not self.done:
                window.discard()  # ended in the warm-up step, if the profiler ran at all
                log.warning("inductor_perf: %s is set but nothing was captured: saw %s; the window opens "
                            "after %d step(s). Lower %s (or run more steps), or use inductor_perf.profile() "
                            "with p.step() to mark steps yourself", env.TRACE_DIR, self.seen(),
                            self.skip_steps, env.SKIP_STEPS)
            self.done = True

    def _stop_at_exit(self, note: str | None = None) -> None:
        owner = self.window.owner
        if owner is not None and self.window.owner_ident != threading.get_ident():
            self.window.prof = None
            log.warning("inductor_perf: nothing written: the capture's profiler runs on thread '%s', which "
                        "made no further step before the program ended, and torch.profiler can only be "
                        "stopped from its own thread; run one more step on it, or use "
                        "inductor_perf.profile() there", owner[1])
            return
        self.window.stop(note, align_to_calls=True)


def unprofiled_steps(starts: list[tuple[float, int]]) -> list[float]:
    """The durations (µs) of the steps that ran before the profiler started and compiled nothing: each
    from one step's start to the next's (``starts``: (time in s, graphs compiled so far) at each step's
    start; the last one is the profiler's step). The first step is always left out (it compiles)."""
    return [round((b - a) * 1e6, 3) for (a, n), (b, m) in zip(starts[1:], starts[2:]) if m == n]


_EVAL_FRAME = os.path.join("torch", "_dynamo", "eval_frame.py")


def _dynamo_entry_frame() -> Any:
    """The outermost frame of Dynamo's entry code (``torch/_dynamo/eval_frame.py``) on this thread's
    stack: the call of the compiled model we are in, whose ranges close once it returns. None when
    there is none (a torch that moved it: the window then stops at the next step or at the end)."""
    found, f = None, sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.endswith(_EVAL_FRAME):
            found = f
        f = f.f_back
    return found


def _outside_backward() -> bool:
    """Not inside an autograd backward pass. The engine runs a pass under a copy of the thread's
    state taken at its start, profiler included, and puts that copy back at its end: a profiler
    stopped inside would be running again afterwards (and refuse the next start)."""
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is None or task() == -1


_install_lock = threading.Lock()


def ensure_auto_capture() -> AutoCapture | None:
    """Arm the env-var session once per process (called by the backend at compile time)."""
    out_dir = env.get_str(env.TRACE_DIR)
    if not out_dir:
        return None
    with _install_lock:
        current = instrument.CALL_HOOK.session
        if isinstance(current, AutoCapture) or instrument.CALL_HOOK.auto_armed:
            return current if isinstance(current, AutoCapture) else None
        try:
            skip = env.get_int(env.SKIP_STEPS, DEFAULT_SKIP_STEPS)
            steps = env.get_int(env.RECORD_STEPS, DEFAULT_RECORD_STEPS, minimum=1)
        except ValueError as e:
            log.warning("inductor_perf: %s; using the defaults", e)
            skip, steps = DEFAULT_SKIP_STEPS, DEFAULT_RECORD_STEPS
        session = AutoCapture(out_dir, skip, steps)
        instrument.CALL_HOOK.auto_armed = True
        install(session)
        atexit.register(session.at_exit)
        return session
