"""Text, markdown and JSON of the cross-rank view (:class:`inductor_perf.ranks.view.CrossRankSummary`):
the straggler first, then what to fix first across ranks (its findings), the per-rank table, the kernels that differ most between ranks, the
collectives and what was left out; and of a folder of runs (:class:`inductor_perf.ranks.view.FolderSummary`,
:func:`format_folder`): the table of runs, then each set of ranks' view. Takes the object or its
``to_dict()``; imports no stage."""

from __future__ import annotations

import json
from typing import Any

from ..model.kernel_kinds import KIND_LABELS
from ..model.kernel_names import readable_names, short_name
from .text import TEXT_WIDTH, _check_fmt, _wrap, fmt_bytes, fmt_gbps, fmt_pct, fmt_tflops, fmt_time_us, render_table

MAX_COLLECTIVE_ROWS = 24
"""Rows of the collectives table in text and markdown (all of them are in the JSON)."""
MAX_FINDING_ROWS = 8
"""Findings listed in text and markdown (all of them are in the JSON)."""


def _ranks_table(d: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    per = d["per"]
    headers = ["Rank", "Step" if per == "step" else "Window", "Busy", "Compute", "Collective", "Exposed",
               "Idle", "Compute %", "Exposed %", "Idle %"]
    rows = [[r["rank"], fmt_time_us(r["step_us"]), fmt_pct(r["busy_pct"]), fmt_time_us(r["compute_us"]),
             fmt_time_us(r["comm_us"]), fmt_time_us(r["exposed_comm_us"]), fmt_time_us(r["idle_us"]),
             fmt_pct(r["compute_pct"]), fmt_pct(r["exposed_comm_pct"]), fmt_pct(r["idle_pct"])]
            for r in d["ranks"]]
    return headers, rows


def _kernels_table(d: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    headers = ["Kernel", "Kind", "Ranks", "Min", "Median", "Max", "Max on rank"]
    names = readable_names([k["name"] for k in d["kernels"]], 44)
    rows = [[names[k["name"]], KIND_LABELS.get(k["kind"], k["kind"]), k["ranks"], fmt_time_us(k["min_us"]),
             fmt_time_us(k["median_us"]), fmt_time_us(k["max_us"]), k["max_rank"]] for k in d["kernels"]]
    return headers, rows


def _collectives_table(d: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    headers = ["Collective", "Rank", "Calls", "Size (median)", "Time", "algbw", "busbw", "Wait"]
    rows = [[c["op"], c["rank"], f"{c['calls']:g}", fmt_bytes(c["median_bytes"]), fmt_time_us(c["time_us"]),
             fmt_gbps(c["algbw_gbps"]), fmt_gbps(c["busbw_gbps"]), fmt_time_us(c["wait_us"])]
            for c in d["collectives"][:MAX_COLLECTIVE_ROWS]]
    return headers, rows


def _straggler_lines(d: dict[str, Any]) -> list[str]:
    st = d["straggler"]
    out = [f"Straggler: rank {st['rank']}" if st else "Straggler: none", d["straggler_note"]]
    if not st:
        return out
    per = d["per"]
    out.append(f"its compute differs from the others' median by {fmt_time_us(st['compute_delta_us'])} per {per}, "
               f"its idle time by {fmt_time_us(st['idle_delta_us'])}")
    if st["idle_delta_us"] > max(st["compute_delta_us"], 0):
        out.append("most of its extra time is device idle time: host-side work (data loading, Python, "
                   "synchronization), not slower kernels")
    for key, title in (("kernels", "kernels"), ("modules", "modules"), ("lines", "source lines"),
                       ("idle_hosts", "idle while the host ran")):
        items = st[key]
        if items:
            out.append(f"its extra time ({title}): " + "; ".join(
                f"{short_name(name) if key == 'kernels' else name} +{fmt_time_us(us)}" for name, us in items))
    return out


def _finding_lines(f: dict[str, Any], per: str, read: int) -> tuple[str, list[str]]:
    """(the headline of one finding row, its detail lines: where, the ranks' figures, fix, and for the
    job's row its evidence)."""
    pct = f" ({f['saving_pct_of_step']:.3g} %)" if f["saving_pct_of_step"] is not None else ""
    worst = f"max {fmt_time_us(f['max_saving_us'])} on rank {f['worst_rank']}"
    if f["scope"] == "job":
        head = f"[{f['kind']}, the job] {fmt_time_us(f['job_saving_us'])}/{per}{pct}: {f['title']}"
        details = [f"each rank's own exposed collective time: median {fmt_time_us(f['median_saving_us'])}, {worst} "
                   f"({len(f['ranks'])} ranks with collectives)", f"fix: {f['fix']}", f"why: {f['evidence']}"]
    else:
        spread = (f"median {fmt_time_us(f['median_saving_us'])}/{per}{pct}, {worst}"
                  if f["median_saving_us"] is not None else "no per-step saving")
        once = f", {f['one_time_s']:.3g} s once at most" if f["one_time_s"] else ""
        counted = f", {f['counted']} with a per-step saving" if f["counted"] != len(f["ranks"]) else ""
        head = (f"[{f['kind']}] {spread}{once}; {len(f['ranks'])} of {read} ranks{counted}: {f['title']} "
                f"(rank {f['worst_rank']}'s)")
        details = ([f"at: {f['source']}" + (f" ({f['module']})" if f["module"] else "")] if f["source"] else [])
        details.append(f"fix: {f['fix']}")
    return head, details


def _findings_block(d: dict[str, Any], fmt: str) -> list[str]:
    """What to fix first, across ranks: the view's findings (empty when there is none)."""
    rows = d.get("findings") or []
    if not rows:
        return []
    title = f"What to fix first, across ranks (saving per {d['per']})"
    shown = rows[:MAX_FINDING_ROWS]
    more = f"{len(rows) - len(shown)} more in --format json" if len(rows) > len(shown) else None
    out = ["", f"### {title}", ""] if fmt == "markdown" else ["", title]
    for n, f in enumerate(shown, 1):
        head, details = _finding_lines(f, d["per"], len(d["findings_read"]))
        if fmt == "markdown":
            out.append(f"{n}. {head}" + "".join(f"<br>{x}" for x in details))
        else:
            out.append(_wrap(f"{n}. ", head))
            out += [_wrap(" " * (len(str(n)) + 2), x) for x in details]
    if fmt == "markdown":
        out += ["", f"_{d['findings_note']}" + (f"; {more}" if more else "") + "_"]
    else:
        out.append(_wrap("  ", d["findings_note"] + (f"; {more}" if more else "")))
    return out


def _sections(d: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]], str | None]]:
    per = d["per"]
    sources = sorted({r["collectives"] for r in d["ranks"]})
    foot_ranks = (f"per {per}; Compute = non-collective kernels (union over streams); Collective = time in "
                  "collectives; Exposed = collective time no compute overlaps; Idle = the rest; collectives "
                  f"found as {' and '.join(sources)} events (docs/ranks.md); files in --format json")
    foot_coll = (f"per {per}; Wait = time beyond the least any rank spent in the op (the last to arrive waits "
                 "~0); busbw by nccl-tests' factors (docs/costs.md)")
    if len(d["collectives"]) > MAX_COLLECTIVE_ROWS:
        foot_coll += f"; {len(d['collectives']) - MAX_COLLECTIVE_ROWS} more rows in --format json"
    return [(f"Ranks ({len(d['ranks'])})", *_ranks_table(d), foot_ranks),
            (f"Kernels that differ most between ranks (time per {per})", *_kernels_table(d), None),
            ("Collectives", *_collectives_table(d), foot_coll)]


