"""The summary of a large GPU trace file in one streaming pass, without holding the events as dicts:
the same :class:`~inductor_perf.summary.rows.Summary` as loading the whole trace
(:func:`inductor_perf.summary.files.summarize_trace`), within float rounding, in a fraction of its
memory. What still grows with the trace (docs/summary-engines.md): a small object per kernel, 36
bytes per host event, and the cost join's index (let go before the end).

The pass: the file's text is mapped (a ``.gz`` is first decompressed to a temporary file, in
blocks) and read in windows of :data:`WINDOW_BYTES`; each window's events are parsed by orjson as
one array, fed to the cost join (:class:`~inductor_perf.costs.from_shapes.CostJoin`, as ``augment`` costs a
raw trace) and to :class:`_Pass`, which keeps:

- each device event as a small :class:`~inductor_perf.summary.kernels.ParsedEvent` (launch-config args
  dropped), with its event index for its cost;
- each host thread's events as six flat arrays (start, duration, name, category, event index, op x
  shape key), nested into the forest idle attribution walks only for the threads that launched a
  kernel next to a gap;
- the runtime calls' correlation ids (which thread launched each kernel), the ``ProfilerStep#N``
  ranges and host collectives, the window's first and last instant, and the counts of skipped events;
- each CPU op's op x shape key (its name, input shapes and dtypes:
  :func:`~inductor_perf.summary.op_shapes.shape_key`), as a number in its thread's columns, each
  distinct key kept once: the op x shape table reads these instead of the events.

Then the costs are placed (:meth:`CostJoin.finish`), each kernel gets the args ``augment`` would
write (:mod:`inductor_perf.summary.stream.finish`), is summed, and keeps only what the later tables
read; :func:`inductor_perf.summary.core.assemble` does the rest, as for a loaded trace. The windows' text is
given back to the kernel as soon as it is parsed (``madvise``), so the mapped file does not stay
resident (:mod:`inductor_perf.traces.windows`). A large file's later windows are read by a forked
worker, whose join and pass are appended to this process's (:mod:`inductor_perf.summary.stream.fork`).

Traces this engine does not take (no orjson, a layout other than Kineto's one-object-per-event
array, NaN literals, no device events: a CPU trace) make :func:`summarize_file_stream` return None,
and the caller loads the whole trace. A file cut mid-event raises TraceFormatError, as loading does.
"""

from __future__ import annotations

import contextlib
import logging
from array import array
from collections import defaultdict
from typing import Any, Callable, Container, Iterator, Sequence

from ...model import events as evs
from ...traces import files as tf
from ...traces.windows import WINDOW_BYTES, Windows, LayoutError, mapped_text
from ..kernels import ParsedEvent, _hashable
from ..op_shapes import ShapeKey, raw_shape_key, shape_key
from .loop import _DROP_ARGS, _HOST_COLLECTIVES, _LEAF, _NO_ARGS, _STEP, _STEP_PREFIX, new_thread, read_batch

log = logging.getLogger(__name__)

__all__ = ["WINDOW_BYTES", "Windows", "mapped_text", "summarize_file_stream"]
"""``WINDOW_BYTES``, ``Windows`` and ``mapped_text`` live in :mod:`inductor_perf.traces.windows`;
named here too for the diff's streamed side and the tests. Which files ``engine="auto"`` streams:
:func:`inductor_perf.traces.engines.streams`."""


_left_to_exit: list[Any] | None = None
"""The list :func:`leave_to_exit` keeps states in, inside :func:`left_to_exit`; None outside it."""


@contextlib.contextmanager
def left_to_exit() -> Iterator[list[Any]]:
    """Within the block, :func:`leave_to_exit` keeps each pass's state in the list yielded, for the
    OS to take back whole when the process ends, instead of Python freeing it object by object (0.13 s
    for the state of a 1M-event trace). The command line opens it when the process ends right after
    summarizing one trace (:func:`inductor_perf.cli.run`), holds the list and ends the process
    without the interpreter's teardown. Outside it (a library caller, a command over several traces)
    nothing is kept."""
    global _left_to_exit
    outer, _left_to_exit = _left_to_exit, []
    try:
        yield _left_to_exit
    finally:
        _left_to_exit = outer


