"""The end of the streaming summary (:mod:`inductor_perf.summary.stream.engine`): place the costs, give each
kernel the args ``augment`` would write, sum it, drop what no later table reads, and assemble the
:class:`~inductor_perf.summary.rows.Summary` as :func:`inductor_perf.summary.core.summarize` does.

Each kernel's augmented args exist only while it is summed: afterwards a kernel keeps its source line
and module (the gap table and the communication view read them) and, for a collective, all its args
(the collective tables read them).
"""

from __future__ import annotations

from array import array
from itertools import repeat
from operator import attrgetter
from typing import Any, Callable

from ...augment.args import roof_figures
from ...augment.in_memory import recorded_costs_note
from ...devices.props import recorded_block
from ...model import events as evs
from ...model.kernel_kinds import KIND_COLLECTIVE
from ...roofline.point import INLINE_RANGE, binding_roof, inline_sums, inline_takes
from ..core import static_sums
from ..coverage import Coverage
from ..idle import BusyWindow, IdleTables, idle_tables, window_of, with_next_sources
from ..idle_split import stream_idle
from ..kernels import DEF_GPU, TraceKernels, dtype_weight
from ..graph_gaps import graph_gaps_of_columns
from ..op_shapes import OpShapeSums, fill_launch_dtypes, launch_dtypes_note, streamed_shape_keys
from ..signals import pageable_copies
from ..steps import profiler_steps

_dur = attrgetter("dur")
_NO_ARGS: dict[str, Any] = {}
"""The args of a kernel left with none (shared: nothing mutates a kernel's args; it replaces them)."""

_NO_COSTS = ("this trace carries no costs and records no shapes to compute them from: "
             "profile with record_shapes=True")


def pass_costs(seen: Any, join: Any, header: dict) -> tuple[dict, dict, str | None, bool]:
    """(costs, labels, costs note, whether to apply them): as
    :func:`inductor_perf.augment.in_memory.with_costs` decides for a loaded trace."""
    if seen.costed:
        return {}, {}, recorded_costs_note(header), False
    costs, _ = join.finish(seen.total, header.get("distributedInfo"))
    labels = join.labels
    if not costs and not labels:
        return {}, {}, _NO_COSTS, False
    return costs, labels, (f"costs computed from recorded shapes ({len(costs):,} events costed, as "
                           "`inductor-perf augment` would)"), True


def _static(cost: Any, device: Any, peak_cache: dict, bandwidth: float | None) -> tuple:
    """What :func:`~inductor_perf.augment.args.augment_event` computes from a (non-collective) cost
    alone, for a device event: (head args, tail args, FLOPs, bytes, peak TFLOP/s, roof GB/s). Kernels
    share costs (one per op signature), so each cost's part is computed once."""
    from ...augment.args import roof_bandwidth, static_args
    from ...devices.peaks import dtype_peak

    peak = bw = None
    if device is not None:
        key = (cost.dtype, cost.matmul_flops > 0)
        if key not in peak_cache:
            peak_cache[key] = dtype_peak(device, cost.dtype, cost.matmul_flops > 0)
        peak = peak_cache[key]
        bw = bandwidth if cost.memory_roof is None or cost.memory_roof == "hbm" else roof_bandwidth(
            device, cost.memory_roof)
    head, tail = static_args(cost)
    return head, tail, int(cost.flops), int(cost.bytes_read) + int(cost.bytes_written), peak, bw


_DYNAMIC = frozenset({evs.ACHIEVED_TFLOPS, evs.ACHIEVED_GBPS, evs.ACHIEVED_FLOPS_PCT, evs.ACHIEVED_BANDWIDTH_PCT,
                      evs.ROOFLINE_BOUND})
"""The args :func:`~inductor_perf.augment.args.args_for` writes that depend on the kernel's duration."""


