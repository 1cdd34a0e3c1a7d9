"""The only formatter: summaries, comparisons (eager vs compiled, trace vs trace) and generic tables
as text, markdown or JSON.

Text is meant for a 100-column terminal: headline numbers first, then tables whose widest text
columns are shortened (middle ellipsis, so a kernel's trailing index stays visible). JSON is strict
(``allow_nan=False``). Renderers take the data objects (or their ``to_dict()``) and never import the
stages that make them, so every stage can call its renderer without an import cycle.

Example::

    >>> print(render_table(["op", "time"], [["mm", "1.00 ms"]], "markdown"))
    | op | time |
    |:---|:---|
    | mm | 1.00 ms |
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from ..model import events as evs
from ..model.events import strict_json
from ..model.kernel_kinds import KIND_LABELS
from ..model.kernel_names import readable_names
from .findings import TABLES, findings_markdown, findings_text
from .units import compact_dtypes, compact_shapes  # noqa: F401  (compact_shapes: named here too)
from .units import (_NA, _SI, _finite, _scaled, _sig, fmt_bytes, fmt_flop, fmt_gb, fmt_gbps, fmt_pct,  # noqa: F401
                    fmt_si, fmt_tflops, fmt_time_us)

FORMATS = ("text", "markdown", "json")
TEXT_WIDTH = 100


def _placement(row: dict[str, Any]) -> dict[str, Any]:
    p = row.get("placement")
    return p if isinstance(p, dict) else {}


_SHORT_ROOFS = {"host link": "host", "interconnect": "ic", "float64": "fp64", "float32": "fp32", "bfloat16": "bf16",
                "float16": "fp16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8",
                "float8_e5m2fnuz": "fp8"}
"""Roof names in a narrow text column (the footnote spells them out); JSON and the page keep the full names."""


def _roof_name(p: dict[str, Any], short: bool = False) -> str:
    """The roof that binds a kernel: its memory level or link, or its compute roof's dtype."""
    if p.get("bound") == "memory":
        name = p.get("level") or _NA
    elif p.get("bound") == "compute":
        name = (p.get("compute_roof") or _NA).split(" ")[0]
    else:
        return _NA
    return _SHORT_ROOFS.get(name, name) if short else name


def _peak_cell(row: dict[str, Any]) -> str:
    """% of the roof that binds the kernel and that roof's name, starred when above it (its reason is
    in the footnote)."""
    p = _placement(row)
    if not _finite(p.get("pct_of_roof")):
        return _NA
    return f"{fmt_pct(p['pct_of_roof'])} {_roof_name(p, short=True)}" + ("*" if p.get("above_roof_reason") else "")


