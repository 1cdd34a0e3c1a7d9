"""Join a profiler trace's kernel events to compile-time tags, through our per-call markers.

Each compiled-graph call is wrapped in a marker event naming the graph instance (and, under
dynamic shapes, the call's size-symbol values; see :mod:`inductor_perf.markers`). Inside a marker,
on the same thread, the kernel events are the outermost events whose names are the graph's tag
``profiler_name``s; the k-th event of a name is the k-th call site of that name. GPU tags pass
their cost on to the device kernels launched from inside that event (``correlation``).

Pure: trace and tag lookup in, per-event costs out.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any, Callable, Mapping

from .event_cost import EventCost, JoinStats
from .markers import MARKER_PREFIX, parse_marker
from .tags import GraphTags, KernelTag

# Device-side event categories that can carry a kernel's cost (older Kineto capitalized them).
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})


def _is_device_side(cat: Any) -> bool:
    """Events on a GPU timeline: kernels and copies, and the GPU-stream copies Kineto makes of
    user annotations (``gpu_user_annotation``), which must not count as graph calls."""
    return isinstance(cat, str) and (cat.lower() in _DEVICE_CATS or cat.lower().startswith("gpu_"))


def _dtype(tag: KernelTag) -> Any:
    import torch

    for node in tag.nodes:
        for name in node.dtypes:
            dt = getattr(torch, name, None)
            if isinstance(dt, torch.dtype):
                return dt
    return None


def event_cost(tag: KernelTag, symbols: Mapping[str, int] | None) -> EventCost:
    """The cost of one call of ``tag`` (symbolic costs evaluated with ``symbols``)."""
    t = tag.evaluated(symbols)
    return EventCost(
        flops=int(t.flops), matmul_flops=int(t.matmul_flops),
        bytes_read=int(t.bytes_read), bytes_written=int(t.bytes_written),
        dtype=_dtype(tag), source=tag.source, module_path=tag.module_path,
        node_names=tuple(n.name for n in tag.nodes), stack_trace=tag.stack_trace,
        kind=tag.kind, graph_id=tag.graph_id, is_backward=tag.is_backward, cost_source="tag",
        eager_ops=tag.eager_ops, tag=tag,
    )


def _split(cost: EventCost, weights: list[float]) -> list[EventCost]:
    """Share one op's cost among the device kernels it launched, by duration."""
    import dataclasses

    total = sum(weights)
    # Kernels without durations share equally.
    shares = [w / total for w in weights] if total else [1.0 / len(weights)] * len(weights)
    out = []
    acc = [0, 0, 0, 0]
    fields = ("flops", "matmul_flops", "bytes_read", "bytes_written")
    for k, share in enumerate(shares):
        vals = []
        for j, f in enumerate(fields):
            full = getattr(cost, f)
            v = full - acc[j] if k == len(shares) - 1 else int(round(full * share))
            acc[j] += v
            vals.append(v)
        out.append(dataclasses.replace(cost, **dict(zip(fields, vals))))
    return out


def _is_kernel(ev: dict) -> bool:
    return str(ev.get("cat")).lower() == "kernel"


def _call_cost(tag: KernelTag, symbols: Mapping[str, int] | None, stats: JoinStats) -> EventCost | None:
    """One call's cost, or None (counted) when the trace lacks a size its symbolic cost needs."""
    try:
        return event_cost(tag, symbols)
    except ValueError:
        stats.symbolic_unresolved += 1
        return None


def _share(costs: dict[int, EventCost], events: list, ids: list[int], cost: EventCost) -> int:
    """Give the device events ``ids`` one call site's ``cost``, split by duration; returns len(ids)."""
    for d, c in zip(ids, _split(cost, [float(events[d].get("dur") or 0) for d in ids])):
        costs[d] = c
    return len(ids)


