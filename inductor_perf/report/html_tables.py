"""The report page's HTML tables: the kernels (each linked to its roofline point), the summary's other
tables, the kernels left off the chart, and the compiled-vs-eager comparison with its fusion map.

Every number goes through :mod:`inductor_perf.report.text`'s formatters and the summary's tables come from
``report.text._tables`` itself, so the page and the text summary show the same figures in the same units.
Pure: strings in, HTML strings out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Sequence

from . import text as rp
from .findings import table_id
from ..model.kernel_names import readable_names

NAME_WIDTH = 64
"""Characters of a kernel name shown in a cell (middle ellipsis, as the text tables do); the full
name is the cell's title."""
KERNEL_ROWS = 100
"""Rows of the kernel table: enough for every kernel of a typical compiled model, few enough that
a trace with thousands of kernel names keeps a page that opens fast (every point still hovers)."""


@dataclass(frozen=True)
class KernelView:
    """One kernel row of the summary as the page shows it. ``key``: the page-wide id ("k0"...);
    ``placement``: :class:`inductor_perf.roofline.roofs.Placement` (None when the kernel has no FLOPs nor
    bytes); ``charted``: whether it is a point on the chart."""

    key: str
    row: Any
    placement: Any
    charted: bool


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str],
          foot: str | None = None, *, raw: bool = False, table_id: str | None = None) -> str:
    """A titled HTML table of display strings (``raw``: cells are HTML already). ``align`` is one
    "l"/"r" per column."""
    cls = ["num" if a == "r" else "" for a in align]
    out = [f"<h3>{esc(title)}</h3>", f"<table{f' id={esc(table_id)!r}' if table_id else ''}><thead><tr>"]
    out += [f"<th class='{c}'>{esc(h)}</th>" for h, c in zip(headers, cls)]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td class='{c}'>{v if raw else esc(v)}</td>" for v, c in zip(r, cls))
                   + "</tr>")
    out.append("</tbody></table>")
    if foot:
        out.append(f"<p class='foot'>{esc(foot)}</p>")
    return "\n".join(out)


def _name_cell(name: str, shown: str, key: str | None) -> str:
    text = esc(shown)
    if key is not None:
        text = f"<a href='#pt-{esc(key)}'>{text}</a>"
    return f"<span class='kname' title='{esc(name)}'>{text}</span>"


def kernel_table(views: Sequence[KernelView], distinct: int, *, linked: bool = True,
                 table_id: str = "kernels") -> str:
    """The kernels, most time first, each name linking to its point when it has one (``linked``:
    the chart is on the page)."""
    shown_views = list(views[:KERNEL_ROWS])
    names = readable_names([v.row.name for v in shown_views], NAME_WIDTH)
    rows = []
    for v in shown_views:
        r, p = v.row, v.placement
        rows.append([
            _name_cell(r.name, names[r.name], v.key if v.charted and linked else None), esc(rp.fmt_count(r.count)),
            esc(rp.fmt_time_us(r.total_us)), esc(rp.fmt_time_us(r.mean_us)), esc(rp.fmt_pct(r.share_of_busy_pct)),
            esc(rp.fmt_flop(r.flop)), esc(rp.fmt_gb(r.gb)), esc(rp.fmt_tflops(r.achieved_tflops)),
            esc(rp.fmt_gbps(r.achieved_gbps)), _of_roof_cell(p),
            esc(_bound_text(p, r)), esc(r.dtype or "-"), esc(rp._short_source(r.source)),
            esc(r.module_path or "-")])
    note = "; a linked name is a point on the chart" if linked else ""
    above = [f"{v.row.name}: {rp.fmt_pct(v.placement.pct_of_roof)} of {v.placement.roof}, "
             f"{v.placement.above_roof_reason}" for v in shown_views
             if v.placement is not None and v.placement.above_roof_reason]
    out = table(f"Kernels by total time ({len(rows)} of {distinct}{note})",
                ["Kernel", "Calls", "Total", "Mean", "Busy", "FLOP", "Bytes", "FLOP/s", "B/s", "Of roof",
                 "Bound", "Dtype", "Source", "Module"], rows, list("lrrrrrrrrrllll"),
                "Of roof = achieved FLOP/s or bytes/s as a % of the roof that binds at the kernel's intensity "
                "(its dtype's compute roof, the memory level it is placed at, or its link), as in the text and "
                "JSON summaries; * = above it, why below; Busy = % of the device-busy time during which the "
                "kernel ran (top rows of the summary only)", raw=True, table_id=table_id)
    if above:
        out += ("\n<p class='foot'>Above their roof (*):</p><ul class='notes above-roof'>"
                + "".join(f"<li>{esc(a)}</li>" for a in above) + "</ul>")
    return out