def above_roof_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One "name: reason" per row above its roof (``*`` in the Peak column), for a footnote."""
    from ..model.kernel_names import short_name

    return [f"{short_name(r['name'])}: {fmt_pct(_placement(r)['pct_of_roof'])} of {_roof_name(_placement(r))}, "
            f"{_placement(r)['above_roof_reason']}" for r in rows if _placement(r).get("above_roof_reason")]


def _short_source(src: str | None) -> str:
    """``/long/path/model.py:12`` -> ``model.py:12`` (the full path stays in JSON)."""
    if not src:
        return _NA
    return src.replace("\\", "/").rsplit("/", 1)[-1]


def fmt_count(n: int | None) -> str:
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else _NA


# --- Tables ---------------------------------------------------------------------------------------
def _cell(value: Any) -> str:
    if value is None:
        return _NA
    if isinstance(value, float):
        return _sig(value) if math.isfinite(value) else _NA
    return str(value)


def _shorten(s: str, width: int) -> str:
    if len(s) <= width:
        return s
    if width <= 1:
        return s[:width]
    keep = width - 1
    head = (keep + 1) // 2
    return s[:head] + "…" + s[len(s) - (keep - head):]


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, *,
                 align: Sequence[str] | None = None, width: int = TEXT_WIDTH, fixed: Sequence[int] = ()) -> str:
    """Render rows as ``text`` (aligned columns fitted to ``width``), ``markdown`` or ``json``.

    ``align`` is one ``"l"``/``"r"`` per column; by default columns whose values are all numbers
    (or None) are right-aligned. Cells are shown with ``str`` (floats to 3 significant digits); pass
    preformatted strings for units. JSON gives a list of ``{header: value}`` objects with raw values.
    Text columns listed in ``fixed`` are never shortened (names already fitted and kept apart by
    :func:`inductor_perf.model.kernel_names.readable_names`).

    >>> print(render_table(["a", "n"], [["x", 1], ["yy", 22]], "text"))
    a    n
    --  --
    x    1
    yy  22
    """
    _check_fmt(fmt)
    ncol = len(headers)
    for r in rows:
        if len(r) != ncol:
            raise ValueError(f"table row has {len(r)} cells; expected {ncol} (one per header)")
    if fmt == "json":
        return json.dumps([dict(zip(headers, (strict_json(v) for v in r))) for r in rows],
                          indent=2, allow_nan=False)
    if align is None:
        align = ["r" if rows and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                                     for v in (r[i] for r in rows)) else "l" for i in range(ncol)]
    cells = [[_cell(v) for v in r] for r in rows]
    if fmt == "markdown":
        def esc(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")
        out = ["| " + " | ".join(esc(h) for h in headers) + " |",
               "|" + "|".join(("---:" if a == "r" else ":---") for a in align) + "|"]
        out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in cells]
        return "\n".join(out)
    # text: shrink the widest left-aligned (text) columns until the table fits
    widths = [max([len(headers[i])] + [len(r[i]) for r in cells]) for i in range(ncol)]
    sep = 2
    while sum(widths) + sep * (ncol - 1) > width:
        shrinkable = [i for i in range(ncol) if align[i] == "l" and widths[i] > max(12, len(headers[i]))
                      and i not in fixed]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda j: widths[j])
        widths[i] -= 1

    def line(vals: Sequence[str]) -> str:
        parts = []
        for i, v in enumerate(vals):
            v = _shorten(v, widths[i])
            parts.append(v.rjust(widths[i]) if align[i] == "r" else v.ljust(widths[i]))
        return (" " * sep).join(parts).rstrip()

    out = [line(list(headers)), (" " * sep).join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _check_fmt(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


# --- Summary --------------------------------------------------------------------------------------
def _split_text(d: dict[str, Any]) -> str:
    """The kinds with time, largest first (every kind when none has any)."""
    us = d["time_split_us"]
    kinds = [k for k in us if _finite(us[k]) and us[k] > 0] or list(us)
    kinds.sort(key=lambda k: -(us[k] or 0))
    return ", ".join(f"{KIND_LABELS.get(k, k)} {fmt_pct(d['time_split_pct'].get(k))}" for k in kinds)


def _na_pct(pct: float | None) -> str:
    """A headline percentage, "n/a" when unknown."""
    return fmt_pct(pct) if _finite(pct) else "n/a"


def _headline(d: dict[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    ev = f"{fmt_count(d['events_used'])} events"
    nskip = sum(d["skipped"].values())
    if nskip:
        ev += f", {fmt_count(nskip)} skipped"
    basis = d.get("window_basis")
    span = {"steps": f"{len(d.get('steps') or [])} recorded step(s)", "kernels": "first to last kernel",
            "events": "first to last event"}.get(basis) if isinstance(basis, str) else None
    pairs.append(("Window", f"{fmt_time_us(d['wall_us'])}  ({span + '; ' if span else ''}{ev})"))
    pairs.append(("Device busy", f"{fmt_pct(d['busy_pct'])}  ({fmt_time_us(d['busy_us'])} busy in "
                                 f"{fmt_count(d['kernel_count'])} kernels on {d['timelines']} timeline(s); "
                                 f"definition: {d['kernel_definition']})"))
    pairs.append(("Idle", f"{fmt_time_us(d['idle_us'])}  ({fmt_count(d['gap_count'])} gaps)"))
    pairs.append(("Kernel time", f"{fmt_time_us(d['kernel_time_us'])}: {_split_text(d)}"))
    unknown = d.get("flops_unknown")
    if d["achieved_tflops"] is None and d["achieved_gbps"] is None:
        ach = f"n/a ({unknown or 'no kernel_flop / kernel_num_gb args in this trace'})"
    else:
        flops = fmt_tflops(d["achieved_tflops"]) if d["achieved_tflops"] is not None else "n/a FLOP/s"
        ach = f"{flops}, {fmt_gbps(d['achieved_gbps']) if d['achieved_gbps'] is not None else 'n/a B/s'}"
        if d["flop"] is not None:
            ach += f"  ({fmt_flop(d['flop'])}, {fmt_gb(d['gb'])} moved; FLOPs known for " \
                   f"{fmt_pct(d['flop_coverage_pct'])} of compute-kernel time)"
        elif unknown:
            ach += f"  ({fmt_gb(d['gb'])} moved; FLOP/s n/a: {unknown})" if d["gb"] is not None else \
                f"  (FLOP/s n/a: {unknown})"
    pairs.append(("Achieved", ach))
    if d.get("costed_time_pct") is not None or d.get("costs_note"):
        costed = f"{fmt_pct(d.get('costed_time_pct'))} of kernel time carries a cost (FLOPs, bytes or a " \
                 "collective's size)"
        if d.get("lower_bound_pct"):
            costed += f", {fmt_pct(d['lower_bound_pct'])} of it only a lower bound (kernel_cost_bound: an op " \
                      "record that left out values changing its cost)"
        if d.get("costs_note"):
            costed += f"; {d['costs_note']}"
        pairs.append(("Costed", costed))
    p = d["peak"]
    note = d.get("device_note")
    if p["peak_tflops"] is not None or p["mem_bandwidth_gbs"] is not None:
        pairs.append(("Of peak", f"{_na_pct(d['flops_pct_of_peak'])} of {fmt_tflops(p['peak_tflops'])} "
                                 f"{p['dtype'] or ''}, {_na_pct(d['bandwidth_pct_of_peak'])} of "
                                 f"{fmt_gbps(p['mem_bandwidth_gbs'])}  (device: {p['device'] or '?'}"
                                 f"{'; ' + note if note else ''}; peaks: {p['peak_source'] or '?'})"))
        if d.get("above_peak_reason"):
            pairs[-1] = ("Of peak", pairs[-1][1] + f"; above 100 %: {d['above_peak_reason']}")
    else:
        pairs.append(("Of peak", f"unknown ({note or 'no device peaks given'})"))
    if "mfu_pct" in d:
        pairs.append(("MFU", _mfu_text(d)))
    dist = d.get("distributed")
    if dist:
        pairs.append(("Distributed", ", ".join(f"{k} {v}" for k, v in dist.items())))
    return pairs


def _mfu_text(d: dict[str, Any]) -> str:
    """The MFU line: MFU and HFU of the window, the FLOPs of a step, and the note (why unknown, or
    what the figures leave out)."""
    note = d.get("mfu_note")
    if d["mfu_pct"] is None and d.get("hfu_pct") is None:
        return f"n/a ({note or 'unknown'})"
    per = ""
    if d.get("model_flop_per_step") is not None:
        per = (f"; per step {fmt_flop(d['model_flop_per_step'])} model, "
               f"{fmt_flop(d.get('hardware_flop_per_step'))} executed")
    if d.get("mfu_unprofiled_pct") is not None:
        per += f"; MFU {_na_pct(d['mfu_unprofiled_pct'])} over the step the capture timed without the profiler"
    return (f"{_na_pct(d['mfu_pct'])}, HFU {_na_pct(d.get('hfu_pct'))}  (of {fmt_tflops(d['peak']['peak_tflops'])} "
            f"{d['peak']['dtype'] or ''} over the window{per}{'; ' + note if note else ''})")


_Table = tuple[str, list[str], list[list[Any]], list[str], list[int], str | None]
"""(title, headers, rows, align, columns never shortened, footnote) of one table."""


def _name_width(cells: list[list[Any]], headers: list[str], name_col: int) -> int:
    """Room left for the name column of a text table once the other columns have theirs."""
    others = sum(max([len(headers[i])] + [len(_cell(r[i])) for r in cells]) for i in range(len(headers))
                 if i != name_col)
    return max(24, min(60, TEXT_WIDTH - others - 2 * (len(headers) - 1)))


def _kernel_table(d: dict[str, Any], fmt: str) -> _Table:
    # 100 columns hold ten columns only with compact numbers: SI prefix without the unit word.
    headers = ["Kernel", "Calls", "Total", "Mean", "Busy", "FLOP", "Bytes", "Peak", "Bound", "Source"]
    rows = [[r["name"], r["count"], fmt_time_us(r["total_us"]), fmt_time_us(r["mean_us"]),
             fmt_pct(r["share_of_busy_pct"]), fmt_si(r["flop"]),
             fmt_si(r["gb"] * 1e9 if _finite(r["gb"]) else None), _peak_cell(r),
             r["bound"] or _NA, _short_source(r["source"])]
            for r in d["top_kernels"]]
    align = list("lrrrrrrrll")
    if fmt == "text":
        # Columns with nothing to say (a raw trace has no FLOPs, bounds or sources) give their room
        # to the kernel names.
        keep = [0, 1, 2, 3, 4] + [i for i in range(5, len(headers)) if any(r[i] != _NA for r in rows)]
        headers, align = [headers[i] for i in keep], [align[i] for i in keep]
        rows = [[r[i] for i in keep] for r in rows]
    width = _name_width(rows, headers, 0) if fmt == "text" else None
    shown = readable_names([r[0] for r in rows], width)
    for r in rows:
        r[0] = shown[r[0]]
    foot = ("Busy = % of the device-busy time (union over all streams) during which the row's kernels ran; "
            "Peak = % of the roof that binds the kernel at its intensity, and which: a memory level, a "
            "link (host: to the host, ic: the GPU interconnect) or the compute roof of its dtype (tf32: a "
            "float32 GEMM on TF32 tensor cores)")
    above = above_roof_lines(d["top_kernels"])
    if above:
        foot += "; * above its roof: " + "; ".join(above)
    return (f"{TABLES['top_kernels'][1]} ({len(rows)} of {d['distinct_kernels']}; Peak = % of the roof that "
            "binds)", headers, rows, align, [0], foot)


def _steps_table(d: dict[str, Any]) -> _Table | None:
    steps = d.get("steps") or []
    if not steps:
        return None
    rows = [[("* " if r["name"] == d.get("slowest_step") else "") + r["name"], fmt_time_us(r["dur_us"]),
             fmt_pct(r["busy_pct"]), fmt_pct(r["matmul_pct"]), fmt_pct(r["other_pct"]), fmt_pct(r["comm_pct"]),
             fmt_pct(r["idle_pct"]), r["kernel_count"], fmt_pct(r.get("mfu_pct")), fmt_pct(r.get("hfu_pct"))]
            for r in steps]
    return (f"{TABLES['steps'][1]} ({len(steps)}; * = slowest)",
            ["Step", "Time", "Busy", "Matmul", "Other", "Comm", "Idle", "Kernels", "MFU", "HFU"], rows,
            list("lrrrrrrrrr"), [0],
            "shares of the step's time, adding to 100 %: Matmul = a matmul/conv/attention kernel runs; "
            "Other = other device work and no matmul; Comm = only collectives run (exposed); "
            "Busy = Matmul + Other + Comm (union over all streams); MFU / HFU = the step's model / "
            "executed FLOPs over its time x the peak of the MFU line")


def _stream_idle_table(d: dict[str, Any]) -> _Table:
    """Each stream's idle time between its kernels, by what it waited for (HTA's idle time breakdown)."""
    rows = [[r["stream"], r["kernels"], fmt_time_us(r["idle_us"]), fmt_pct(r["host_wait_pct"]),
             fmt_pct(r["launch_delay_pct"]), fmt_pct(r["other_pct"])] for r in d.get("idle_by_stream") or []]
    return (f"{TABLES['idle_by_stream'][1]} (between its kernels, by what it waited for)",
            ["Stream", "Kernels", "Idle", "Host wait", "Launch delay", "Other"], rows, list("lrrrrr"), [],
            "Host wait = the next kernel's launch call began after the stream went idle; Launch delay = "
            "a gap under 30 µs (launch overhead); Other = queued, yet waiting (an event, another stream), "
            "or no launch call in the trace; shares of the stream's idle time")


def _op_peak_cell(r: dict[str, Any], short: bool) -> str:
    """As :func:`_peak_cell`, from an ``ops_by_shape`` row's ``pct_of_roof`` and ``roof``."""
    if not _finite(r["pct_of_roof"]):
        return _NA
    roof = r["roof"] or _NA
    if short:
        first = roof.split(" ")[0]
        roof = _SHORT_ROOFS.get(first, first)
    return f"{fmt_pct(r['pct_of_roof'])} {roof}" + ("*" if r["above_roof_reason"] else "")


