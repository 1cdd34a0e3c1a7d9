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


def findings_text(findings: Iterable[dict[str, Any]], top: int | None = OPENING, *, details: bool = False) -> list[str]:
    """Numbered lines, largest saving first: kind, saving, title, source, fix (and, with ``details``,
    the evidence); ``top`` None: all of them."""
    rows = list(findings)
    shown = rows if top is None else rows[:top]
    out: list[str] = []
    for n, f in enumerate(shown, 1):
        out.append(_fill(f"{n}. ", f"[{f['kind']}] saves ~{_saving(f)}: {f['title']}"))
        pad = " " * (len(str(n)) + 2)
        if f.get("source"):
            out.append(_fill(pad + "at:  ", f["source"] + (f"  ({f['module']})" if f.get("module") else "")))
        out.append(_fill(pad + "fix: ", f["fix"]))
        if details:
            out.append(_fill(pad + "why: ", f["evidence"]))
    if len(rows) > len(shown):
        out.append(f"   ... {len(rows) - len(shown)} more in the JSON (summary.json 'findings', or inductor-perf advise)")
    return out


def findings_markdown(findings: Iterable[dict[str, Any]], top: int | None = OPENING) -> list[str]:
    rows = list(findings)
    shown = rows if top is None else rows[:top]
    out = []
    for n, f in enumerate(shown, 1):
        src = f" at `{f['source']}`" if f.get("source") else ""
        out.append(f"{n}. **{f['kind']}** ~{_saving(f)}: {f['title']}{src}. Fix: {f['fix']}")
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


def findings_html(findings: list[dict[str, Any]], top: int = OPENING) -> str:
    """The page's opening list (empty when there is none)."""
    if not findings:
        return ""
    items = []
    for f in findings[:top]:
        src = f" <code>{escape(f['source'])}</code>" if f.get("source") else ""
        items.append(f"<li><b>{escape(f['kind'])}</b> ~{escape(_saving(f))}: {escape(f['title'])}{src}"
                     f"<br><i>fix:</i> {escape(f['fix'])}<br><small>{escape(f['evidence'])}</small></li>")
    more = (f"<p class='caption'>{len(findings) - top} more in summary.json ('findings')</p>"
            if len(findings) > top else "")
    return "<div class='findings'><h3>What to fix first</h3><ol>" + "".join(items) + "</ol>" + more + "</div>"
