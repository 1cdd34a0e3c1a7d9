"""Which op launched each device kernel: kernel <- runtime call <- op.

A device kernel names the runtime call (``cudaLaunchKernel``...) that launched it by its
``correlation`` (or, in traces where correlations do not match, by an ac2g flow from the call to the
kernel); the runtime call sits, on its CPU thread, inside the op that made it (or, failing that,
carries the op's ``External id``). Both joins use this: :mod:`inductor_perf.costs.from_tags` goes from a
tagged call site down to the kernels it launched (:func:`launched_device_events`, and
:func:`replayed_kernels` for a CUDA graph replay), :mod:`inductor_perf.costs.from_shapes` from each kernel up
to the op whose recorded shapes give its cost (:class:`LaunchIndex`). A memcpy / memset carries its
own size (:class:`Copy`, :func:`copy_cost`).

Pure: events in, indices out; nesting on a thread is :func:`inductor_perf.model.events.nest_columns`.
"""

from __future__ import annotations

import bisect
import re
from array import array
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..model.event_cost import AugmentStats, EventCost
from ..model.events import (CPU_OP_CATS, CPU_SCOPE_CATS, DEVICE_CATS, DUR_MAX_US, FLOW_CATS, KERNEL_CATS, RUNTIME_CATS,
                            TS_MAX_US, Columns, event_time, nest_columns, new_columns, number)
from ..roofline.roofs import tf32_kernel

# Runtime calls that replay a captured CUDA graph (mode="reduce-overhead"): their correlation names
# every kernel of the replay.
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch"})


def _is_kernel(ev: dict) -> bool:
    return str(ev.get("cat")).lower() == "kernel"


# --- from a CPU event down to its device events ---------------------------------------------------
def launched_device_events(events: list, thread: tuple[list[int], list[float]], j: int, end: float,
                           corr_to_device: Mapping[Any, list[int]]) -> list[int]:
    """Device kernels launched by runtime/driver calls nested in the CPU event at ``thread[j]``.

    ``thread`` is the CPU thread's events (indices in nesting order, and their starts); ``end`` the
    event's end; ``corr_to_device`` the device events by ``correlation``.
    """
    idx, starts = thread
    out: list[int] = []
    hi = bisect.bisect_right(starts, end)
    for jj in range(j, hi):
        ev = events[idx[jj]]
        corr = (ev.get("args") or {}).get("correlation")
        if corr is not None:
            out.extend(corr_to_device.get(corr, ()))
    # An op that launched kernels and a memset/memcpy (cuBLAS zeroing a workspace) puts its cost on
    # the kernels: a memset does no FLOPs. Copies alone (aten::copy_ as a DtoD memcpy) keep it.
    kernels = [d for d in out if _is_kernel(events[d])]
    return sorted(set(kernels or out), key=lambda d: events[d]["ts"])


def replayed_kernels(events: list, launch: dict, corr_to_device: Mapping[Any, list[int]]) -> list[int]:
    """The kernels of the CUDA graph replay that the runtime call ``launch`` (one of
    :data:`GRAPH_LAUNCHES`) started, in the order they ran: the captured order."""
    corr = (launch.get("args") or {}).get("correlation")
    return sorted((d for d in corr_to_device.get(corr, ()) if _is_kernel(events[d])),
                  key=lambda d: events[d]["ts"])


# --- from a device kernel up to its launching op --------------------------------------------------
def _key(v: Any) -> Any:
    """A hashable stand-in for a pid / tid / id value of any JSON type."""
    return v if isinstance(v, (str, int, float)) else repr(v)


def id_key(v: Any) -> Any:
    """:func:`_key` with a shortcut for the str / int ids of parsed JSON."""
    t = type(v)
    return v if t is int or t is str else _key(v)


def _loc(ev: dict) -> tuple[Any, Any, float] | None:
    """Where an event is: (pid, tid, ts) as :meth:`LaunchIndex.index` keys them, or None without a ts."""
    ts = number(ev.get("ts"))
    return None if ts is None else (id_key(ev.get("pid")), id_key(ev.get("tid")), ts)


