#!/usr/bin/env python
"""Open a raw and an augmented trace in the tools users use, and compare what each tool sees.

Not part of the test suite: these tools are not CI dependencies. See docs/interop.md for how to
install them (outside the project venv) and for the numbers observed so far.

    # 1. the raw and the augmented trace of the very same events (project venv)
    python tools/check_interop.py make-traces /tmp/interop_work
    # 2. every check, each in a subprocess that sees only its tool's site-packages
    python tools/check_interop.py all --raw /tmp/interop_work/raw.pt.trace.json \\
        --aug /tmp/interop_work/aug.trace.json.gz --site /tmp/interop_site --hta-site /tmp/hta_site

Each check prints one JSON object; ``all`` prints them together and exits 1 when an invariant fails.
Checks: perfetto (trace processor in viztracer's bundled UI, headless Chromium), catapult
(trace_viewer_full.html from torch-tb-profiler, headless Chromium), hta, tbprofiler.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Args every tool should hand back unchanged (the ones users filter and sort by).
CHECKED_ARGS = ("kernel_flop", "kernel_num_gb", "module_path", "roofline_bound")


# --- plain-JSON facts: what the tools are compared against -----------------------------------------

def load_json(path: str) -> tuple[dict, int]:
    """Load a (possibly gzipped) trace; also count NaN/Infinity literals, which strict JSON forbids."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    nonfinite = [0]

    def constant(name: str) -> float:
        nonfinite[0] += 1
        return float(name)

    return json.loads(text, parse_constant=constant), nonfinite[0]


def json_facts(path: str) -> dict:
    """Counts straight from the JSON: events by phase, and the events carrying each of our args."""
    trace, nonfinite = load_json(path)
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    phases = Counter(e.get("ph") for e in events)
    with_arg = {k: [e for e in events if k in (e.get("args") or {})] for k in CHECKED_ARGS}
    flop_events = with_arg["kernel_flop"]
    return {
        "nonfinite_numbers": nonfinite,
        "events": len(events),
        "ph_X": phases.get("X", 0),
        "ph_B": phases.get("B", 0),
        "ph_E": phases.get("E", 0),
        "ph_i": phases.get("i", 0) + phases.get("I", 0),
        "events_with": {k: len(v) for k, v in with_arg.items()},
        "kernel_flop_sum": sum(int(e["args"]["kernel_flop"]) for e in flop_events),
        "kernel_flop_pairs": sorted((str(e.get("name")), int(e["args"]["kernel_flop"])) for e in flop_events),
    }


