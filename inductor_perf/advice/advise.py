"""The findings of one trace, ranked (docs/advisor.md): every detector run on its summary, the
measurable ones kept, largest saving per step first. The one function behind ``summary.json``'s
``findings``, the text summary's and the page's opening, and ``inductor-perf advise``. Torch-free."""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from . import compile as compile_records, device, host
from .finding import Finding, ranked

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
    """The ranked findings of ``summary`` (:func:`inductor_perf.advice.finding.ranked`). ``record``:
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
    return ranked(found)


def attach(summary: Any, record: Mapping[str, Any] | None = None) -> Any:
    """``summary`` with its :attr:`~inductor_perf.summary.rows.Summary.findings` set (:func:`advise`, JSON form)."""
    summary.findings = [f.to_dict() for f in advise(summary, record)]
    return summary
