"""What the summary could not cost, and why: the share of kernel time that carries a cost, and the
uncosted ops / kernels that take the most time, each with the reason augmentation recorded
(``not_costed``) and what a user can change; and the share of the costed time whose cost is only a
lower bound (``kernel_cost_bound: "lower"``, docs/costs.md).

A kernel "carries a cost" when augmentation gave it FLOPs or bytes (``kernel_flop``,
``kernel_num_gb``, ``kernel_bytes_*``) or, for a collective, a bus bandwidth or message size
(``busbw_gbps``, ``comm_bytes``). Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ..model import events as evs
from .kernels import ParsedEvent
from .rows import percent, rounded

REASON_HINTS = {
    "no_shapes": ("the launching op's record does not say enough: no input shapes (profile with "
                  "record_shapes=True), or an older profiler that wrote a tensor list as [] or left out "
                  "an argument that changes the cost (a reduction's dims)"),
    "unknown_op": "no cost rule for this op (nor a torch shape rule)",
    "bad_shapes": "the op's shape rule refused the recorded inputs",
    "unknown_dtype": "an input dtype that cannot be sized",
    "no_launch_op": "no CPU op launched it (CUDA-graph replay, or the correlation was lost): "
                    "profile without CUDA graphs to cost it",
    "graph_replay": "replayed by cudaGraphLaunch: no op recorded the shapes of a captured CUDA graph's "
                    "kernels (torch.compile mode=\"reduce-overhead\", CUDA graph trees); profile without CUDA "
                    "graphs to cost them, or compile with backend=\"inductor_perf\" to tag them",
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
    """A ``not_costed`` value (:data:`inductor_perf.model.events.NOT_COSTED_REASONS`), ``no_launch_op`` for
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


class CoverageFigures(NamedTuple):
    """What :meth:`Coverage.result` finds."""

    costed_pct: float | None
    """% of kernel time that carries a cost (None: no kernel carries one)."""
    uncosted: list[UncostedRow]
    """The ``top`` uncosted rows, most time first."""
    lower_bound_pct: float | None
    """% of the costed time whose cost is a lower bound."""


class Coverage:
    """:func:`coverage` one kernel at a time (:meth:`add`), for a caller that does not keep every
    kernel's args: what decides a row's reason is kept per row, the reason itself chosen at the end."""

    def __init__(self) -> None:
        self.augmented = self.joined = self.any = False
        self.costed = 0.0
        self.lower = 0.0  # costed time whose cost is a lower bound
        # (op, op or kernel name, not_costed value, has launch_op) -> [count, time, {kernel name: time}]
        self.groups: dict[tuple[str | None, str, str | None, bool], list[Any]] = {}

    def add(self, name: str, dur: float, args: dict[str, Any]) -> None:
        """Count one kernel of ``dur`` with these (augmented) args."""
        self.add_digest(name, dur, self.digest(args))

    @staticmethod
    def digest(args: dict[str, Any]) -> tuple:
        """What :meth:`add` reads of a kernel's args (kernels sharing a cost share it): (costed,
        augmented, joined, cost is a lower bound, launching op, ``not_costed``, has ``launch_op``)."""
        costed = has_cost(args)
        augmented = costed or evs.COST_SOURCE in args or evs.NOT_COSTED in args or evs.LAUNCH_OP in args
        joined = evs.LAUNCH_OP in args or evs.NOT_COSTED in args
        op = args.get(evs.LAUNCH_OP)
        why = args.get(evs.NOT_COSTED)
        return (costed, augmented, joined, args.get(evs.COST_BOUND) == evs.LOWER_BOUND,
                op if isinstance(op, str) and op else None, why if isinstance(why, str) and why else None,
                evs.LAUNCH_OP in args)

    def add_digest(self, name: str, dur: float, d: tuple, n: int = 1) -> None:
        """Count one kernel of ``dur`` whose args' :meth:`digest` is ``d`` (or ``n`` kernels of this
        name and digest, ``dur`` their total duration)."""
        costed, augmented, joined, lower, op, why, launched = d
        self.any = True
        if augmented:
            self.augmented = True
        if joined:
            self.joined = True
        if costed:
            self.costed += dur
            if lower:
                self.lower += dur
            return
        key = (op, op or name, why, launched)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = [0, 0.0, {}]
        g[0] += n
        g[1] += dur
        g[2][name] = g[2].get(name, 0.0) + dur

    def result(self, kernel_time: float, top: int) -> CoverageFigures:
        """(% of kernel time that carries a cost, the ``top`` uncosted rows by time, % of the costed
        time whose cost is a lower bound)."""
        merged: dict[tuple[str | None, str, str], list[Any]] = {}
        for (op, key, why, launched), (n, t, names) in self.groups.items():
            reason = why or _reason({evs.LAUNCH_OP: op} if launched else {}, self.augmented, self.joined)
            g = merged.setdefault((op, key, reason), [0, 0.0, {}])
            g[0] += n
            g[1] += t
            for name, dt in names.items():
                g[2][name] = g[2].get(name, 0.0) + dt
        rows = [UncostedRow(op=op, kernel=max(names, key=names.get), reason=reason,
                            hint=REASON_HINTS.get(reason, REASON_HINTS["unknown"]), count=n, total_us=rounded(t),
                            share_of_kernel_time_pct=percent(t, kernel_time))
                for (op, _, reason), (n, t, names) in merged.items()]
        rows.sort(key=lambda r: (-r.total_us, r.kernel))
        return CoverageFigures((percent(self.costed, kernel_time) if self.any else None), rows[:top],
                               percent(self.lower, self.costed) if self.costed > 0 else None)


def coverage(kernels: list[ParsedEvent], kernel_time: float, top: int) -> CoverageFigures:
    """:meth:`Coverage.result` of ``kernels``."""
    acc = Coverage()
    for k in kernels:
        acc.add(k.name, k.dur, k.args)
    return acc.result(kernel_time, top)


def flops_unknown(kernels: list[ParsedEvent], compute_time: float, uncosted: list[Any], costs_note: str | None) -> str:
    """Why a trace's FLOP total, FLOP/s and compute % of peak are unknown (no compute kernel carries
    a FLOP count): what the trace lacks and, where the coverage knows it, what the user can change."""
    if not kernels:
        return "no kernels in the trace"
    if compute_time <= 0:
        return "no compute kernel in the trace (only copies, fills and collectives)"
    if costs_note and not uncosted:
        return f"no compute kernel carries a FLOP count: {costs_note}"
    by_reason: dict[str, list[Any]] = {}
    for r in uncosted:  # the reason with the most uncosted time
        acc = by_reason.setdefault(r.reason, [0.0, r.hint])
        acc[0] += r.total_us or 0.0
    if by_reason:
        reason, (_, hint) = max(by_reason.items(), key=lambda item: item[1][0])
        return f"no compute kernel carries a FLOP count ({reason}: {hint})"
    return "no compute kernel carries a FLOP count"