def _kept(args: dict) -> dict:
    """The args a summed non-collective kernel keeps: its source line and module (the gap table and
    the communication view read them)."""
    src, mod = args.get(evs.SOURCE), args.get(evs.MODULE_PATH)
    return ({evs.SOURCE: src, evs.MODULE_PATH: mod} if src is not None and mod is not None else
            {evs.SOURCE: src} if src is not None else {evs.MODULE_PATH: mod} if mod is not None else _NO_ARGS)


class _Sums:
    """Sums the kernels with a (non-collective) cost and no args of its own without building their args.

    Of the args :func:`~inductor_perf.augment.args.args_for` and the label would give a kernel, all that
    the totals (:meth:`~inductor_perf.summary.core._Totals.add_group`), the coverage and the headline dtype
    read is the same for every kernel of one (cost, label, name, category): a *digest*, made once.
    Only the achieved % and the roofline bound depend on the kernel's duration. They are computed from
    it as ``args_for`` computes them: by the inline form of :func:`roofline.point.classify`
    (:mod:`inductor_perf.roofline.point`, augment's too) where its ranges hold, else by
    :func:`~inductor_perf.augment.args.roof_figures`. :meth:`add` only files a kernel under its digest;
    :meth:`fold` sums each digest's kernels among themselves (:func:`_achieved_sums`: the same
    expressions, over a digest's durations at once) and adds the digests to the totals: the sums of
    summing the args one kernel at a time, within float rounding (the additions come in another order)."""

    def __init__(self, totals: Any, cov: Coverage, weights: dict[str, list[float]],
                 static_of: Callable[[Any], tuple], shapes: OpShapeSums | None = None) -> None:
        self.totals, self.cov, self.weights, self.static_of, self.shapes = totals, cov, weights, static_of, shapes
        self.digests: dict[tuple, tuple | None] = {}
        """(id(cost), label items, name, category) -> digest; None: summed from its args instead.
        The costs are alive for as long as this is (their ids are not reused)."""

    def add(self, k: Any, cost: Any, lab: dict | None) -> bool:
        """File ``k`` under its digest; False when its kind of kernel needs its args."""
        try:
            key = (id(cost), tuple(lab.items()) if lab else None, k.name, k.cat)
            d = self.digests.get(key, False)
        except TypeError:  # a label value that cannot be hashed
            return False
        if d is False:
            d = self.digests[key] = self._digest(k, lab, self.static_of(cost))
        if d is None:
            return False
        d[-1].append(k)
        return True

    def _digest(self, k: Any, lab: dict | None, got: tuple) -> tuple | None:
        """What :meth:`fold` needs of the kernels of this (cost, label, name, category), and the list
        they are filed in; ``got``: :func:`_static` of the cost. None: the kernel is to be summed from
        its args."""
        head, tail, flops, nbytes, peak, bw = got
        if lab and not _DYNAMIC.isdisjoint(lab):
            return None
        args = {**head, **tail, **lab} if lab else {**head, **tail}
        kind = self.totals.kind_of(k.name, k.cat, args)
        if kind == KIND_COLLECTIVE:
            return None  # a collective keeps all its args (the collective tables read them)
        inline = inline_takes(flops, nbytes, peak, bw)
        roof = binding_roof(flops, nbytes, peak, bw) if inline else None
        st = static_sums(args)
        # made now, as the first kernel of this digest is filed: the tables' rows and the dtypes'
        # running sums are made in the kernels' order
        accs = self.totals.accs(k.name, kind, st[6], st[7])
        dw = dtype_weight(args)
        weight = None if dw is None else (self.weights.setdefault(dw[0], [0.0, 0.0]), dw[1], dw[2])
        folded = (k.name, st, accs, weight, Coverage.digest(args))
        return kind, _kept(args), (flops, nbytes, peak, bw, roof, inline), folded, []

    def fold(self) -> None:
        """Sum each digest's kernels, give them their kept args and kind, and add the digest to the
        totals, the coverage and the dtype weights, in the order the digests were made; then forget
        them."""
        kinds = self.totals.kinds
        for d in self.digests.values():
            if d is None or not d[-1]:
                continue
            kind, kept, roofs, (name, st, accs, weight, cov), members = d
            for k in members:
                k.args = kept
            kinds.update(zip(map(id, members), repeat(kind)))
            n = len(members)
            time, fp, fp_time, bp, bp_time, bounds = _achieved_sums([k.dur for k in members], *roofs)
            # a kernel's duration is positive: a sum of durations is 0 only when no kernel added to it
            self.totals.add_group(kind, st, accs, n, time, fp if fp_time else None, bp if bp_time else None,
                                  bounds, members, fp_time, bp_time)
            if weight is not None:  # add_weight(), n times: its dtype's running sums, these kernels' FLOPs
                acc, mm, fl = weight
                acc[0] += mm * n
                acc[1] += fl * n
            self.cov.add_digest(name, time, cov, n)
            if self.shapes is not None:
                self.shapes.add_many(members, st, kind)
        self.digests.clear()