def format_ranks(view: Any, fmt: str = "text") -> str:
    """Render a :class:`~inductor_perf.ranks.view.CrossRankSummary` (or its ``to_dict()``)."""
    _check_fmt(fmt)
    d = view if isinstance(view, dict) else view.to_dict()
    if fmt == "json":
        return json.dumps(d, indent=2, allow_nan=False, sort_keys=True) + "\n"
    world = f" of {d['world_size']}" if d["world_size"] else ""
    title = (f"inductor_perf cross-rank summary: {len(d['ranks'])}{world} ranks"
             + (f", {d['backend']}" if d["backend"] else ""))
    head = _straggler_lines(d)
    out: list[str] = []
    if fmt == "markdown":
        out += [f"## {title}", ""] + [f"**{head[0]}**", ""] + [f"- {h}" for h in head[1:]]
        out += _findings_block(d, fmt)
        for t, headers, rows, foot in _sections(d):
            if rows:
                out += ["", f"### {t}", "", render_table(headers, rows, "markdown")]
                out += ["", f"_{foot}_"] if foot else []
        if d["notes"]:
            out += ["", "### Notes", ""] + [f"- {n}" for n in d["notes"]]
        return "\n".join(out) + "\n"
    out += [title, "=" * min(TEXT_WIDTH, len(title)), head[0]] + [_wrap("  ", h) for h in head[1:]]
    out += _findings_block(d, fmt)
    for t, headers, rows, foot in _sections(d):
        if rows:
            out += ["", t, render_table(headers, rows, "text")]
            out += [_wrap("  ", foot)] if foot else []
    if d["notes"]:
        out += ["", "Notes"] + [_wrap("- ", n) for n in d["notes"]]
    return "\n".join(out) + "\n"