def _of_roof_cell(p: Any) -> str:
    """A kernel's % of its roof, starred with the reason as the cell's title when above it."""
    if p is None:
        return esc(rp.fmt_pct(None))
    if p.above_roof_reason:
        return f"<span title='{esc(p.above_roof_reason)}'>{esc(rp.fmt_pct(p.pct_of_roof))}*</span>"
    return esc(rp.fmt_pct(p.pct_of_roof))


def _bound_text(placement: Any, row: Any) -> str:
    if placement is not None and placement.bound != "unknown":
        level = f" ({placement.level})" if placement.bound == "memory" and placement.level else ""
        return placement.bound + level
    return row.bound or "-"


def summary_tables(d: dict[str, Any], *, suffix: str = "") -> list[str]:
    """The summary's other tables (steps, modules, source lines, not costed, idle by host activity,
    longest gaps), as the text report builds them; those a finding links to with their id
    (:func:`inductor_perf.report.findings.table_id` + ``suffix``, the section's)."""
    out = []
    for title, headers, rows, align, _, foot in rp._tables(d, "markdown")[1:]:
        if rows:
            tid = table_id(title)
            out.append(table(title, headers, [[rp._cell(c) for c in r] for r in rows], align, foot,
                             table_id=tid + suffix if tid else None))
    return out


def uncharted_table(views: Sequence[KernelView], *, table_id: str = "not-charted") -> str:
    """The kernels with neither FLOPs nor bytes: not on the chart, named here with their time."""
    left = [v for v in views if not v.charted]
    if not left:
        return "<p>Every kernel carries FLOPs or bytes and is on the chart.</p>"
    names = readable_names([v.row.name for v in left], NAME_WIDTH)
    rows = [[_name_cell(v.row.name, names[v.row.name], None), esc(v.row.kind), esc(rp.fmt_count(v.row.count)),
             esc(rp.fmt_time_us(v.row.total_us))] for v in left]
    return table(f"Not on the chart: {len(left)} kernel(s) with no FLOPs and no bytes",
                 ["Kernel", "Kind", "Calls", "Time"], rows, list("llrr"),
                 "A roofline needs FLOPs or bytes; why these have none (when the trace says) is in the "
                 "'Not costed' table and its hints. Collectives are sized by their message instead.",
                 raw=True, table_id=table_id)


def comparison_html(c: Any) -> str:
    """The compiled-vs-eager (or trace-vs-trace) comparison as :func:`inductor_perf.report.text.format_comparison`
    lays it out, from the same lines and tables: the step times, one table per phase, the totals,
    the fusion map and the notes."""
    a, b = c.a, c.b
    short = ("eager", "compiled") if (a.label, b.label) == ("eager", "compiled") else ("A", "B")
    head = rp._comparison_head(c, short, False)[2:]  # the text's lines less its title and underline
    out = [f"<h2>Comparison: {esc(a.label)} vs {esc(b.label)}, by {esc(c.by)}</h2>"]
    out += [f"<p>{esc(line)}</p>" for line in head]
    tables, fusion = rp.comparison_tables(c, short)
    out += [table(title, headers, cells, list(align)) for title, headers, cells, align in tables]
    if fusion:
        out.append("<h3>Fusion map (eager ops → compiled kernel, longest first)</h3><ul class='fusion'>"
                   + "".join(f"<li>{esc(f)}</li>" for f in fusion) + "</ul>")
    if c.notes:
        out.append("<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in c.notes) + "</ul>")
    return "\n".join(out)