def _achieved_sums(durs: list[float], flops: int, nbytes: int, peak: float | None, bw: float | None,
                   roof: str | None, inline: bool) -> tuple[float, float, float, float, float, dict[str, float]]:
    """Of kernels of one cost lasting ``durs`` µs: (total duration, sum of achieved % of the peak x
    duration and the duration of those that have one, the same for % of the bandwidth, duration by
    roofline bound in the order the bounds first come): by :func:`~inductor_perf.roofline.point.inline_sums`
    (the same floats as summing each kernel's args) when every duration is within its range, else
    kernel by kernel as :func:`~inductor_perf.augment.args.roof_figures` (rare: no device peaks, or a
    duration under a picosecond)."""
    lo, hi = INLINE_RANGE
    if not (inline and lo <= min(durs) and max(durs) <= hi):
        return _achieved_sums_each(durs, flops, nbytes, peak, bw)
    time, fp, bp, bounds = inline_sums(durs, flops, nbytes, peak, bw, roof)  # type: ignore[arg-type]
    return time, fp, time, bp, time, bounds


def _achieved_sums_each(durs: list[float], flops: int, nbytes: int, peak: float | None,
                        bw: float | None) -> tuple[float, float, float, float, float, dict[str, float]]:
    """:func:`_achieved_sums` kernel by kernel, by :func:`~inductor_perf.augment.args.roof_figures`."""
    time = fp = fp_time = bp = bp_time = 0.0
    bounds: dict[str, float] = {}
    for dur in durs:
        fpct, bpct, bound = roof_figures(flops, nbytes, dur, peak, bw)
        time += dur
        if fpct is not None:
            fp += fpct * dur
            fp_time += dur
        if bpct is not None:
            bp += bpct * dur
            bp_time += dur
        bounds[bound] = bounds.get(bound, 0.0) + dur
    return time, fp, fp_time, bp, bp_time, bounds


def _launchers(seen: Any) -> dict[int, Any]:
    """Each kernel's launching thread, by ``id`` of the kernel: the thread of the runtime call with
    its correlation id (None when there is none)."""
    from ..kernels import _hashable

    by_corr = seen.by_corr
    none = (None, None)
    return {id(k): by_corr.get(corr if type(corr) is int else _hashable(corr), none)[0]
            for k, corr in zip(seen.kernels, seen.kernel_corr)}


