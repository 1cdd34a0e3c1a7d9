"""Runtime markers: one profiler range per compiled-graph call, naming the graph instance.

The marker lets a trace's kernel events join exactly to their compile-time tags: forward and
backward, repeated kernels, identical subgraphs, graph breaks and cache hits all get distinct
instance ids, and under dynamic shapes the marker carries the call's size-symbol values.

Cost: with no profiler running the wrapper does two attribute reads (~60 ns) per graph call; with
a profiler it uses ``_RecordFunctionFast`` (~0.25 us), not ``record_function`` (~6 us).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from ..model.tags import GraphTags

# torch is imported by wrap_callable (at compile time, where it is loaded already), not here: the
# marker parsers serve the offline joins and diff, which read JSON and never need torch.

MARKER_PREFIX = "## inductor_perf graph="
_MARKER_RE = re.compile(r"^## inductor_perf graph=(\d+) (fwd|bwd)(?: sym=([^ ]*))? ##$")


def marker_name(instance_id: int, is_backward: bool, symbols: Mapping[str, int] | None = None) -> str:
    """The profiler event name for one call of a compiled graph.

    >>> marker_name(3, False, {"s0": 8})
    '## inductor_perf graph=3 fwd sym=s0:8 ##'
    """
    name = f"{MARKER_PREFIX}{instance_id} {'bwd' if is_backward else 'fwd'}"
    if symbols:
        name += " sym=" + ",".join(f"{k}:{v}" for k, v in sorted(symbols.items()))
    return name + " ##"


def parse_marker(name: str) -> tuple[int, bool, dict[str, int]] | None:
    """(instance id, is_backward, symbol values) of a marker event name, or None.

    >>> parse_marker('## inductor_perf graph=3 bwd sym=s0:8,s1:2 ##')
    (3, True, {'s0': 8, 's1': 2})
    """
    if not name.startswith(MARKER_PREFIX):
        return None
    m = _MARKER_RE.match(name)
    if not m:
        return None
    symbols: dict[str, int] = {}
    if m.group(3):
        for item in m.group(3).split(","):
            key, _, value = item.partition(":")
            try:
                symbols[key] = int(value)
            except ValueError:
                return None
    return int(m.group(1)), m.group(2) == "bwd", symbols


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
