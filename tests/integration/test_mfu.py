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


def test_mfu_line_in_the_text_and_recompute_known_from_our_tags(run):
    line = [ln for ln in run["text"].splitlines() if ln.startswith("MFU")]
    assert line and "HFU" in line[0]
    with open(run["json"]) as f:
        summary = json.load(f)
    # the kernels carry our compile-time tags: their recompute is known (none here), not "unknown"
    assert "recompute unknown" not in (summary["mfu_note"] or "")


CHECKPOINT_SCRIPT = textwrap.dedent('''
    import json, sys, torch, torch.nn as nn
    from torch.utils.checkpoint import checkpoint
    from torch.utils.flop_counter import FlopCounterMode
    import inductor_perf
    torch.manual_seed(0)
    class M(nn.Module):
        def __init__(s, d=64):
            super().__init__(); s.a = nn.Linear(d, 4 * d); s.b = nn.Linear(4 * d, d); s.c = nn.Linear(d, d)
            s.ckpt = True
        def inner(s, x):
            return s.b(torch.relu(s.a(x)))
        def forward(s, x):
            h = checkpoint(s.inner, x, use_reentrant=False) if s.ckpt else s.inner(x)
            return s.c(h).sum()
    m = M(); x = torch.randn(32, 64)
    def step(f):
        f(x).backward()
    m.ckpt = False
    with FlopCounterMode(display=False) as plain:  # the model's FLOPs: no recompute
        step(m)
    m.ckpt = True
    f = torch.compile(m, backend="inductor_perf")
    step(f); step(f)
    with inductor_perf.profile(sys.argv[1], name="ckpt") as p:
        for _ in range(2):
            step(f); p.step()
    tags = [t for t in inductor_perf.kernel_table() if t.is_backward]
    print("RESULT " + json.dumps({"plain": plain.get_total_flops(), "json": p.result.summary_json_path,
                                  "recompute": sum(int(t.recompute_flops) for t in tags),
                                  "recomputed_ops": sorted(t.op or "" for t in tags if int(t.recompute_flops))}))
''')


def test_checkpointed_forward_recomputed_in_backward_is_out_of_model_flops(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(CHECKPOINT_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path), env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])
    # The backward recomputes the checkpointed a and b (c's weight gradient needs b's output, which the
    # partitioner recomputes rather than saves): 2*32*64*256 FLOPs each, by hand
    assert got["recompute"] == 2 * (2 * 32 * 64 * 256)
    assert got["recomputed_ops"] and all("addmm" in op for op in got["recomputed_ops"])
    with open(got["json"]) as f:
        summary = json.load(f)
    # model FLOPs: the step without checkpointing (FlopCounterMode); hardware: that plus the recompute
    assert summary["model_flop_per_step"] == pytest.approx(got["plain"], rel=1e-5)
    assert summary["hardware_flop_per_step"] >= got["plain"] + got["recompute"] - 10
    for row in summary["steps"]:
        assert row["hfu_pct"] > row["mfu_pct"]
