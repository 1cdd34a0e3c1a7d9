"""What augmentation writes on one event: the args of an :class:`EventCost` measured against a
device's roofs (its peak for the cost's dtype, its memory bandwidth), and the device row a trace
names.

Shared by both engines of :func:`augment.core.augment_file`: :func:`augment.core.augment_trace` (the whole
trace as dicts) and :mod:`inductor_perf.augment.stream` (event bytes spliced), so that both write the
same args in the same order.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Mapping

from ..costs.comm import comm_args
from ..devices.peaks import dtype_peak
from ..model import events as evs
from ..model.event_cost import AugmentStats, EventCost

log = logging.getLogger(__name__)


def augment_event(ev: dict, cost: EventCost | None, device: Any, device_events_only: bool,
                  peak_cache: dict[tuple[Any, bool], float | None], bandwidth: float | None,
                  stats: AugmentStats, label: Mapping[str, Any] | None = None) -> dict:
    """A copy of ``ev`` whose new ``args`` dict carries ``cost``'s args, then ``label``'s
    (``launch_op``, ``not_costed``: :attr:`costs.from_shapes.CostJoin.labels`); counts it in ``stats``.
    ``cost`` None: the label alone."""
    args = dict(evs.event_args(ev))
    new_ev = dict(ev)
    new_ev["args"] = args
    if cost is None:
        if label:
            args.update(label)
        stats.events_labelled += 1
        return new_ev
    use_device = device is not None and (not device_events_only or evs.category(ev) not in evs.CPU_SCOPE_CATS)
    peak = None
    if use_device and cost.comm is None:
        key = (cost.dtype, cost.matmul_flops > 0)
        if key not in peak_cache:
            peak_cache[key] = dtype_peak(device, cost.dtype, cost.matmul_flops > 0)
        peak = peak_cache[key]
    dur = evs.number(ev.get("dur"))
    if dur is None or dur <= 0:
        stats.nonpositive_dur += 1
        dur = None
    if cost.comm is not None:
        args.update(comm_args(cost.comm, dur, roof_bandwidth(device, "interconnect") if use_device else None))
    else:
        bw = bandwidth if cost.memory_roof is None or cost.memory_roof == "hbm" else roof_bandwidth(
            device, cost.memory_roof)
        args.update(cost_args(cost, dur, peak, bw if use_device else None))
    if label:
        args.update(label)
    stats.events_augmented += 1
    if peak is not None:
        stats.peaks_known = True
    return new_ev


def _ratio(num: float, den: float) -> float | None:
    try:
        return evs.number(num / den)
    except (OverflowError, ZeroDivisionError):
        return None


def cost_args(cost: EventCost, dur_us: float | None, peak_tflops: float | None,
              bandwidth_gbs: float | None) -> dict[str, Any]:
    """The args ``cost`` adds to an event of ``dur_us`` against these roofs (None: unknown)."""
    head, tail = static_args(cost)
    return args_for(head, tail, int(cost.flops), int(cost.bytes_read) + int(cost.bytes_written), dur_us,
                    peak_tflops, bandwidth_gbs)


def static_args(cost: EventCost) -> tuple[dict[str, Any], dict[str, Any]]:
    """The args of ``cost`` that do not depend on the event: those before the achieved numbers,
    and those after ``roofline_bound`` (None values left out)."""
    nbytes = int(cost.bytes_read) + int(cost.bytes_written)
    head: dict[str, Any] = {
        evs.KERNEL_FLOP: int(cost.flops),
        evs.KERNEL_MATMUL_FLOP: int(cost.matmul_flops),
        evs.KERNEL_RECOMPUTE_FLOP: int(cost.recompute_flops) if cost.recompute_flops else None,
        evs.KERNEL_NUM_GB: _ratio(nbytes, 1e9),
    }
    if cost.cost_source != "triton":
        head[evs.KERNEL_BYTES_READ] = int(cost.bytes_read)
        head[evs.KERNEL_BYTES_WRITTEN] = int(cost.bytes_written)
    tail = {
        evs.SOURCE: cost.source,
        evs.MODULE_PATH: cost.module_path,
        evs.NODE_NAMES: ", ".join(cost.node_names) if cost.node_names else None,
        evs.STACK_TRACE: cost.stack_trace,
        evs.KERNEL_KIND: cost.kind,
        evs.GRAPH_ID: cost.graph_id,
        evs.IS_BACKWARD: cost.is_backward,
        evs.COST_SOURCE: cost.cost_source,
        evs.COST_BOUND: cost.bound,
        evs.EAGER_OPS: ", ".join(cost.eager_ops) if cost.eager_ops else None,
        evs.KERNEL_DTYPE: str(cost.dtype).removeprefix("torch.") if cost.dtype is not None else None,
        evs.MEMORY_ROOF: cost.memory_roof,
    }
    return ({k: v for k, v in head.items() if v is not None}, {k: v for k, v in tail.items() if v is not None})


def args_for(head: dict[str, Any], tail: dict[str, Any], flops: int, nbytes: int, dur_us: float | None,
             peak_tflops: float | None, bandwidth_gbs: float | None) -> dict[str, Any]:
    """``head``, the achieved numbers and roofline bound (:func:`roofline.point.classify`), then ``tail``."""
    a = dict(head)
    if dur_us is not None:
        # flop / µs / 1e6 = TFLOP/s; byte / µs / 1e3 = GB/s
        v = _ratio(flops, dur_us * 1e6)
        if v is not None:
            a[evs.ACHIEVED_TFLOPS] = v
        v = _ratio(nbytes, dur_us * 1e3)
        if v is not None:
            a[evs.ACHIEVED_GBPS] = v
    fpct, bpct, bound = roof_figures(flops, nbytes, dur_us, peak_tflops, bandwidth_gbs)
    if fpct is not None:
        a[evs.ACHIEVED_FLOPS_PCT] = fpct
    if bpct is not None:
        a[evs.ACHIEVED_BANDWIDTH_PCT] = bpct
    a[evs.ROOFLINE_BOUND] = bound
    a.update(tail)
    return a


def roof_figures(flops: int, nbytes: int, dur_us: float | None, peak_tflops: float | None,
                 bandwidth_gbs: float | None) -> tuple[float | None, float | None, str]:
    """(achieved % of the peak, % of the bandwidth, roofline bound) that :func:`args_for` writes
    (None: the arg is left out; "unknown": no bound)."""
    if (peak_tflops or bandwidth_gbs) and flops >= 0 and nbytes >= 0:
        point = _classify(flops, nbytes, dur_us or 0.0, peak_tflops, bandwidth_gbs)
        if point is not None:
            return (evs.number(point.flops_pct), evs.number(point.bandwidth_pct),
                    str(point.bound) if point.bound else "unknown")
    return None, None, "unknown"


# --- device roofs --------------------------------------------------------------------------------
def device_bandwidth(device: Any) -> float | None:
    """The device's memory bandwidth in GB/s, or None (no device, or not a positive number)."""
    if device is None:
        return None
    bw = evs.number(getattr(device, "mem_bandwidth_gbs", None))
    return bw if bw and bw > 0 else None


