"""The GPU zoo: train small models with backend="inductor_perf" and the env-var capture, and check
what a user would look at. Run on a machine with CUDA (tools/gpu_check.sh does):

    python3 tools/gpu_zoo.py OUT_DIR [CASE ...]

Each case runs in a fresh interpreter (the env-var capture is once per process) and writes
``OUT_DIR/<case>/`` (the capture's trace and summary) and one line of ``OUT_DIR/zoo.jsonl``:
- every Triton kernel tag has FLOPs (>= 0), bytes > 0, a source line and a module path;
- matmul FLOPs of one training step (forward + backward tags) vs FlopCounterMode on the eager step;
- in the captured trace, the share of device kernels that carry our cost args, and of Triton ones;
- the summary's device, % of peak and bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

CASES = ("sanity", "gpt_bf16", "resnet_block", "mlp_autotune", "gpt_cudagraphs", "mlp_dynamic")

_CHILD = r'''
import glob, gzip, json, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

case, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
dev = "cuda"

import importlib.util
spec = importlib.util.spec_from_file_location("zoo_models", os.path.join("tools", "gpu_zoo_models.py"))
zm = importlib.util.module_from_spec(spec); spec.loader.exec_module(zm)
model, x, autocast, mode = zm.build(case)
inputs = None
if case == "mlp_dynamic":  # a new batch size each step, dynamic from the first compile
    inputs = [torch.randn(n, 256, device=dev) for n in (16, 24, 32, 40, 48, 56, 64, 72)]
    for t in inputs:
        torch._dynamo.mark_dynamic(t, 0)
opt = torch.optim.SGD(model.parameters(), lr=1e-3) if case != "sanity" else None

def step(m, xb):
    return zm.step(case, m, xb, autocast)

from torch.utils.flop_counter import FlopCounterMode
with FlopCounterMode(display=False) as fc:
    step(model, x)
eager_flops = int(fc.get_total_flops())
if opt is not None:
    opt.zero_grad(set_to_none=True)

import inductor_perf
kw = {"mode": mode} if mode else {}
compiled = torch.compile(model, backend="inductor_perf", **kw)
t0 = time.perf_counter()
losses = []
for i in range(8):
    xb = inputs[i] if inputs is not None else x
    losses.append(float(step(compiled, xb)))
    if opt is not None:
        opt.step()
        opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
wall = time.perf_counter() - t0

from inductor_perf.model.tags import evaluate
graphs = inductor_perf.graph_table()
res = {"case": case, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
       "graphs": len(graphs), "tagged_graphs": sum(g.tagged for g in graphs),
       "graph_errors": [g.error for g in graphs if g.error], "wall_s": round(wall, 2),
       "eager_step_flops": eager_flops}
bad = []
triton = 0
kinds = {}
mm_fwd = mm_bwd = 0
# the only dynamic size is the batch: every size symbol of the graphs takes the first batch's value
sym = {n: x.shape[0] for g in graphs for n in g.symbol_locators} if case == "mlp_dynamic" else None
# the tags, for offline checks of the trace join (tests/fixtures/gpu/)
with open(os.path.join(out, "tags.json"), "w") as f:
    json.dump([g.to_dict() for g in graphs], f)
counted = graphs
res["counted_graphs"] = len(counted)
for g in counted:
    for k in g.kernels:
        kinds[k.kind] = kinds.get(k.kind, 0) + 1
        try:
            ev = k.evaluated(sym) if sym else k
            mmf = evaluate(ev.matmul_flops)
            nbytes = evaluate(ev.bytes_read) + evaluate(ev.bytes_written)
            fl = evaluate(ev.flops)
        except Exception as e:
            bad.append((k.kernel_name, f"evaluate: {e}"))
            continue
        if g.is_backward:
            mm_bwd += mmf
        else:
            mm_fwd += mmf
        if k.kernel_name.startswith("triton"):
            triton += 1
            why = [w for w, ok in (("flops<0", fl >= 0), ("bytes=0", nbytes > 0), ("no source", bool(k.source)),
                                   ("no module", k.module_path is not None)) if not ok]
            if why:
                bad.append((k.kernel_name, ",".join(why)))
res.update(triton_tags=triton, kinds=kinds, bad_triton_tags=bad[:20], n_bad=len(bad),
           tag_matmul_flops_fwd=mm_fwd, tag_matmul_flops_bwd=mm_bwd,
           tag_step_matmul_flops=mm_fwd + mm_bwd,
           flops_equal=(mm_fwd + mm_bwd) == eager_flops)
res["symbols"] = [dict(g.symbol_locators) for g in graphs if g.symbol_locators]

traces = sorted(glob.glob(os.path.join(out, "*.trace.json.gz")))
res["trace"] = traces[-1] if traces else None
if traces:
    with gzip.open(traces[-1], "rt") as f:
        tr = json.load(f)
    kern = [e for e in tr["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    tagged = [e for e in kern if "kernel_flop" in (e.get("args") or {})]
    tk = [e for e in kern if e.get("name", "").startswith("triton")]
    tkt = [e for e in tk if "kernel_flop" in (e.get("args") or {})]
    res.update(kernel_events=len(kern), kernel_events_tagged=len(tagged), triton_events=len(tk),
               triton_events_tagged=len(tkt),
               triton_with_pct=sum(1 for e in tkt if "achieved_bandwidth_pct" in e["args"] or "achieved_flops_pct" in e["args"]),
               untagged_kernel_names=sorted({e["name"][:80] for e in kern if e not in tagged})[:15],
               graph_launches=sum(1 for e in tr["traceEvents"] if isinstance(e, dict) and e.get("name") == "cudaGraphLaunch"),
               device_props=tr.get("deviceProperties", [])[:1])
    with open(traces[-1].replace(".trace.json.gz", ".summary.json")) as f:
        s = json.load(f)
    res["summary"] = {k: s.get(k) for k in ("kernel_count", "busy_pct", "flop_coverage_pct", "achieved_tflops",
                                           "achieved_gbps", "flops_pct_of_peak", "bandwidth_pct_of_peak",
                                           "peak", "time_split_pct", "notes")}
    res["summary"]["capture"] = s.get("capture")
    res["top_kernels"] = [{k: r.get(k) for k in ("name", "count", "total_us", "flop", "gb", "flops_pct",
                                                 "bandwidth_pct", "bound", "module_path", "source")}
                          for r in s.get("top_kernels", [])[:12]]
print("JSON:" + json.dumps(res, default=str))
'''


def run_case(case: str, out: str, timeout: float) -> dict:
    d = os.path.join(out, case)
    os.makedirs(d, exist_ok=True)
    # one recorded step keeps the traces small enough to commit as fixtures
    env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=d, INDUCTOR_PERF_SKIP="3", INDUCTOR_PERF_STEPS="1",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(os.environ.get("ZOO_CACHE", "/tmp/zoo-cache"), case))
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD, case, d], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return {"case": case, "error": f"timeout after {timeout} s", "stderr": str(e.stderr)[-3000:]}
    with open(os.path.join(d, "child.log"), "w") as f:
        f.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    for line in p.stdout.splitlines():
        if line.startswith("JSON:"):
            r = json.loads(line[5:])
            r["seconds"] = round(time.time() - t0, 1)
            return r
    return {"case": case, "error": f"exit {p.returncode}", "stderr": p.stderr[-4000:]}


def main() -> int:
    out = sys.argv[1]
    cases = sys.argv[2:] or list(CASES)
    os.makedirs(out, exist_ok=True)
    ok = True
    with open(os.path.join(out, "zoo.jsonl"), "a") as f:
        for case in cases:
            r = run_case(case, out, timeout=float(os.environ.get("ZOO_TIMEOUT", "240")))
            f.write(json.dumps(r) + "\n")
            f.flush()
            brief = {k: r.get(k) for k in ("case", "error", "seconds", "graphs", "tagged_graphs", "n_bad",
                                           "flops_equal", "tag_step_matmul_flops", "eager_step_flops",
                                           "kernel_events", "kernel_events_tagged", "triton_events",
                                           "triton_events_tagged", "graph_launches")}
            print(json.dumps(brief), flush=True)
            ok = ok and not r.get("error") and r.get("flops_equal") and not r.get("n_bad")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
