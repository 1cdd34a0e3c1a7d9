"""The report page's roofline chart: kernels and roofs drawn by matplotlib as an SVG the page inlines.

Log-log: x is arithmetic intensity (FLOP per byte moved), y achieved FLOP/s (a kernel's FLOPs over
its total time). Every compute roof of :class:`~inductor_perf.roofline.roofs.Roofs` is a horizontal line and
every memory roof a diagonal (FLOP/s = intensity x bandwidth), each labelled. Each kernel is one
point (area proportional to its total time, colour by its bound), drawn as its own matplotlib artist
with ``gid="pt-<key>"``; the SVG is then post-processed so that this one element also carries
``data-kernel="<key>"`` and a ``<title>`` (the browser's hover text).

Kernels with FLOPs but no bytes have an infinite intensity: they are drawn on the right edge at
their FLOP/s. Kernels with bytes but no FLOPs have neither coordinate on a log axis: they are drawn
on the left edge at the height where their achieved bandwidth's diagonal meets it (the memory roof
meets that edge at its own bandwidth's height, so the two compare there). Both get a marker of
their own, named in the legend.

matplotlib is imported only inside :func:`roofline_svg` (never at package import); without it the
function raises :class:`ChartUnavailable` and the page says why the chart is missing.
"""

from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Sequence

from ..roofline.roofs import Roofs

EDGE_NO_BYTES = "no-bytes"
EDGE_NO_FLOP = "no-flop"

BOUND_COLOURS = {"compute": "#d62728", "memory": "#1f77b4", "unknown": "#8c8c8c"}
"""Point colour per bound (``roofline.roofs.place``); latency-bound and unplaced kernels share grey."""
BOUND_LABELS = {"compute": "compute-bound", "memory": "memory-bound", "unknown": "latency / unknown"}

