"""Eager profiling with nn.Module attribution: cheap profiler ranges around every module call.

While :func:`module_ranges` is active, every ``forward`` of every submodule of a model runs inside a
profiler range named ``## inductor_perf module=<fqn> ##`` (``""`` is the root module). The ranges
use ``torch._C._profiler._RecordFunctionFast`` (~0.25 us each) rather than
``torch.profiler.record_function`` (~6 us each, which would distort eager timings), and they are
opened only while a profiler is running. The hooks are removed when the block ends.

:func:`step_range` and :func:`phase_range` mark the steps and phases (model forward, loss, backward)
of the loops that :func:`inductor_perf.compare` runs, so eager and compiled traces are cut the same
way. The names are parsed back by :mod:`inductor_perf.comparison`.

Example::

    >>> with module_ranges(model), torch.profiler.profile() as prof:  # doctest: +SKIP
    ...     model(x).sum().backward()
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # pragma: no cover
    import torch

# torch is imported where a range is opened, not here: the range names' parsers serve the offline
# diff (inductor_perf.comparison.units), which reads JSON and never needs torch (~1.3 s to import).

MODULE_PREFIX = "## inductor_perf module="
STEP_PREFIX = "## inductor_perf step="
PHASE_PREFIX = "## inductor_perf phase="
PHASES = ("forward", "loss", "backward")

_MODULE_RE = re.compile(r"^## inductor_perf module=(.*) ##$")
_STEP_RE = re.compile(r"^## inductor_perf step=(\d+) ##$")
_PHASE_RE = re.compile(r"^## inductor_perf phase=(forward|loss|backward) ##$")


def module_range_name(fqn: str) -> str:
    """The profiler range name for calls of the module at ``fqn``.

    >>> module_range_name("encoder.layers.0.attn")
    '## inductor_perf module=encoder.layers.0.attn ##'
    """
    return f"{MODULE_PREFIX}{fqn} ##"


def parse_module_range(name: str) -> str | None:
    """The module FQN of a module range name, or None for any other name.

    >>> parse_module_range('## inductor_perf module= ##')
    ''
    """
    if not name.startswith(MODULE_PREFIX):
        return None
    m = _MODULE_RE.match(name)
    return m.group(1) if m else None


def parse_step_range(name: str) -> int | None:
    """The step index of a ``## inductor_perf step=<k> ##`` range name, or None (reserved: compare
    writes ``ProfilerStep#<k>`` instead)."""
    if not name.startswith(STEP_PREFIX):
        return None
    m = _STEP_RE.match(name)
    return int(m.group(1)) if m else None


def parse_phase_range(name: str) -> str | None:
    """``forward`` / ``loss`` / ``backward`` for a phase range name, or None."""
    if not name.startswith(PHASE_PREFIX):
        return None
    m = _PHASE_RE.match(name)
    return m.group(1) if m else None


@contextlib.contextmanager
def _fast_range(name: str) -> Iterator[None]:
    import torch

    if not torch.autograd.profiler._is_profiler_enabled:
        yield
        return
    with torch._C._profiler._RecordFunctionFast(name):
        yield


def step_range(index: int) -> contextlib.AbstractContextManager[None]:
    """A profiler range around one step, named ``ProfilerStep#<index>`` as torch.profiler's own step
    marks are: HTA and TensorBoard read those as iterations. (A profiler without a ``schedule``
    writes no step marks of its own.)"""
    return _fast_range(f"ProfilerStep#{index}")


def phase_range(phase: str) -> contextlib.AbstractContextManager[None]:
    """A profiler range around one phase of a step: ``forward``, ``loss`` or ``backward``."""
    assert phase in PHASES, phase
    return _fast_range(f"{PHASE_PREFIX}{phase} ##")


@contextlib.contextmanager
def module_ranges(model: torch.nn.Module) -> Iterator[int]:
    """Open a profiler range around every module call of ``model`` for the block; yields the number
    of modules hooked. The hooks are removed on exit, also when the block raises."""
    import torch

    record = torch._C._profiler._RecordFunctionFast
    profiler = torch.autograd.profiler
    # One stack for all modules: calls nest strictly, so the post hook closes the range its own pre
    # hook opened (a module called re-entrantly pushes twice and pops twice).
    open_ranges: list[Any] = []
    handles: list[Any] = []

    def make_pre(name: str) -> Any:
        def pre(_mod: Any, _args: Any) -> None:
            if not profiler._is_profiler_enabled:
                open_ranges.append(None)
                return
            r = record(name)
            r.__enter__()
            open_ranges.append(r)
        return pre

    def post(_mod: Any, _args: Any, _out: Any) -> None:
        if not open_ranges:
            return  # hooks installed mid-call: nothing of ours is open
        r = open_ranges.pop()
        if r is not None:
            r.__exit__(None, None, None)

    try:
        for fqn, sub in model.named_modules():
            handles.append(sub.register_forward_pre_hook(make_pre(module_range_name(fqn))))
            # always_call: the range closes even when forward raises.
            handles.append(sub.register_forward_hook(post, always_call=True))
        yield len(handles) // 2
    finally:
        for h in handles:
            h.remove()
        while open_ranges:  # only after an exception escaped a forward
            r = open_ranges.pop()
            if r is not None:
                r.__exit__(None, None, None)