def leave_to_exit(state: Any) -> None:
    """Keep ``state`` until the process ends when it ends right after this summary (inside
    :func:`left_to_exit`); otherwise do nothing, and it is freed as usual."""
    if _left_to_exit is not None:
        _left_to_exit.append(state)


class _HostNode:
    """A host event in a thread's forest: what idle attribution reads of it (name, category, span,
    nesting), in fewer bytes than a :class:`~inductor_perf.summary.kernels.ParsedEvent`."""

    __slots__ = ("name", "cat", "ts", "end", "parent", "children")
    is_kernel = False
    args = _NO_ARGS

    def __init__(self, name: str, cat: str, ts: float, end: float) -> None:
        self.name = name
        self.cat = cat
        self.ts = ts
        self.end = end
        self.parent: _HostNode | None = None
        self.children: Any = _LEAF


class _Threads:
    """Every host event, per (pid, tid), as flat arrays (:func:`new_thread`); names and categories
    interned."""

    def __init__(self) -> None:
        self.cols: dict[tuple[Any, Any], tuple[array, array, array, array, array, array]] = {}
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}

    def add(self, key: tuple[Any, Any], name: str, cat: str, ts: float, dur: float, i: int, shape: int = -1) -> None:
        cols = self.cols.get(key)
        if cols is None:
            cols = self.cols[key] = new_thread()
        n = self.names.get(name)
        if n is None:
            n = self.names[name] = len(self.names)
        c = self.cats.get(cat)
        if c is None:
            c = self.cats[cat] = len(self.cats)
        cols[0].append(ts)
        cols[1].append(dur)
        cols[2].append(n)
        cols[3].append(c)
        cols[4].append(i)
        cols[5].append(shape)

    def state(self) -> tuple[list[str], list[str], dict]:
        """What :meth:`merge` takes (plain containers: picklable)."""
        return list(self.names), list(self.cats), self.cols

    def merge(self, state: tuple[list[str], list[str], dict], base: int = 0, to_shape: list[int] | None = None) -> None:
        """Append the :meth:`state` of the threads of the events after this one's (another process's):
        its name and category ids re-mapped to this one's, its event indices (numbered from 0 there)
        from ``base``, its op x shape key numbers by ``to_shape`` (None: the same here)."""
        names, cats, cols = state
        to_name = [self.names.setdefault(n, len(self.names)) for n in names]
        to_cat = [self.cats.setdefault(c, len(self.cats)) for c in cats]
        same_names, same_cats = to_name == list(range(len(names))), to_cat == list(range(len(cats)))
        if to_shape is not None:
            to_shape = [*to_shape, -1]  # -1 (no key) stays -1
        for key, (ts, dur, name, cat, index, shape) in cols.items():
            if base:
                index = array("q", map(base.__add__, index))
            if not same_names:
                name = array("i", map(to_name.__getitem__, name))
            if not same_cats:
                cat = array("i", map(to_cat.__getitem__, cat))
            if to_shape is not None:
                shape = array("i", map(to_shape.__getitem__, shape))
            mine = self.cols.get(key)
            if mine is None:
                self.cols[key] = (ts, dur, name, cat, index, shape)
            else:
                for col, more in zip(mine, (ts, dur, name, cat, index, shape)):
                    col.extend(more)

    def forest(self, key: tuple[Any, Any], parents: list[_HostNode] | None = None) -> list[_HostNode]:
        """The thread's top-level events, nested as :func:`summary.kernels._build_forest` nests them
        (the same order, parents and children), as :class:`_HostNode` nodes. A leaf's ``children``
        is a shared empty tuple: only the nodes with children get a list, and are appended to
        ``parents`` (when given) as they get it."""
        names = list(self.names)
        cats = list(self.cats)
        ts, dur, name, cat = self.cols[key][:4]
        roots: list[_HostNode] = []
        stack: list[tuple[float, _HostNode]] = []  # (end, node) of the open events, innermost last
        for j in _by_start(ts, dur):
            t = ts[j]
            end = t + dur[j]
            e = _HostNode(names[name[j]], cats[cat[j]], t, end)
            # evs.nest_threads(slack=1e-6): the parent is the innermost open event that this one
            # starts inside and ends by (give or take the slack)
            while stack and not (t < stack[-1][0] and end <= stack[-1][0] + 1e-6):
                stack.pop()
            if not stack:
                roots.append(e)
            else:
                up = e.parent = stack[-1][1]
                if up.children is _LEAF:
                    up.children = [e]
                    if parents is not None:
                        parents.append(up)
                else:
                    up.children.append(e)
            stack.append((end, e))
        return roots

    def enclosing_ops(self, wanted: Container[int]) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """(event index, the CPU ops around it as (event index, op x shape key number), innermost
        first) of each host event in ``wanted``, nested as :meth:`forest` nests them: the open events
        when it is reached are its ancestors (for the op x shape table:
        :func:`~inductor_perf.summary.op_shapes.streamed_shape_keys`)."""
        for ts, dur, _, _, index, shape in self.cols.values():
            stack: list[tuple[float, int, int]] = []  # (end, index, key number) of the open events, innermost last
            for j in _by_start(ts, dur):
                t = ts[j]
                end = t + dur[j]
                while stack and not (t < stack[-1][0] and end <= stack[-1][0] + 1e-6):
                    stack.pop()
                i = index[j]
                if i in wanted:
                    yield i, [(x, s) for _, x, s in reversed(stack) if s >= 0]
                stack.append((end, i, shape[j]))