# --- small helpers ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float) -> None:
    end = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if time.time() > end:
                raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")
            time.sleep(0.3)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def chromium(binary: str) -> Iterator[int]:
    """A headless Chromium with the DevTools protocol on a local port; yields the port."""
    port = free_port()
    profile = tempfile.mkdtemp(prefix="interop_chrome_")
    proc = subprocess.Popen(
        [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/json/version", 60)
        yield port
    finally:
        stop(proc)
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """One tab driven through the DevTools protocol (needs websocket-client)."""

    def __init__(self, cdp_port: int, url: str) -> None:
        import websocket  # from the tools' site, not the project venv

        req = urllib.request.Request(f"http://127.0.0.1:{cdp_port}/json/new?{url}", method="PUT")
        target = json.load(urllib.request.urlopen(req, timeout=30))
        # Chromium rejects DevTools websockets that send an Origin header it was not told about.
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=300,
                                              suppress_origin=True)
        self.n = 0
        self.console: list[str] = []
        self.errors: list[str] = []
        self.call("Runtime.enable")

    def call(self, method: str, **params: Any) -> dict:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.consoleAPICalled":
                args = msg["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            if msg.get("method") == "Runtime.exceptionThrown":
                d = msg["params"]["exceptionDetails"]
                self.errors.append(f"{d.get('url', '')}:{d.get('lineNumber')}: "
                                   f"{d.get('exception', {}).get('description', d.get('text', ''))[:300]}")
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def eval(self, expr: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise RuntimeError(f"JS error: {d.get('exception', {}).get('description') or d.get('text')}")
        return res["result"].get("value")

    def wait_for(self, expr: str, timeout: float) -> Any:
        end = time.time() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.time() > end:
                raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {expr}; "
                                   f"page errors: {self.errors[:3]}")
            time.sleep(0.5)

    def close(self) -> None:
        self.ws.close()


# --- 1. Perfetto trace processor (viztracer's bundled UI) ------------------------------------------

_PERFETTO_QUERY_JS = """(async () => {
  const r = await window.app.trace.engine.query(%s);
  const cols = r.columns(); const rows = [];
  for (const it = r.iter({}); it.valid(); it.next()) {
    const o = {};
    for (const c of cols) { let v = it.get(c); if (typeof v === 'bigint') v = Number(v); o[c] = v; }
    rows.push(o);
  }
  return JSON.stringify(rows);
})()"""


def perfetto_load(path: str, chrome: str, cdp_port: int) -> dict:
    """Serve one trace with vizviewer, open it in the Perfetto UI, and run our SQL on it."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "viztracer.viewer", "--server_only", "--port", str(port),
                             os.path.abspath(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_http(f"http://127.0.0.1:{port}/vizviewer_info", 60)
        page = Page(cdp_port, f"http://127.0.0.1:{port}/")
        try:
            page.wait_for("!!(window.app && window.app.trace && window.app.trace.engine)", 180)

            def q(sql: str) -> list[dict]:
                return json.loads(page.eval(_PERFETTO_QUERY_JS % json.dumps(sql)))

            out: dict[str, Any] = {}
            out["slices"] = q("select count(*) as n from slice")[0]["n"]
            out["instants"] = q("select count(*) as n from slice where dur = 0")[0]["n"]
            out["stats_nonzero"] = {f"{r['name']}[{r['severity']}]": r["value"] for r in q(
                "select name, severity, sum(value) as value from stats where value > 0 "
                "group by name, severity order by name")}
            out["slice_drop_overlapping_complete_event"] = q(
                "select coalesce(sum(value), 0) as v from stats "
                "where name = 'slice_drop_overlapping_complete_event'")[0]["v"]
            for k in CHECKED_ARGS:
                out[f"slices_with_{k}"] = q(
                    f"select count(*) as n from slice where extract_arg(arg_set_id, 'args.{k}') is not null")[0]["n"]
            rows = q("select name, extract_arg(arg_set_id, 'args.kernel_flop') as f from slice "
                     "where extract_arg(arg_set_id, 'args.kernel_flop') is not null")
            out["kernel_flop_sum"] = sum(int(r["f"]) for r in rows)
            out["kernel_flop_pairs"] = sorted((str(r["name"]), int(r["f"])) for r in rows)
            ex = q("select name, extract_arg(arg_set_id, 'args.kernel_flop') as kernel_flop, "
                   "extract_arg(arg_set_id, 'args.kernel_num_gb') as kernel_num_gb, "
                   "extract_arg(arg_set_id, 'args.roofline_bound') as roofline_bound, "
                   "extract_arg(arg_set_id, 'args.module_path') as module_path from slice "
                   "where extract_arg(arg_set_id, 'args.kernel_flop') > 0 order by kernel_flop desc limit 1")
            out["example"] = ex[0] if ex else None
            return out
        finally:
            page.close()
    finally:
        stop(proc)


def check_perfetto(raw: str, aug: str, chrome: str) -> dict:
    facts = json_facts(aug)
    with chromium(chrome) as cdp:
        r = perfetto_load(raw, chrome, cdp)
        a = perfetto_load(aug, chrome, cdp)
    problems = []
    if a["slices"] != r["slices"]:
        problems.append(f"slice count changed: raw {r['slices']}, augmented {a['slices']}")
    if a["slice_drop_overlapping_complete_event"] > r["slice_drop_overlapping_complete_event"]:
        problems.append("slice_drop_overlapping_complete_event rose: raw "
                        f"{r['slice_drop_overlapping_complete_event']}, augmented "
                        f"{a['slice_drop_overlapping_complete_event']}")
    for k in CHECKED_ARGS:
        if a[f"slices_with_{k}"] != facts["events_with"][k]:
            problems.append(f"args.{k}: {a[f'slices_with_{k}']} slices in Perfetto, "
                            f"{facts['events_with'][k]} events in the JSON")
    if a["kernel_flop_pairs"] != facts["kernel_flop_pairs"]:
        diff = Counter(map(tuple, facts["kernel_flop_pairs"])) - Counter(map(tuple, a["kernel_flop_pairs"]))
        problems.append(f"kernel_flop values differ from the JSON, e.g. {list(diff.items())[:3]}")
    for d in (r, a):
        d.pop("kernel_flop_pairs")
    return {"tool": "perfetto", "raw": r, "augmented": a,
            "json": {k: v for k, v in facts.items() if k != "kernel_flop_pairs"}, "problems": problems}


# --- 2. Catapult trace viewer (trace_viewer_full.html) ---------------------------------------------

_CATAPULT_JS = """(async () => {
  const text = await (await fetch(%s)).text();
  const model = new tr.Model();
  const i = new tr.importer.Import(model);
  i.importTraces([text]);
  let slices = 0, async = 0, withFlop = 0, threads = 0;
  for (const t of model.getAllThreads()) {
    threads++;
    slices += t.sliceGroup.slices.length;
    for (const s of t.sliceGroup.slices) if (s.args && s.args.kernel_flop !== undefined) withFlop++;
    async += t.asyncSliceGroup.slices.length;
  }
  return JSON.stringify({slices, async_slices: async, threads, slices_with_kernel_flop: withFlop,
    import_warnings: model.importWarnings.map(w => w.type + ': ' + w.message)});
})()"""


# Catapult is built on Web Components v0 and Polymer 1, which current Chromium cannot run without
# webcomponents.js 0.7 (a CDN download). Offline we keep only the trace-viewer part of the bundled
# script (from where `tr` is defined) and stub the few Polymer names it touches at load time. The
# importer and model -- what this check exercises -- construct no elements.
_TR_START = "'use strict';const global=this.window||this.global;this.tr=(function(){"
_POLYMER_STUB = """
window.Polymer = function (proto) { return function () { return document.createElement('div'); }; };
Polymer.dom = function (node) { return node; };
Polymer.Settings = {useNativeShadow: true};
Polymer.Base = {};
// The HTML-imports polyfill provided document._currentScript; UI modules read its ownerDocument.
Object.defineProperty(document, '_currentScript', {get() { return document.currentScript; }});
if (!document.registerElement) {
  document.registerElement = function (name, opts) {
    return function () { return document.createElement((opts && opts.extends) || name); };
  };
}
"""


def catapult_page(viewer_html: str) -> str:
    """A page holding trace_viewer_full.html's `tr` code (importers, model) without its Polymer UI."""
    with open(viewer_html, encoding="utf-8") as f:
        text = f.read()
    start = text.find(_TR_START)
    end = text.rfind("</script>")
    if start < 0 or end < start:
        raise SystemExit(f"{viewer_html}: cannot find the trace-viewer script (layout changed?)")
    body = text[start:end].replace("</script", "<\\/script")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><script>" + _POLYMER_STUB + "</script><script>"
            + body + "</script></head><body></body></html>")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve_dir(directory: str) -> Iterator[int]:
    port = free_port()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port),
                                          functools.partial(_QuietHandler, directory=directory))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield port
    finally:
        srv.shutdown()
        srv.server_close()


