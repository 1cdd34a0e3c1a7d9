"""A trace's step, the unit of every finding's saving: the recorded steps' median (``ProfilerStep#N``),
else the whole window as one step. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..summary.steps import median


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
            return cls(len(steps), median(r.dur_us for r in steps), f"median of {len(steps)} step(s)",
                       sum(r.dur_us for r in steps) / len(steps))
        return cls(1, summary.wall_us or None, "the window (no recorded steps)")

    def per_step(self, total_us: float) -> float:
        return round(total_us / self.count, 3)

    mean_us: float | None = None
    """The mean step (the window's time in steps over their number), for a saving above the median step."""

    def pct(self, saving_us: float | None) -> tuple[float | None, str | None]:
        """(``saving_us`` as a % of the median step, or why it is of the mean step instead: a saving is a
        mean over the steps, and when the steps vary it can exceed the median step; None: no step)."""
        if saving_us is None or not self.us:
            return None, None
        if saving_us > self.us and self.mean_us and self.mean_us > self.us:
            return (round(100.0 * saving_us / self.mean_us, 2),
                    f"% of the mean step ({self.mean_us:.0f} µs): the steps vary, and this saving, a mean over "
                    f"them, exceeds the median step ({self.us:.0f} µs)")
        return round(100.0 * saving_us / self.us, 2), None


def us(x: float) -> str:
    """A duration for a finding's title or evidence."""
    if x >= 1e6:
        return f"{x / 1e6:.3g} s"
    if x >= 1e3:
        return f"{x / 1e3:.3g} ms"
    return f"{x:.3g} µs"