def _by_start(ts: array, dur: array) -> Sequence[int]:
    """Indices sorted by (start, -duration, index), the order of :func:`model.events.nest_threads`."""
    return evs.order_by_start(ts, lambda i: (-dur[i], i))


class _Roots:
    """``TraceKernels.roots`` built lazily: a thread's forest when a table asks for it, built once and
    kept for the tables that follow (the idle tables and the advisor's signals walk the same forests),
    until :meth:`release`. Its nodes (~165 bytes a host event) point to their parents and their
    children: cycles, which the summary's paused garbage collector would not free
    (``traces.files.gc_paused``); :meth:`release` breaks them."""

    def __init__(self, threads: _Threads) -> None:
        self.threads = threads
        self._forests: dict[tuple[Any, Any], list[_HostNode]] = {}
        self._parents: list[_HostNode] = []
        """The nodes with children of every forest built: what :meth:`release` unlinks."""

    def __contains__(self, key: object) -> bool:
        return key in self.threads.cols

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(self.threads.cols)

    def __getitem__(self, key: tuple[Any, Any]) -> list[_HostNode]:
        got = self._forests.get(key)
        if got is None:
            got = self._forests[key] = self.threads.forest(key, self._parents)
        return got

    def release(self) -> None:
        """Let the forests go: each node's children unlinked (no cycle left, so each node is freed as
        soon as nothing else holds it), and a later lookup builds its forest again."""
        for node in self._parents:
            node.children = _LEAF
        self._parents = []
        self._forests = {}