def check_catapult(raw: str, aug: str, chrome: str, site: str) -> dict:
    viewer = os.path.join(site, "torch_tb_profiler", "static", "trace_viewer_full.html")
    if not os.path.exists(viewer):
        raise SystemExit(f"no {viewer}: install torch-tb-profiler into --site")
    facts = json_facts(aug)
    work = tempfile.mkdtemp(prefix="interop_catapult_")
    try:
        with open(os.path.join(work, "viewer.html"), "w", encoding="utf-8") as f:
            f.write(catapult_page(viewer))
        # The importer is given decompressed text, as torch-tb-profiler's own page does.
        for name, src in (("raw.json", raw), ("aug.json", aug)):
            opener = gzip.open if src.endswith(".gz") else open
            with opener(src, "rb") as f, open(os.path.join(work, name), "wb") as g:
                shutil.copyfileobj(f, g)
        out: dict[str, Any] = {}
        with serve_dir(work) as port, chromium(chrome) as cdp:
            page = Page(cdp, "about:blank")
            try:
                page.call("Page.navigate", url=f"http://127.0.0.1:{port}/viewer.html")
                page.wait_for("typeof tr !== 'undefined' && !!tr.importer && !!tr.Model", 20)
                for key, name in (("raw", "raw.json"), ("augmented", "aug.json")):
                    out[key] = json.loads(page.eval(_CATAPULT_JS % json.dumps("/" + name)))
                out["page_load_errors"] = page.errors[:5]
            finally:
                page.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r, a = out["raw"], out["augmented"]
    problems = []
    if a["slices"] != r["slices"]:
        problems.append(f"slice count changed: raw {r['slices']}, augmented {a['slices']}")
    new_warnings = sorted(set(a["import_warnings"]) - set(r["import_warnings"]))
    if new_warnings:
        problems.append(f"import warnings only in the augmented trace: {new_warnings[:5]}")
    if a["slices_with_kernel_flop"] != facts["events_with"]["kernel_flop"]:
        problems.append(f"{a['slices_with_kernel_flop']} slices with kernel_flop, "
                        f"{facts['events_with']['kernel_flop']} events in the JSON")
    for d in (r, a):
        d["import_warnings_count"] = len(d["import_warnings"])
        d["import_warnings"] = d["import_warnings"][:5]
    return {"tool": "catapult", "raw": r, "augmented": a, "page_load_errors": out["page_load_errors"],
            "problems": problems}


