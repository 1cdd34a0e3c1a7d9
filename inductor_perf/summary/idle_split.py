"""Idle time of each device stream, split by what the stream waited for (HTA's idle time breakdown).

On one stream, kernels run one after another. Each gap between a kernel's end (the latest end so
far on the stream) and the next kernel's start is filed whole under one cause, by the next kernel's
launch (the start of the runtime call with its correlation id):

- **host_wait**: the launch call began after the stream had gone idle: the host had not asked for
  the kernel yet (the host is the bottleneck: Python, the dispatcher, a data loader, a sync);
- **launch_delay**: otherwise (the kernel was queued before the stream went idle, or has no launch
  call in the trace: a lost correlation id), a gap shorter than :data:`LAUNCH_DELAY_US`: the device's
  own kernel-to-kernel launch overhead;
- **other**: such a gap of :data:`LAUNCH_DELAY_US` or more (it waited on an event, another stream, a
  copy). A CUDA-graph replay's kernels carry the ``cudaGraphLaunch``'s correlation id.

These are HolisticTraceAnalysis's ``host_wait``, ``kernel_wait`` and ``other`` (its
``get_idle_time_breakdown`` with its default threshold, ``consecutive_kernel_delay=30``, which HTA
documents as 30 ns and applies to gaps in µs: 30 µs, what it reports and what we use), computed from
the same events, and checked against HTA 0.5.0 itself (tests/unit/summary/test_idle_split_hta.py).
We differ on purpose where HTA drops the kernels without a launch call (and, by default, those of the
last ProfilerStep), and takes a gap from the previous kernel's end even when kernels overlap;
docs/summary.md "Checked against HTA" says by how much.

Only a GPU trace has launch calls: a CPU trace's kernels are run by the thread that calls them,
and it has no rows. Pure and torch-free; both summary engines give :func:`launch_times`' map.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Iterable, Mapping

from ..model import events as evs
from .kernels import DEF_GPU, ParsedEvent, _hashable
from .rows import percent, rounded

LAUNCH_DELAY_US = 30.0
"""Gaps shorter than this between a queued kernel and the one before it are launch overhead: HTA's
``consecutive_kernel_delay`` default as HTA applies it (30, compared with gaps in µs; its docstring
says ns, which no queued kernel of a real trace ever starts within)."""

CAUSES = ("host_wait", "launch_delay", "other")
_START = attrgetter("ts")


@dataclass
class StreamIdleRow:
    """One device stream's idle time between its kernels, by cause (µs, and % of the stream's idle)."""

    stream: str
    """``"<pid>/<tid>"`` of the stream's events (device / stream in a Kineto trace)."""
    kernels: int
    span_us: float
    """From the stream's first kernel start to its last kernel end."""
    idle_us: float
    """The gaps between its kernels (``span_us`` less the time a kernel runs on it)."""
    host_wait_us: float
    launch_delay_us: float
    other_us: float
    host_wait_pct: float | None
    """% of ``idle_us``; the three add up to 100."""
    launch_delay_pct: float | None
    other_pct: float | None


def launch_times(runtime_events: Iterable[ParsedEvent], kernels: Iterable[ParsedEvent]) -> dict[int, float]:
    """The start of each kernel's launch call, by ``id`` of the kernel: the runtime event with its
    ``correlation`` arg (a later call of one id overwrites, as the launching thread's join does).
    The in-memory engine's; the streaming engine builds the same map from its pass."""
    by_corr: dict[Any, float] = {}
    for e in runtime_events:
        corr = e.args.get("correlation")
        if corr is not None and evs.is_runtime(e.cat):
            by_corr[_hashable(corr)] = e.ts
    out: dict[int, float] = {}
    for k in kernels:
        corr = k.args.get("correlation")
        if corr is not None:
            ts = by_corr.get(_hashable(corr))
            if ts is not None:
                out[id(k)] = ts
    return out


def stream_idle(kernels: list[ParsedEvent], launch: Mapping[int, float] | None, definition: str,
                delay_us: float = LAUNCH_DELAY_US) -> list[StreamIdleRow]:
    """One :class:`StreamIdleRow` per stream with kernels, most idle first (then by stream); none for
    a trace whose kernels are not device events (``definition``) or without ``launch`` times."""
    if definition != DEF_GPU or launch is None:
        return []
    streams: dict[tuple[Any, Any], list[ParsedEvent]] = {}
    for k in kernels:
        streams.setdefault((k.pid, k.tid), []).append(k)
    rows = []
    for (pid, tid), ks in streams.items():
        ks.sort(key=_START)  # stable: kernels starting together keep their order
        split = [0.0, 0.0, 0.0]
        end = ks[0].end
        for k in ks[1:]:
            if k.ts > end:
                gap = k.ts - end
                at = launch.get(id(k))
                split[0 if at is not None and at > end else 1 if gap < delay_us else 2] += gap
            if k.end > end:
                end = k.end
        idle = sum(split)
        rows.append(StreamIdleRow(
            stream=f"{pid}/{tid}", kernels=len(ks), span_us=rounded(end - ks[0].ts), idle_us=rounded(idle),
            host_wait_us=rounded(split[0]), launch_delay_us=rounded(split[1]), other_us=rounded(split[2]),
            host_wait_pct=percent(split[0], idle), launch_delay_pct=percent(split[1], idle),
            other_pct=percent(split[2], idle)))
    rows.sort(key=lambda r: (-r.idle_us, r.stream))
    return rows
