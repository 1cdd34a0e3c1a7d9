"""The streaming summary's per-event loop (:mod:`inductor_perf.summary.stream.engine`): each window's events
fed to the cost join (:meth:`LaunchIndex.index <inductor_perf.costs.launch.LaunchIndex.index>`, then
:meth:`CostJoin.cost <inductor_perf.costs.from_shapes.CostJoin.cost>`) and to the pass
(``summary.stream.engine._Pass.add``), fused into one loop.

A batch is a window's events as orjson's dicts or as msgspec's envelopes
(:func:`~inductor_perf.traces.windows.decode_envelopes`: the members below decoded, the args decoded
here by orjson; an event not taken here is read whole again by ``Windows.load``). A diff's streamed
side takes the same loop (its host events kept by ``comparison.sides._Kept`` in the place of the pass).

Both read the same fields of a complete event (category, start, duration, args, name, pid, tid) and
validate them each their own way; here each field is fetched once, the category is classified once
for both (:func:`_route`, remembered per category string), and what the two would record is recorded
inline. This fast path takes only the events on which both validations are trivially true (a
category string, float (or int) start and duration within :func:`~inductor_perf.model.events.plain_time`'s
bounds, dict args, a str name, int or str pid and tid: what Kineto writes); any other event goes
through the three methods themselves (an event with bad times is skipped and counted there). So
the join's and the pass's state after a window are exactly those of calling the methods on each
event (a test checks it on every trace the engine-equality tests use).
"""

from __future__ import annotations

import re
from array import array
from functools import lru_cache
from typing import Any, Callable

from ...costs.launch import COPY, GRAPH_LAUNCHES, KERNEL, RUNTIME, kind_of_category, id_key, copy_of
from ...model import events as evs
from ...roofline.roofs import tf32_kernel
from ..comm import HOST_PREFIXES
from ..kernels import ParsedEvent, _hashable

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

_STEP_PREFIX = "ProfilerStep#"
_HOST_COLLECTIVES = HOST_PREFIXES
"""Host annotations that are collectives themselves (a backend without device kernels): kept, with
their args, for the collectives table (:func:`inductor_perf.summary.comm.comm_view`)."""
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_MARKS = evs.COST_MARKS
"""The cost marks, which :func:`read_batch` tests inline (:func:`~inductor_perf.model.events.has_cost_mark`)."""

_BIG = 1 << 1000
"""Ints of at most this size become floats without overflow."""
_INT_LO, _INT_HI = -(1 << 63), 1 << 64
"""The ints orjson reads as ints (it reads a larger one as a float; msgspec as an int)."""
_FIELDS = ("cat", "ts", "dur", "name", "pid", "tid")
"""A dict event's fields that :func:`read_batch` reads, in its order."""


def _decoding() -> tuple[Callable[[Any], Any], Any]:
    """(``orjson.loads``, the value of an envelope's missing member)."""
    import orjson

    from ...traces.windows import envelope_decoder

    got = envelope_decoder()
    return orjson.loads, got[2] if got is not None else None


@lru_cache(maxsize=None)
def _op_args_decoder() -> tuple[Any, Any, Any] | None:
    """(the decoder of a CPU op's args text into what its cost depends on, its error type,
    ``msgspec.UNSET``); None without msgspec. It decodes the External id, keeps the recorded inputs
    (``Input Dims``, ``Input type``, ``Concrete Inputs``) as their text, notes the cost marks
    (:data:`_OP_MARKS`), and skips every other member unread."""
    try:
        import msgspec
    except ImportError:
        return None
    unset = msgspec.UNSET
    fields = [("ext", Any, unset), ("dims", msgspec.Raw, unset), ("types", msgspec.Raw, unset),
              ("concrete", msgspec.Raw, unset)] + [(f"m{j}", msgspec.Raw, unset) for j in range(len(_OP_MARKS))]
    rename = {"ext": "External id", "dims": "Input Dims", "types": "Input type", "concrete": "Concrete Inputs",
              **{f"m{j}": m for j, m in enumerate(_OP_MARKS)}}
    return msgspec.json.Decoder(msgspec.defstruct("OpArgs", fields, rename=rename, gc=False)), msgspec.DecodeError, unset


_OP_MARKS = evs.COST_MARKS + (evs.KERNEL_NUM_GB,)
"""The args that make an op's cost more than its name and inputs: a trace's own costs (the pass's
marks) or a cost of its own (``CostJoin._apply``)."""