# --- 3. Holistic Trace Analysis ----------------------------------------------------------------------

def check_hta(raw: str, aug: str) -> dict:
    os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")
    import hta  # noqa: F401  (from --hta-site)
    from hta.common.trace import Trace
    from hta.configs.parser_config import ParserConfig
    from hta.trace_analysis import TraceAnalysis

    try:
        from importlib.metadata import version
        hta_version = version("HolisticTraceAnalysis")
    except Exception:
        hta_version = "unknown"
    facts = json_facts(aug)
    work = tempfile.mkdtemp(prefix="interop_hta_")
    try:
        raw_dir = os.path.join(work, "raw")
        os.makedirs(raw_dir)
        shutil.copy(raw, os.path.join(raw_dir, os.path.basename(raw)))
        raw_events = len(TraceAnalysis(trace_dir=raw_dir).t.get_trace(0))
        shutil.copy(aug, os.path.join(work, os.path.basename(aug)))
        ta = TraceAnalysis(trace_dir=work)
        ranks = list(ta.t.traces)
        df0 = ta.t.get_trace(ranks[0])
        spec_of = {"kernel_flop": 1, "kernel_num_gb": 1.0, "module_path": "s", "roofline_bound": "s"}
        cfg = ParserConfig(args=ParserConfig.get_default_args() + [
            ParserConfig.make_attribute_spec(k, v) for k, v in spec_of.items()])
        t = Trace(trace_dir=work, parser_config=cfg)
        t.parse_traces()
        df = t.get_trace(ranks[0])
        sym = t.symbol_table
        out: dict[str, Any] = {"hta_version": hta_version, "ranks": ranks, "events_raw": raw_events,
                               "events_default_cfg": len(df0), "events_with_args_cfg": len(df),
                               "columns_added": [c for c in spec_of if c in df.columns]}
        problems = []
        if raw_events != len(df0):
            problems.append(f"HTA sees {raw_events} events in the raw trace, {len(df0)} in the augmented")
        for k in spec_of:
            if k not in df.columns:
                problems.append(f"column {k} missing")
        if not problems:
            has_flop = df[df["kernel_flop"] != 0]
            out["rows_kernel_flop_nonzero"] = int(len(has_flop))
            out["kernel_flop_sum"] = int(df["kernel_flop"].sum())
            json_nonzero = sum(1 for _, f in facts["kernel_flop_pairs"] if f != 0)
            if out["kernel_flop_sum"] != facts["kernel_flop_sum"]:
                problems.append(f"kernel_flop sum {out['kernel_flop_sum']} != JSON {facts['kernel_flop_sum']}")
            if out["rows_kernel_flop_nonzero"] != json_nonzero:
                problems.append(f"{out['rows_kernel_flop_nonzero']} rows with kernel_flop != 0, "
                                f"JSON has {json_nonzero}")

            def decode(v: Any) -> Any:
                # HTA may keep string args as symbol ids; map them back when it does.
                if isinstance(v, (int,)) and not isinstance(v, bool) and 0 <= v < len(sym.sym_table):
                    return sym.sym_table[v]
                return v

            top = has_flop.sort_values("kernel_flop", ascending=False).head(1)
            if len(top):
                row = top.iloc[0]
                out["example"] = {"name": sym.sym_table[int(row["name"])] if "name" in row else None,
                                  "kernel_flop": int(row["kernel_flop"]),
                                  "kernel_num_gb": float(row["kernel_num_gb"]),
                                  "roofline_bound": decode(row["roofline_bound"]),
                                  "module_path": decode(row["module_path"]),
                                  "dtypes": {k: str(df[k].dtype) for k in spec_of}}
            roof = Counter(str(decode(v)) for v in has_flop["roofline_bound"])
            out["roofline_bound_values"] = dict(roof)
        out["problems"] = problems
        out["tool"] = "hta"
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- 4. torch-tb-profiler -----------------------------------------------------------------------------