class _Pass:
    """What the summary needs of each event, kept as :mod:`summary.stream.engine` says (module docstring).
    Mirrors :func:`inductor_perf.summary.kernels._parse` and ``select_kernels`` for a GPU trace."""

    def __init__(self, op_shapes: bool = True) -> None:
        self.total = self.used = 0
        self.skipped: dict[str, int] = defaultdict(int)
        self.w0 = float("inf")
        self.w1 = float("-inf")
        self.kernels: list[ParsedEvent] = []
        self.kernel_index = array("q")
        """Each kernel's event index (its cost's key)."""
        self.kernel_corr: list[Any] = []
        """Each kernel's correlation id (None without one); None once read (``finish._launches``)."""
        self.kernel_call: array | None = None
        """Each kernel's launch call's event index (-1: none), from ``by_corr`` once the pass is done
        (``finish._launches``, which then lets ``by_corr`` and ``kernel_corr`` go)."""
        self._kernel_names: dict[str, str] = {}
        self._thread_keys: dict[tuple[Any, Any], tuple[Any, Any]] = {}
        self.threads = _Threads()
        self.by_corr: dict[Any, tuple[tuple[Any, Any], float, int]] = {}
        """Correlation id of each runtime call -> (its thread, its start, its event index)."""
        self.graph_launches = False
        self.steps: list[ParsedEvent] = []
        """The host events the tables read besides the forest: ``ProfilerStep#N`` ranges and host
        collectives (:data:`_HOST_COLLECTIVES`), in file order."""
        self.costed = False
        self.op_shapes = op_shapes
        """Whether each CPU op's op x shape key is kept (its number in its thread's columns); not for
        the light summary, which makes no op x shape table."""
        self.shape_ids: dict[ShapeKey, int] = {}
        """Each distinct op x shape key (:func:`~inductor_perf.summary.op_shapes.shape_key`) -> its number."""
        self._cat_class: dict[str, int] = {}

    def _classify(self, cat: str) -> int:
        """0: ignored ("trace"), 1: device event, 2: other device-side event, 3: host event, 4: runtime
        call (a host event: :func:`~inductor_perf.model.events.is_runtime`); ``loop._P_*``."""
        c = self._cat_class.get(cat)
        if c is None:
            low = cat.lower()
            c = (0 if low == "trace" else 1 if low in evs.DEVICE_CATS else 2 if evs.is_device_side(cat)
                 else 4 if evs.is_runtime(cat) else 3)
            self._cat_class[cat] = c
        return c

    def shape_id(self, name: str, args: dict, sig: tuple | None = None, raw: dict | None = None) -> int:
        """The number of the op x shape key of CPU op ``name`` with ``args`` (numbered here when new);
        ``sig``: the op's signature as :func:`~inductor_perf.summary.stream.loop._op_args` read it, whose
        ``Input Dims`` and ``Input type`` text the key is made of (its args may lack them), kept in ``raw``
        by ``sig``."""
        if sig is not None:
            key = raw_shape_key(name, sig[1], sig[2])
        else:
            key = shape_key(name, args.get("Input Dims"), args.get("Input type"))
        ids = self.shape_ids
        got = ids.get(key)
        if got is None:
            got = ids[key] = len(ids)
        if raw is not None and sig is not None:
            raw[sig] = got
        return got

    def add_other(self, ev: Any) -> None:
        """Take an event that is not a complete ("X") one: count a non-object, note a cost mark."""
        if type(ev) is not dict:
            self.skipped["not an object"] += 1
        elif not self.costed and evs.has_cost_mark(ev.get("args")):
            self.costed = True

    def add(self, i: int, ev: dict) -> None:
        """Take event ``i``, a complete ("X") event. :func:`~inductor_perf.summary.stream.loop.read_batch`
        does the same inline for most events: a change here must be made there too."""
        args = ev.get("args")
        if type(args) is not dict:
            args = args if isinstance(args, dict) else {}
        if not self.costed and evs.has_cost_mark(args):
            self.costed = True
        t = evs.event_time(ev.get("ts"), ev.get("dur"))
        if t is None:  # every command's rule: a complete event of any category, counted
            self.skipped[evs.BAD_TIME] += 1
            return
        ts, dur = t
        cat = ev.get("cat")
        cat = cat if isinstance(cat, str) else ""
        cls = self._classify(cat)
        if not cls:
            return
        if dur == 0.0:
            self.skipped["zero dur"] += 1
            return
        self.used += 1
        if ts < self.w0:
            self.w0 = ts
        if ts + dur > self.w1:
            self.w1 = ts + dur
        name = ev.get("name")
        op = cat == "cpu_op" and isinstance(name, str) and self.op_shapes
        name = name if isinstance(name, str) else str(name)
        pid, tid = ev.get("pid"), ev.get("tid")
        if type(pid) is not int:
            pid = _hashable(pid)
        if type(tid) is not int:
            tid = _hashable(tid)
        if cls == 1:
            slim = {k: v for k, v in args.items() if k not in _DROP_ARGS} or _NO_ARGS
            name = self._kernel_names.setdefault(name, name)
            k = ParsedEvent(name, cat, pid, tid, ts, dur, slim)
            k.children = _LEAF  # a device event nests nothing: no list per kernel
            self.kernels.append(k)
            self.kernel_index.append(i)
            self.kernel_corr.append(args.get("correlation"))
        elif cls >= 3:
            key = self._thread_keys.setdefault((pid, tid), (pid, tid))
            # a CPU op's op x shape key, kept (loop._take_host does the same)
            self.threads.add(key, name, cat, ts, dur, i, self.shape_id(name, args) if op else -1)
            if cls == 4:
                corr = args.get("correlation")
                if corr is not None:
                    self.by_corr[_hashable(corr)] = (key, ts, i)
                if "GraphLaunch" in name and evs.replays_cuda_graph(cat, name):
                    self.graph_launches = True
            elif name.startswith(_STEP_PREFIX) and _STEP.match(name) or name.startswith(_HOST_COLLECTIVES):
                self.steps.append(ParsedEvent(name, cat, pid, tid, ts, dur, args))


