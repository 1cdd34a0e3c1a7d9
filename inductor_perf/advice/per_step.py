"""A trace's step, the unit of every finding's saving: the recorded steps' median (``ProfilerStep#N``),
else the whole window as one step; and the step without the profiler, which the savings of host-side
kinds are stated against when the capture measured it (:func:`unprofiled`). Torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..summary.steps import duration_text, median


@dataclass(frozen=True)
class Step:
    """How to turn a window total into a saving per step."""

    count: int
    """Steps in the window (1 without recorded steps: the window is the step)."""
    us: float | None
    """The median step's duration (the window's without steps); None when it is empty."""
    basis: str
    """What a step is here, for the evidence: "median of N steps" or "the window"."""

    @classmethod
    def of(cls, summary: Any) -> "Step":
        steps = summary.steps or []
        if steps:
            n, in_steps = len(steps), sum(r.dur_us for r in steps)
            wall = summary.wall_us or 0.0
            return cls(n, median(r.dur_us for r in steps), f"median of {n} step(s)", max(in_steps, wall) / n,
                       wall if wall > in_steps else None)
        return cls(1, summary.wall_us or None, "the window (no recorded steps)")

    def per_step(self, total_us: float) -> float:
        return round(total_us / self.count, 3)

    mean_us: float | None = None
    """The mean step, for a saving above the median step: the steps' time over their number, or the
    window's where work ran past the steps (its totals count that work too)."""
    past_us: float | None = None
    """The window's duration where it is longer than the steps' time in all (work that ran past the
    recorded steps: kernels still queued, collectives on other threads); None otherwise."""

    def pct(self, saving_us: float | None) -> tuple[float | None, str | None]:
        """(``saving_us`` as a % of the median step, or why it is of the mean step instead: a saving is a
        mean over the steps, and when the steps vary it can exceed the median step; None: no step)."""
        if saving_us is None or not self.us:
            return None, None
        if saving_us > self.us and self.mean_us and self.mean_us > self.us:
            pct = round(100.0 * saving_us / self.mean_us, 2)
            if self.past_us:
                return pct, (f"% of the window's time per step ({us(self.mean_us)}): the window ({us(self.past_us)}) "
                             f"runs past its {self.count} recorded step(s), its totals count that work too, and "
                             f"this saving exceeds the median step ({us(self.us)})")
            return pct, (f"% of the mean step ({us(self.mean_us)}): the steps vary, and this saving, a mean over "
                         f"them, exceeds the median step ({us(self.us)})")
        return round(100.0 * saving_us / self.us, 2), None


us = duration_text
"""A duration for a finding's title or evidence."""


UNPROFILED_KINDS = frozenset({"input_wait", "host_bound", "sync", "optimizer"})
"""The kinds whose saving is host time under the profiler (the host's ops, or the device's idle while the
host runs them), stated as its share of the un-profiled step (:func:`unprofiled`). Not the kinds whose
saving is kernel time (``headroom``, ``precision``, ``exposed_comm``, ``memcpy``: a kernel runs as fast
with the profiler on), nor ``graph_break`` (its model takes the profiler's cost of the ranges in the
gaps off itself) or ``recompile`` (compile seconds)."""


def unprofiled(summary: Any, record: Mapping[str, Any] | None) -> tuple[float, str] | None:
    """(scale, note) that turns a saving measured under the profiler into one of the run without it,
    when the trace records the un-profiled step (``unprofiled_step_us``: the env-var capture times the
    steps between the compile and the profiler's start) and the profiled median step is longer: the
    profiler slows each op it records (with ``record_shapes``, 2-4x for small eager ops), and a saving is
    taken to be the same share of either step. None when there is nothing to scale."""
    got = record.get("unprofiled_step_us") if isinstance(record, Mapping) else None
    step = Step.of(summary)
    if not isinstance(got, (int, float)) or got <= 0 or not step.us or got >= step.us:
        return None
    n = record.get("unprofiled_steps") if isinstance(record, Mapping) else None
    which = f"{n} step(s) before the profiler started" if isinstance(n, int) else "steps before the profiler started"
    return got / step.us, (f" Times above are under the profiler, whose median step took {us(step.us)}; without "
                           f"it the step took {us(got)} (median of {which}): the saving is its share of that step.")
