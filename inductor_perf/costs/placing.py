"""Where the costs of a plain profiler trace go (:meth:`inductor_perf.costs.from_shapes.CostJoin.finish`): each
costed op's cost on the device events it launched, split over them by duration (:func:`split_shares`),
a memcpy / memset's own bytes, a collective's message; and the label of every device event: the op
that launched it, and why it has no cost when it has none (docs/costs.md, "Labels").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from ..devices.spec import TF32
from ..model import events as evs
from ..model.event_cost import EventCost
from .comm import RPC_NAME, CommInfo, comm_cost
from .launch import copy_cost
from .ops.formulas import NO_SHAPES, UNKNOWN_OP

if TYPE_CHECKING:  # pragma: no cover
    from .from_shapes import CostJoin

Label = Mapping[str, Any]
"""The args a device event gets besides its cost: ``launch_op``, ``not_costed`` (and ``comm_op``
for a collective with no recorded size)."""

NO_LAUNCH_OP = "no_launch_op"


def split_shares(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (non-negative ints, not all 0) into ints that
    sum to exactly ``total``: each gets the floor of its exact share, and what the floors leave goes
    one by one to the largest remainders (the earlier on a tie).

    >>> split_shares(10, [1, 1, 1])
    [4, 3, 3]
    """
    w_sum = sum(weights)
    shares = [total * w // w_sum for w in weights]
    left = total - sum(shares)
    if left:
        order = sorted(range(len(weights)), key=lambda j: (-(total * weights[j] % w_sum), j))
        for j in order[:left]:
            shares[j] += 1
    return shares


class Placer:
    """:meth:`CostJoin.finish`'s placing of costs on events, and the labels of device events."""

    def __init__(self, join: "CostJoin", parent: dict[int, int], shadowed: set[int],
                 dist_info: Mapping[str, Any] | None) -> None:
        self.join, self.parent, self.shadowed, self.dist_info = join, parent, shadowed, dist_info
        self.costs: dict[int, EventCost] = {}
        self.labels: dict[int, Label] = {}
        self.comm_groups: dict[int, list[int]] = {}
        """Sizing scope (or the kernel itself, sized by its own args) -> its collective kernels."""
        self._label_cache: dict[tuple[Any, ...], Label] = {}
        self._plain: dict[str | None, Label] = {}
        """Op name -> the label of a costed kernel it launched (no reason, no collective)."""

    def label(self, op: int | None, reason: str | None = None, comm_op: str | None = None) -> Label:
        """The (shared) label dict of an event launched by ``op`` with no cost for ``reason``."""
        name = self.join.names.get(op) if op is not None else None
        key = (name, reason, comm_op)
        got = self._label_cache.get(key)
        if got is None:
            got = {}
            if name is not None:
                got[evs.LAUNCH_OP] = name
            if comm_op is not None:
                got[evs.COMM_OP] = comm_op
            if reason is not None:
                got[evs.NOT_COSTED] = reason
            got = self._label_cache[key] = got
            if reason is None and comm_op is None:
                self._plain[name] = got
        return got

    def _reason(self, launch: int) -> str:
        """Why a kernel launched by ``launch`` (no costed op above it) has no cost: the reason of the
        innermost op above it that has a formula, else "unknown_op"."""
        failed, parent = self.join.failed, self.parent
        p: int | None = launch
        while p is not None:
            r = failed.get(p)
            if r is not None:
                r = r.split(":", 1)[0]
                return r if r in evs.NOT_COSTED_REASONS else "bad_shapes"
            p = parent.get(p)
        return UNKNOWN_OP

    def place(self) -> dict[int, EventCost]:
        """Costs by event index; fills the join's :attr:`~CostJoin.labels` and stats."""
        join, stats, costs, labels = self.join, self.join.stats, self.costs, self.labels
        own, parent, shadowed, pres = join.own, self.parent, self.shadowed, join.pre
        groups: dict[int, int | list[int]] = {}  # costed op -> its kernel, or its kernels in index order
        served: set[int] = set()  # costed ops whose work other events carry (launch args, copies, collectives)
        special = pres.keys() | join.comm_kernels.keys() | join.copies.keys()
        without = 0
        for k, launch in join.launches(parent):
            target = launch  # the innermost costed op at or above the launch (a hot loop: inlined)
            while target is not None and target not in own:
                target = parent.get(target)
            if launch is None:
                without += 1
            if k not in special:
                # A costed op shadowed by a costed op inside it still carries the kernels it
                # launched itself (a fused backward node around its buffer fills).
                if target is not None and (target not in shadowed or target == launch):
                    g = groups.get(target)
                    if g is None:
                        groups[target] = k  # most ops launch one kernel: a list only for a second
                    elif type(g) is int:
                        groups[target] = [g, k]
                    else:
                        g.append(k)
                else:
                    why = (NO_LAUNCH_OP if launch is None else UNKNOWN_OP if target is not None
                           else self._reason(launch))
                    if (why is NO_LAUNCH_OP or why == UNKNOWN_OP) and k in join.replayed:  # filled as launches() goes
                        why = evs.GRAPH_REPLAY
                    labels[k] = self.label(launch, why)
                continue
            pre = pres.get(k)
            if pre is not None:
                costs[k] = pre
                stats.triton_costed += 1
                labels[k] = self.label(launch)
            elif k in join.comm_kernels:
                self._comm(k, launch)
            else:
                self._copy(k, launch)
                if target is not None and own[target].flops:
                    continue  # a copy does not do the op's arithmetic (the GEMM beside a memset)
            if target is not None:
                served.add(target)
        stats.kernels_without_launch += without
        self._split_comm()
        costed = lower = 0
        names, by_name = join.names, self._plain  # the launch_op label of each op name, looked up once
        for i, cost in join.own.items():
            ks = groups.get(i)
            if ks is None:
                if i in shadowed or i in served:
                    continue
                costs[i] = cost
            elif type(ks) is int:  # _split's common case, inlined
                k = ks
                costs[k] = cost
                name = names.get(i)
                label = by_name.get(name)
                labels[k] = label if label is not None else self.label(i)
            else:
                self._split(i, cost, ks)
            costed += 1
            lower += cost.bound is not None
        stats.ops_costed = costed
        stats.ops_lower_bound = lower
        join.labels = labels
        self._tf32(groups)
        return costs

    def _tf32(self, groups: Mapping[int, int | list[int]]) -> None:
        """The kernels of a float32 matmul op of which one ran on TF32 tensor cores (its name says so:
        :func:`roofline.roofs.tf32_kernel`) are measured against the TF32 roof: their costs' dtype becomes
        "tf32" (a split-K reduce beside a ``tensorop_s1688gemm`` shares its op's work, and its roof).
        The index noted those names (``join.tf32``) as it read the kernels."""
        join, costs, tf32 = self.join, self.costs, self.join.tf32
        for op, ks in groups.items():
            cost = join.own.get(op)
            if cost is None or cost.matmul_flops <= 0 or str(cost.dtype).removeprefix("torch.") != "float32":
                continue
            ks = [ks] if type(ks) is int else ks
            if any(k in tf32 for k in ks):
                for k in ks:
                    c = costs.get(k)
                    if c is not None:
                        costs[k] = replace(c, dtype=TF32)

    def _split(self, op: int, cost: EventCost, ks: list[int]) -> None:
        """Put ``cost`` on the kernels ``ks`` (two or more) of ``op``, in proportion to their durations
        (:func:`split_shares`, in ns; equal shares when none has a duration)."""
        label = self.label(op)
        self.join.stats.ops_with_several_kernels += 1
        kernels = self.join.kernels
        w = [max(0, round(kernels[k][2] * 1000)) for k in ks]
        if not any(w):
            w = [1] * len(ks)
        matmul = split_shares(cost.matmul_flops, w)
        other = split_shares(cost.flops - cost.matmul_flops, w)
        read = split_shares(cost.bytes_read, w)
        written = split_shares(cost.bytes_written, w)
        for j, k in enumerate(ks):
            # The costs of shapes and launch args carry only these fields.
            self.costs[k] = EventCost(flops=matmul[j] + other[j], matmul_flops=matmul[j], bytes_read=read[j],
                                      bytes_written=written[j], dtype=cost.dtype, cost_source=cost.cost_source,
                                      bound=cost.bound)
            self.labels[k] = label

    def _copy(self, k: int, launch: int | None) -> None:
        """A memcpy / memset carries its own bytes (:func:`copy_cost`), whatever op launched it."""
        copy = self.join.copies[k]
        cost = copy_cost(copy)
        if cost is None:
            self.join.stats.copies_unsized += 1
            self.labels[k] = self.label(launch, NO_SHAPES if copy.nbytes is None else UNKNOWN_OP)
            return
        self.join.stats.copies_costed += 1
        self.costs[k] = cost
        self.labels[k] = self.label(launch)

    def _comm(self, k: int, launch: int | None) -> None:
        """A collective kernel's cost from its own args and its enclosing scopes (nearest first;
        ``record_param_comms`` before ``nccl:*``, whose sizes are less direct)."""
        join = self.join
        name_op, own = join.comm_kernels[k]
        sources: list[tuple[str, CommInfo]] = [("kernel", own)] if own is not None else []
        scopes: dict[str, int] = {}
        annotations: list[tuple[str, CommInfo]] = []
        p = launch
        while p is not None:
            got = join.comm_scopes.get(p)
            if got is not None:
                (sources if got[0] == RPC_NAME else annotations).append(got)
                scopes.setdefault(got[0], p)
            p = self.parent.get(p)
        sources += annotations
        cost = comm_cost(name_op or "", sources, self.dist_info)
        if cost is None:
            join.stats.collectives_unsized += 1
            op = next((i.op for _s, i in sources if i.op is not None), name_op)
            self.labels[k] = self.label(launch, NO_LAUNCH_OP if launch is None else NO_SHAPES, op)
            return
        join.stats.collectives_sized += 1
        self.costs[k] = EventCost(flops=0, matmul_flops=0, bytes_read=0, bytes_written=0, memory_roof="interconnect",
                                  comm=cost)
        scope = scopes.get(cost.size_source)
        self.labels[k] = self.label(scope if scope is not None else launch)
        self.comm_groups.setdefault(scope if scope is not None else k, []).append(k)

    def _split_comm(self) -> None:
        """S of a scope that launched several collective kernels, split over them by duration
        (:func:`split_shares`): each then reads as the group's rate."""
        kernels = self.join.kernels
        for ks in self.comm_groups.values():
            if len(ks) < 2:
                continue
            w = [max(0, round(kernels[k][2] * 1000)) for k in ks]
            if not any(w):
                w = [1] * len(ks)
            whole = self.costs[ks[0]].comm
            for k, share in zip(ks, split_shares(whole.nbytes, w)):
                self.costs[k] = replace(self.costs[k], comm=replace(whole, nbytes=share))