def _runs_table(d: dict[str, Any], fmt: str) -> tuple[list[str], list[list[Any]]]:
    headers = ["Run", "Rank", "Device", "Steps", "Step", "Window", "Busy", "Kernels", "FLOP/s", "Of peak",
               "Top kernel", "Its busy"]
    tops = readable_names([r["top_kernel"] for r in d["runs"] if r["top_kernel"]], 32 if fmt == "text" else None)
    rows = [[r["file"], "-" if r["rank"] is None else f"{r['rank']}" + (f" of {r['world_size']}" if r["world_size"] else ""),
             r["device"] or "-", r["steps"] or "-", fmt_time_us(r["step_us"]), fmt_time_us(r["window_us"]),
             fmt_pct(r["busy_pct"]), r["kernels"], fmt_tflops(r["achieved_tflops"]),
             fmt_pct(r["flops_pct_of_peak"]) + (f" {r['peak_dtype']}" if r["peak_dtype"] else ""),
             tops[r["top_kernel"]] if r["top_kernel"] else "-", fmt_pct(r["top_kernel_busy_pct"])]
            for r in d["runs"]]
    return headers, rows


_RUNS_FOOT = ("one row per trace that is not a rank of a job whose other ranks are here; Step = mean "
              "ProfilerStep#N, Window = the summary's window (the steps, else the kernels' span), Busy = % "
              "of it with a kernel running, "
              "FLOP/s = the kernels' FLOPs over their time, Of peak = that as % of the device's peak, "
              "Its busy = % of the busy time the top kernel ran; - where unknown; files and why in --format json")


def format_folder(view: Any, fmt: str = "text") -> str:
    """Render what ``summary DIR`` found (:func:`inductor_perf.ranks.view.folder_view`): a
    :class:`~inductor_perf.ranks.view.CrossRankSummary` as :func:`format_ranks` does, a
    :class:`~inductor_perf.ranks.view.FolderSummary` (or either's ``to_dict()``) as the table of runs,
    then each set of ranks' view."""
    _check_fmt(fmt)
    d = view if isinstance(view, dict) else view.to_dict()
    if "runs" not in d:
        return format_ranks(d, fmt)
    if fmt == "json":
        return json.dumps(d, indent=2, allow_nan=False, sort_keys=True) + "\n"
    title = (f"inductor_perf summary of {d['path']}: {len(d['runs'])} run(s) of their own"
             + (f", {len(d['rank_sets'])} set(s) of ranks of one job" if d["rank_sets"] else ""))
    headers, rows = _runs_table(d, fmt)
    md = fmt == "markdown"
    out = [f"## {title}", ""] if md else [title, "=" * min(TEXT_WIDTH, len(title))]
    if rows:
        out += ([f"### Runs ({len(rows)})", ""] if md else ["", f"Runs ({len(rows)})"])
        out += [render_table(headers, rows, fmt, align=list("lllrrrrrrrlr"), fixed=[0]), ""]
        out += [f"_{_RUNS_FOOT}_"] if md else [_wrap("  ", _RUNS_FOOT)]
    for view_d in d["rank_sets"]:
        out += ["", format_ranks(view_d, fmt).rstrip("\n")]
    head = "What was done with each trace"
    out += (["", f"### {head}", ""] + [f"- {n}" for n in d["notes"]] if md
            else ["", head] + [_wrap("- ", n) for n in d["notes"]])
    return "\n".join(out) + "\n"