WIDTH_PX, HEIGHT_PX = 900, 550
_DPI = 96  # CSS pixels per inch: the figure is WIDTH_PX x HEIGHT_PX in a browser at 100 %
_LABEL_BOX = {"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1.0}
"""Behind roof labels, so they stay readable over points and grid lines."""
_SVG_NS = "http://www.w3.org/2000/svg"
_XLINK_NS = "http://www.w3.org/1999/xlink"


class ChartUnavailable(RuntimeError):
    """The chart cannot be drawn (matplotlib missing, nothing to plot); the message says why."""


@dataclass(frozen=True)
class ChartPoint:
    """One kernel on the chart. ``flop`` and ``nbytes`` are its totals over ``total_us`` (all its
    calls); ``bound`` is "compute", "memory" or "unknown"; ``title`` the hover text."""

    key: str
    flop: float
    nbytes: float
    total_us: float
    bound: str
    title: str

    @property
    def edge(self) -> str | None:
        """Which edge the point is pinned to, when one of its coordinates is off a log axis."""
        if self.nbytes <= 0:
            return EDGE_NO_BYTES
        if self.flop <= 0:
            return EDGE_NO_FLOP
        return None

    @property
    def flops_per_s(self) -> float:
        return self.flop / (self.total_us * 1e-6)

    @property
    def bytes_per_s(self) -> float:
        return self.nbytes / (self.total_us * 1e-6)


def chartable(flop: float | None, nbytes: float | None, total_us: float | None) -> bool:
    """Whether a kernel can be a point: some FLOPs or bytes, and a duration."""
    return bool(total_us and total_us > 0 and ((flop or 0) > 0 or (nbytes or 0) > 0))


# --- Axis ranges -------------------------------------------------------------------------------------
def _decade_pad(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened to whole decades with a little room, so points never sit on the frame."""
    lo, hi = lo / 2.5, hi * 2.5
    return 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))


def _limits(points: Sequence[ChartPoint], roofs: Roofs | None) -> tuple[tuple[float, float], tuple[float, float]]:
    """(x range, y range): every finite point, every ridge point and roof, then the edge points."""
    xs = [p.flop / p.nbytes for p in points if p.edge is None]
    ys = [p.flops_per_s for p in points if p.edge != EDGE_NO_FLOP]
    comp = [c.tflops * 1e12 for c in roofs.compute] if roofs else []
    mem = [m.gbps * 1e9 for m in roofs.memory] if roofs else []
    xs += [c / m for c in comp for m in mem]
    ys += comp
    if not xs:
        xs = [0.1, 100.0]
    xlim = _decade_pad(min(xs), max(xs))
    ys += [p.bytes_per_s * xlim[0] for p in points if p.edge == EDGE_NO_FLOP]
    ys += [m * xlim[0] for m in mem]
    if not ys:
        ys = [1e9]
    return xlim, _decade_pad(min(ys), max(ys))


def _xy(p: ChartPoint, xlim: tuple[float, float]) -> tuple[float, float]:
    if p.edge == EDGE_NO_BYTES:
        return xlim[1], p.flops_per_s
    if p.edge == EDGE_NO_FLOP:
        return xlim[0], p.bytes_per_s * xlim[0]
    return p.flop / p.nbytes, p.flops_per_s


# --- Drawing -------------------------------------------------------------------------------------------
def _fmt_rate(x: float, unit: str) -> str:
    from .text import fmt_gbps, fmt_tflops

    return fmt_tflops(x) if unit == "flops" else fmt_gbps(x)


def _compute_labels(roofs: Roofs) -> list[tuple[float, bool, str]]:
    """(TFLOP/s, any matrix unit, label) per distinct compute roof value, highest first: roofs of equal
    value share one line and one label ("float16/bfloat16 matrix: 312 TFLOP/s")."""
    by_value: dict[float, dict[str, list[str]]] = {}
    for c in roofs.compute:
        by_value.setdefault(c.tflops, {}).setdefault(c.unit, []).append(c.dtype)
    out = []
    for tflops, units in sorted(by_value.items(), reverse=True):
        text = ", ".join(f"{'/'.join(dtypes)} {unit}" for unit, dtypes in sorted(units.items()))
        out.append((tflops, "matrix" in units, f"{text}: {_fmt_rate(tflops, 'flops')}"))
    return out


def _draw_roofs(ax: Any, roofs: Roofs, xlim: tuple[float, float], ylim: tuple[float, float]) -> None:
    """Compute roofs as horizontal lines from where the main-memory diagonal meets them (the
    roofline's ridge) to the right edge; memory roofs as diagonals up to the highest compute roof.
    Labels sit on their lines; a label that would overlap the one above moves to a slot further
    left."""
    labels = _compute_labels(roofs)
    main = roofs.main_memory()
    top_flops = labels[0][0] * 1e12 if labels else ylim[1]
    # Pixels per decade on the y axis, to keep labels (9 pt ~ 12 px) apart.
    height_px = ax.get_window_extent().height
    px_per_decade = height_px / math.log10(ylim[1] / ylim[0])
    placed: list[tuple[int, float]] = []
    for tflops, matrix, text in labels:
        y = tflops * 1e12
        x0 = max(xlim[0], y / (main.gbps * 1e9)) if main else xlim[0]
        ax.plot([x0, xlim[1]], [y, y], color="#333333", lw=1.4 if matrix else 1.0, ls="-" if matrix else "--",
                zorder=1)
        if x0 > xlim[0]:  # left of the ridge the memory roof binds: the compute roof only faintly
            ax.plot([xlim[0], x0], [y, y], color="#bbbbbb", lw=0.8, ls=":", zorder=1)
        slot = 0
        while any(s == slot and abs(math.log10(y / py)) * px_per_decade < 13 for s, py in placed):
            slot += 1
        placed.append((slot, y))
        ax.text(xlim[1] / 1.15 / 10 ** (1.8 * slot), y * 1.06, text, ha="right", va="bottom", fontsize=9,
                color="#333333", zorder=4, bbox=_LABEL_BOX)
    # A diagonal's angle on screen: measure it through the axes transform once the limits are set.
    (x0, y0), (x1, y1) = ax.transData.transform([(1.0, 1.0), (10.0, 10.0)])
    angle = math.degrees(math.atan2(y1 - y0, x1 - x0))
    for m in roofs.memory:
        bw = m.gbps * 1e9
        x_end = min(xlim[1], top_flops / bw)
        ax.plot([xlim[0], x_end], [bw * xlim[0], bw * x_end], color="#2a7f62", lw=1.4, zorder=1)
        # The label sits a fifth of the way along the visible part of the diagonal.
        xs = xlim[0] * (x_end / xlim[0]) ** 0.2
        if ylim[0] < bw * xs < ylim[1]:
            ax.text(xs, bw * xs * 1.25, f"{m.level}: {_fmt_rate(m.gbps, 'bytes')}", rotation=angle,
                    rotation_mode="anchor", ha="left", va="bottom", fontsize=9, color="#2a7f62", zorder=4,
                    bbox=_LABEL_BOX)


def _draw_points(ax: Any, points: Sequence[ChartPoint], xlim: tuple[float, float]) -> None:
    """One scatter artist per kernel, largest first so that small points stay on top (hoverable)."""
    tmax = max(p.total_us for p in points)
    markers = {None: "o", EDGE_NO_BYTES: ">", EDGE_NO_FLOP: "<"}
    for p in sorted(points, key=lambda q: -q.total_us):
        x, y = _xy(p, xlim)
        area = 16.0 + 584.0 * p.total_us / tmax  # pt^2: the longest kernel about 25 pt across
        sc = ax.scatter([x], [y], s=area, marker=markers[p.edge], c=BOUND_COLOURS.get(p.bound, "#8c8c8c"),
                        alpha=0.75, edgecolors="white", linewidths=0.6, zorder=3, clip_on=False)
        sc.set_gid(f"pt-{p.key}")


def _legend(ax: Any, points: Sequence[ChartPoint]) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker="o", markersize=8, color=BOUND_COLOURS[b], label=BOUND_LABELS[b])
               for b in BOUND_COLOURS if any(p.bound == b for p in points)]
    edges = {p.edge for p in points}
    if EDGE_NO_BYTES in edges:
        handles.append(Line2D([], [], ls="", marker=">", markersize=8, color="#555555",
                              label="no bytes: right edge"))
    if EDGE_NO_FLOP in edges:
        handles.append(Line2D([], [], ls="", marker="<", markersize=8, color="#555555",
                              label="no FLOPs: left edge, at its GB/s"))
    ax.legend(handles=handles, loc="lower right", fontsize=9, framealpha=0.9,
              title="area ∝ total time", title_fontsize=9)


def _figure(points: Sequence[ChartPoint], roofs: Roofs | None, title: str | None) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_PX / _DPI, HEIGHT_PX / _DPI), dpi=_DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xlim, ylim = _limits(points, roofs)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)", fontsize=11)
    ax.set_ylabel("achieved (FLOP/s)", fontsize=11)
    ax.tick_params(labelsize=10)
    ax.grid(True, which="major", color="#e5e5e5", lw=0.8, zorder=0)
    if title:
        ax.set_title(title, fontsize=12, loc="left")
    if roofs is not None:
        _draw_roofs(ax, roofs, xlim, ylim)
    _draw_points(ax, points, xlim)
    _legend(ax, points)
    return fig


def roofline_svg(points: Sequence[ChartPoint], roofs: Roofs | None, *, title: str | None = None,
                 id_prefix: str = "c0-") -> str:
    """The chart as an ``<svg>`` element (no XML prolog), ready to inline in HTML. matplotlib's own
    ids (markers, clip paths) get ``id_prefix``, so that several charts can share a page.

    Raises :class:`ChartUnavailable` when matplotlib cannot be imported or there is no point.
    """
    if not points:
        raise ChartUnavailable("no kernel carries FLOPs or bytes, so there is nothing to place on a roofline")
    try:
        import matplotlib
        from matplotlib.backends.backend_svg import FigureCanvasSVG
    except ImportError as e:
        raise ChartUnavailable(f"matplotlib could not be imported ({e}); install it "
                               "(pip install matplotlib) to get the roofline chart") from None
    # Text stays text (smaller, selectable, the page's fonts); a fixed salt gives the same ids each run.
    rc = {"svg.fonttype": "none", "svg.hashsalt": "inductor-perf", "font.family": "sans-serif"}
    with matplotlib.rc_context(rc):
        fig = _figure(points, roofs, title)
        buf = io.StringIO()
        FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None, "Creator": None})
    return _annotate(buf.getvalue(), {p.key: p.title for p in points}, id_prefix)


_REF = re.compile(r"(url\(#|^#)([^)\s]+)")


def _own_ids(root: ET.Element, prefix: str) -> None:
    """matplotlib's ids: the ones something refers to (``#id``, ``url(#id)``) get ``prefix``, the
    others go (figure_1, patch_2...: unique in one SVG, not on a page of several)."""
    elements = list(root.iter())
    used = {m.group(2) for el in elements for v in el.attrib.values() for m in _REF.finditer(v)}
    for el in elements:
        gid = el.get("id")
        if gid is not None and not gid.startswith("pt-"):
            if gid in used:
                el.set("id", prefix + gid)
            else:
                del el.attrib["id"]
        for k, v in el.attrib.items():
            if k != "id" and "#" in v:
                el.set(k, _REF.sub(lambda m: m.group(1) + (prefix + m.group(2) if m.group(2) in used
                                                           else m.group(2)), v))


def _annotate(svg: str, titles: dict[str, str], id_prefix: str) -> str:
    """Give each kernel's element ``data-kernel`` and a ``<title>``; drop what the page does not need
    (metadata), and size the chart in CSS pixels so it scales down with the window."""
    ET.register_namespace("", _SVG_NS)
    ET.register_namespace("xlink", _XLINK_NS)
    root = ET.fromstring(svg)
    for meta in root.findall(f"{{{_SVG_NS}}}metadata"):
        root.remove(meta)
    root.set("width", f"{WIDTH_PX}")
    root.set("height", f"{HEIGHT_PX}")
    root.set("class", "roofline")
    _own_ids(root, id_prefix)
    seen = set()
    for el in root.iter():
        gid = el.get("id", "")
        if gid.startswith("pt-") and gid[3:] in titles:
            key = gid[3:]
            el.set("data-kernel", key)
            t = ET.Element(f"{{{_SVG_NS}}}title")
            t.text = titles[key]
            el.insert(0, t)
            seen.add(key)
    missing = set(titles) - seen
    if missing:  # our own invariant: every point was drawn with its gid
        raise ChartUnavailable(f"{len(missing)} point(s) lost their id in the SVG (matplotlib changed?)")
    return ET.tostring(root, encoding="unicode")
