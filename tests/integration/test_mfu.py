"""MFU per step against an independent count: FlopCounterMode's FLOPs of the eager training step,
over the step's duration as the trace records it (its ``ProfilerStep#N`` event), over the peak the
summary states. A small transformer block (layer norm, MLP up / down, residual, classifier head)
trained on CPU under ``inductor_perf.profile()``, in a subprocess."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent('''
    import json, sys, torch, torch.nn as nn
    from torch.utils.flop_counter import FlopCounterMode
    import inductor_perf
    torch.manual_seed(0)
    class Block(nn.Module):
        def __init__(s, d=128):
            super().__init__()
            s.ln = nn.LayerNorm(d); s.up = nn.Linear(d, 4 * d); s.down = nn.Linear(4 * d, d); s.head = nn.Linear(d, 16)
        def forward(s, x):
            return s.head(x + s.down(nn.functional.gelu(s.up(s.ln(x)))))
    m = Block()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(64, 128); y = torch.randint(0, 16, (64,))
    def step(f):
        nn.functional.cross_entropy(f(x), y).backward(); opt.step(); opt.zero_grad()
    with FlopCounterMode(display=False) as fc:
        step(m)
    f = torch.compile(m, backend="inductor_perf")
    step(f); step(f)
    with inductor_perf.profile(sys.argv[1], name="mfu") as p:
        for _ in range(3):
            step(f); p.step()
    print("RESULT " + json.dumps({"flop": fc.get_total_flops(), "trace": p.result.trace_path,
                                  "json": p.result.summary_json_path, "text": p.result.summary_text}))
''')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mfu")
    script = out / "script.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600,
                          cwd=str(out), env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_mfu_per_step_is_flopcounter_flops_over_step_time_over_the_stated_peak(run):
    with gzip.open(run["trace"], "rt") as f:
        trace = json.load(f)
    # the steps as the trace records them, read here without our code
    durs = {e["name"]: e["dur"] for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}
    with open(run["json"]) as f:
        summary = json.load(f)
    peak = summary["peak"]["peak_tflops"]
    assert peak and run["flop"] > 0
    assert len(summary["steps"]) == 3
    for row in summary["steps"]:
        expected = 100 * run["flop"] / (durs[row["name"]] * 1e-6) / (peak * 1e12)
        assert row["mfu_pct"] == pytest.approx(expected, rel=0.03), row
        # the step's compiled work is all matmul and fused pointwise: HFU counts both, so never less
        assert row["hfu_pct"] >= row["mfu_pct"]
    assert summary["model_flop_per_step"] == pytest.approx(run["flop"], rel=0.03)
    # the window: three steps' FLOPs over the window's wall time
    expected = 100 * 3 * run["flop"] / (summary["wall_us"] * 1e-6) / (peak * 1e12)
    assert summary["mfu_pct"] == pytest.approx(expected, rel=0.03)


def test_mfu_line_in_the_text_and_the_note_on_recompute(run):
    line = [ln for ln in run["text"].splitlines() if ln.startswith("MFU")]
    assert line and "HFU" in line[0]
    with open(run["json"]) as f:
        summary = json.load(f)
    assert summary["mfu_note"] and "recompute" in summary["mfu_note"]