class _Launches:
    """Each kernel's launch, by the kernel's position in ``seen.kernels``, as columns: its launching
    thread (a number into :attr:`threads`; -1: no runtime call has its correlation id), its launch
    call's start and event index (-1: none). What :func:`_launches` keeps of the pass's runtime calls,
    in 20 bytes a kernel; the dicts by ``id`` of the kernel that the tables read are made from it when
    they come (:meth:`launcher`, :meth:`times`)."""

    def __init__(self, threads: list[Any], thread: array, ts: array, call: array) -> None:
        self.threads, self.thread, self.ts, self.call = threads, thread, ts, call

    def launcher(self, kernels: list[Any]) -> dict[int, Any]:
        """Each kernel's launching thread by ``id`` (None: unknown): :func:`_launchers`."""
        threads = self.threads
        return {id(k): threads[t] if t >= 0 else None for k, t in zip(kernels, self.thread)}

    def of(self, kernels: list[Any], wanted: set[int]) -> dict[int, tuple[Any, float]]:
        """(launching thread, launch call's start) by ``id``, of the kernels whose ids are in ``wanted``
        and whose launch is known: :func:`~inductor_perf.summary.signals.copy_launches`."""
        threads = self.threads
        return {id(k): (threads[t], ts) for k, t, ts, c in zip(kernels, self.thread, self.ts, self.call)
                if t >= 0 and c >= 0 and id(k) in wanted}

    def times(self, kernels: list[Any]) -> dict[int, float]:
        """Each kernel's launch call's start by ``id``, for those with one: what
        :func:`~inductor_perf.summary.idle_split.launch_times` gives the in-memory engine."""
        return {id(k): t for k, t, c in zip(kernels, self.ts, self.call) if c >= 0}


def _launches(seen: Any) -> _Launches:
    """Each kernel's launch (:class:`_Launches`), read from the pass's runtime calls by the kernels'
    correlation ids before the costs are placed; keeps each kernel's launch call's event index in
    ``seen.kernel_call``, which the op x shape table reads
    (:func:`~inductor_perf.summary.op_shapes.streamed_shape_keys`), and lets the runtime calls and the
    correlation ids go (``seen.by_corr``, ``seen.kernel_corr``: a dict entry, a tuple, a float and an
    int a runtime call, an int a kernel), which nothing reads after. Their memory is then taken again
    by the placing of the costs, which is the summary's peak."""
    from ..kernels import _hashable

    by_corr = seen.by_corr
    number: dict[Any, int] = {}
    threads: list[Any] = []
    thread, ts, call = array("i"), array("d"), array("q")
    for corr in seen.kernel_corr:
        got = by_corr.get(corr if type(corr) is int else _hashable(corr)) if corr is not None else None
        if got is None:
            thread.append(-1)
            ts.append(0.0)
            call.append(-1)
            continue
        key = got[0]
        t = number.get(key)
        if t is None:
            t = number[key] = len(threads)
            threads.append(key)
        thread.append(t)
        ts.append(got[1])
        call.append(got[2])
    seen.kernel_call = call
    seen.by_corr = seen.kernel_corr = None
    return _Launches(threads, thread, ts, call)


def _idle_part(seen: Any, roots: Any, top: int, launches: _Launches) -> tuple:
    """In the helper (:func:`~inductor_perf.summary.stream.fork.fork_helper`): the idle tables
    (:func:`~inductor_perf.summary.idle.idle_tables`) of the merged pass, before the kernels have their
    costs; the kernel after each gap row by its position in ``seen.kernels``, for its source line
    (:func:`~inductor_perf.summary.idle.with_next_sources`); and the busy window's (busy time, spans
    as one flat array of starts and ends), which the parent then need not compute. Everything it runs
    is imported at this module's top, before the fork (the rules of
    :class:`~inductor_perf.augment.stream.worker.Worker`)."""
    window = window_of(seen.w0, seen.w1, seen.kernels, profiler_steps(seen.steps))
    tk = TraceKernels([], seen.steps, roots, seen.kernels, DEF_GPU)  # is_kernel: idle attribution never reads it
    after: list[Any] = []
    rows, count, idle_rows = idle_tables(tk, window, launches.launcher(seen.kernels), top, after=after)
    want = {id(k) for k in after if k is not None}
    at = {id(k): j for j, k in enumerate(seen.kernels) if id(k) in want}
    spans = array("d", [x for s, e, _, _ in window.merged for x in (s, e)])
    return (rows, count, idle_rows, [at[id(k)] if k is not None else None for k in after],
            (window.busy, spans, window.start, window.end, window.basis))