def _pass_state(seen: _Pass) -> Iterator[Any]:
    """:class:`_Pass`'s state in three parts (plain containers: picklable), each let go here once the
    next is asked for: the counts, steps and runtime calls; the kernels as columns; the threads."""
    yield (seen.used, dict(seen.skipped), seen.w0, seen.w1, seen.by_corr, seen.graph_launches, seen.steps, seen.costed)
    seen.by_corr, seen.steps = {}, []
    ks, seen.kernels = seen.kernels, []
    # columns, not ParsedEvent objects: ~10x faster to pickle and unpickle; equal categories and ids shared
    # (pickle then writes each once, and the parent gets one object each), keyed by type too (1 != 1.0)
    one: dict[Any, Any] = {}
    share = one.setdefault
    yield ([k.name for k in ks], [share((str, k.cat), k.cat) for k in ks],
           [share((type(k.pid), k.pid), k.pid) for k in ks], [share((type(k.tid), k.tid), k.tid) for k in ks],
           array("d", [k.ts for k in ks]), array("d", [k.dur for k in ks]),
           [k.args or None for k in ks], seen.kernel_index, seen.kernel_corr)
    del ks
    seen.kernel_index, seen.kernel_corr = array("q"), []
    yield seen.threads.state(), list(seen.shape_ids)