def _op_args(name: str, text: Any, ops: dict, loads: Callable[[Any], Any]) -> tuple[Any, tuple | None, tuple | None]:
    """A CPU op's args from their text ``text``: (its args, the :meth:`CostJoin.outcome
    <inductor_perf.costs.from_shapes.CostJoin.outcome>` to replay for it or None, its signature (to learn
    the outcome by when there is none, and for its op x shape key) or None when its args are not read
    by signature). With an outcome, the args are its External id alone: all that the join's
    index and the pass read of an op's args once its cost is known (a step's or a host collective's
    args are kept whole: :func:`_op_learns`). ``ops``: outcomes by signature, the op's name and the
    text of its recorded inputs (the same text gives the same inputs)."""
    decoder, error, unset = _op_args_decoder()  # type: ignore[misc]
    try:
        o = decoder.decode(text)
    except error:  # not an object, or not JSON: orjson says which
        return loads(memoryview(text)), None, None
    if o.m0 is not unset or o.m1 is not unset or o.m2 is not unset or o.m3 is not unset:
        return loads(memoryview(text)), None, None
    sig = (name, None if o.dims is unset else bytes(o.dims), None if o.types is unset else bytes(o.types),
           None if o.concrete is unset else bytes(o.concrete))
    hit = ops.get(sig)
    ext = o.ext
    if hit is None or (type(ext) is int and not _INT_LO <= ext < _INT_HI):  # an int orjson reads as a float
        return loads(memoryview(text)), None, sig
    return (_NO_ARGS if ext is unset else {"External id": ext}), hit, sig


def _op_learns(name: str) -> bool:
    """Whether the outcome of an op of this name may be replayed (:func:`_op_args`): not for a step
    or a host collective, whose args the pass keeps."""
    return not (name.startswith(_STEP_PREFIX) or name.startswith(_HOST_COLLECTIVES))


# What the pass does with a category (_route's second item, its _classify): nothing ("trace"), a device
# event kept as a kernel, another device-side event (counted in the window only), a host event, a runtime
# call (a host event whose correlation id is kept: model.events.is_runtime).
_P_NONE, _P_KERNEL, _P_DEVICE, _P_HOST, _P_RUNTIME = 0, 1, 2, 3, 4
UNIT = 5
"""What a diff's side does with a category (its ``_classify``): keep the complete event for its units
(:class:`inductor_perf.comparison.sides._Kept`), whatever its duration."""


def _route(cat: str, seen: Any) -> tuple[int, int]:
    """(the join's kind of category ``cat`` (``costs.launch``'s KERNEL, OP... or NONE), what the pass
    does with it (``_P_*``)): as ``LaunchIndex.index`` and ``_Pass.add`` each classify it."""
    return kind_of_category(cat), seen._classify(cat)


