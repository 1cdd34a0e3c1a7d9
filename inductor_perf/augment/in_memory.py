"""Costs for a trace that ``augment`` has not costed, computed in memory by the very code ``augment``
runs, so that ``summary`` and ``diff`` of a raw trace give the numbers of augment-then-summary.

A trace counts as costed when any event carries a cost mark (:func:`inductor_perf.model.events.is_costed`:
``kernel_flop``, ``cost_source`` or ``launch_op``; augmentation writes them, and a trace of our own
compiled run carries them from its tags). Otherwise :func:`with_costs` runs :func:`inductor_perf.augment.core.costs_from_shapes` and
:func:`inductor_perf.augment.core.augment_trace` (device-side peaks only, as ``augment_file`` does). The
augmented trace shares every unchanged event with the input, so the two are never two full copies.
Pure: no file I/O.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from ..model import events as evs

log = logging.getLogger(__name__)


def recorded_costs_note(trace: Mapping[str, Any]) -> str | None:
    """How the costs of a trace our capture costed from recorded shapes were computed, as the capture
    recorded it (:data:`~inductor_perf.devices.props.RECORD_KEY`): the note :func:`with_costs` gave
    then, which the summary of the written, costed trace repeats."""
    from ..devices.props import recorded_block

    block = recorded_block(trace)
    note = block.get("costs_note") if block is not None else None
    return note if isinstance(note, str) and note else None


def with_costs(trace: dict, device: Any = None) -> tuple[dict, str | None]:
    """``trace`` itself when it is costed (or not a trace dict: the summary says what is wrong);
    else an augmented copy and a note saying how its costs were computed.

    ``device``: the peaks to measure against (None: none; the CLI passes
    :func:`inductor_perf.augment.core.device_from_trace`'s, as ``augment`` would use).
    """
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return trace, None
    if evs.is_costed(trace):
        return trace, recorded_costs_note(trace)
    from .core import augment_trace
    from ..errors import TraceFormatError
    from ..costs.from_shapes import costs_and_labels

    try:
        costs, labels, _ = costs_and_labels(trace)
        if not costs and not labels:
            return trace, ("this trace carries no costs and records no shapes to compute them from: "
                           "profile with record_shapes=True")
        new, stats = augment_trace(trace, costs, device, device_events_only=True, labels=labels)
    except TraceFormatError as e:
        log.debug("costs not computed: %s", e)
        return trace, None
    return new, (f"costs computed from recorded shapes ({stats.events_augmented:,} events costed, as "
                 "`inductor-perf augment` would)")