def costs_from_tags(trace: dict, lookup: Callable[[int], GraphTags | None]
                    ) -> tuple[dict[int, EventCost], JoinStats]:
    """Per-event costs for every kernel event that ran inside one of our markers.

    ``lookup(instance_id)`` returns the graph's tags (``inductor_perf.tags.REGISTRY.get``).
    """
    events = trace.get("traceEvents") or []
    stats = JoinStats()
    threads: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    marker_idx: list[int] = []
    corr_to_device: dict[Any, list[int]] = defaultdict(list)
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        ts, dur = ev.get("ts"), ev.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
            continue
        cat = ev.get("cat")
        if _is_device_side(cat):
            corr = (ev.get("args") or {}).get("correlation")
            if corr is not None and cat.lower() in _DEVICE_CATS:
                corr_to_device[corr].append(i)
            continue
        threads[(ev.get("pid"), ev.get("tid"))].append(i)
        name = ev.get("name")
        if isinstance(name, str) and name.startswith(MARKER_PREFIX):
            marker_idx.append(i)
    if not marker_idx:
        return {}, stats
    ordered: dict[tuple[Any, Any], tuple[list[int], list[float]]] = {}
    for key, idx in threads.items():
        idx.sort(key=lambda i: (events[i]["ts"], -events[i]["dur"]))
        ordered[key] = (idx, [events[i]["ts"] for i in idx])
    costs: dict[int, EventCost] = {}
    sites_by_graph: dict[int, dict[str, list[KernelTag]]] = {}
    for mi in marker_idx:
        marker = events[mi]
        parsed = parse_marker(marker["name"])
        if parsed is None:
            continue
        stats.markers += 1
        instance_id, _, symbols = parsed
        graph = lookup(instance_id)
        if graph is None:
            stats.markers_unknown_graph += 1
            continue
        if not graph.tagged:
            stats.untagged_graphs += 1
            continue
        by_name = sites_by_graph.get(instance_id)
        if by_name is None:  # built once per graph, not once per call
            by_name = defaultdict(list)
            for tag in graph.kernels:
                by_name[tag.profiler_name].append(tag)
            sites_by_graph[instance_id] = by_name
        idx, starts = ordered[(marker.get("pid"), marker.get("tid"))]
        m_start, m_end = marker["ts"], marker["ts"] + marker["dur"]
        lo = bisect.bisect_left(starts, m_start)
        hi = bisect.bisect_right(starts, m_end)
        seen: dict[str, int] = defaultdict(int)
        outer_end = -float("inf")
        matched = 0
        for j in range(lo, hi):
            i = idx[j]
            if i == mi:
                continue
            ev = events[i]
            if ev["ts"] + ev["dur"] > m_end + 1e-3:
                continue  # not inside this marker
            if ev["ts"] < outer_end:
                continue  # nested inside an event we already took (aten::addmm -> aten::copy_)
            sites = by_name.get(ev.get("name"))
            if not sites:
                continue
            k = seen[ev["name"]]
            if k >= len(sites):
                continue
            seen[ev["name"]] = k + 1
            outer_end = ev["ts"] + ev["dur"]
            tag = sites[k]
            cost = _call_cost(tag, symbols, stats)
            if cost is None:
                continue
            matched += 1
            if tag.device != "cpu":
                dev = _device_kernels(events, ordered[(marker.get("pid"), marker.get("tid"))], j,
                                      outer_end, corr_to_device)
                if dev:
                    stats.device_events_tagged += _share(costs, events, dev, cost)
                    continue
            costs[i] = cost
            stats.events_tagged += 1
        if matched == 0:
            # A CUDA graph replay (mode="reduce-overhead"): no per-kernel launches on the host,
            # one cudaGraphLaunch whose device kernels are the captured ones, in capture order.
            device_tags = [t for t in graph.kernels if t.device != "cpu"]
            for j in range(lo, hi):
                ev = events[idx[j]]
                if ev.get("name") not in _GRAPH_LAUNCHES or ev["ts"] + ev["dur"] > m_end + 1e-3:
                    continue
                corr = (ev.get("args") or {}).get("correlation")
                replayed = sorted((d for d in corr_to_device.get(corr, ()) if _is_kernel(events[d])),
                                  key=lambda d: events[d]["ts"])
                for tag, dev in align_replay(device_tags, [events[d]["name"] for d in replayed]):
                    cost = _call_cost(tag, symbols, stats)
                    if cost is None:
                        continue
                    matched += 1
                    n = _share(costs, events, [replayed[k] for k in dev], cost)
                    stats.device_events_tagged += n
                    stats.graph_replay_kernels += n
        stats.unmatched_call_sites += len(graph.kernels) - matched
        stats.per_marker_counts.append((instance_id, matched))
    return costs, stats


_GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch"})


def align_replay(tags: list[KernelTag], names: list[str]) -> list[tuple[KernelTag, list[int]]]:
    """Pair a graph's device call sites with the kernels of one CUDA graph replay.

    The replay runs the captured kernels in capture order, which is call-site order. A generated
    (Triton) call site keeps its name on the device, so it is matched to the next kernel of that
    name; the kernels between two matched Triton kernels belong to the extern call sites between
    them (cuBLAS, cuDNN... names say nothing of the op): all of them to a single extern site, one
    each when the counts agree, none when they don't (no guess). Returns (tag, kernel positions).

    >>> from inductor_perf.tags import KernelTag
    >>> t = lambda n, kind: KernelTag(graph_id=0, is_backward=False, kernel_name=n, kind=kind, call_index=0,
    ...     nodes=(), flops=0, matmul_flops=0, bytes_read=0, bytes_written=0, source=None,
    ...     stack_trace=None, module_path=None, profiler_name=n, device="cuda")
    >>> got = align_replay([t("triton_a", "generated"), t("mm", "extern"), t("triton_b", "generated")],
    ...                    ["triton_a", "gemm_main", "gemm_splitk_reduce", "triton_b"])
    >>> [(tag.kernel_name, pos) for tag, pos in got]
    [('triton_a', [0]), ('mm', [1, 2]), ('triton_b', [3])]
    """
    out: list[tuple[KernelTag, list[int]]] = []
    pos = 0
    pending: list[KernelTag] = []

    def settle(upto: int) -> None:
        between = [k for k in range(pos, upto) if not names[k].startswith("triton")]
        if len(pending) == 1 and between:
            out.append((pending[0], between))
        elif pending and len(pending) == len(between):
            out.extend((tag, [k]) for tag, k in zip(pending, between))
        pending.clear()

    for tag in tags:
        if tag.kind != "generated":
            pending.append(tag)
            continue
        j = next((k for k in range(pos, len(names)) if names[k] == tag.kernel_name), None)
        if j is None:
            continue  # not in this replay: leave it unmatched rather than guess
        settle(j)
        out.append((tag, [j]))
        pos = j + 1
    settle(len(names))
    return out


def _device_kernels(events: list, thread: tuple[list[int], list[float]], j: int, end: float,
                    corr_to_device: Mapping[Any, list[int]]) -> list[int]:
    """Device kernels launched by runtime/driver calls nested in the CPU event at ``thread[j]``."""
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
