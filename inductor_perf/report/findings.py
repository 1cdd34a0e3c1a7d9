"""The advisor's findings (:mod:`inductor_perf.advice`) as text, markdown, JSON and HTML: what the
summary and the page open with, and all that ``inductor-perf advise`` prints. Takes the JSON form
(``summary.json``'s ``findings``); imports no stage."""

from __future__ import annotations

import json
import textwrap
from html import escape
from typing import Any, Iterable

from .units import fmt_time_us

OPENING = 5
"""Findings the text summary and the page open with (the rest are in the JSON)."""
_WIDTH = 100

TABLES: dict[str, tuple[str, str]] = {
    "top_kernels": ("kernels", "Top kernels by total time"),
    "steps": ("steps", "Steps"),
    "ops_by_shape": ("ops-by-shape", "By op and input shapes"),
    "lines": ("lines", "By source line"),
    "idle_by_host": ("idle-by-host", "Idle time by host activity"),
    "idle_by_stream": ("idle-by-stream", "Idle time by stream"),
    "gaps": ("gaps", "Longest idle gaps"),
}
"""The summary's tables a finding can stand on: the summary JSON's key -> (the table's id on the page,
the start of its title in the text and on the page)."""

EVIDENCE_TABLES: dict[str, tuple[str, ...]] = {
    "input_wait": ("idle_by_host", "idle_by_stream"),
    "host_bound": ("idle_by_stream", "idle_by_host", "gaps"),
    "sync": ("idle_by_host", "gaps"),
    "optimizer": ("ops_by_shape",),
    "headroom": ("top_kernels", "lines", "ops_by_shape"),
    "precision": ("top_kernels", "ops_by_shape"),
    "memcpy": ("top_kernels",),
    "exposed_comm": ("steps",),
}
"""The tables (keys of :data:`TABLES`) whose rows each kind's saving is read from: the idle split by
stream and by host activity for the idle kinds, the kernels and the op-by-shape rows for the kernel
kinds. The text names them under each finding and the page links them; graph_break and recompile
stand on the compile record, which has no table."""


def table_id(title: str) -> str | None:
    """The page id of the summary table titled ``title`` (None for a table no finding links to)."""
    return next((tid for tid, head in TABLES.values() if title.startswith(head)), None)


def _evidence(f: dict[str, Any], d: dict[str, Any] | None) -> list[str]:
    """Keys of the tables ``f`` stands on; with the summary ``d``, only those it has rows in."""
    return [k for k in EVIDENCE_TABLES.get(f["kind"], ()) if d is None or d.get(k)]


def _saving(f: dict[str, Any]) -> str:
    us = f.get("saving_us_per_step")
    pct = f.get("saving_pct_of_step")
    if us is None:
        one = f.get("one_time_s")
        return f"{one:.3g} s once" if one else "-"
    return f"{fmt_time_us(us)}/step" + (f" ({pct:.3g} %)" if pct is not None else "")


def _fill(prefix: str, text: str) -> str:
    return textwrap.fill(text, width=_WIDTH, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                         break_on_hyphens=False)


def findings_text(findings: Iterable[dict[str, Any]], top: int | None = OPENING, *, details: bool = False,
                  summary: dict[str, Any] | None = None) -> list[str]:
    """Numbered lines, largest saving first: kind, saving, title, source, fix, the tables the saving
    stands on (those of ``summary`` that have rows, printed below; without it, all of the kind's, in
    ``inductor-perf summary``) and, with ``details``, the evidence; ``top`` None: all of them."""
    rows = list(findings)
    shown = rows if top is None else rows[:top]
    out: list[str] = []
    for n, f in enumerate(shown, 1):
        out.append(_fill(f"{n}. ", f"[{f['kind']}] saves ~{_saving(f)}: {f['title']}"))
        pad = " " * (len(str(n)) + 2)
        if f.get("source"):
            out.append(_fill(pad + "at:  ", f["source"] + (f"  ({f['module']})" if f.get("module") else "")))
        out.append(_fill(pad + "fix: ", f["fix"]))
        see = _evidence(f, summary)
        if see:
            where = "below" if summary is not None else "in inductor-perf summary"
            out.append(_fill(pad + "see: ", ", ".join(TABLES[k][1] for k in see) + f" ({where})"))
        if details:
            out.append(_fill(pad + "why: ", f["evidence"]))
    if len(rows) > len(shown):
        out.append(f"   ... {len(rows) - len(shown)} more in the JSON (summary.json 'findings', or inductor-perf advise)")
    return out


def findings_markdown(findings: Iterable[dict[str, Any]], top: int | None = OPENING, *,
                      summary: dict[str, Any] | None = None) -> list[str]:
    """As :func:`findings_text`, a numbered markdown list (with ``summary``: the tables below it names)."""
    rows = list(findings)
    shown = rows if top is None else rows[:top]
    out = []
    for n, f in enumerate(shown, 1):
        src = f" at `{f['source']}`" if f.get("source") else ""
        see = _evidence(f, summary) if summary is not None else []
        tail = (" See: " + ", ".join(TABLES[k][1] for k in see) + " (below).") if see else ""
        out.append(f"{n}. **{f['kind']}** ~{_saving(f)}: {f['title']}{src}. Fix: {f['fix']}{tail}")
    return out


def format_findings(findings: list[dict[str, Any]], fmt: str = "text", *, label: str | None = None) -> str:
    """All of one trace's findings (``inductor-perf advise``): text with their evidence, markdown, or JSON."""
    if fmt == "json":
        return json.dumps(findings, indent=2, allow_nan=False)
    head = f"What to fix first: {label}" if label else "What to fix first"
    if not findings:
        return f"{head}\n(no finding with a measurable saving)\n"
    if fmt == "markdown":
        return "\n".join([f"## {head}", ""] + findings_markdown(findings, None)) + "\n"
    return "\n".join([head, "=" * min(_WIDTH, len(head))] + findings_text(findings, None, details=True)) + "\n"


def findings_html(findings: list[dict[str, Any]], top: int = OPENING, *, summary: dict[str, Any] | None = None,
                  suffix: str = "") -> str:
    """The page's opening list (empty when there is none); each finding links to the tables of
    ``summary`` its saving stands on (ids :data:`TABLES` + ``suffix``, the section's)."""
    if not findings:
        return ""
    items = []
    for f in findings[:top]:
        src = f" <code>{escape(f['source'])}</code>" if f.get("source") else ""
        see = _evidence(f, summary) if summary is not None else []
        links = ("<br><i>see:</i> " + ", ".join(f"<a href='#{TABLES[k][0]}{escape(suffix)}'>{escape(TABLES[k][1])}</a>"
                                               for k in see)) if see else ""
        items.append(f"<li><b>{escape(f['kind'])}</b> ~{escape(_saving(f))}: {escape(f['title'])}{src}"
                     f"<br><i>fix:</i> {escape(f['fix'])}{links}<br><small>{escape(f['evidence'])}</small></li>")
    more = (f"<p class='caption'>{len(findings) - top} more in summary.json ('findings')</p>"
            if len(findings) > top else "")
    return "<div class='findings'><h3>What to fix first</h3><ol>" + "".join(items) + "</ol>" + more + "</div>"