class _Flows:
    """The ac2g flow pairs of a trace and its runtime calls by location: how a kernel whose
    correlation names no runtime call finds the call that launched it."""

    def __init__(self) -> None:
        self.start: dict[Any, tuple[Any, Any, float]] = {}
        self.finish: dict[tuple[Any, Any, float], Any] = {}
        self.runtime_by_loc: dict[tuple[Any, Any, float], int] = {}

    def runtime_of(self, kernel: dict) -> int | None:
        loc = _loc(kernel)
        fid = self.finish.get(loc) if loc is not None else None
        start = self.start.get(fid) if fid is not None else None
        return self.runtime_by_loc.get(start) if start is not None else None


# Event category -> KERNEL, OP, RUNTIME, SCOPE (another CPU scope), COPY (memcpy / memset on the
# device) or NONE of these.
KERNEL, OP, RUNTIME, SCOPE, COPY, NONE = 0, 1, 2, 3, 4, -1
_CAT_KIND: dict[str, int] = {}
_COPY_CATS = DEVICE_CATS - KERNEL_CATS


def kind_of_category(cat: Any) -> int:
    """The kind of category ``cat`` (matched lower-cased), remembered for the few that traces use."""
    if not isinstance(cat, str):
        return NONE
    c = cat.lower()
    kind = (KERNEL if c in KERNEL_CATS else OP if c in CPU_OP_CATS else SCOPE if c in CPU_SCOPE_CATS
            else RUNTIME if c in RUNTIME_CATS else COPY if c in _COPY_CATS else NONE)
    if type(cat) is str and len(_CAT_KIND) < 1024:
        _CAT_KIND[cat] = kind
    return kind


# --- device copies ------------------------------------------------------------------------------
_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH|DtoA|AtoD|AtoA|AtoH|HtoA)\b")
# hipMemcpyKind / cudaMemcpyKind codes of a runtime call's ``kind`` arg.
_KIND_CODES = {0: "HtoH", 1: "HtoD", 2: "DtoH", 3: "DtoD"}


@dataclass(frozen=True)
class Copy:
    """A memcpy / memset on the device: its size in bytes when the event says it (``bytes``), its
    kind ("HtoD", "DtoH", "DtoD", "PtoP", ...; "memset" for a memset; None: unknown)."""

    nbytes: int | None
    kind: str | None


def copy_of(name: Any, args: dict) -> Copy:
    """The :class:`Copy` a memcpy / memset event describes: kind from its name
    ("Memcpy HtoD (Pinned -> Device)"; "Memset (Device)"), else its ``kind`` arg."""
    n = _size(args.get("bytes"))
    if isinstance(name, str) and name.lower().startswith("memset"):
        return Copy(n, "memset")
    m = _COPY_KIND.search(name) if isinstance(name, str) else None
    kind = m.group(1) if m else args.get("kind")
    return Copy(n, kind if isinstance(kind, str) and _COPY_KIND.fullmatch(kind) else None)


def runtime_copy(args: dict, copy: Copy) -> Copy:
    """``copy`` completed from the runtime call that launched it: ROCm writes the size (``size``)
    and the hipMemcpyKind code (``kind``) there, not on the device event."""
    n = copy.nbytes if copy.nbytes is not None else _size(args.get("size"))
    kind = copy.kind
    if kind is None:
        code = _size(args.get("kind"))
        kind = _KIND_CODES.get(code) if code is not None else None
    return Copy(n, kind)


# Bytes of a copy of n bytes by kind: (read, written, the roof it is measured against). A DtoD copy
# reads and writes device memory; a host copy crosses the host link once (the device side written
# for HtoD, read for DtoH); a peer copy crosses the interconnect once (read here, written there).
_COPY_RULES: dict[str, tuple[bool, bool, str]] = {
    "DtoD": (True, True, "hbm"), "memset": (False, True, "hbm"), "HtoD": (False, True, "host_link"),
    "DtoH": (True, False, "host_link"), "PtoP": (True, False, "interconnect"),
}


def copy_cost(copy: Copy) -> EventCost | None:
    """The cost of a memcpy / memset (:data:`_COPY_RULES`); None without a size or for a kind
    without a device roof (HtoH, array copies, unknown)."""
    rule = _COPY_RULES.get(copy.kind) if copy.kind is not None else None
    if rule is None or copy.nbytes is None:
        return None
    n = copy.nbytes
    return EventCost(flops=0, matmul_flops=0, bytes_read=n if rule[0] else 0, bytes_written=n if rule[1] else 0,
                     cost_source="shapes", memory_roof=rule[2])