def _merge_pass(seen: _Pass, parts: list, base: int) -> None:
    """Append to ``seen`` the :func:`_pass_state` parts of a :class:`_Pass` over the events after its
    own, numbered from ``base`` here; ``parts`` is emptied as they are taken in (each let go then)."""
    used, skipped, w0, w1, by_corr, graph_launches, steps, costed = parts.pop(0)
    seen.used += used
    for why, n in skipped.items():
        seen.skipped[why] += n
    seen.w0, seen.w1 = min(seen.w0, w0), max(seen.w1, w1)
    # a later call overwrites, as in add(); its event index numbered from base here
    seen.by_corr.update({c: (key, ts, i + base) for c, (key, ts, i) in by_corr.items()})
    del by_corr
    seen.graph_launches = seen.graph_launches or graph_launches
    seen.steps.extend(steps)
    seen.costed = seen.costed or costed
    names, cats, pids, tids, ts, dur, args, index, corr = parts.pop(0)
    add, no_args = seen.kernels.append, _NO_ARGS
    for k in map(ParsedEvent, names, cats, pids, tids, ts, dur, [a if a is not None else no_args for a in args]):
        k.children = _LEAF
        add(k)
    del names, cats, pids, tids, ts, dur, args
    seen.kernel_index.extend(array("q", [i + base for i in index]))
    seen.kernel_corr.extend(corr)
    del index, corr
    threads, keys = parts.pop(0)
    ids = seen.shape_ids
    to = [ids.setdefault(key, len(ids)) for key in keys]  # the worker's key numbers here
    seen.threads.merge(threads, base, None if to == list(range(len(to))) else to)


def _read(events: Windows, join: Any, seen: _Pass, i: int, stage: Callable[[str], None] | None,
          fused: bool = True) -> int:
    """Feed the events of ``events``' windows, numbered from ``i``, to ``join`` and ``seen``; the
    index after the last one. ``fused``: by :func:`~inductor_perf.summary.stream.loop.read_batch` (the
    same state, faster), else by the methods themselves, event by event (what the tests compare it to)."""
    index, cost, later, take, other = join.index, join.cost, join.flows_later, seen.add, seen.add_other
    routes: dict[str, tuple[int, int]] = {}
    ops: dict[tuple, tuple] = {}  # read_batch's CPU op outcomes by signature, across the windows
    shapes = {} if seen.op_shapes else None  # and their op x shape keys' numbers (_Pass.shape_id)
    if not fused:
        events.typed = False  # the methods take dicts
    for batch in events:
        if seen.costed:
            # an augmented trace's costs are its own (summary.stream.finish.pass_costs): the join's
            # are never read, so the rest of the file skips it (and is read as dicts, which _Pass.add takes)
            events.typed = False
            enveloped = events.enveloped
            for ev in batch:
                if enveloped:
                    ev = events.load(i)
                if type(ev) is dict and ev.get("ph") == "X":
                    take(i, ev)
                else:
                    other(ev)
                i += 1
            if stage is not None:
                stage(f"summarizing: {i:,} events read")
            continue
        if fused:
            i = read_window_batch(batch, i, join, seen, routes, events, ops, shapes)
        else:
            for ev in batch:
                if type(ev) is dict and ev.get("ph") == "X":
                    got = index(i, ev)
                    if got is not None:
                        cost(i, ev, *got)
                    take(i, ev)
                else:
                    if type(ev) is dict and ev.get("ph") in ("s", "f"):
                        later.append(i)
                    other(ev)
                i += 1
        if stage is not None:
            stage(f"summarizing: {i:,} events read")
    return i


def read_window_batch(batch: list, i: int, join: Any, seen: Any, routes: dict, events: Windows,
                      ops: dict | None = None, shapes: dict | None = None) -> int:
    """:func:`~inductor_perf.summary.stream.loop.read_batch` of a window of ``events``; :class:`LayoutError` when an
    event's args that msgspec took are not strict JSON to orjson (a number past a double's range), as
    orjson parsing that window whole would have found."""
    import orjson

    try:
        return read_batch(batch, i, join, seen, routes, events.load if events.enveloped else None, ops, shapes)
    except orjson.JSONDecodeError:
        raise LayoutError("not strict JSON") from None