def _op_shape_table(d: dict[str, Any], fmt: str) -> _Table | None:
    """Time by (op, input shapes, input dtypes), most time first (TraceLens's unique-args view)."""
    got = d.get("ops_by_shape")
    if not got:
        return None
    short = fmt == "text"

    def cut(v: str, n: int) -> str:
        return _shorten(v, n) if short else v

    rows = [[cut(r["op"], 24), compact_shapes(r["shapes"]),
             compact_dtypes(r["dtypes"]) if short else (r["dtypes"] or _NA), r["calls"], fmt_time_us(r["total_us"]),
             fmt_time_us(r["mean_us"]), fmt_flop(r["flop"]), fmt_gb(r["gb"]), fmt_tflops(r["achieved_tflops"]),
             fmt_gbps(r["achieved_gbps"]),
             _op_peak_cell(r, short)]
            for r in got]
    headers = ["Op", "Shapes", "Dtypes", "Calls", "Time", "Mean", "FLOP", "Bytes", "Rate", "GB/s", "Peak"]
    if short:  # compact: the bytes and GB/s are in the JSON and on the page
        rows = [[r[0], r[1] + ("" if r[2] == _NA else f" ({r[2]})"), r[3], r[4], r[8], r[10]] for r in rows]
        headers = ["Op", "Shapes (dtypes)", "Calls", "Time", "Rate", "Peak"]
    above = [f"{r['op']} {compact_shapes(r['shapes'])}: {r['above_roof_reason']}" for r in got if r["above_roof_reason"]]
    foot = ("Time = device time of the kernels the op's calls launched (CPU: the op's own); compiled = a "
            "kernel Inductor generated, keyed by the eager ops it fuses; Peak = % of the roof that binds")
    if above:
        foot += "; * above its roof: " + above[0] + (f" (and {len(above) - 1} more)" if len(above) > 1 else "")
    left = 2 if short else 3
    return (f"{TABLES['ops_by_shape'][1]} (top {len(rows)})", headers, rows,
            list("l" * left + "r" * (len(headers) - left)), [0], foot)


