"""The ``inductor_perf`` torch.compile backend: Inductor, plus compile-time kernel tags.

Registered only through the ``torch_dynamo_backends`` entry point in pyproject.toml (torch then
registers it itself; registering again here would fail with "duplicate name").

The compile and its tags are :mod:`inductor_perf.tagging.compiler`'s. This entry point adds what a
compile asks of the stages outside tagging (:class:`~inductor_perf.tagging.compiler.StageHooks`):
arming the ``INDUCTOR_PERF_TRACE_DIR`` capture (capture/) and checking an ``inductor_perf.device``
row (devices/), each imported only when a compile needs it.

Tagging never breaks a compile: if it fails, the graph keeps Inductor's result, one warning is
logged for the process, and the graph is recorded as untagged (see ``inductor_perf.graph_table()``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

# Inductor's compile_fx, imported when torch looks this backend up, inside the torch.compile() call, as
# torch.compile(backend="inductor") imports it there (through torch._inductor.compiler_bisector). Left
# to the first compile, the same import ran inside Dynamo's compile of the first frame and the compile
# took 0.1 - 0.2 s longer in all (measured, cause not traced): 6 % of a warm restart of the bench's
# block (docs/benchmarks.md, "Warm compile").
import torch._inductor.compile_fx  # noqa: F401

from .tagging.compiler import StageHooks, compile_tagged


def _arm_capture() -> None:
    from .capture.auto import ensure_auto_capture

    ensure_auto_capture()


def _check_device(override: Any) -> None:
    from .devices.resolve import parse_device_override

    parse_device_override(override)


def _note_compiles() -> None:
    """Keep Dynamo's records of the compiles so far (graph breaks, recompiles) for the traces: Dynamo
    holds only its last 64 compiles (capture.compile_log; never raises)."""
    from .capture.compile_log import COMPILE_LOG

    COMPILE_LOG.note()


HOOKS = StageHooks(arm_capture=_arm_capture, check_device=_check_device)


def inductor_perf_backend(gm: Any, example_inputs: Sequence[Any], *, options: Mapping[str, Any] | None = None,
                          mode: str | None = None, **kwargs: Any) -> Any:
    """The ``backend="inductor_perf"`` compiler: Inductor's compile_fx with kernel tagging.

    >>> model = torch.compile(torch.nn.Linear(4, 4), backend="inductor_perf")  # doctest: +SKIP
    """
    compiled = compile_tagged(gm, example_inputs, options=options, mode=mode, hooks=HOOKS, **kwargs)
    # after the compile: its torch check and the compile workers' start come first (tagging.compiler)
    _note_compiles()
    return compiled