def check_tbprofiler(raw: str, aug: str) -> dict:
    from importlib.metadata import version

    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    out: dict[str, Any] = {"tool": "tbprofiler", "version": version("torch-tb-profiler")}
    problems = []
    for key, src in (("raw", raw), ("augmented", aug)):
        work = tempfile.mkdtemp(prefix="interop_tb_")
        try:
            # What RunLoader does per worker file (minus its process pool and remote-file cache); the
            # plugin only picks up files named <worker>.pt.trace.json[.gz].
            dst = os.path.join(work, "worker0.pt.trace.json" + (".gz" if src.endswith(".gz") else ""))
            shutil.copy(src, dst)
            data = RunProfileData.parse("worker0", None, dst, work)
            profile = RunGenerator("worker0", None, data).generate_run_profile()
            table = profile.operation_table_by_name or {}
            rows = table.get("data", []) if isinstance(table, dict) else []
            names = [str(r.get("name")) for r in rows]
            graph = [r for r in rows if str(r.get("name", "")).startswith("graph_")]
            out[key] = {
                "views": [str(getattr(v, "display_name", v)) for v in profile.views],
                "operator_rows": len(rows),
                "operator_calls": sum(int(r.get("calls", 0)) for r in rows),
                "graph_kernel_rows": len(graph),
                "graph_kernel_calls": sum(int(r.get("calls", 0)) for r in graph),
                "graph_kernels_sample": sorted(r["name"] for r in graph)[:4],
                "has_aten_mm": "aten::mm" in names,
            }
        except Exception as e:  # report what the tool raised, as the user would see it
            problems.append(f"{key}: {type(e).__name__}: {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if "raw" in out and "augmented" in out:
        for k in ("operator_rows", "operator_calls", "graph_kernel_rows", "graph_kernel_calls"):
            if out["raw"].get(k) != out["augmented"].get(k):
                problems.append(f"{k}: raw {out['raw'].get(k)}, augmented {out['augmented'].get(k)}")
    if not out.get("augmented", {}).get("graph_kernel_rows"):
        problems.append("no graph_* kernels in the operator table")
    out["problems"] = problems
    return out


# --- making the traces ---------------------------------------------------------------------------------

def make_traces(out_dir: str, steps: int = 2, warmup: int = 3) -> dict:
    """Compile examples/demo.py's model, profile ``steps`` steps, write raw + augmented of the same events."""
    import importlib.util

    import torch
    import torch.nn.functional as F

    from inductor_perf.capture.session import process_trace

    spec = importlib.util.spec_from_file_location("inductor_perf_demo", os.path.join(REPO, "examples", "demo.py"))
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    torch.manual_seed(0)
    model = demo.TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, backend="inductor_perf", options={"inductor_perf.kernel_profile": True})
    idx = torch.randint(0, 512, (8, 64))
    target = torch.randint(0, 512, (8, 64))

    def step() -> None:
        logits = compiled(idx)
        F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    with torch.profiler.profile(record_shapes=True) as prof:
        for _ in range(steps):
            step()
    os.makedirs(out_dir, exist_ok=True)
    raw = os.path.join(out_dir, "raw.pt.trace.json")
    prof.export_chrome_trace(raw)
    res = process_trace(raw, os.path.join(out_dir, "aug"))
    return {"raw": raw, "augmented": res.trace_path, "events_tagged": res.events_tagged,
            "warnings": res.warnings}