def _size(v: Any) -> int | None:
    """A byte count from a number or a decimal string ("2560"), else None."""
    if isinstance(v, str):
        v = int(v) if v.strip().isdigit() else None
    n = number(v)
    return int(n) if n is not None and n >= 0 and n == int(n) else None


def shifted(indices: Iterable[int], base: int) -> Iterable[int]:
    """Event ``indices`` with ``base`` added (lazily); ``indices`` itself for 0 (the fast
    ``set.update`` / ``array.extend`` of a container)."""
    return map(base.__add__, indices) if base else indices


def _values_shifted(d: dict[Any, int], base: int) -> Any:
    """``d``'s items with ``base`` added to their values (event indices), lazily; ``d`` itself for 0."""
    return ((k, i + base) for k, i in d.items()) if base else d


def add_rebased(mine: dict[int, Any], theirs: dict[int, Any], base: int) -> None:
    """Add ``theirs``, keyed by event index, to ``mine``, with ``base`` added to its keys, in order."""
    if not base:
        mine.update(theirs)
        return
    for i, v in theirs.items():
        mine[i + base] = v


class LaunchIndex:
    """What finding each kernel's launching op needs, one event at a time: :meth:`index` each
    event in order, then :meth:`launches`. Keeps only what most traces need, not the events, so a
    caller that parses events one by one never has to hold them all.

    ``load(i)`` gives event ``i`` again (parsed anew, or from the caller's list); :meth:`launches`
    reads back with it what only some traces need: flow events (when a kernel's correlation names
    no runtime call), a kernel's location (for those flows) and a runtime call's External id (when
    its launching op cannot be found by nesting).
    """

    _STATE: tuple[str, ...] = ("by_thread", "is_scope", "ext_to_op", "dup_ext", "runtime_by_corr", "kernels",
                               "flows_later", "copies", "graph_launches", "tf32")
    _COUNTS: tuple[str, ...] = ("device_kernels", "cpu_ops", "duplicate_external_ids", "bad_time")

    def __init__(self, load: Callable[[int], Any]) -> None:
        self.stats = AugmentStats()
        # (pid, tid) -> the (ts, -dur, i) columns of CPU ops, other CPU scopes and runtime calls
        self.by_thread: dict[tuple[Any, Any], Columns] = {}
        self.is_scope: set[int] = set()
        self.ext_to_op: dict[Any, int] = {}
        self.dup_ext: set[Any] = set()
        self.runtime_by_corr: dict[Any, int] = {}
        # device event index (kernels, memcpy, memset) -> (correlation, External id, dur)
        self.kernels: dict[int, tuple[Any, Any, float]] = {}
        self.copies: dict[int, Copy] = {}
        """The memcpy / memset events among :attr:`kernels`."""
        self.graph_launches: set[int] = set()
        """Runtime calls that replay a CUDA graph (:data:`GRAPH_LAUNCHES`)."""
        self.tf32: set[int] = set()
        """Kernels whose names say they ran on TF32 tensor cores (:func:`~inductor_perf.roofline.roofs.tf32_kernel`),
        noted as they are indexed so that the costs never read a kernel again for its name."""
        self.replayed: set[int] = set()
        """Device events launched by one of :attr:`graph_launches`, filled by :meth:`launches`."""
        self._load = load
        self.flows_later = array("q")
        """Indices of flow events ("s"/"f"), parsed in :meth:`launches` only if a kernel needs them;
        :meth:`index` appends to it, and a caller that sees ``ph`` first may append flows itself."""

    def event(self, i: int) -> Any:
        """Event ``i`` read again (the ``load`` given), for what only some events need."""
        return self._load(i)

    def index(self, i: int, ev: dict) -> tuple[int, dict] | None:
        """Index event ``i`` (a dict). Returns ``(kind, args)`` for a device kernel (:data:`KERNEL`)
        and a CPU scope (:data:`OP` or :data:`SCOPE`), the events a caller may cost; else None."""
        ph = ev.get("ph")
        if ph != "X":
            if ph == "s" or ph == "f":
                self.flows_later.append(i)
            return None
        ts, dur = ev.get("ts"), ev.get("dur")
        # model.events.plain_time inline, else the reference: bad times skip the event, counted (any category)
        if not (type(ts) is float and type(dur) is float and 0.0 <= ts <= TS_MAX_US and 0.0 <= dur <= DUR_MAX_US):
            t = event_time(ts, dur)
            if t is None:
                self.stats.bad_time += 1
                return None
            ts, dur = t
        if not dur > 0.0:
            dur = 0.0  # -0.0
        cat = ev.get("cat")
        kind = _CAT_KIND.get(cat) if type(cat) is str else None
        if kind is None:
            kind = kind_of_category(cat)
        if kind < 0:
            return None
        args = ev.get("args")
        if type(args) is not dict:
            args = args if isinstance(args, dict) else {}
        if kind == KERNEL or kind == COPY:
            corr = args.get("correlation")
            self.kernels[i] = (id_key(corr) if corr is not None else None, args.get("External id"), dur)
            if kind == COPY:
                self.copies[i] = copy_of(ev.get("name"), args)
                return None
            if tf32_kernel(ev.get("name")):
                self.tf32.add(i)
            self.stats.device_kernels += 1
            return kind, args
        pid = ev.get("pid")
        if type(pid) is not int and type(pid) is not str:
            pid = _key(pid)
        tid = ev.get("tid")
        if type(tid) is not int and type(tid) is not str:
            tid = _key(tid)
        cols = self.by_thread.get((pid, tid))
        if cols is None:
            cols = self.by_thread[(pid, tid)] = new_columns()
        cols[0].append(ts)
        cols[1].append(-dur)
        cols[2].append(i)
        if kind == RUNTIME:
            corr = args.get("correlation")
            if corr is not None:
                self.runtime_by_corr[id_key(corr)] = i
            name = ev.get("name")
            if type(name) is str and name in GRAPH_LAUNCHES:
                self.graph_launches.add(i)
            return None
        self.add_scope(i, kind, args)
        return kind, args

    def add_scope(self, i: int, kind: int, args: dict) -> None:
        """:meth:`index`'s end for a CPU scope (:data:`OP` or :data:`SCOPE`) event ``i`` of these
        ``args``, once it is in :attr:`by_thread` (the streaming summary's fused loop calls it too)."""
        self.is_scope.add(i)
        if kind == OP:
            self.stats.cpu_ops += 1
            ext = args.get("External id")
            if ext is not None:
                k = id_key(ext)
                if k in self.ext_to_op:
                    self.dup_ext.add(k)
                    self.stats.duplicate_external_ids += 1
                else:
                    self.ext_to_op[k] = i

    def state(self) -> tuple:
        """What :meth:`index` recorded, as plain containers (picklable): another process's index
        over a later range of events hands this to :meth:`merge`."""
        s = self.stats
        counts = tuple(getattr(s, n) for n in self._COUNTS)
        return (counts, [getattr(self, n) for n in self._STATE])

    def merge(self, state: tuple, base: int = 0) -> None:
        """Take in the :meth:`state` of an index over events that all come after this one's, as if
        :meth:`index` had been called on them here, in order; ``base``: what to add to its event
        indices (a process that numbered its events from 0 while this one read those before them).
        Each of its containers is let go once taken in (``state`` is emptied of them)."""
        counts, parts = state
        s = self.stats
        for n, c in zip(self._COUNTS, counts):
            setattr(s, n, getattr(s, n) + c)
        st = dict(zip(self._STATE, parts))
        parts.clear()
        self._merge(st, base)

    def _merge(self, st: dict[str, Any], base: int) -> None:
        """:meth:`merge` of the containers named in :data:`_STATE` (a subclass adds its own), popped
        from ``st`` one at a time."""
        by_thread = self.by_thread
        for key, theirs in st.pop("by_thread").items():
            if base:
                theirs = (theirs[0], theirs[1], array("q", shifted(theirs[2], base)))
            cols = by_thread.get(key)
            if cols is None:
                by_thread[key] = theirs
            else:  # nested in parents(); the later range's indices are all larger
                for mine, more in zip(cols, theirs):
                    mine.extend(more)
        # Keyed by event index: the two ranges never share a key.
        add_rebased(self.kernels, st.pop("kernels"), base)
        add_rebased(self.copies, st.pop("copies"), base)
        self.is_scope.update(shifted(st.pop("is_scope"), base))
        self.graph_launches.update(shifted(st.pop("graph_launches"), base))
        self.tf32.update(shifted(st.pop("tf32"), base))
        # a later event overwrites, as in index()
        self.runtime_by_corr.update(_values_shifted(st.pop("runtime_by_corr"), base))
        self.flows_later.extend(shifted(st.pop("flows_later"), base))
        # An External id first seen in the later range is a duplicate when this range has it.
        mine, theirs, dup = self.ext_to_op, st.pop("ext_to_op"), self.dup_ext
        common = mine.keys() & theirs.keys()
        mine.update(_values_shifted(theirs, base) if not common else
                    ((k, i + base) for k, i in theirs.items() if k not in common))
        dup |= common
        dup |= st.pop("dup_ext")
        self.stats.duplicate_external_ids += len(common)

    def parents(self) -> dict[int, int]:
        """Nesting of the CPU-side events per thread: event -> innermost enclosing CPU scope."""
        return nest_columns(self.by_thread, self.is_scope)

    def _flows(self) -> _Flows:
        """Parse the flow events put aside and index the runtime calls by location."""
        flows = _Flows()
        load = self._load
        for i in self.flows_later:
            ev = load(i)
            cat = ev.get("cat")
            if not isinstance(cat, str) or cat.lower() not in FLOW_CATS:
                continue
            loc = _loc(ev)
            if loc is None:
                continue
            if ev.get("ph") == "s":
                flows.start[id_key(ev.get("id"))] = loc
            else:
                flows.finish[loc] = id_key(ev.get("id"))
        is_scope, by_loc = self.is_scope, flows.runtime_by_loc
        for (pid, tid), (starts, _negdur, index) in self.by_thread.items():
            for ts, i in zip(starts, index):
                if i not in is_scope:
                    # the later of two runtime calls at one place wins, as for correlations
                    j = by_loc.get((pid, tid, ts))
                    if j is None or i > j:
                        by_loc[(pid, tid, ts)] = i
        return flows

    def _runtime_ext(self, runtime: int) -> Any:
        """The External id a runtime call carries (that of its launching op), or None."""
        args = self._load(runtime).get("args")
        return args.get("External id") if isinstance(args, dict) else None

    def launches(self, parent: Mapping[int, int]) -> Iterator[tuple[int, int | None]]:
        """``(device event, launching op or None)`` for each kernel, memcpy and memset, in index
        order; ``parent`` is :meth:`parents`. A copy whose event lacks its size or kind gets them
        from its runtime call (:func:`runtime_copy`) in :attr:`copies`; a device event replayed by a
        CUDA graph goes in :attr:`replayed` before it is yielded."""
        kernels, by_corr, graphs = self.kernels, self.runtime_by_corr, self.graph_launches
        flows: _Flows | None = None
        for k in sorted(kernels):
            corr, ext, _dur = kernels[k]
            runtime = by_corr.get(corr) if corr is not None else None
            if runtime is None and self.flows_later:
                if flows is None:
                    flows = self._flows()
                runtime = flows.runtime_of(self._load(k))
            if graphs and runtime in graphs:
                self.replayed.add(k)
            if runtime is not None and k in self.copies:
                c = self.copies[k]
                if c.nbytes is None or c.kind is None:
                    args = self._load(runtime).get("args")
                    if isinstance(args, dict):
                        self.copies[k] = runtime_copy(args, c)
            # The runtime call sits inside its launching op on the CPU thread: exact, even when
            # External ids repeat.
            launch = parent.get(runtime) if runtime is not None else None
            if launch is None:
                if ext is None and runtime is not None:
                    ext = self._runtime_ext(runtime)  # it carries its launching op's External id
                if ext is not None:
                    ek = _key(ext)
                    launch = None if ek in self.dup_ext else self.ext_to_op.get(ek)
            yield k, launch