def read_batch(batch: list, i: int, join: Any, seen: Any, routes: dict[str, tuple[int, int]],
               load: Callable[[int], Any] | None = None, ops: dict | None = None, shapes: dict | None = None) -> int:
    """Feed ``batch``'s events, numbered from ``i``, to ``join`` (a ``CostJoin``) and ``seen`` (a ``_Pass``, or
    a diff's side: ``comparison.sides._Kept``) as ``join.index`` / ``join.cost`` and ``seen.add`` /
    ``seen.add_other`` would, in order; the index after the last one. ``routes``: :func:`_route` by category,
    filled here. ``load``: the batch is envelopes, and ``load(i)`` reads event ``i`` whole (``Windows.load``),
    for the events not taken here. ``ops`` (envelopes and a ``_Pass`` only): the CPU ops' cost outcomes by
    signature, for :func:`_cost_op`; ``shapes``: their op x shape keys' numbers, for :func:`_take_host`."""
    other, later, host, (m0, m1, m2) = seen.add_other, join.flows_later.append, _take_host, _MARKS
    typed, (loads, unset) = load is not None, _decoding()
    ops = ops if typed and _op_args_decoder() is not None else None
    n_kernels = used = 0
    lo, hi, ts_max, dur_max = float("inf"), float("-inf"), evs.TS_MAX_US, evs.DUR_MAX_US
    hit = sig = None
    for i, ev in enumerate(batch, i):
        if typed:  # an envelope: its args decoded here (a flow has none)
            ph, args = ev.ph, ev.args
            hit = sig = None
            if args is unset or (ph != "X" and seen.costed):
                args = None
            elif ops is not None and ph == "X" and ev.cat == "cpu_op" and type(ev.name) is str:
                args, hit, sig = _op_args(ev.name, args, ops, loads)
            else:
                args = loads(memoryview(args))
        elif type(ev) is dict:
            ph, args = ev.get("ph"), ev.get("args")
        else:
            other(ev)
            continue
        if ph != "X":
            if ph == "s" or ph == "f":
                later(i)
            if not seen.costed and isinstance(args, dict) and (m0 in args or m1 in args or m2 in args):
                seen.costed = True  # add_other's cost marks, inline
            continue
        if typed:
            cat, ts, dur, name, pid, tid = ev.cat, ev.ts, ev.dur, ev.name, ev.pid, ev.tid
            if (type(pid) is int and not _INT_LO <= pid < _INT_HI) or (type(tid) is int and not _INT_LO <= tid < _INT_HI):
                pid = None  # an int orjson reads as a float: the event is read whole below
        else:
            cat, ts, dur, name, pid, tid = map(ev.get, _FIELDS)
        ts = float(ts) if type(ts) is int and -_BIG < ts < _BIG else ts  # whole microseconds (older Kineto)
        dur = float(dur) if type(dur) is int and -_BIG < dur < _BIG else dur
        route = routes.get(cat) if type(cat) is str else None
        if route is None and type(cat) is str:
            route = routes[cat] = _route(cat, seen)
        if (route is None or type(ts) is not float or type(dur) is not float or type(args) is not dict
                or type(name) is not str or not (0.0 <= ts <= ts_max and 0.0 <= dur <= dur_max)  # evs.plain_time
                or (type(pid) is not int and type(pid) is not str) or (type(tid) is not int and type(tid) is not str)):
            _by_methods(join, seen, i, load(i) if typed else ev)
            continue
        jk, pc = route
        if args and not seen.costed and (m0 in args or m1 in args or m2 in args):
            seen.costed = True
        # --- the join's index (LaunchIndex.index) and cost (CostJoin.cost)
        pt = (pid, tid)
        if jk == KERNEL or jk == COPY:
            n_kernels += _index_device(join, i, jk, name, args, ts, dur)
        elif jk >= 0:
            _index_host(join, i, jk, pt, name, args, ts, dur, hit, sig, ops)
        # --- the pass (_Pass.add)
        if not pc:
            continue
        if pc == UNIT:  # a diff's side (sides._Kept), which keeps zero durations too
            seen.unit(i, name, cat, pid, tid, ts, dur, args)
            continue
        if not dur > 0.0:
            seen.skipped["zero dur"] += 1
            continue
        used += 1
        lo = ts if ts < lo else lo
        hi = ts + dur if ts + dur > hi else hi
        if pc == _P_KERNEL:
            _keep_kernel(seen, i, name, cat, pid, tid, ts, dur, args)
        elif pc >= _P_HOST:
            host(seen, pt, name, cat, ts, dur, args, pc, i, sig, shapes)
    join.stats.device_kernels += n_kernels
    seen.used += used
    seen.w0, seen.w1 = min(seen.w0, lo), max(seen.w1, hi)
    return i + 1 if batch else i


def _cost_op(join: Any, i: int, jk: int, name: str, args: dict, ts: float, hit: tuple | None,
             sig: tuple | None, ops: dict) -> None:
    """``CostJoin.cost`` of CPU op ``i`` read by :func:`_op_args`: its outcome ``hit`` replayed, or
    its cost found and the outcome kept in ``ops`` under its signature ``sig``."""
    if hit is not None:
        join.replay(i, hit)
        return
    join.cost_of(i, name, jk, args, ts)
    got = join.outcome(i, name) if _op_learns(name) else None
    if got is not None:
        ops[sig] = got


def _index_device(join: Any, i: int, jk: int, name: str, args: dict, ts: float, dur: float) -> int:
    """``LaunchIndex.index`` (and ``CostJoin.cost``) of device event ``i``, a kernel or a copy (``jk``)
    with plain fields: 1 for a kernel (counted), 0 for a copy."""
    corr = args.get("correlation")
    join.kernels[i] = (corr if type(corr) is int else id_key(corr) if corr is not None else None,
                       args.get("External id"), dur if dur > 0.0 else 0.0)  # (0.0 for -0.0)
    if jk == COPY:
        join.copies[i] = copy_of(name, args)
        return 0
    if tf32_kernel(name):
        join.tf32.add(i)
    if evs.KERNEL_FLOP in args or evs.KERNEL_NUM_GB in args or name.find("ccl", 0, 24) >= 0:
        join.cost_of(i, name, jk, args, ts)  # a precost or a collective: the rest of cost() does nothing
    return 1