def _helped_window(busy: float, spans: Any, start: float, end: float, basis: str) -> BusyWindow:
    """The busy window the helper computed (:func:`_idle_part`): its spans without their kernels,
    which only the idle tables read (the helper's)."""
    it = iter(spans)
    return BusyWindow(start, end, [(s, e, None, None) for s, e in zip(it, it)], busy, basis)


def finish(seen: Any, held: list, header: dict, *, device: Any, top: int,
           label_of: Callable[[dict], str | None], stage: Callable[[str], None] | None,
           roots: Any, light: bool = False, size: int = 0) -> tuple[Any, Any]:
    """(summary, device used) of a streamed trace; ``held``: ``[the cost join]``, emptied once the
    costs are placed (its index is the largest thing the pass kept); ``label_of(header)`` gives the
    label. ``light``: the light summary (:mod:`inductor_perf.summary.light`): a kernel gets only the
    args its kind reads, and only the cross-rank view's fields are computed. ``size``: the trace's
    bytes of text; for a large one (:func:`~inductor_perf.summary.stream.fork.fork_helper`) the idle tables are
    computed by a forked helper while this process places the costs and sums the kernels."""
    from ...augment.args import device_from_trace
    from .fork import fork_helper

    note = None
    if device is None:
        device, note = device_from_trace(header)
    launches = helper = None
    if not light:
        launches = _launches(seen)  # before the costs are placed: the runtime calls are let go then
        helper = fork_helper(size, _idle_part, seen, roots, top, launches)
    try:
        return _finish(seen, held, header, device, note, top, label_of, stage, roots, light, helper, launches)
    finally:
        if helper is not None:
            helper.close()
        roots.release()  # the host forests the tables walked


def _sum_kernels(seen: Any, costs: dict | None, labels: dict, device: Any, totals: Any, cov: Coverage | None,
                 weights: dict[str, list[float]], shapes: OpShapeSums | None = None) -> None:
    """Give each kernel of the pass the args ``augment`` would write (``costs`` None: it keeps the
    trace's own), add it to ``totals``, ``cov`` and the dtype ``weights`` (``cov`` None: the light
    summary, whose kernels get only their costs' own args), and to the op x shape table's ``shapes``,
    and leave it its kept args."""
    from ...augment.args import args_for, augment_event, device_bandwidth
    from ...model.event_cost import AugmentStats
    from ..kernels import add_dtype_weight

    light, apply = cov is None, costs is not None
    peak_cache: dict[Any, Any] = {}
    static: dict[int, tuple] = {}
    bandwidth = device_bandwidth(device)
    astats = AugmentStats()

    def static_of(cost: Any) -> tuple:
        got = static.get(id(cost))
        if got is None:
            got = static[id(cost)] = _static(cost, device, peak_cache, bandwidth)
        return got

    sums = _Sums(totals, cov, weights, static_of, shapes) if cov is not None else None
    for k, i in zip(seen.kernels, seen.kernel_index):
        if apply:
            cost, lab = costs.get(i), labels.get(i)  # type: ignore[union-attr]
            if cost is not None and cost.comm is None:
                if sums is not None and not k.args and sums.add(k, cost, lab):
                    continue
                got = static_of(cost)
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
        if shapes is not None:
            shapes.add(k, static_sums(args), totals.kinds[id(k)])
        if cov is not None:
            add_dtype_weight(weights, args)
            cov.add(k.name, k.dur, args)
        if totals.kinds[id(k)] != KIND_COLLECTIVE:
            k.args = _kept(args)
    if sums is not None:
        sums.fold()
    if shapes is not None:
        shapes.done()


