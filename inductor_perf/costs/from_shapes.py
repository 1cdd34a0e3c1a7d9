"""Costs of a plain torch.profiler trace from the shapes it recorded (``record_shapes=True``): each
op's FLOPs and bytes (:mod:`inductor_perf.costs.ops.formulas`), counted once.

An op's cost goes on the device kernels it launched (found by :mod:`inductor_perf.costs.launch`;
split over them by duration when several), else on the CPU op itself; of nested ops with formulas
only the innermost one that could be costed counts, unless the outer one does arithmetic the inner
one does not (:func:`_shadows`). memcpy / memset events carry their own bytes,
collective kernels their message (:mod:`inductor_perf.costs.comm`). Every device event also gets a
label (:attr:`CostJoin.labels`): the op that launched it, and why it has no cost when it has none.
Where each cost goes is :mod:`inductor_perf.costs.placing`'s.
"""

from __future__ import annotations

import importlib
from array import array
from typing import Any, Callable, Mapping

from ..model import events as evs
from ..model.event_cost import AugmentStats, EventCost
from ..model.events import COST_SOURCE, KERNEL_FLOP, KERNEL_MATMUL_FLOP, KERNEL_NUM_GB, number
from ..traces.files import validate_trace
from .comm import ANNOTATION_PREFIX, RPC_NAME, CommInfo, from_annotation, from_args, is_comm_kernel, normalize_op
from .launch import KERNEL, LaunchIndex, add_rebased, shifted
from .ops.fbgemm import TBE_PREFIXES, embedding_backward_key, embedding_forward_key, paired_backward_cost
from .ops.formulas import NO_SHAPES, UNKNOWN_DTYPE, UNKNOWN_OP, OpCost
from .ops.meta import PENDING, op_cost_or_reason, wants_cost
from .placing import Label, Placer


def warm_up() -> None:
    """Import what attribution, the device table and the roofline need before a large trace is
    loaded (all torch-free: dtypes are handled by name, see
    :func:`~inductor_perf.costs.ops.formulas.parse_dtype_name`)."""
    for m in ("inductor_perf.devices.table", "inductor_perf.roofline.point"):
        importlib.import_module(m)


def before_fork() -> None:
    """Open the op-meta disk cache before forking a worker that costs ops: its file name needs torch's
    version (``importlib.metadata``), which a worker must not import (:class:`augment.stream.worker.Worker`);
    the worker inherits it open."""
    from .ops.meta import _cache

    _cache()


def _precost(args: dict) -> EventCost | None:
    """Cost already on the event (Triton launches with benchmark_kernel / profile_bandwidth)."""
    if KERNEL_FLOP not in args and KERNEL_NUM_GB not in args:
        return None  # the usual case, decided without the lookups below
    flop = args.get(KERNEL_FLOP)
    gb = args.get(KERNEL_NUM_GB)
    flop_n = number(flop)
    gb_n = number(gb)
    if flop_n is None and gb_n is None:
        return None
    flops = int(flop_n) if flop_n is not None and flop_n >= 0 else 0
    nbytes = int(round(gb_n * 1e9)) if gb_n is not None and gb_n >= 0 else 0
    src = args.get(COST_SOURCE)
    matmul = number(args.get(KERNEL_MATMUL_FLOP))
    return EventCost(flops=flops, matmul_flops=int(matmul) if matmul is not None and 0 <= matmul <= flops else 0,
                     bytes_read=nbytes, bytes_written=0,
                     cost_source=src if src in ("tag", "triton") else "triton",
                     bound=evs.LOWER_BOUND if args.get(evs.COST_BOUND) == evs.LOWER_BOUND else None)


def costs_from_shapes(trace: dict) -> tuple[dict[int, EventCost], AugmentStats]:
    """Per-event costs of a plain torch.profiler trace recorded with ``record_shapes=True``.

    Each op's cost is counted once: on its device kernel when it launched any (joined through
    ``correlation`` / ac2g flows / ``External id``; split over them by duration when several), else on the
    CPU op itself. Among nested ops with formulas (``aten::convolution`` > ``aten::_convolution`` >
    ``aten::mkldnn_convolution``) only the innermost one that could be costed counts.

    >>> costs, stats = costs_from_shapes(load_trace("resnet.pt.trace.json"))  # doctest: +SKIP
    """
    costs, _labels, stats = costs_and_labels(trace)
    return costs, stats