def _index_host(join: Any, i: int, jk: int, pt: tuple, name: str, args: dict, ts: float, dur: float,
                hit: tuple | None, sig: tuple | None, ops: dict | None) -> None:
    """``LaunchIndex.index`` (and ``CostJoin.cost``) of host event ``i`` on thread ``pt``, a runtime
    call or an op or scope (``jk``) with plain fields; ``hit``, ``sig``: what :func:`_op_args` found
    of an envelope's CPU op (both None otherwise)."""
    cols = join.by_thread.get(pt)
    if cols is None:
        cols = join.by_thread[pt] = evs.new_columns()
    cols[0].append(ts)
    cols[1].append(-dur if dur > 0.0 else -0.0)  # the join's duration: 0.0 for -0.0
    cols[2].append(i)
    if jk == RUNTIME:
        corr = args.get("correlation")
        if corr is not None:
            join.runtime_by_corr[corr if type(corr) is int else id_key(corr)] = i
        if name in GRAPH_LAUNCHES:
            join.graph_launches.add(i)
        return
    join.add_scope(i, jk, args)  # LaunchIndex.index's end for a scope, then its cost
    if hit is None and sig is None:  # (only an envelope's cpu_op sets them: _op_args)
        join.cost_of(i, name, jk, args, ts)
    else:
        _cost_op(join, i, jk, name, args, ts, hit, sig, ops)  # type: ignore[arg-type]


def _keep_kernel(seen: Any, i: int, name: str, cat: str, pid: Any, tid: Any, ts: float, dur: float,
                 args: dict) -> None:
    """The end of ``_Pass.add`` for a device event with plain fields and a positive duration."""
    slim = _NO_ARGS if args.keys() <= _DROP_ARGS else {k: v for k, v in args.items() if k not in _DROP_ARGS}
    k = ParsedEvent(seen._kernel_names.setdefault(name, name), cat, pid, tid, ts, dur, slim)
    k.children = _LEAF  # a device event nests nothing: no list per kernel
    seen.kernels.append(k)
    seen.kernel_index.append(i)
    seen.kernel_corr.append(args.get("correlation"))


def _by_methods(join: Any, seen: Any, i: int, ev: dict) -> None:
    """Complete event ``i`` fed to the methods the fast path fuses."""
    got = join.index(i, ev)
    if got is not None:
        join.cost(i, ev, *got)
    seen.add(i, ev)


def new_thread() -> tuple[array, array, array, array, array, array]:
    """A thread's columns (``engine._Threads``): start, duration, name id, category id, event index, and
    the number of a CPU op's op x shape key (``_Pass.shape_ids``; -1: another event, or none kept)."""
    return array("d"), array("d"), array("i"), array("i"), array("q"), array("i")


def _take_host(seen: Any, pt: tuple, name: str, cat: str, ts: float, dur: float, args: dict, pc: int,
               i: int, sig: tuple | None = None, shapes: dict | None = None) -> None:
    """The end of ``_Pass.add`` for host event ``i`` on thread ``pt`` (``pc``: ``_P_HOST`` or
    ``_P_RUNTIME``), with ``_Threads.add`` inline. ``shapes`` (None: the pass keeps no op x shape keys):
    the numbers of the CPU ops' keys by their signature ``sig`` as :func:`_op_args` read it (None: not
    read so; the key is made from ``args``), filled here (``_Pass.shape_id``)."""
    key = seen._thread_keys.get(pt)
    if key is None:
        key = seen._thread_keys[pt] = pt
    threads = seen.threads
    cols = threads.cols.get(key)
    if cols is None:
        cols = threads.cols[key] = new_thread()
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
    cols[4].append(i)
    if shapes is not None and cat == "cpu_op":  # its op x shape key, as _Pass.add keeps it
        got = shapes.get(sig) if sig is not None else None
        cols[5].append(got if got is not None else seen.shape_id(name, args, sig, shapes))
    else:
        cols[5].append(-1)
    if pc == _P_RUNTIME:
        corr = args.get("correlation")
        if corr is not None:
            seen.by_corr[corr if type(corr) is int else _hashable(corr)] = (key, ts, i)
        if "GraphLaunch" in name and evs.replays_cuda_graph(cat, name):
            seen.graph_launches = True
        return
    if name.startswith(_STEP_PREFIX) and _STEP.match(name) or name.startswith(_HOST_COLLECTIVES):
        seen.steps.append(ParsedEvent(name, cat, pt[0], pt[1], ts, dur, args))