def _finish(seen: Any, held: list, header: dict, device: Any, note: str | None, top: int,
            label_of: Callable[[dict], str | None], stage: Callable[[str], None] | None,
            roots: Any, light: bool, helper: Any, launches: _Launches | None) -> tuple[Any, Any]:
    """:func:`finish` once the helper (or None) is started and the kernels' ``launches`` read (None:
    the light summary, which reads the runtime calls themselves)."""
    from ..core import Counts, SummaryParts, _Totals, assemble, distributed_info, top_unions
    from ..kernels import dtype_of_weights

    if stage is not None:
        stage("summarizing: placing costs")
    costs, labels, costs_note, apply = pass_costs(seen, held.pop(), header)
    shapes = None if light else OpShapeSums(streamed_shape_keys(seen, labels if apply else None))
    # the trace's own args (costed before): a kernel without kernel_dtype gets its launching op's
    filled = 0 if shapes is None or apply else fill_launch_dtypes(seen.kernels, shapes.keys)
    if light:
        from ..light import LightTotals, assemble_light

        totals, cov = LightTotals(), None
    else:
        totals, cov = _Totals(), Coverage()
    weights: dict[str, list[float]] = {}
    _sum_kernels(seen, costs if apply else None, labels, device, totals, cov, weights, shapes)
    del costs, labels
    tk = trace_kernels(seen, roots)
    counts = Counts(seen.total, seen.used, dict(seen.skipped))
    if light:  # never a helper
        window = window_of(seen.w0, seen.w1, seen.kernels, profiler_steps(seen.steps))
        return assemble_light(tk, counts, window, _launchers(seen), totals, distributed_info(header),
                              top=top, label=label_of(header)), device
    kernels = seen.kernels
    # each stream's idle split here, not in assemble(): its launch times (a dict entry a kernel) go at once
    by_stream = stream_idle(kernels, launches.times(kernels), tk.definition)[:top]  # type: ignore[union-attr]
    # the rows' busy time (the numerators of their shares of busy time) before waiting for the helper,
    # whose busy window gives the denominator
    unions = top_unions(totals, top) if helper is not None else None
    # the idle tables are the launchers' and the window's kernels' only reader: with a helper, its own
    idle = helper.result() if helper is not None else None
    if idle is not None:
        rows, count, idle_rows, after, helped = idle
        window = _helped_window(*helped)
        idle = IdleTables(with_next_sources(rows, [kernels[j] if j is not None else None for j in after]), count,
                          idle_rows)
    else:  # no helper, or it failed: the idle tables here, as assemble() would make them, so that the
        # launchers (a dict entry a kernel) are let go before the tables that follow
        window = window_of(seen.w0, seen.w1, seen.kernels, profiler_steps(seen.steps))
        idle = idle_tables(tk, window, launches.launcher(kernels), top)  # type: ignore[union-attr]
    copies = pageable_copies(kernels)
    copy_calls = launches.of(kernels, {id(k) for k in copies}) if copies else {}  # type: ignore[union-attr]
    summary = assemble(SummaryParts(
        kernels=tk, counts=counts, window=window, launcher=None, graph_launches=seen.graph_launches,
        distributed=distributed_info(header), totals=totals, coverage=cov.result(sum(map(_dur, seen.kernels)), top),
        dtype=dtype_of_weights(weights), device=device, top=top, label=label_of(header), device_note=note,
        costs_note=costs_note, idle=idle, unions=unions, idle_by_stream=by_stream, record=recorded_block(header),
        graph_gaps=graph_gaps_of_columns(profiler_steps(seen.steps), seen.threads.names, seen.threads.cols),
        op_shapes=shapes, dtypes_note=launch_dtypes_note(filled), copy_calls=copy_calls))
    return summary, device


def trace_kernels(seen: Any, roots: Any) -> Any:
    """The :class:`~inductor_perf.summary.kernels.TraceKernels` of a streamed GPU trace: ``events``
    left empty (counted in ``seen``), ``host_events`` only the ``ProfilerStep#N`` ranges, in file
    order (all the per-step view reads)."""
    for k in seen.kernels:
        k.is_kernel = True
    return TraceKernels([], seen.steps, roots, seen.kernels, DEF_GPU)