def costs_and_labels(trace: dict) -> tuple[dict[int, EventCost], dict[int, Label], AugmentStats]:
    """:func:`costs_from_shapes` and the labels of the device events (:attr:`CostJoin.labels`)."""
    validate_trace(trace)
    events = trace["traceEvents"]
    join = CostJoin(load=events.__getitem__)
    add = join.add
    for i, ev in enumerate(events):
        if isinstance(ev, dict):
            add(i, ev)
    costs, stats = join.finish(len(events), trace.get("distributedInfo"))
    return costs, join.labels, stats


def _memo_key(name: str, args: dict) -> Any:
    """An exact key for an op's recorded inputs: orjson's encoding when it is unambiguous (it writes
    NaN as null and refuses >64-bit ints), else ``repr`` (slower, same meaning)."""
    inputs = (args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs"))
    if _dumps is not None:
        try:
            b = _dumps(inputs)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
        else:
            if b"null" not in b:
                return name, b
    return name, repr(inputs)


def _orjson_dumps() -> Any:
    try:
        from orjson import dumps
    except ImportError:
        return None
    return dumps


_dumps = _orjson_dumps()


_KF, _KGB = KERNEL_FLOP, KERNEL_NUM_GB
# What CostJoin.cost does with a CPU op of a given name (_op_role).
_COSTED, _NO_COST, _TBE, _TBE_NO_COST, _COMM_SCOPE = "costed", "no_cost", "tbe", "tbe_no_cost", "comm_scope"


def _op_role(name: str) -> str:
    """A collective's scope (record_param_comms, ``nccl:*``: sizes only); else whether an op may
    have a cost (:func:`~inductor_perf.costs.ops.meta.wants_cost`), and for an fbgemm TBE op, that it is
    kept for pairing its backward with its forward too."""
    if name == RPC_NAME or name.startswith(ANNOTATION_PREFIX):
        return _COMM_SCOPE
    wanted = wants_cost(name)
    if name.startswith(TBE_PREFIXES):
        return _TBE if wanted else _TBE_NO_COST
    return _COSTED if wanted else _NO_COST


_SHAPE_KEYS = ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")


class CostJoin(LaunchIndex):
    """:func:`costs_from_shapes` one event at a time: ``add(i, event)`` for each dict event in
    order, then ``finish(n_events)``. Keeps only what the join of most traces reads, not the events,
    so a caller that parses events one by one never has to hold them all; ``load(i)`` gives event
    ``i`` again (see :class:`~inductor_perf.costs.launch.LaunchIndex`).
    """

    _STATE = LaunchIndex._STATE + ("names", "own", "failed", "recognized", "pre", "comm_kernels", "comm_scopes",
                                   "pending", "tbe_forwards", "tbe_backwards")
    _COUNTS = LaunchIndex._COUNTS + ("triton_costed",)

    def __init__(self, load: Callable[[int], Any]) -> None:
        super().__init__(load)
        self.own: dict[int, EventCost] = {}
        self.memo: dict[Any, Any] = {}
        self.failed: dict[int, str] = {}
        self.recognized: set[int] = set()
        self.pre: dict[int, EventCost] = {}
        """Kernel -> the cost its launch args carry (:func:`_precost`)."""
        self.pending: dict[Any, tuple[str, dict, array]] = {}
        """Ops whose cost needs torch, left to the parent by a forked worker (:data:`costs.ops.meta.PENDING`):
        memo key -> (op name, its recorded shapes, the events of that signature)."""
        self._key: Any = None
        """The memo key of the op :meth:`_op_result` last answered for."""
        self.tbe_forwards: list[tuple[float, str, dict]] = []
        """fbgemm's TBE forward ops: (ts, name, recorded shapes), to cost their backward nodes."""
        self.tbe_backwards: list[tuple[int, float, str, Any]] = []
        """Backward TBE nodes: (event, ts, name, grad dims)."""
        self.comm_kernels: dict[int, tuple[str | None, CommInfo | None]] = {}
        """Collective kernel -> (the collective its name spells, what its own args say)."""
        self.comm_scopes: dict[int, tuple[str, CommInfo]] = {}
        """``record_param_comms`` op / ``nccl:*`` annotation -> (which of the two, what it says)."""
        self.labels: dict[int, Label] = {}
        """Device event -> its label (:data:`Label`), filled by :meth:`finish`."""
        self.names: dict[int, str] = {}
        """CPU scope -> its name, for ``launch_op`` (one str object per distinct name)."""
        self._roles: dict[str, tuple[str, str, dict[bytes, Any]]] = {}
        """Op name -> what :meth:`cost` does with it (:func:`_op_role`), decided once per name; the
        name object :attr:`names` holds; and the results of :meth:`_op_result` for this name by the
        orjson bytes of its recorded inputs (:func:`_memo_key`), PENDING left out."""

    def add(self, i: int, ev: dict) -> None:
        """Index event ``i`` (a dict) and cost it when it is an op with a formula."""
        got = self.index(i, ev)
        if got is not None:
            self.cost(i, ev, *got)

    def cost(self, i: int, ev: dict, kind: int, args: dict) -> None:
        """The costing half of :meth:`add`, for what :meth:`index` returned (a hot loop calls the
        two itself: one Python call less per event)."""
        self.cost_of(i, ev.get("name"), kind, args, ev.get("ts"))

    def cost_of(self, i: int, name: Any, kind: int, args: dict, ts: Any = None) -> None:
        """:meth:`cost` of an event given by its name, start (read only for fbgemm's TBE ops) and args,
        for a caller that has read them already (:mod:`inductor_perf.summary.stream.loop`)."""
        if kind == KERNEL:
            if _KF in args or _KGB in args:
                pre = _precost(args)
                if pre is not None:
                    self.pre[i] = pre
            if type(name) is str and name.find("ccl", 0, 24) >= 0 and is_comm_kernel(name):
                self.comm_kernels[i] = (normalize_op(name), from_args(args))
            return
        if type(name) is not str:
            self._apply(i, args, None)
            return
        got = self._roles.get(name)
        if got is None:
            got = self._roles[name] = (_op_role(name), name, {})
        role, self.names[i], hits = got
        if role is _COMM_SCOPE:  # sizes for the collectives inside, never a cost of its own
            info = from_annotation(name, args) if name != RPC_NAME else from_args(args)
            if info is not None:
                self.comm_scopes[i] = ("nccl_annotation" if name != RPC_NAME else RPC_NAME, info)
            return
        if role is _TBE or role is _TBE_NO_COST:
            self._note_tbe(i, ts, name, args)
        if role is _NO_COST or role is _TBE_NO_COST:
            result = None
        else:
            # _op_result's memo hit, inlined (a hot loop): this name's costs by their inputs' bytes
            key = None
            if _dumps is not None:
                g = args.get
                try:
                    key = _dumps((g("Input Dims"), g("Input type"), g("Concrete Inputs")))
                except TypeError:  # orjson.JSONEncodeError is a TypeError
                    pass
            result = hits.get(key, hits) if key is not None else hits
            if result is hits:
                result = self._op_result(name, args)
            if type(result) is EventCost:  # _apply's common case, inlined
                self.recognized.add(i)
                self.own[i] = result
                return
            if result is PENDING:
                # A forked worker leaves torch's shape rules to the parent (one import of torch,
                # once per signature): the ops of each signature, costed on merge.
                self.pending[self._key][2].append(i)
                return
        self._apply(i, args, result)

    def outcome(self, i: int, name: str) -> tuple | None:
        """What :meth:`cost_of` recorded for CPU op ``i`` named ``name`` whose args carry no cost marks,
        when that depends on nothing but the name and the recorded inputs (``Input Dims``, ``Input
        type``, ``Concrete Inputs``, as :attr:`_roles`' memo has it): :meth:`replay` records the same for
        another op of that name and inputs. None otherwise (a TBE op, a collective's scope, an op left
        pending for the parent)."""
        got = self._roles.get(name)
        if got is None:
            return None
        role, name_obj, _ = got
        if role is _NO_COST:
            return (name_obj, None, None)
        if role is not _COSTED:
            return None
        if i in self.recognized:
            own = self.own.get(i)
            if own is not None:
                return (name_obj, True, own)
            failed = self.failed.get(i)
            return (name_obj, False, failed) if failed is not None else None
        if i in self.own:
            return None
        pending = self.pending.get(self._key)
        if pending is not None and pending[2] and pending[2][-1] == i:
            return None  # left to the parent (PENDING): a later op of these inputs is pending too
        return (name_obj, None, None)  # no formula for it, or nothing to cost

    def replay(self, i: int, outcome: tuple) -> None:
        """Record for CPU op ``i`` the :meth:`outcome` of another, as :meth:`cost_of` would."""
        name_obj, own, value = outcome
        self.names[i] = name_obj
        if own is None:
            return
        self.recognized.add(i)
        if own:
            self.own[i] = value
        else:
            self.failed[i] = value

    def _op_result(self, name: str, args: dict) -> Any:
        """The memoized :func:`op_cost_or_reason` of an op (an EventCost for a cost)."""
        # Steps repeat the same layers: memoize by the recorded inputs (repr is a cheap,
        # exact key for JSON values).
        memo = self.memo
        memo_key = _memo_key(name, args)
        result = memo.get(memo_key, memo)
        if result is memo:
            result = op_cost_or_reason(name, args)
            if isinstance(result, OpCost):
                # EventCost is frozen: one instance can serve every op with these inputs.
                result = EventCost(flops=int(result.flops), matmul_flops=int(result.matmul_flops),
                                   bytes_read=int(result.bytes_read), bytes_written=int(result.bytes_written),
                                   dtype=result.dtype, cost_source="shapes", bound=result.bound)
            if isinstance(memo_key[1], bytes):
                # orjson's output keeps its whole write buffer (~4 KB) alive; store a tight copy.
                memo_key = (memo_key[0], memoryview(memo_key[1]).tobytes())
            memo[memo_key] = result
            if result is PENDING:
                self.pending[memo_key] = (name, {k: args.get(k) for k in _SHAPE_KEYS}, array("q"))
            else:
                role = self._roles.get(name)
                if role is not None and type(memo_key[1]) is bytes:
                    role[2][memo_key[1]] = result
        self._key = memo_key
        return result

    def _apply(self, i: int, args: dict, result: Any) -> None:
        """Record op ``i``'s result: its cost, the reason it has none, or nothing to cost."""
        if result is None or (type(result) is str and result == UNKNOWN_OP):
            pre = _precost(args) if (_KF in args or _KGB in args) else None
            if pre is not None:
                self.own[i] = pre
                self.stats.triton_costed += 1
            return
        self.recognized.add(i)
        if type(result) is EventCost:
            self.own[i] = result
        else:
            self.failed[i] = result

    def _note_tbe(self, i: int, ts: Any, name: str, args: dict) -> None:
        """Keep what pairing a backward TBE node with its forward needs (:meth:`_pair_tbe`); ``ts``:
        the op's start as the trace has it."""
        ts = number(ts)
        if ts is None:
            return
        if embedding_forward_key(name) is not None:
            self.tbe_forwards.append((ts, name, {k: args.get(k) for k in _SHAPE_KEYS}))
        elif embedding_backward_key(name) is not None:
            dims = args.get("Input Dims")
            if isinstance(dims, list) and dims:
                self.tbe_backwards.append((i, ts, name, dims[0]))

    def _pair_tbe(self) -> None:
        """A backward TBE node records only its grad output: with its forward's shapes
        (:func:`~inductor_perf.costs.ops.fbgemm.paired_backward_cost`) it is costed in full
        (indices, updated rows, optimizer state), replacing the grad-only lower bound."""
        by_opt: dict[str, list[tuple[float, str, dict]]] = {}
        for f in self.tbe_forwards:
            by_opt.setdefault(embedding_forward_key(f[1]) or "", []).append(f)
        for fs in by_opt.values():
            fs.sort(key=lambda f: f[0])
        for i, ts, name, grad in self.tbe_backwards:
            fs = by_opt.get(embedding_backward_key(name) or "")
            got = paired_backward_cost(grad, name, fs, ts) if fs and i in self.own else None
            if got is not None:
                self.own[i] = EventCost(flops=int(got.flops), matmul_flops=0, bytes_read=int(got.bytes_read),
                                        bytes_written=int(got.bytes_written), dtype=got.dtype, cost_source="shapes")
                self.stats.tbe_backwards_paired += 1

    def _merge(self, st: dict[str, Any], base: int) -> None:
        super()._merge(st, base)
        self.tbe_forwards.extend(st.pop("tbe_forwards"))
        self.tbe_backwards.extend((i + base, *rest) for i, *rest in st.pop("tbe_backwards"))
        for name, args, ops in st.pop("pending").values():
            result = self._op_result(name, args)
            if result is PENDING:  # this process defers too: pass them on
                self.pending[self._key][2].extend(shifted(ops, base))
            else:
                for i in ops:
                    self._apply(i + base, args, result)
        # Keyed by event index: the two ranges never share a key.
        for n in ("names", "own", "failed", "pre", "comm_kernels", "comm_scopes"):
            add_rebased(getattr(self, n), st.pop(n), base)
        self.recognized.update(shifted(st.pop("recognized"), base))

    def finish(self, n_events: int, dist_info: Mapping[str, Any] | None = None
               ) -> tuple[dict[int, EventCost], AugmentStats]:
        """The costs by event index, and the stats of a trace of ``n_events`` events;
        ``dist_info`` is the trace's ``distributedInfo`` (a collective's group size when its
        events do not say it). Fills :attr:`labels`."""
        self.stats.events = n_events
        if self.tbe_backwards:
            self._pair_tbe()
        parent = self.parents()
        self._prefer_exact(parent)
        shadowed = self._count_failures(parent)
        return Placer(self, parent, shadowed, dist_info).place(), self.stats

    def _prefer_exact(self, parent: dict[int, int]) -> None:
        """A lower bound (``EventCost.bound``) inside an op costed exactly gives way to it when that
        op would then carry its kernels (no other costed op inside shadows it): the inner op is not
        costed (``no_shapes``), as before bounds. E.g. ``aten::sum(x, dtype)`` recorded around
        ``aten::sum.dim_IntList`` without its dims."""
        own = self.own
        under: dict[int, list[int]] = {}  # exact op -> the bounds nearest inside it
        for i in [i for i, c in own.items() if c.bound is not None]:
            p = parent.get(i)
            while p is not None and (p not in own or own[p].bound is not None):
                p = parent.get(p)
            if p is not None:
                under.setdefault(p, []).append(i)
        if not under:
            return  # the usual case: no walk over every costed op
        inner = {i for bounds in under.values() for i in bounds}
        shadowed: set[int] = set()  # as _count_failures decides it, without those bounds
        for i in own:
            p = parent.get(i) if i not in inner else None
            while p is not None:
                if p in under and _shadows(own[i], own[p]):
                    shadowed.add(p)
                p = parent.get(p)
        for p, bounds in under.items():
            if p not in shadowed:
                for i in bounds:
                    del own[i]
                    self.failed[i] = NO_SHAPES

    def _count_failures(self, parent: dict[int, int]) -> set[int]:
        """Count the ops that could not be costed, once per nest; returns the costed ops that a
        costed op below them shadows (only the innermost costed op of a nest counts)."""
        own, recognized, stats = self.own, self.recognized, self.stats
        shadowed: set[int] = set()
        covered: set[int] = set()  # recognized ops with a costed op at or below them
        for i in own:
            covered.add(i)
            p = parent.get(i)
            while p is not None:
                if p in own and _shadows(own[i], own[p]):
                    shadowed.add(p)
                if p in recognized:
                    covered.add(p)
                p = parent.get(p)
        unknown_names: set[str] = set()
        for i, reason in self.failed.items():
            if i in covered or _has_recognized_ancestor(i, parent, recognized):
                continue  # counted once per nest, at its outermost op
            if reason.startswith(UNKNOWN_DTYPE):
                stats.unknown_dtypes += 1
                unknown_names.add(reason.split(":", 1)[1])
            elif reason == NO_SHAPES:
                stats.ops_without_shapes += 1
            else:
                stats.ops_bad_shapes += 1
        stats.unknown_dtype_names = tuple(sorted(unknown_names))
        return shadowed


def _shadows(inner: EventCost, outer: EventCost) -> bool:
    """Whether a costed op inside a costed op stands for it (only the innermost costed op of a nest
    counts) - unless the outer op does arithmetic the inner one does not: a matmul is not shadowed by
    the copy or fill it does inside, nor an op with FLOPs by one without, such as the conversion of
    its input or the fill of its output (CPU ``aten::sum`` of int32 runs ``aten::to`` and
    ``aten::fill_`` inside, then reduces the int64 copy itself). Both are then costed, each with
    the traffic it moves."""
    return bool(inner.matmul_flops or not outer.matmul_flops) and bool(inner.flops or not outer.flops)


def _has_recognized_ancestor(i: int, parent: dict[int, int], recognized: set[int]) -> bool:
    p = parent.get(i)
    while p is not None:
        if p in recognized:
            return True
        p = parent.get(p)
    return False