def _uncosted_table(d: dict[str, Any], fmt: str) -> _Table | None:
    rows_in = d.get("uncosted") or []
    if not rows_in:
        return None
    names = readable_names([r["kernel"] for r in rows_in], 40 if fmt == "text" else None)
    rows = [[r["op"] or _NA, names[r["kernel"]], r["reason"], fmt_time_us(r["total_us"]),
             fmt_pct(r["share_of_kernel_time_pct"]), r["count"]] for r in rows_in]
    hints = {r["reason"]: r["hint"] for r in rows_in}
    foot = "; ".join(f"{k}: {v}" for k, v in hints.items())
    return (f"Not costed: top ops / kernels without a cost ({fmt_pct(d.get('costed_time_pct'))} of kernel time "
            "carries one)", ["Launching op", "Kernel", "Why", "Time", "Of kernels", "Calls"], rows,
            list("lllrrr"), [1], foot)


def _tables(d: dict[str, Any], fmt: str = "text") -> list[_Table]:
    """Every table, cells already in display units."""
    tables = [_kernel_table(d, fmt)]
    steps = _steps_table(d)
    if steps:
        tables.append(steps)
    by_shape = _op_shape_table(d, fmt)
    if by_shape:
        tables.append(by_shape)
    for key, title, n in (("modules", "By module", "distinct_modules"),
                          ("lines", TABLES["lines"][1], "distinct_lines")):
        rows = [[_short_source(r["key"]) if key == "lines" else r["key"], r["count"], fmt_time_us(r["total_us"]), fmt_pct(r["share_of_busy_pct"]),
                 fmt_flop(r["flop"]), fmt_gb(r["gb"]), fmt_tflops(r["achieved_tflops"])] for r in d[key]]
        tables.append((f"{title} ({len(rows)} of {d[n]})",
                       ["Module" if key == "modules" else "Source", "Calls", "Time", "Busy", "FLOP", "Bytes",
                        "Rate"], rows, list("lrrrrrr"), [],
                       "Busy = % of the device-busy time during which a kernel of the row ran (union over "
                       "its kernels: never above 100 %; rows overlap when streams run in parallel)"))
    uncosted = _uncosted_table(d, fmt)
    if uncosted:
        tables.append(uncosted)
    idle = [[r["host"], fmt_time_us(r["idle_us"]), fmt_pct(r["share_of_idle_pct"]), r["gaps"],
             _short_source(r["source"])] for r in d["idle_by_host"]]
    tables.append((f"{TABLES['idle_by_host'][1]} (innermost host event on the launching thread)",
                   ["Host activity", "Idle", "Of idle", "Gaps", "Python frame"], idle, list("lrrrl"), [], None))
    tables.append(_stream_idle_table(d))
    near = [g["next_kernel"] or g["prev_kernel"] for g in d["gaps"]]
    names = readable_names([n for n in near if n], 32 if fmt == "text" else None)
    gaps = [[fmt_time_us(g["dur_us"]), "+" + fmt_time_us(g["start_us"]), g["position"],
             g["host_innermost"] or _NA, names[n] if n else _NA, _short_source(g["source"])]
            for g, n in zip(d["gaps"], near)]
    tables.append((f"{TABLES['gaps'][1]} ({len(gaps)} of {d['gap_count']})",
                   ["Idle", "At", "Where", "Host activity", "Next kernel", "Source"], gaps, list("rrllll"), [4],
                   None))
    return tables


