"""The streaming summary's per-event loop (:mod:`inductor_perf.summary_stream`): each window's events
fed to the cost join (:meth:`LaunchIndex.index <inductor_perf.launch_join.LaunchIndex.index>`, then
:meth:`CostJoin.cost <inductor_perf.op_costs.CostJoin.cost>`) and to the pass
(``summary_stream._Pass.add``), fused into one loop.

Both read the same fields of a complete event (category, start, duration, args, name, pid, tid) and
validate them each their own way; here each field is fetched once, the category is classified once
for both (:func:`_route`, remembered per category string), and what the two would record is recorded
inline. This fast path takes only the events on which both validations are trivially true (a
category string, float (or int) start and duration, finite, dict args, a str name, int or
str pid and tid: what Kineto writes); any other event goes through the three methods themselves. So
the join's and the pass's state after a window are exactly those of calling the methods on each
event (a test checks it on every trace the engine-equality tests use).
"""

from __future__ import annotations

import re
from array import array
from typing import Any

from . import events as evs
from .launch_join import COPY, GRAPH_LAUNCHES, KERNEL, RUNTIME, _cat_kind, _k, copy_of
from .summary_comm import HOST_PREFIXES
from .summary_kernels import _Ev, _hashable

_DROP_ARGS = frozenset({"queued", "device", "context", "stream", "correlation", "External id", "registers per thread",
                        "shared memory", "blocks per SM", "warps per SM", "grid", "block",
                        "est. achieved occupancy %"})
"""Kineto's launch-configuration and id args of a kernel: no table reads them (the correlation id is
kept apart, in ``_Pass.kernel_corr``); dropped to keep kernels small."""

_NO_ARGS: dict[str, Any] = {}
"""The args of every kernel left with none and of every host event (shared: nothing mutates an
event's args; it replaces them)."""
_LEAF: Any = ()
"""The children of every host event without any (shared)."""

_RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime")
_STEP_PREFIX = "ProfilerStep#"
_HOST_COLLECTIVES = HOST_PREFIXES
"""Host annotations that are collectives themselves (a backend without device kernels): kept, with
their args, for the collectives table (:func:`inductor_perf.summary_comm.comm_view`)."""
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_MARKS = (evs.KERNEL_FLOP, evs.COST_SOURCE, evs.LAUNCH_OP)

_BIG = 1 << 1000
"""Ints of at most this size become floats without overflow."""

# What the pass does with a category (_route's second item): nothing ("trace"), a device event kept
# as a kernel, another device-side event (counted in the window only), a host event, a runtime call.
_P_NONE, _P_KERNEL, _P_DEVICE, _P_HOST, _P_RUNTIME = 0, 1, 2, 3, 4


def _route(cat: str, seen: Any) -> tuple[int, int]:
    """(the join's kind of category ``cat`` (``launch_join``'s KERNEL, OP... or NONE), what the pass
    does with it (``_P_*``)): as ``LaunchIndex.index`` and ``_Pass.add`` each classify it."""
    cls = seen._classify(cat)
    if cls == 3 and cat in _RUNTIME_CATS:
        cls = _P_RUNTIME
    return _cat_kind(cat), cls


