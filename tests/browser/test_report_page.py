"""Our report page in a real browser (issue 14's acceptance): a page from the checked-in CPU trace, from
a real A100 trace, and from a capture of a small transformer on CPU each render in headless Chromium
with no console error or warning, fetch nothing, and draw one roofline mark ([data-kernel]) per
distinct costed kernel.

The expected mark count is worked out here from the trace's own fields, not from the page's tables
nor from summary/core.py's kernel selection: the distinct names of the events whose args carry
``kernel_flop > 0`` or ``kernel_num_gb > 0`` (after costing a raw trace the way ``inductor-perf
augment`` does, :func:`inductor_perf.augment.in_memory.with_costs`) - device events (kernels, memcpy,
memset) when the trace has any, else host events that no other costed event on their thread
encloses (an op's costed ``aten::copy_`` inside its costed ``aten::addmm`` is not a kernel of its own).
In a host trace of compiled graphs (one with ``## Call CompiledFxGraph`` ranges) only the compiled
graphs' work counts, as docs/summary.md defines ``cpu-compiled-kernels``: events tagged at compile time
(``kernel_kind``) and events inside a graph call on their thread; an eager ``aten::add_`` of the
optimizer, costed from its recorded shapes, is not a kernel of a compiled graph.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
MLP_TRACE = ROOT / "tests" / "fixtures" / "mlp_cpu_compiled.trace.json"
TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES", ROOT / ".." / "shared" / "traces"))
A100_TRACE = TRACES / "a100_ranks8_r3_control.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}  # Kineto's device categories


def _report_html() -> Any:
    """inductor_perf.report.html, lazily: the page is written by another part of issue 14. Until it
    lands the tests skip, except under INDUCTOR_PERF_REQUIRE_BROWSER=1 (make test-browser), where
    a missing page is a failure."""
    try:
        import inductor_perf.report.html as rh
    except ModuleNotFoundError as e:
        if e.name != "inductor_perf.report.html":
            raise
        rh = None
    if rh is None:
        reason = "inductor_perf.report.html is not in this checkout (the page of issue 14)"
        if os.environ.get("INDUCTOR_PERF_REQUIRE_BROWSER") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return rh


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def costed_kernel_names(trace: dict) -> set[str]:
    """The distinct names of the costed kernels of one trace dict (see the module docstring)."""
    from inductor_perf.augment.in_memory import with_costs

    costed, _ = with_costs(trace)
    events = [e for e in costed.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"
              and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]
    if any(e.get("cat") in DEVICE_CATS for e in events):
        events = [e for e in events if e.get("cat") in DEVICE_CATS]
    marked = [e for e in events if isinstance(e.get("args"), dict)
              and (_positive(e["args"].get("kernel_flop")) or _positive(e["args"].get("kernel_num_gb")))]
    calls = [e for e in events if str(e.get("name")).startswith("## Call CompiledFxGraph")]
    if calls and not any(e.get("cat") in DEVICE_CATS for e in events):
        def in_call(e: dict) -> bool:
            return any(c.get("pid") == e.get("pid") and c.get("tid") == e.get("tid")
                       and c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] for c in calls)
        marked = [e for e in marked if "kernel_kind" in e["args"] or in_call(e)]
    names: set[str] = set()
    by_thread: dict[tuple[Any, Any], list[dict]] = {}
    for e in marked:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for evs in by_thread.values():
        # Longest first among equal starts, so an enclosing event comes before what it encloses.
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = float("-inf")
        for e in evs:
            if e["ts"] + e["dur"] <= end:
                continue  # inside a costed event that started no later on this thread
            names.add(str(e.get("name")))
            end = max(end, e["ts"] + e["dur"])
    return names


def test_costed_kernel_names_by_hand():
    # Hand-made: a costed op enclosing a costed copy (one kernel), an uncosted op, a zero-cost op,
    # the same kernel twice (one name), an op on another thread at the same time (its own kernel).
    def X(name: str, ts: float, dur: float, tid: int = 1, **a: Any) -> dict:
        return {"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": a}

    trace = {"traceEvents": [
        X("aten::addmm", 0, 10, kernel_flop=100), X("aten::copy_", 2, 3, kernel_num_gb=1e-6),
        X("aten::relu", 20, 1), X("aten::fill_", 30, 1, kernel_flop=0, kernel_num_gb=0),
        X("aten::addmm", 40, 10, kernel_flop=100), X("aten::mm", 2, 3, tid=2, kernel_flop=8)]}
    assert costed_kernel_names(trace) == {"aten::addmm", "aten::mm"}
    # A trace with device events counts those only.
    trace["traceEvents"].append({"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1,
                                 "dur": 4, "args": {"kernel_flop": 50}})
    assert costed_kernel_names(trace) == {"gemm"}
    # A host trace of compiled graphs counts the work of the graph calls and compile-time tags only.
    host = [e for e in trace["traceEvents"] if e["cat"] != "kernel"]
    host += [X("## Call CompiledFxGraph abc ##", 60, 20), X("aten::bmm", 62, 5, kernel_flop=9),
             X("graph_0_cpp_fused_0", 90, 1, kernel_kind="generated", kernel_num_gb=1e-6)]
    assert costed_kernel_names({"traceEvents": host}) == {"aten::bmm", "graph_0_cpp_fused_0"}


def _check_page(open_page: Any, page: Path, expected: set[str]) -> None:
    r = open_page(page)
    assert r.problems() == [], f"{page}: " + "; ".join(r.problems())
    assert 'id="no-chart"' not in r.dom, "the page says it has no chart"
    assert expected, "the trace has no costed kernel: the test would prove nothing"
    assert r.kernel_marks == len(expected), (
        f"{r.kernel_marks} [data-kernel] marks for {len(expected)} distinct costed kernels")
    print(f"{page.name}: {r.kernel_marks} marks, {page.stat().st_size / 1e3:.0f} kB, {r.seconds} s in Chromium")


def test_page_of_the_checked_in_cpu_trace(open_page, tmp_path):
    from inductor_perf.traces.files import load_trace

    rh = _report_html()
    out = tmp_path / "mlp.report.html"
    rh.write_report(str(MLP_TRACE), str(out))
    _check_page(open_page, out, costed_kernel_names(load_trace(str(MLP_TRACE))))


def test_page_of_a_real_a100_trace(open_page, tmp_path):
    from inductor_perf.traces.files import load_trace

    if not A100_TRACE.exists():
        pytest.skip(f"{A100_TRACE} absent (the shared real traces are not checked in)")
    rh = _report_html()
    out = tmp_path / "a100.report.html"
    rh.write_report(str(A100_TRACE), str(out))
    _check_page(open_page, out, costed_kernel_names(load_trace(str(A100_TRACE))))


def test_report_cli_writes_the_same_kind_of_page(open_page, tmp_path):
    from inductor_perf.traces.files import load_trace

    _report_html()
    out = tmp_path / "cli.report.html"
    proc = subprocess.run([sys.executable, "-m", "inductor_perf", "report", str(MLP_TRACE), "-o", str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    _check_page(open_page, out, costed_kernel_names(load_trace(str(MLP_TRACE))))


# A one-block GPT trained for five steps, profiled on steps 3-4 (the pattern of
# tests/integration/test_capture.py); one thread, as there, so that eager ops are not erratic.
TRANSFORMER_SCRIPT = textwrap.dedent('''
    import torch, torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    torch.set_num_threads(1)
    class Block(nn.Module):
        def __init__(s, dim=64, heads=4):
            super().__init__()
            s.heads = heads
            s.ln1 = nn.LayerNorm(dim); s.qkv = nn.Linear(dim, 3 * dim); s.proj = nn.Linear(dim, dim)
            s.ln2 = nn.LayerNorm(dim)
            s.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        def forward(s, x):
            b, t, c = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, s.heads, c // s.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + s.mlp(s.ln2(x))
    class TinyGPT(nn.Module):
        def __init__(s, vocab=128, dim=64):
            super().__init__()
            s.embed = nn.Embedding(vocab, dim); s.block = Block(dim); s.head = nn.Linear(dim, vocab)
        def forward(s, idx):
            return s.head(s.block(s.embed(idx)))
    m = TinyGPT(); opt = torch.optim.SGD(m.parameters(), lr=0.01)
    f = torch.compile(m, backend="inductor_perf")
    idx = torch.randint(0, 128, (4, 32)); tgt = torch.randint(0, 128, (4, 32))
    for step in range(5):
        loss = F.cross_entropy(f(idx).view(-1, 128), tgt.view(-1))
        loss.backward(); opt.step(); opt.zero_grad()
''')


def test_page_of_a_small_transformer_capture_on_cpu(open_page, tmp_path):
    from inductor_perf.traces.files import load_trace

    _report_html()
    script = tmp_path / "script.py"  # a real file, so FX records source lines
    script.write_text(TRANSFORMER_SCRIPT)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INDUCTOR_PERF_TRACE_DIR": str(out),
           "INDUCTOR_PERF_SKIP": "2", "INDUCTOR_PERF_STEPS": "2"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = glob.glob(str(out / "*.trace.json.gz"))
    assert len(traces) == 1, proc.stderr[-3000:]
    page = Path(traces[0][: -len(".trace.json.gz")] + ".report.html")
    assert page.exists(), f"the capture wrote no {page.name}: {sorted(p.name for p in out.iterdir())}"
    _check_page(open_page, page, costed_kernel_names(load_trace(traces[0])))