def format_summary(summary: Any, fmt: str = "text", *, title: str | None = None) -> str:
    """Render a :class:`inductor_perf.summary.rows.Summary` (or its ``to_dict()``) as text, markdown or JSON.

    All three carry the same numbers: text and markdown show them in human units.
    """
    _check_fmt(fmt)
    d = summary if isinstance(summary, dict) else summary.to_dict()
    if fmt == "json":
        return json.dumps(d, indent=2, allow_nan=False, sort_keys=True)
    name = title or d.get("label") or "trace"
    head = _headline(d)
    tables = _tables(d, fmt)
    out: list[str] = []
    if fmt == "markdown":
        out.append(f"## inductor_perf summary: {name}")
        out.append("")
        if d.get("findings"):
            out += ["### What to fix first", ""] + findings_markdown(d["findings"], summary=d) + [""]
        out.append(render_table(["Metric", "Value"], head, "markdown", align=["l", "l"]))
        for t_title, headers, rows, align, _, foot in tables:
            if rows:
                out += ["", f"### {t_title}", "", render_table(headers, rows, "markdown", align=align)]
                out += ["", f"_{foot}_"] if foot else []
        if d["notes"]:
            out += ["", "### Notes", ""] + [f"- {n}" for n in d["notes"]]
        return "\n".join(out) + "\n"
    out.append(f"inductor_perf summary: {name}")
    out.append("=" * min(TEXT_WIDTH, len(out[0])))
    if d.get("findings"):
        out += ["What to fix first"] + findings_text(d["findings"], summary=d) + [""]
    label_w = max(len(k) for k, _ in head)
    for k, v in head:
        out.append(_wrap(f"{k.ljust(label_w)}  ", v))
    for t_title, headers, rows, align, fixed, foot in tables:
        if rows:
            out += ["", _wrap("", t_title), render_table(headers, rows, "text", align=align, fixed=fixed)]
            out += [_wrap("  ", foot)] if foot else []
    if d["notes"]:
        out += ["", "Notes"] + [_wrap("- ", n) for n in d["notes"]]
    return "\n".join(out) + "\n"


