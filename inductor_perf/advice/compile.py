"""The compile-side findings: graph breaks and recompiles, from what the capture recorded at compile time.

:func:`find` reads the ``"compile"`` part of a trace's ``"inductor_perf"`` block (written by
:mod:`inductor_perf.capture.compile_log`; its fields are in docs/advisor.md) and the trace's
:class:`~inductor_perf.summary.rows.Summary`:

- ``graph_break``: one finding per distinct break (Dynamo's reason, the user's line). What it saves
  per step is the time between the compiled pieces inside each step
  (:class:`~inductor_perf.summary.graph_gaps.GraphGaps`: the eager work, Python and guard checks
  between one compiled graph's end and the next one's start), less the profiler's cost of recording
  the ranges that begin there (their count times the recording cost read off the trace), on the
  model that without the breaks the pieces would run as one graph with no gap; with several breaks
  that time is split evenly.
- ``recompile``: one finding per frame compiled more than once: how many times, the guards that
  failed, the seconds those compiles took (``one_time_s``), and, for the recompiles that ran inside
  the profiled steps, their seconds per step.

Torch-free: data in, findings out.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from ..summary.kernels import DEF_GPU
from ..summary.steps import median
from .finding import Finding

_FRAME_ID = re.compile(r"(\d+)/(\d+)")
_HINT = re.compile(r"^\s*Hint:\s*(.+)$", re.MULTILINE)
_ITEM_FIX = ("keep the value a tensor inside forward (e.g. torch.where instead of an `if` on .item()), "
             "or set torch._dynamo.config.capture_scalar_outputs = True")
_RECOMPILE_FIX = ("mark the changing dimension dynamic: torch._dynamo.mark_dynamic(x, dim) on the input before "
                  "the call, or torch.compile(..., dynamic=True)")
_VALUE_FIX = ("a Python number the frame reads changes between calls and the frame specializes on it: keep it "
              "a tensor (e.g. torch.where instead of an `if` on it), or pass it in as a tensor")
_OTHER_FIX = "make what the failed guard checks stay the same between calls, or mark it dynamic (dynamic=True)"


def _recompile_fix(guards: list[str]) -> str:
    """The fix for the guards that failed: a size that changes, a Python value that changes, or other."""
    if any("size mismatch" in g or "stride mismatch" in g or ".size()" in g for g in guards):
        return _RECOMPILE_FIX
    if guards and all(re.search(r"==\s*-?[\d.]+(e-?\d+)?\b", g) for g in guards):
        return _VALUE_FIX
    return _OTHER_FIX


def find(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """The ``graph_break`` and ``recompile`` findings of one trace; none without a compile record.

    ``record``: the trace's ``"inductor_perf"`` block (or None); ``summary``: its
    :class:`~inductor_perf.summary.rows.Summary` (its ``steps`` and ``graph_gaps``), or None."""
    compiled = record.get("compile") if isinstance(record, Mapping) else None
    if not isinstance(compiled, Mapping):
        return []
    step_us = median(s.dur_us for s in getattr(summary, "steps", None) or ())
    steps = len(getattr(summary, "steps", None) or ())
    on_device = getattr(summary, "kernel_definition", None) == DEF_GPU
    return (_graph_breaks(compiled.get("graph_breaks") or [], getattr(summary, "graph_gaps", None), step_us, on_device)
            + _recompiles(compiled.get("frames") or [], compiled.get("recompile_limit"), steps, step_us))


def _pct(us: float | None, step_us: float | None) -> float | None:
    return round(100.0 * us / step_us, 3) if us is not None and step_us else None


def _short(path: str | None) -> str:
    return os.path.basename(path) if path else "?"


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no reason given)"


def _break_fix(reason: str, source: str | None) -> str:
    if "item()" in reason:
        return f"at {source}: {_ITEM_FIX}" if source else _ITEM_FIX
    hints = _HINT.findall(reason or "")
    where = f"at {source}" if source else "where it breaks"
    return f"remove the graph break {where}" + (f": {hints[0].strip()}" if hints else
                                                 " (torch._dynamo.explain(model)(inputs) lists each break)")


def _graph_breaks(breaks: list[Mapping[str, Any]], gaps: Any, step_us: float | None,
                  on_device: bool = False) -> list[Finding]:
    if not breaks:
        return []
    per_break = overhead = None
    if gaps is not None and getattr(gaps, "steps", 0):
        if gaps.events_in_gaps_per_step is not None and gaps.record_cost_us is not None:
            overhead = min(gaps.gap_us_per_step, gaps.events_in_gaps_per_step * gaps.record_cost_us)
        per_break = (gaps.gap_us_per_step - (overhead or 0.0)) / len(breaks)
    out = []
    for b in breaks:
        reason, source = str(b.get("reason") or ""), b.get("source")
        where = f"{_short(b.get('file'))}:{b.get('line')}" if b.get("line") is not None else "an unknown line"
        if per_break is None:
            measured = "no compiled-graph calls inside profiled steps, so no per-step time is measured"
        else:
            share = f"; split evenly among the {len(breaks)} breaks recorded" if len(breaks) > 1 else ""
            less = (f", less {overhead:.1f} us the profiler spent recording the {gaps.events_in_gaps_per_step:g} "
                    f"ranges that begin there ({gaps.record_cost_us:g} us each, read off the trace)"
                    if overhead is not None else ", the profiler's own recording cost included (not read off this trace)")
            measured = (f"{gaps.gap_us_per_step:.1f} us per step between compiled pieces ({gaps.gaps_per_step:g} "
                        f"gaps, {gaps.calls_per_step:g} compiled-graph calls per step over {gaps.steps} steps){less}"
                        f"{share}; estimate assumes that without the break the pieces run as one graph with no gap"
                        + ("; on a GPU the host's gap costs the step only while the device idles in it, which "
                           "is not taken off here (an upper bound where the device stays busy)" if on_device else ""))
        out.append(Finding(
            kind="graph_break", title=f"graph break at {where} in {b.get('frame') or '?'}: {_first_line(reason)}",
            source=source, module=None, saving_us_per_step=round(per_break, 3) if per_break is not None else None,
            saving_pct_of_step=_pct(per_break, step_us), one_time_s=None,
            evidence=f"Dynamo broke the graph {b.get('count', 1)} time(s) here: {_first_line(reason)}. {measured}.",
            fix=_break_fix(reason, source)))
    return out


def _recompiles(frames: list[Mapping[str, Any]], limit: Any, steps: int, step_us: float | None) -> list[Finding]:
    by_frame: dict[int, list[Mapping[str, Any]]] = {}
    for f in frames:
        m = _FRAME_ID.search(str(f.get("compile_id") or ""))
        if m:
            by_frame.setdefault(int(m.group(1)), []).append(f)
    out = []
    for compiles in by_frame.values():
        again = [f for f in compiles if f.get("recompile_reason")]
        if not again:
            continue
        first = compiles[0]
        secs = sum(float(f.get("compile_s") or 0.0) for f in again)
        inside = [f for f in again if f.get("in_window")]
        inside_s = sum(float(f.get("compile_s") or 0.0) for f in inside)
        per_step = inside_s * 1e6 / steps if inside and steps else None
        guards: dict[str, str] = {}
        for f in again:  # the first line of each guard failure, less the "2/0: " prefix; one of each kind
            g = re.sub(r"^\s*\d+/\d+:\s*", "", _first_line(str(f["recompile_reason"])))
            guards.setdefault(re.sub(r"[-\d.]+", "N", g), g)
        at_limit = isinstance(limit, int) and len(compiles) >= limit
        limit_note = (f" It reached the recompile limit ({limit}): inputs that fail the guards again now run "
                      "this frame eagerly (not costed here)." if at_limit else "")
        in_steps = (f"{len(inside)} of them ran inside the {steps} profiled steps ({inside_s:.3g} s, "
                    f"{per_step / 1e3:.4g} ms per step; estimate assumes the fix leaves no compile inside the steps)"
                    if per_step is not None else "none ran inside the profiled steps")
        where = f"{_short(first.get('file'))}:{first.get('line')}"
        out.append(Finding(
            kind="recompile", title=f"{first.get('frame') or '?'} ({where}) compiled {len(compiles)} times",
            source=f"{first.get('file')}:{first.get('line')}" if first.get("file") else None, module=None,
            saving_us_per_step=round(per_step, 3) if per_step is not None else None,
            saving_pct_of_step=_pct(per_step, step_us), one_time_s=round(secs, 6),
            evidence=(f"{len(again)} recompile(s) taking {secs:.3g} s in all; guard failed: "
                      f"{'; '.join(list(guards.values())[:3])}{' ...' if len(guards) > 3 else ''}. {in_steps}.{limit_note}"),
            fix=_recompile_fix(list(guards.values()))))
    return out