_ROOF_FIELDS = {"host_link": "host_link_gbs", "interconnect": "interconnect_gbs"}
"""Device-row fields (GB/s per direction, from the device table) of the roofs other than HBM."""


def roof_bandwidth(device: Any, roof: str | None) -> float | None:
    """The bandwidth in GB/s of ``device``'s ``roof`` ("hbm" or None: :func:`device_bandwidth`;
    "host_link", "interconnect": the row's ``host_link_gbs`` / ``interconnect_gbs``), or None when
    the row lacks it: a host copy is never measured against HBM."""
    if roof is None or roof == "hbm":
        return device_bandwidth(device)
    field = _ROOF_FIELDS.get(roof)
    if device is None or field is None:
        return None
    bw = evs.number(getattr(device, field, None))
    return bw if bw and bw > 0 else None


@functools.lru_cache(maxsize=None)
def roofline_classify() -> Callable[..., Any]:
    """:func:`roofline.point.classify`, imported on first use."""
    # Looked up once: an import statement per augmented event costs ~10% of augmenting.
    from ..roofline.point import classify

    return classify


def _classify(flops: int, nbytes: int, dur_us: float, peak_tflops: float | None,
              bandwidth_gbs: float | None) -> Any:
    try:
        return roofline_classify()(flops, nbytes, dur_us, peak_tflops, bandwidth_gbs)
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        log.debug("roofline.classify failed: %s", e)
        return None


def device_from_trace(trace: dict) -> tuple[Any, str | None]:
    """The device row for the trace's GPU and a note saying how it was found, or None and why.

    A trace our capture wrote carries the row it was measured against
    (:func:`devices.props.recorded_device`): that row, whatever machine reads the trace. Else the first ``deviceProperties`` entry's name is looked up (:func:`devices.table.find_row`; note
    None); a name not in the table is recognised from the entry's properties
    (:func:`devices.props.recognise`; note "recognised from properties (sm_80, 108 SMs, 40 GB) →
    NVIDIA A100 SXM4 40GB"). Torch-free: offline augmenting never imports torch.
    """
    from ..devices.props import recognise, recorded_device

    recorded = recorded_device(trace)
    if recorded is not None:
        return recorded
    props = trace.get("deviceProperties") if isinstance(trace, dict) else None
    entries = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []
    named = [d for d in entries if isinstance(d.get("name"), str) and d["name"].strip()]
    if not named:
        return None, ("no GPU in the trace's deviceProperties: achieved % left out (peaks of the machine "
                      "that recorded a CPU trace are unknown)")
    entry = named[0]
    name = entry["name"]
    from ..devices.table import find_row, warn_unknown

    spec, why = find_row(name)
    if spec is not None:
        return spec, None
    spec, note = recognise(entry)
    if spec is not None:
        return spec, note
    warn_unknown(name, f"{why}; {note}")
    return None, f"unknown device {name!r} ({note}): achieved % left out"
