"""The report page: one self-contained HTML file per trace (or directory of traces) with a roofline
chart a person can read at a glance and the summary's tables.

:func:`render_report` returns the page, :func:`write_report` writes it atomically. A source is a
trace path (``.json`` / ``.json.gz``, raw or augmented, ours or anyone's), a directory of traces (one
section per trace, each with its own chart) or a loaded trace dict; raw traces are costed in memory
exactly as ``inductor-perf summary`` does (:mod:`inductor_perf.summary.files`).

The page contract (the browser tests rely on it): every charted kernel is exactly one SVG element with
``data-kernel="<key>"`` and ``id="pt-<key>"`` (keys "k0", "k1"... unique on the page); kernel-table
names link to ``#pt-<key>``; a section without a chart has an element ``id="no-chart"`` (the first
such section; later ones ``no-chart-<n>``) saying why. The page fetches nothing: inline CSS and SVG.

>>> write_report("run.trace.json.gz", "run.report.html")  # doctest: +SKIP
'run.report.html'
"""

from __future__ import annotations

import itertools
import logging
import os
from typing import Any, Callable, Iterable, Iterator

from . import text as rp
from ..roofline.roofs import MATRIX_KINDS, Roofs, place, roofs_for
from .findings import findings_html
from .html_tables import KernelView, comparison_html, esc, kernel_table, summary_tables, uncharted_table

log = logging.getLogger(__name__)

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1280px;
 padding:0 16px;color:#1d1d1f}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:22px 0 6px}
