"""Each compiled graph's call, instrumented: the runtime marker (one profiler range per call, naming
the graph instance: its format is :mod:`inductor_perf.model.markers`) and the hook through which the
open capture session sees every call (:data:`CALL_HOOK`).

Cost: with no profiler running the wrapper does two attribute reads (~60 ns) per graph call; with
a profiler it uses ``_RecordFunctionFast`` (~0.25 us), not ``record_function`` (~6 us).
"""

from __future__ import annotations

from typing import Any, Callable

from .. import config as env
from ..model.markers import marker_name
from ..model.tags import GraphTags

# torch is imported by wrap_callable (at compile time, where it is loaded already), not here: a
# capture imports CALL_HOOK when it starts, before anything is compiled.


class CallHook:
    """The capture session that sees graph calls: the innermost one open (None when none is).

    Sessions are installed and removed by :mod:`inductor_perf.capture.session`, symmetrically: removing one
    gives the slot back to the session it covered. ``session`` is read on every graph call, so it is
    a plain attribute rather than anything costlier."""

    def __init__(self) -> None:
        self.session: Any = None
        self._stack: list[Any] = []
        self.auto_armed = False
        """The env-var session was armed once in this process (it never re-arms after it ends)."""

    def install(self, session: Any) -> None:
        self._stack.append(session)
        self.session = session

    def uninstall(self, session: Any) -> None:
        """Remove ``session`` wherever it is in the stack (a session may end out of order)."""
        self._stack = [s for s in self._stack if s is not session]
        self.session = self._stack[-1] if self._stack else None

    def active(self) -> bool:
        return bool(self._stack)

    def sessions(self) -> list[Any]:
        """The open sessions, outermost first."""
        return list(self._stack)


CALL_HOOK = CallHook()


def capture_requested() -> bool:
    """True when compiles should name their CPU kernels in traces (a capture is configured)."""
    return bool(env.get_str(env.TRACE_DIR)) or CALL_HOOK.active()


def wrap_callable(fn: Callable[[Any], Any], graph: GraphTags) -> Callable[[Any], Any]:
    """``fn`` (a compiled graph's boxed callable) emitting a marker when a profiler is on."""
    import torch

    instance_id, is_backward = graph.instance_id, graph.is_backward
    static_name = marker_name(instance_id, is_backward) if not graph.symbol_locators else None
    record = torch._C._profiler._RecordFunctionFast
    profiler = torch.autograd.profiler

    hook = CALL_HOOK

    def run(inputs: Any) -> Any:
        session = hook.session
        if session is not None:
            try:
                session.before_call(graph)  # may open or close the profiling window
            except Exception:  # capture must never break the run
                hook.uninstall(session)
        # Checking the flag first keeps the profiler-off path at two attribute reads.
        if not profiler._is_profiler_enabled:
            return fn(inputs)
        # Read the sizes before the call: boxed callables clear their input list.
        name = static_name or marker_name(instance_id, is_backward, graph.symbol_values(inputs))
        with record(name):
            return fn(inputs)

    run._inductor_perf_wrapped = fn  # type: ignore[attr-defined]
    return run


def instrument(compiled: Any, graph: GraphTags) -> bool:
    """Install the marker on a CompiledFxGraph; False when it has no callable to wrap."""
    fn = getattr(compiled, "current_callable", None)
    if fn is None or getattr(fn, "_inductor_perf_wrapped", None) is not None:
        return False
    compiled.current_callable = wrap_callable(fn, graph)
    return True
