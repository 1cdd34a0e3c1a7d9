"""The end of the streaming summary (:mod:`inductor_perf.summary_stream`): place the costs, give each
kernel the args ``augment`` would write, sum it, drop what no later table reads, and assemble the
:class:`~inductor_perf.summary_rows.Summary` as :func:`inductor_perf.summary.summarize` does.

Each kernel's augmented args exist only while it is summed: afterwards a kernel keeps its source line
and module (the gap table and the communication view read them) and, for a collective, all its args
(the collective tables read them).
"""

from __future__ import annotations

from typing import Any, Callable

from . import events as evs
from .kernel_kinds import KIND_COLLECTIVE

_NO_ARGS: dict[str, Any] = {}
"""The args of a kernel left with none (shared: nothing mutates a kernel's args; it replaces them)."""

_NO_COSTS = ("this trace carries no costs and records no shapes to compute them from: "
             "profile with record_shapes=True")


def _costs(seen: Any, join: Any, header: dict) -> tuple[dict, dict, str | None, bool]:
    """(costs, labels, costs note, whether to apply them): as
    :func:`inductor_perf.summary_raw.with_costs` decides for a loaded trace."""
    if seen.costed:
        return {}, {}, None, False
    costs, _ = join.finish(seen.total, header.get("distributedInfo"))
    labels = join.labels
    if not costs and not labels:
        return {}, {}, _NO_COSTS, False
    return costs, labels, (f"costs computed from recorded shapes ({len(costs):,} events costed, as "
                           "`inductor-perf augment` would)"), True


def _static(cost: Any, device: Any, peak_cache: dict, bandwidth: float | None) -> tuple:
    """What :func:`~inductor_perf.cost_args.augment_event` computes from a (non-collective) cost
    alone, for a device event: (head args, tail args, FLOPs, bytes, peak TFLOP/s, roof GB/s). Kernels
    share costs (one per op signature), so each cost's part is computed once."""
    from .cost_args import device_peak, roof_bandwidth, static_args

    peak = bw = None
    if device is not None:
        key = (cost.dtype, cost.matmul_flops > 0)
        if key not in peak_cache:
            peak_cache[key] = device_peak(device, cost.dtype, cost.matmul_flops > 0)
        peak = peak_cache[key]
        bw = bandwidth if cost.memory_roof is None or cost.memory_roof == "hbm" else roof_bandwidth(
            device, cost.memory_roof)
    head, tail = static_args(cost)
    return head, tail, int(cost.flops), int(cost.bytes_read) + int(cost.bytes_written), peak, bw


def finish(seen: Any, held: list, header: dict, *, device: Any, top: int,
           label_of: Callable[[dict], str | None], stage: Callable[[str], None] | None,
           roots: Any, light: bool = False) -> tuple[Any, Any]:
    """(summary, device used) of a streamed trace; ``held``: ``[the cost join]``, emptied once the
    costs are placed (its index is the largest thing the pass kept); ``label_of(header)`` gives the
    label. ``light``: the light summary (:mod:`inductor_perf.summary_light`): a kernel gets only the
    args its kind reads, and only the cross-rank view's fields are computed."""
    from .cost_args import args_for, augment_event, device_bandwidth, device_from_trace
    from .event_cost import AugmentStats
    from .summary import Counts, _Totals, assemble, distributed_info
    from .summary_coverage import Coverage
    from .summary_idle import window_of
    from .summary_kernels import _hashable, add_dtype_weight, dtype_of_weights

    note = None
    if device is None:
        device, note = device_from_trace(header)
    if stage is not None:
        stage("summarizing: placing costs")
    costs, labels, costs_note, apply = _costs(seen, held.pop(), header)
    peak_cache: dict[Any, Any] = {}
    static: dict[int, tuple] = {}
    bandwidth = device_bandwidth(device)
    astats = AugmentStats()
    if light:
        from .summary_light import LightTotals, assemble_light

        totals, cov = LightTotals(), None
    else:
        totals, cov = _Totals(), Coverage()
    weights: dict[str, list[float]] = {}
    launcher: dict[int, Any] = {}
    by_corr = seen.by_corr
    source_key, module_key = evs.SOURCE, evs.MODULE_PATH
    for k, i, corr in zip(seen.kernels, seen.kernel_index, seen.kernel_corr):
        launcher[id(k)] = by_corr.get(_hashable(corr))
        if apply:
            cost, lab = costs.get(i), labels.get(i)
            if cost is not None and cost.comm is None:
                got = static.get(id(cost))
                if got is None:
                    got = static[id(cost)] = _static(cost, device, peak_cache, bandwidth)
                head, tail, flops, nbytes, peak, bw = got
                # light: the cost's own args (those the kind reads among them), not the achieved
                # numbers against the roofs (the roofline classification is most of augmenting)
                new = {**head, **tail} if light else args_for(head, tail, flops, nbytes, k.dur, peak, bw)
                if lab:
                    new.update(lab)
                k.args = {**k.args, **new} if k.args else new
            elif cost is not None or lab:
                k.args = augment_event({"cat": k.cat, "dur": k.dur, "args": k.args}, cost, device, True,
                                       peak_cache, bandwidth, astats, lab)["args"]
        args = k.args
        totals.add(k)
        if cov is not None:
            add_dtype_weight(weights, args)
            cov.add(k.name, k.dur, args)
        if totals.kinds[id(k)] != KIND_COLLECTIVE:
            src, mod = args.get(source_key), args.get(module_key)
            k.args = ({source_key: src, module_key: mod} if src is not None and mod is not None else
                      {source_key: src} if src is not None else {module_key: mod} if mod is not None else _NO_ARGS)
    del costs, labels
    seen.by_corr = None  # each kernel's launching thread is known: the runtime calls' ids are not needed
    window = window_of(seen.w0, seen.w1, seen.kernels)  # a GPU trace: at least one event used
    tk = trace_kernels(seen, roots)
    counts = Counts(seen.total, seen.used, dict(seen.skipped))
    if light:
        return assemble_light(tk, counts, window, launcher, totals, distributed_info(header), top=top,
                              label=label_of(header)), device
    summary = assemble(tk, counts, window, launcher, seen.graph_launches,
                       totals, cov.result(sum(k.dur for k in seen.kernels), top), dtype_of_weights(weights),
                       distributed_info(header), device=device, top=top,
                       label=label_of(header), device_note=note,
                       costs_note=costs_note)
    return summary, device


def trace_kernels(seen: Any, roots: Any) -> Any:
    """The :class:`~inductor_perf.summary_kernels.TraceKernels` of a streamed GPU trace: ``events``
    left empty (counted in ``seen``), ``host_events`` only the ``ProfilerStep#N`` ranges, in file
    order (all the per-step view reads)."""
    from .summary_kernels import DEF_GPU, TraceKernels

    for k in seen.kernels:
        k.is_kernel = True
    return TraceKernels([], seen.steps, roots, seen.kernels, DEF_GPU)