# --- driver ------------------------------------------------------------------------------------------------

def _child(check: str, args: argparse.Namespace) -> dict:
    """Run one check in a subprocess whose sys.path starts with that tool's site directory."""
    site = args.hta_site if check == "hta" else args.site
    env = dict(os.environ)
    env["PYTHONPATH"] = site + os.pathsep + HERE
    env["HTA_DISABLE_NS_ROUNDING"] = "1"
    cmd = [args.python or sys.executable, os.path.abspath(__file__), check, "--raw", args.raw, "--aug", args.aug,
           "--site", args.site, "--hta-site", args.hta_site, "--chromium", args.chromium]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode not in (0, 1) or not p.stdout.strip():
        return {"tool": check, "problems": [f"check crashed (rc {p.returncode}): {p.stderr.strip()[-2000:]}"]}
    return json.loads(p.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("check", choices=["make-traces", "all", "perfetto", "catapult", "hta", "tbprofiler"])
    ap.add_argument("out_dir", nargs="?", help="make-traces: where to write raw.pt.trace.json and aug.*")
    ap.add_argument("--raw", help="the raw torch.profiler trace")
    ap.add_argument("--aug", help="the augmented trace of the same events")
    ap.add_argument("--site", default=os.environ.get("INTEROP_SITE", "/tmp/interop_site"),
                    help="pip --target dir with viztracer, torch-tb-profiler, websocket-client")
    ap.add_argument("--hta-site", default=os.environ.get("INTEROP_HTA_SITE", "/tmp/hta_site"),
                    help="pip --target dir with HolisticTraceAnalysis")
    ap.add_argument("--chromium", default=os.environ.get("INTEROP_CHROMIUM", shutil.which("chromium") or "chromium"))
    ap.add_argument("--python", help="interpreter for the checks (default: this one)")
    args = ap.parse_args(argv)

    if args.check == "make-traces":
        if not args.out_dir:
            ap.error("make-traces needs OUT_DIR")
        print(json.dumps(make_traces(args.out_dir), indent=1))
        return 0
    if not args.raw or not args.aug:
        ap.error("--raw and --aug are required")
    if args.check == "all":
        results = [_child(c, args) for c in ("perfetto", "catapult", "hta", "tbprofiler")]
        nonfinite = json_facts(args.aug)["nonfinite_numbers"]
        results.append({"tool": "strict-json", "nonfinite_numbers": nonfinite,
                        "problems": [f"{nonfinite} NaN/Infinity literal(s) in {args.aug}"] if nonfinite else []})
        print(json.dumps(results, indent=1))
        return 1 if any(r.get("problems") for r in results) else 0
    if args.check == "perfetto":
        res = check_perfetto(args.raw, args.aug, args.chromium)
    elif args.check == "catapult":
        res = check_catapult(args.raw, args.aug, args.chromium, args.site)
    elif args.check == "hta":
        res = check_hta(args.raw, args.aug)
    else:
        res = check_tbprofiler(args.raw, args.aug)
    print(json.dumps(res, indent=1))
    return 1 if res.get("problems") else 0


if __name__ == "__main__":
    sys.exit(main())