def _wrap(prefix: str, text: str) -> str:
    import textwrap

    return textwrap.fill(text, width=TEXT_WIDTH, initial_indent=prefix,
                         subsequent_indent=" " * len(prefix), break_on_hyphens=False)


# --- Comparison (eager vs compiled, trace vs trace) -----------------------------------------------


def format_comparison(c: Any, fmt: str = "text") -> str:
    """Render a :class:`inductor_perf.comparison.rows.Comparison` as text, markdown or (strict) JSON.

    Text and markdown: headline step times, one table per phase, the totals (rows + unattributed =
    measured step time), the fusion map and the notes.
    """
    _check_fmt(fmt)
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2, allow_nan=False)
    a, b = c.a, c.b
    short = ("eager", "compiled") if (a.label, b.label) == ("eager", "compiled") else ("A", "B")
    out = _comparison_head(c, short, fmt == "markdown") + _comparison_body(c, short, fmt)
    return "\n".join(out) + "\n"


def _speedup(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None and math.isfinite(v) else "-"


def _count(n: float) -> str:
    if n == 0:
        return "0"
    return f"{n:.0f}" if abs(n - round(n)) < 1e-9 else f"{n:.1f}"


def _comparison_head(c: Any, short: tuple[str, str], md: bool) -> list[str]:
    """Title, side labels, profiled and unprofiled step times, what the rows are."""
    a, b = c.a, c.b
    out: list[str] = []
    title = f"inductor_perf compare: {a.label} vs {b.label}, by {c.by}"
    out += [f"## {title}", ""] if md else [title, "=" * min(TEXT_WIDTH, len(title))]
    if short == ("A", "B"):
        out.append(f"A = {a.label}{'  ' if md else ''}")
        out.append(f"B = {b.label}{'  ' if md else ''}")
    out.append(f"Step time (profiled, mean of {a.steps} / {b.steps} steps): {short[0]} {fmt_time_us(a.step_us)}, "
               f"{short[1]} {fmt_time_us(b.step_us)}, speedup {_speedup(c.speedup)}{'  ' if md else ''}")
    if c.unprofiled_speedup is not None:
        out.append(f"Step time (no profiler, median): {short[0]} {fmt_time_us(a.unprofiled_step_us)}, "
                   f"{short[1]} {fmt_time_us(b.unprofiled_step_us)}, speedup {_speedup(c.unprofiled_speedup)}"
                   f"{'  ' if md else ''}")
    out.append(f"Rows: {c.rows_are}. Times per step, {_time_text(c)}; Ops/Kernels: calls per step; FLOP: "
               f"the row's costed events ({short[1]}'s, else {short[0]}'s); Peak: their FLOP/s over their own "
               "time as % of the compute peak.")
    return out


def _time_text(c: Any) -> str:
    """What the rows' times are, per side."""
    words = {"host": "host time (the op or CPU kernel on its thread)", "device": "device time (the kernels)"}
    if c.a.time == c.b.time:
        return words[c.a.time]
    return f"A: {words[c.a.time]}, B: {words[c.b.time]}"


_PHASE_TITLES = {"optimizer": "Optimizer (torch.optim's step and zero_grad)",
                 "other": "Other (device events launched from no thread of the step, or whose launch the trace lacks)"}


def comparison_tables(c: Any, short: tuple[str, str]) -> tuple[list[tuple[str, list[str], list[list[str]], str]],
                                                               list[str]]:
    """The comparison's tables, cells in display units, as text, markdown and the page show them:
    ([(title, headers, cells, align)]: one per phase, its rows and the phase total, then the totals
    per step (rows - the time rows ran beside each other + unattributed = measured step time, on
    each side)), and the fusion map lines."""
    kernels = c.by == "kernel"
    headers = ["Module" if c.by == "module" else c.by.capitalize(), short[0], short[1], "Speedup",
               "Ops" if not (c.a.compiled or kernels) else f"{short[0]} calls",
               "Kernels" if c.b.compiled and not kernels else f"{short[1]} calls", "FLOP", "Peak"]
    tables: list[tuple[str, list[str], list[list[str]], str]] = []
    fusion_lines: list[str] = []
    for phase in evs.PHASE_ORDER:
        rows = [r for r in c.rows if r.phase == phase]
        if not rows:
            continue
        cells = []
        for r in rows:
            key = r.key if c.by != "line" else r.key.replace("\\", "/").rsplit("/", 1)[-1]
            cells.append([key if key else evs.ROOT_MODULE, fmt_time_us(r.a_us), fmt_time_us(r.b_us),
                          _speedup(r.speedup), _count(r.a_count), _count(r.b_count), fmt_si(r.flops),
                          fmt_pct(r.achieved_pct) + (" *" if r.achieved_pct is not None and r.achieved_pct > 100 else "")])
            if r.fusion:
                fusion_lines.append(f"[{phase}] {key or evs.ROOT_MODULE}: " + "; ".join(r.fusion))
        ta, tb = c.phase_total(phase)
        cells.append([f"{phase} total", fmt_time_us(ta), fmt_time_us(tb),
                      _speedup(ta / tb if ta > 0 and tb > 0 else None), "", "", "", ""])
        tables.append((_PHASE_TITLES.get(phase, phase.capitalize()), headers, cells, "lrrrrrrr"))
    a, b = c.a, c.b
    tot = [["rows (all phases)", fmt_time_us(a.attributed_us), fmt_time_us(b.attributed_us)]]
    if a.overlap_us > 0 or b.overlap_us > 0:
        tot.append(["- rows that ran beside each other (threads, streams)", fmt_time_us(-a.overlap_us),
                    fmt_time_us(-b.overlap_us)])
    what = {"host": "Python, hooks, profiler, gaps", "device": "device idle"}
    tot += [[f"{evs.UNATTRIBUTED}: " + " / ".join(dict.fromkeys(what[t] for t in (a.time, b.time))),
             fmt_time_us(a.unattributed_us), fmt_time_us(b.unattributed_us)],
            ["measured step time", fmt_time_us(a.step_us), fmt_time_us(b.step_us)]]
    tables.append(("Totals (per step)", ["", short[0], short[1]], tot, "lrr"))
    return tables, fusion_lines


def _comparison_body(c: Any, short: tuple[str, str], fmt: str) -> list[str]:
    """The tables (:func:`comparison_tables`), fusion map and notes, as text or markdown."""
    md = fmt == "markdown"
    tables, fusion_lines = comparison_tables(c, short)
    out: list[str] = []
    for title, headers, cells, align in tables:
        out += ["", f"### {title}", ""] if md else ["", title]
        out.append(render_table(headers, cells, fmt, align=list(align)))
    if fusion_lines:
        out += ["", "### Fusion map", ""] if md else ["", "Fusion map (eager ops → compiled kernel, longest first)"]
        out += [("- " if md else "  ") + line for line in fusion_lines]
    if c.notes:
        out += ["", "### Notes", ""] if md else ["", "Notes"]
        out += ["- " + n for n in c.notes]
    return out