dl.head{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:8px 0}
dl.head dt{font-weight:600}dl.head dd{margin:0}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0;display:block;overflow-x:auto;max-width:100%}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f5f5f7;position:sticky;top:0}td.num,th.num{text-align:right;white-space:nowrap}
tbody tr:nth-child(even){background:#fafafa}tbody tr:hover{background:#eef4ff}
.kname{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
p.foot,.caption{color:#555;font-size:12.5px;max-width:1000px}
figure{margin:10px 0}svg.roofline{max-width:100%;height:auto}
svg.roofline [data-kernel]{cursor:pointer}
svg.roofline [data-kernel]:hover path,svg.roofline [data-kernel]:hover use{stroke:#000;stroke-width:2}
svg.roofline [data-kernel]:target path,svg.roofline [data-kernel]:target use{stroke:#000;stroke-width:3}
.nochart{background:#fff6e5;border:1px solid #f0c36d;padding:8px 12px;border-radius:4px;max-width:900px}
ul.notes li,ul.fusion li{margin:2px 0}
"""


def default_report_path(path: str) -> str:
    """``<input stem>.report.html`` beside the input (a directory's page sits beside the directory)."""
    p = os.path.normpath(os.fspath(path))
    for ext in (".json.gz", ".json"):
        if p.endswith(ext):
            p = p[: -len(ext)]
            break
    return p + ".report.html"


# --- Kernels -> points -------------------------------------------------------------------------------
def kernel_views(summary: Any, roofs: Roofs | None, keys: Iterator[str]) -> list[KernelView]:
    """Every kernel row of ``summary`` (most time first) with the placement the summary made of it
    (the same roof as the text and the JSON); the ones with FLOPs or bytes get a key from ``keys``
    and a point. A row without one (a summary made without roofs) is placed against ``roofs``."""
    from .roofline_plot import chartable

    rows = summary.all_kernels or summary.top_kernels
    views = []
    for r in rows:
        nbytes = r.gb * 1e9 if r.gb is not None else None
        charted = chartable(r.flop, nbytes, r.total_us)
        p = getattr(r, "placement", None)
        if p is None and charted and roofs is not None:
            p = place(r.flop, nbytes, r.total_us, r.count, r.dtype, roofs, matrix=r.kind in MATRIX_KINDS)
        views.append(KernelView(next(keys) if charted else "", r, p if charted or p is not None else None, charted))
    return views


def _bound(v: KernelView) -> str:
    """compute / memory from the roofs; without roofs, the trace's own ``roofline_bound``."""
    if v.placement is not None and v.placement.bound in ("compute", "memory"):
        return v.placement.bound
    return v.row.bound if v.row.bound in ("compute", "memory") else "unknown"


def hover_text(v: KernelView) -> str:
    """The point's ``<title>``: what a reader needs to judge the kernel without the table."""
    r, p = v.row, v.placement
    nbytes = r.gb * 1e9 if r.gb is not None else None
    intensity = (r.flop / nbytes) if r.flop and nbytes else None
    lines = [r.name,
             f"source: {r.source or '-'}", f"module: {r.module_path or '-'}",
             f"time: {rp.fmt_time_us(r.total_us)} in {rp.fmt_count(r.count)} call(s)",
             f"FLOPs: {rp.fmt_flop(r.flop)}   bytes: {rp.fmt_bytes(nbytes)}   intensity: "
             + (f"{rp._sig(intensity)} FLOP/B" if intensity else "-"),
             f"achieved: {rp.fmt_tflops(r.achieved_tflops)}, {rp.fmt_gbps(r.achieved_gbps)}"]
    if p is not None and p.pct_of_roof is not None:
        roof = (f"{p.level} {rp.fmt_gbps(p.memory_gbps)}" if p.bound == "memory"
                else f"{p.compute_roof or r.dtype or 'float32'} {rp.fmt_tflops(p.compute_tflops)}")
        lines.append(f"of roof: {rp.fmt_pct(p.pct_of_roof)} ({p.bound}-bound; roof {roof})")
    else:
        lines.append("of roof: - (no roof for this device)")
    if p is not None and p.above_roof_reason:
        lines.append(f"above its roof: {p.above_roof_reason}")
    return "\n".join(lines)


# --- Sections -------------------------------------------------------------------------------------------
def _roofs_html(roofs: Roofs | None, d: dict[str, Any]) -> str:
    if roofs is None or not (roofs.compute or roofs.memory):
        why = d.get("device_note") or "no device peaks given"
        return f"<p><b>Roofs:</b> none ({esc(why)}); points are placed, but no roof is drawn.</p>"
    comp = ", ".join(f"{c.dtype} {c.unit} {rp.fmt_tflops(c.tflops)} ({c.source})" for c in roofs.compute)
    mem = ", ".join(f"{m.level} {rp.fmt_gbps(m.gbps)} ({m.source})" for m in roofs.memory)
    links = ", ".join(f"{m.level} {rp.fmt_gbps(m.gbps)} a direction ({m.source})" for m in roofs.links)
    return (f"<p><b>Roofs of {esc(roofs.device or '?')}</b> ({esc(roofs.note)}): compute {esc(comp or '-')}; "
            f"memory {esc(mem or '-')}{'; links ' + esc(links) if links else ''}.</p>")


def _chart_html(views: list[KernelView], roofs: Roofs | None, label: str, index: int) -> tuple[str, bool]:
    """The chart and its caption, or the element that says why there is none; and whether the chart
    is there (the kernel table links to its points only then)."""
    from .roofline_plot import ChartPoint, ChartUnavailable, roofline_svg

    no_chart_id, id_prefix = ("no-chart" if index == 0 else f"no-chart-{index}"), f"c{index}-"
    points = [ChartPoint(v.key, float(v.row.flop or 0), float((v.row.gb or 0) * 1e9), float(v.row.total_us),
                         _bound(v), hover_text(v)) for v in views if v.charted]
    try:
        svg = roofline_svg(points, roofs, title=f"Roofline: {label}", id_prefix=id_prefix)
    except ChartUnavailable as e:
        return f"<p class='nochart' id='{no_chart_id}'>No roofline chart: {esc(e)}</p>", False
    except Exception as e:  # a chart bug must not cost the user the tables
        log.warning("inductor_perf: the roofline chart failed (%s: %s); the page has the tables only",
                    type(e).__name__, e)
        return (f"<p class='nochart' id='{no_chart_id}'>No roofline chart: drawing it failed "
                f"({esc(type(e).__name__)}: {esc(e)}).</p>", False)
    edges = sum(1 for p in points if p.edge)
    left = sum(1 for v in views if not v.charted)
    cap = (f"{len(points)} kernel(s), one point each: x = FLOPs / bytes moved, y = FLOPs / total time; area "
           "∝ total time; colour = bound at the kernel's intensity. Hover a point for its name, source line, "
           "module and % of roof; a kernel's name in the table below jumps to its point.")
    if edges:
        cap += (f" {edges} point(s) sit on an edge: FLOPs but no bytes on the right edge (infinite "
                "intensity), bytes but no FLOPs on the left edge where their bandwidth's diagonal meets it.")
    if left:
        cap += f" {left} kernel(s) carry neither FLOPs nor bytes and are not charted (listed below)."
    return f"<figure>{svg}<figcaption class='caption'>{esc(cap)}</figcaption></figure>", True


def _section(summary: Any, device: Any, keys: Iterator[str], index: int, comparison: Any,
             title: str | None) -> str:
    d = summary.to_dict()
    label = title or d.get("label") or "trace"
    roofs = roofs_for(device)
    views = kernel_views(summary, roofs, keys)
    sfx = "" if index == 0 else f"-{index}"
    out = [f"<section><h2>{esc(label)}</h2>", findings_html(d.get("findings") or [], summary=d, suffix=sfx),
           "<dl class='head'>"]
    out += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rp._headline(d)]
    out.append("</dl>")
    out.append(_roofs_html(roofs, d))
    if d["notes"]:
        out.append("<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in d["notes"]) + "</ul>")
    chart, drawn = _chart_html(views, roofs, label, index)
    out.append(chart)
    out.append(kernel_table(views, d["distinct_kernels"], linked=drawn, table_id="kernels" + sfx))
    out.append(uncharted_table(views, table_id="not-charted" + sfx))
    out += summary_tables(d, suffix=sfx)
    if comparison is not None:
        out.append(comparison_html(comparison))
    out.append("</section>")
    return "\n".join(out)


def _summaries(source: Any, device: Any, summary: Any,
               stage: Callable[[str], None] | None) -> Iterable[tuple[Any, Any]]:
    """(summary, device) for each trace of ``source``; a given ``summary`` is used as it is."""
    from ..summary.files import summarize_path, summarize_trace

    from ..advice.advise import attach

    if summary is not None:
        yield summary, device
    elif isinstance(source, dict):
        ct = summarize_trace(source, label=None, device=device)
        yield attach(ct.summary), ct.device
    else:
        for ct in summarize_path(os.fspath(source), device=device, stage=stage):
            yield attach(ct.summary), ct.device


def render_report(source: Any, *, device: Any = None, title: str | None = None, summary: Any = None,
                  comparison: Any = None, stage: Callable[[str], None] | None = None) -> str:
    """The page for ``source`` (a trace path, a directory of traces, or a trace dict).

    ``device``: a DeviceSpec whose roofs to draw (default: the trace's own, as ``summary`` finds
    it). ``summary``: a Summary already computed for ``source`` (a capture passes its own, so
    nothing is summarized twice). ``comparison``: a :class:`inductor_perf.comparison.rows.Comparison` to
    show with its fusion map. ``stage`` is told what is being done (a progress line).
    Raises InductorPerfError (one line) when ``source`` holds no readable trace.
    """
    keys = (f"k{n}" for n in itertools.count())
    sections = []
    for n, (s, dev) in enumerate(_summaries(source, device, summary, stage)):
        if stage:
            stage(f"drawing the page of {s.label or 'the trace'}")
        sections.append(_section(s, dev, keys, n, comparison if n == 0 else None, title if n == 0 else None))
    page_title = title or (os.path.basename(os.fspath(source)) if isinstance(source, (str, os.PathLike))
                           else "trace")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>inductor-perf report: {esc(page_title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>inductor-perf report: {esc(page_title)}</h1>\n" + "\n".join(sections)
            + "\n<p class='foot'>Made by <code>inductor-perf report</code>; this page is one file and "
              "fetches nothing.</p></body></html>\n")


def notebook_html(summary: Any, device: Any = None, warnings: Iterable[str] = (), *, height_px: int = 800) -> str:
    """The page of ``summary`` as a notebook cell shows it (``CaptureResult._repr_html_``): the page
    itself (:func:`render_report`, findings and tables as in the file) in an ``<iframe srcdoc>``, so
    that its stylesheet does not restyle the notebook; a paragraph of ``warnings`` without a summary."""
    if summary is None:
        why = "; ".join(warnings) or "nothing was captured"
        return f"<p>inductor_perf: no summary ({esc(why)})</p>"
    page = render_report(None, device=device, summary=summary, title=summary.label or "trace")
    return (f"<iframe srcdoc=\"{esc(page)}\" title='inductor-perf report' "
            f"style='width:100%;height:{int(height_px)}px;border:1px solid #ddd'></iframe>")


def write_report(source: Any, out_path: str | os.PathLike, *, device: Any = None, title: str | None = None,
                 summary: Any = None, comparison: Any = None,
                 stage: Callable[[str], None] | None = None) -> str:
    """Write :func:`render_report`'s page to ``out_path`` atomically; returns ``out_path``. The page
    never replaces a trace it is made from (checked before any work): OutputError."""
    from ..summary.files import trace_files
    from ..traces.files import output_target, write_atomic

    out = os.fspath(out_path)
    inputs = trace_files(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else []
    output_target(out, inputs)
    page = render_report(source, device=device, title=title, summary=summary, comparison=comparison,
                         stage=stage)
    write_atomic(out, lambda f: f.write(page.encode("utf-8")), inputs=inputs, compress=False)
    return out
