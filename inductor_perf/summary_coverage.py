"""What the summary could not cost, and why: the share of kernel time that carries a cost, and the
uncosted ops / kernels that take the most time, each with the reason augmentation recorded
(``not_costed``) and what a user can change.

A kernel "carries a cost" when augmentation gave it FLOPs or bytes (``kernel_flop``,
``kernel_num_gb``, ``kernel_bytes_*``) or, for a collective, a bus bandwidth or message size
(``busbw_gbps``, ``comm_bytes``). Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import events as evs
from .summary_kernels import _Ev
from .summary_rows import _pct, _r

REASON_HINTS = {
    "no_shapes": ("the launching op's record does not say enough: no input shapes (profile with "
                  "record_shapes=True), or an older profiler that wrote a tensor list as [] or left out "
                  "an argument that changes the cost (a reduction's dims)"),
    "unknown_op": "no cost rule for this op (nor a torch shape rule)",
    "bad_shapes": "the op's shape rule refused the recorded inputs",
    "unknown_dtype": "an input dtype that cannot be sized",
    "no_launch_op": "no CPU op launched it (CUDA-graph replay, or the correlation was lost): "
                    "profile without CUDA graphs to cost it",
    "not_augmented": "the trace carries no costs: run `inductor-perf augment` (summary does this "
                     "itself for traces with recorded shapes)",
    "no_reason": "augment recorded no reason (a trace augmented before launch ops were recorded: "
                 "augment it again)",
    "unknown": "no reason recorded",
}
"""What each reason means to the user, and what they can change."""

_COST_KEYS = (evs.KERNEL_FLOP, evs.KERNEL_NUM_GB, evs.KERNEL_BYTES_READ, evs.KERNEL_BYTES_WRITTEN,
              evs.BUSBW_GBPS, evs.COMM_BYTES)


@dataclass
class UncostedRow:
    """Uncosted kernel time of one launching op (or, without one, one kernel name) for one reason."""

    op: str | None
    """The launching op (``launch_op``), when the trace names one."""
    kernel: str
    """The kernel name (the longest-running one of the op's, for an op row)."""
    reason: str
    """A ``not_costed`` value (:data:`inductor_perf.events.NOT_COSTED_REASONS`), ``no_launch_op`` for
    a kernel without ``launch_op`` in a trace whose others have one, ``not_augmented`` (no event of
    the trace carries a cost), ``no_reason`` (an augmented trace that records no reasons at all) or
    ``unknown``."""
    hint: str
    count: int
    total_us: float
    share_of_kernel_time_pct: float | None


def has_cost(args: dict[str, Any]) -> bool:
    """Whether a kernel's args carry a cost (see the module docstring)."""
    for key in _COST_KEYS:
        v = evs.number(args.get(key)) if key in args else None
        if v is not None and v > 0:
            return True
    return False


def _reason(args: dict[str, Any], augmented: bool, joined: bool) -> str:
    why = args.get(evs.NOT_COSTED)
    if isinstance(why, str) and why:
        return why
    if not augmented:
        return "not_augmented"
    if not joined:
        return "no_reason"
    if evs.LAUNCH_OP not in args:
        return "no_launch_op"
    return "unknown"


def coverage(kernels: list[_Ev], kernel_time: float, top: int) -> tuple[float | None, list[UncostedRow]]:
    """(% of kernel time that carries a cost, the ``top`` uncosted rows by time)."""
    augmented = any(evs.COST_SOURCE in k.args or evs.NOT_COSTED in k.args or evs.LAUNCH_OP in k.args
                    or has_cost(k.args) for k in kernels)
    joined = any(evs.LAUNCH_OP in k.args or evs.NOT_COSTED in k.args for k in kernels)
    costed = 0.0
    groups: dict[tuple[str | None, str, str], list[Any]] = {}
    for k in kernels:
        if has_cost(k.args):
            costed += k.dur
            continue
        op = k.args.get(evs.LAUNCH_OP)
        op = op if isinstance(op, str) and op else None
        reason = _reason(k.args, augmented, joined)
        key = (op, op or k.name, reason)
        g = groups.setdefault(key, [0, 0.0, {}])
        g[0] += 1
        g[1] += k.dur
        g[2][k.name] = g[2].get(k.name, 0.0) + k.dur
    rows = [UncostedRow(op=op, kernel=max(names, key=names.get), reason=reason,
                        hint=REASON_HINTS.get(reason, REASON_HINTS["unknown"]), count=n, total_us=_r(t),
                        share_of_kernel_time_pct=_pct(t, kernel_time))
            for (op, _, reason), (n, t, names) in groups.items()]
    rows.sort(key=lambda r: (-r.total_us, r.kernel))
    return (_pct(costed, kernel_time) if kernels else None), rows[:top]
