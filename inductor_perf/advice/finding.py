"""One finding: a problem seen in a trace or in the compile records, the fix, and what it would save.

The JSON form (:meth:`Finding.to_dict`) is what ``summary.json``'s ``findings`` lists and
``inductor-perf advise`` prints; its keys and the kind names in :data:`KINDS` are fixed so that tools
can read them. Torch-free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

KINDS = ("graph_break", "recompile", "input_wait", "host_bound", "sync", "optimizer", "headroom",
         "precision", "exposed_comm", "memcpy")
"""Every kind a finding can have (docs/advisor.md says what each means and how its saving is estimated)."""


@dataclass
class Finding:
    kind: str
    """One of :data:`KINDS`."""
    title: str
    """One line: what is wrong, in the user's terms."""
    source: str | None
    """``file.py:LINE`` of the user's code where one is known."""
    module: str | None
    """The ``nn.Module`` path where one is known."""
    saving_us_per_step: float | None
    """Time the fix would save per step (µs); None when the saving is one-time only."""
    saving_pct_of_step: float | None
    """The same as a share of the step (%)."""
    one_time_s: float | None
    """Time spent once (compiles), in seconds; None when there is none."""
    evidence: str
    """What was measured, and which model an estimate rests on where it needs one."""
    fix: str
    """What to change."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"finding kind {self.kind!r}: expected one of {', '.join(KINDS)}")

    @property
    def measurable(self) -> bool:
        """Whether it saves anything measurable (a finding that does not is never shown)."""
        return bool((self.saving_us_per_step or 0) > 0 or (self.one_time_s or 0) > 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """The measurable findings, largest saving per step first, then largest one-time cost."""
    keep = [f for f in findings if f.measurable]
    return sorted(keep, key=lambda f: (-(f.saving_us_per_step or 0.0), -(f.one_time_s or 0.0), f.kind))