def _worker_part(events: Windows) -> Iterator[Any]:
    """In the forked worker (:mod:`inductor_perf.summary.stream.fork`): the pass over its windows, numbered
    from 0, then what :func:`_take` merges, one part at a time (each let go once sent): (events read,
    the windows' bookkeeping); the join's counts then each of its containers (the counts None when its
    part showed costs of its own: the join is never read then, and nothing more of it is sent); and
    :func:`_pass_state`."""
    from ...costs.from_shapes import CostJoin
    from ...costs.ops.meta import defer_torch

    defer_torch()  # ops that need torch's shape rules go to the parent with the join's state
    join = CostJoin(events.load)  # never finished here: the parent reads events back
    seen = _Pass()
    n = _read(events, join, seen, 0, None)
    yield n, events.part()
    counts, containers = join.state()
    del join
    yield None if seen.costed else counts
    while containers and not seen.costed:
        yield containers.pop(0)
    del containers
    yield from _pass_state(seen)


def summarize_file_stream(path: str, *, device: Any = None, top: int = 20,
                          label_of: Callable[[dict], str | None] = lambda header: None,
                          stage: Callable[[str], None] | None = None,
                          light: bool = False) -> tuple[Any, Any] | None:
    """(summary, device used) of the GPU trace file ``path``, summarized in one streaming pass; None
    when this engine does not take the file (see the module docstring): the caller then loads it
    whole. ``label_of(header)`` gives the summary's label from the trace's header (its object with
    ``traceEvents`` empty). ``light``: only what the cross-rank view reads
    (:mod:`inductor_perf.summary.light`)."""
    if tf.orjson_or_none() is None:
        return None
    try:
        return _stream(path, device, top, label_of, stage, light)
    except LayoutError as e:
        log.info("%s: not streamed (%s)", path, str(e) or "a layout the streaming pass does not take")
        return None


def _stream(path: str, device: Any, top: int, label_of: Callable[[dict], str | None],
            stage: Callable[[str], None] | None, light: bool = False) -> tuple[Any, Any] | None:
    """:func:`summarize_file_stream`'s pass; raises :class:`LayoutError` for a file it does not take. A
    large file's later windows are read by a forked worker (:mod:`inductor_perf.summary.stream.fork`)."""
    from ...costs.from_shapes import CostJoin
    from .fork import start_worker
    from .finish import finish

    with mapped_text(path) as raw, tf.gc_paused():
        events = Windows(raw, path, typed=True)
        worker = start_worker(events, light, _worker_part)
        try:
            join = CostJoin(events.load)
            seen = _Pass(op_shapes=not light)
            i = _read(events, join, seen, 0, stage)
            if worker is not None:
                i = _take(worker, events, join, seen, i, stage)
        finally:
            if worker is not None:
                worker.close(kill=True)  # a no-op once reaped
        if not seen.kernels:
            return None  # no device events: a CPU trace, loaded whole
        seen.total = i
        held = [join]  # finish() lets the join go once the costs are placed
        del join
        done = finish(seen, held, events.header or {}, device=device, top=top, label_of=label_of, stage=stage,
                      roots=_Roots(seen.threads), light=light, size=len(raw))
        leave_to_exit(seen)
        return done


def _take(worker: Any, events: Windows, join: Any, seen: _Pass, i: int, stage: Callable[[str], None] | None) -> int:
    """Merge what the worker read (its windows come after ``events``', its events after event
    ``i - 1``) into ``events``, ``join`` and ``seen``; read its windows here if it failed. The index
    after the last event."""
    parts = worker.receive()  # raises the worker's TraceFormatError / LayoutError
    if parts is None:
        log.warning("the summary worker failed; reading its part of the trace here")
        rest = Windows(events.raw, events.path, events.window, begin=worker.cut - 1, typed=events.typed)
        end = _read(rest, join, seen, i, stage)
        events.adopt(rest.part(), i)
        return end
    n, windows = parts.next()
    events.adopt(windows, i)
    counts = parts.next()
    state = None if counts is None else (counts, [parts.next() for _ in join._STATE])
    _merge_pass(seen, [parts.next() for _ in range(3)], i)
    if not seen.costed and state is not None:
        join.merge(state, i)  # empties state
    del state
    parts.trim()
    if stage is not None:
        stage(f"summarizing: {i + n:,} events read")
    return i + n
