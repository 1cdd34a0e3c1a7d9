"""The findings of one trace, ranked (docs/advisor.md): every detector run on its summary, the
measurable ones kept, largest saving per step first. The one function behind ``summary.json``'s
``findings``, the text summary's and the page's opening, and ``inductor-perf advise``. Torch-free."""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from . import compile as compile_records, device, host
from .finding import Finding, ranked
from .per_step import UNPROFILED_KINDS, unprofiled

log = logging.getLogger(__name__)

Detector = Callable[[Mapping[str, Any] | None, Any], list[Finding]]
DETECTORS: tuple[Detector, ...] = (
    host.find_input_wait,
    host.find_host_bound,
    host.find_sync,
    host.find_optimizer,
    host.find_memcpy,
    device.find_headroom,
    device.find_precision,
    device.find_exposed_comm,
    compile_records.find,
)
"""Each takes (the trace's record, :data:`inductor_perf.devices.props.RECORD_KEY`; the summary)."""


def advise(summary: Any, record: Mapping[str, Any] | None = None) -> list[Finding]:
    """The ranked findings of ``summary`` (:func:`inductor_perf.advice.finding.ranked`), the savings of
    :data:`~.per_step.UNPROFILED_KINDS` stated against the un-profiled step where the trace records one
    (:func:`~.per_step.unprofiled`; their ``saving_pct_of_step`` stays the share of the profiled step). ``record``:
    the trace's record, default the one the summary read. A detector that fails is logged and skipped:
    a finding less, never a summary less."""
    if record is None:
        sig = getattr(summary, "signals", None)
        record = sig.record if sig is not None else None
    found: list[Finding] = []
    for detect in DETECTORS:
        try:
            found += detect(record, summary)
        except Exception as e:  # one detector's bug must not cost the summary
            log.warning("inductor_perf: advisor %s failed (%s: %s)", detect.__name__, type(e).__name__, e)
    scaled = unprofiled(summary, record)
    if scaled is not None:
        scale, note = scaled
        for f in found:
            if f.kind in UNPROFILED_KINDS and f.saving_us_per_step:
                f.saving_us_per_step = round(f.saving_us_per_step * scale, 3)
                f.evidence += note
    return ranked(found)


def attach(summary: Any, record: Mapping[str, Any] | None = None) -> Any:
    """``summary`` with its :attr:`~inductor_perf.summary.rows.Summary.findings` set (:func:`advise`, JSON form)."""
    summary.findings = [f.to_dict() for f in advise(summary, record)]
    return summary