def read_batch(batch: list, i: int, join: Any, seen: Any, routes: dict[str, tuple[int, int]]) -> int:
    """Feed ``batch``'s events, numbered from ``i``, to ``join`` (a ``CostJoin``) and ``seen`` (a
    ``_Pass``) as ``join.index`` / ``join.cost`` and ``seen.add`` / ``seen.add_other`` would, in
    order; the index after the last one. ``routes``: :func:`_route` by category, filled here."""
    cost, other, later = join.cost, seen.add_other, join.flows_later.append
    jkernels, copies, by_thread, runtime_by_corr = join.kernels, join.copies, join.by_thread, join.runtime_by_corr
    graph_launches, new_columns, scope = join.graph_launches, evs.new_columns, join.add_scope
    kernels, kindex, kcorr = seen.kernels.append, seen.kernel_index.append, seen.kernel_corr.append
    knames, host = seen._kernel_names, _take_host
    drop, no_args, leaf, (m0, m1, m2), kf, kgb = _DROP_ARGS, _NO_ARGS, _LEAF, _MARKS, evs.KERNEL_FLOP, evs.KERNEL_NUM_GB
    n_kernels = used = 0
    lo, hi = float("inf"), float("-inf")
    for ev in batch:
        if type(ev) is not dict:
            other(ev)
            i += 1
            continue
        ph = ev.get("ph")
        if ph != "X":
            if ph == "s" or ph == "f":
                later(i)
            if not seen.costed:  # add_other's cost marks, inline
                a = ev.get("args")
                if isinstance(a, dict) and (m0 in a or m1 in a or m2 in a):
                    seen.costed = True
            i += 1
            continue
        cat, ts, dur, args = ev.get("cat"), ev.get("ts"), ev.get("dur"), ev.get("args")
        name, pid, tid = ev.get("name"), ev.get("pid"), ev.get("tid")
        # whole microseconds (older Kineto): floats, as both convert them
        ts = float(ts) if type(ts) is int and -_BIG < ts < _BIG else ts
        dur = float(dur) if type(dur) is int and -_BIG < dur < _BIG else dur
        route = routes.get(cat) if type(cat) is str else None
        if route is None and type(cat) is str:
            route = routes[cat] = _route(cat, seen)
        if (route is None or type(ts) is not float or type(dur) is not float or type(args) is not dict
                or type(name) is not str or ts - ts != 0.0 or dur - dur != 0.0
                or (type(pid) is not int and type(pid) is not str) or (type(tid) is not int and type(tid) is not str)):
            _by_methods(join, seen, i, ev)
            i += 1
            continue
        jk, pc = route
        if args and not seen.costed and (m0 in args or m1 in args or m2 in args):
            seen.costed = True
        # --- the join's index (LaunchIndex.index) and cost (CostJoin.cost)
        pt = (pid, tid)
        jdur = dur if dur > 0.0 else 0.0  # the join's duration: 0 for a zero or negative one
        if jk == KERNEL or jk == COPY:
            corr = args.get("correlation")
            jkernels[i] = (corr if type(corr) is int else _k(corr) if corr is not None else None,
                           args.get("External id"), jdur)
            if jk == COPY:
                copies[i] = copy_of(name, args)
            else:
                n_kernels += 1
                if kf in args or kgb in args or name.find("ccl", 0, 24) >= 0:
                    cost(i, ev, jk, args)  # a precost or a collective: the rest of cost() does nothing
        elif jk >= 0:
            cols = by_thread.get(pt)
            if cols is None:
                cols = by_thread[pt] = new_columns()
            cols[0].append(ts)
            cols[1].append(-jdur)
            cols[2].append(i)
            if jk == RUNTIME:
                corr = args.get("correlation")
                if corr is not None:
                    runtime_by_corr[corr if type(corr) is int else _k(corr)] = i
                if name in GRAPH_LAUNCHES:
                    graph_launches.add(i)
            else:
                scope(i, jk, args)  # LaunchIndex.index's end for a scope, then its cost
                cost(i, ev, jk, args)
        # --- the pass (_Pass.add)
        if not pc:
            i += 1
            continue
        if not dur > 0.0:
            seen.skipped["negative dur" if dur < 0 else "zero dur"] += 1
            i += 1
            continue
        used += 1
        if ts < lo:
            lo = ts
        if ts + dur > hi:
            hi = ts + dur
        if pc == _P_KERNEL:
            slim = no_args if args.keys() <= drop else {k: v for k, v in args.items() if k not in drop}
            k = _Ev(knames.setdefault(name, name), cat, pid, tid, ts, dur, slim)
            k.children = leaf  # a device event nests nothing: no list per kernel
            kernels(k)
            kindex(i)
            kcorr(args.get("correlation"))
        elif pc >= _P_HOST:
            host(seen, pt, name, cat, ts, dur, args, pc)
        i += 1
    join.stats.device_kernels += n_kernels
    seen.used += used
    seen.w0, seen.w1 = min(seen.w0, lo), max(seen.w1, hi)
    return i


def _by_methods(join: Any, seen: Any, i: int, ev: dict) -> None:
    """Complete event ``i`` fed to the methods the fast path fuses."""
    got = join.index(i, ev)
    if got is not None:
        join.cost(i, ev, *got)
    seen.add(i, ev)


def _take_host(seen: Any, pt: tuple, name: str, cat: str, ts: float, dur: float, args: dict, pc: int) -> None:
    """The end of ``_Pass.add`` for a host event on thread ``pt`` (``pc``: ``_P_HOST`` or ``_P_RUNTIME``),
    with ``_Threads.add`` inline."""
    key = seen._thread_keys.get(pt)
    if key is None:
        key = seen._thread_keys[pt] = pt
    threads = seen.threads
    cols = threads.cols.get(key)
    if cols is None:
        cols = threads.cols[key] = (array("d"), array("d"), array("l"), array("l"))
    names, cats = threads.names, threads.cats
    n = names.get(name)
    if n is None:
        n = names[name] = len(names)
    c = cats.get(cat)
    if c is None:
        c = cats[cat] = len(cats)
    cols[0].append(ts)
    cols[1].append(dur)
    cols[2].append(n)
    cols[3].append(c)
    if pc == _P_RUNTIME:
        corr = args.get("correlation")
        if corr is not None:
            seen.by_corr[corr if type(corr) is int else _hashable(corr)] = key
        if cat != "hip_runtime" and "GraphLaunch" in name:
            seen.graph_launches = True
    elif name.startswith(_STEP_PREFIX) and _STEP.match(name) or name.startswith(_HOST_COLLECTIVES):
        seen.steps.append(_Ev(name, cat, pt[0], pt[1], ts, dur, args))
