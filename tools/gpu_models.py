"""Real architectures from transformers on a GPU: tiny GPT-2, Llama and Mixtral configs built here
(nothing downloaded), one bf16-autocast training step compiled with backend="inductor_perf" and
captured with INDUCTOR_PERF_TRACE_DIR, as a user would. Run on a machine with CUDA
(tools/gpu_check.sh's ``models`` phase does; ``--device cpu`` runs the same check here):

    python3 tools/gpu_models.py OUT_DIR [CASE ...] [--device cuda|cpu]

Each case runs in a fresh interpreter (the env-var capture is once per process), writes
``OUT_DIR/<case>/`` (trace, summary, page, and ``tags.json``: the process's graph table) and one
line of ``OUT_DIR/models.jsonl`` saying:
- the device kernels our compiled graphs launched (their launches lie inside our graph markers), and
  those of them without ``kernel_flop``, bytes > 0, a ``source`` or a ``module_path``;
- matmul FLOPs of the recorded steps (``kernel_matmul_flop`` of those kernels) against
  FlopCounterMode's count of the same eager step, plus by hand what it has no formula for (grouped
  matmuls of MoE experts: 2 FLOPs per multiply-add), times the recorded steps;
- whether the capture wrote its trace, summary and page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

CASES = ("gpt2", "llama", "mixtral")

# num_key_value_heads = num_attention_heads: FlopCounterMode of torch 2.11 cannot count grouped-query
# attention's sdpa (its shapes assert), and the check needs its count of the eager step.
_BUILD = {
    "gpt2": """
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(vocab_size=4096, n_positions=256, n_embd=256, n_layer=2, n_head=4, bos_token_id=0,
                 eos_token_id=0)
m = GPT2LMHeadModel(cfg)
""",
    "llama": """
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
m = LlamaForCausalLM(cfg)
""",
    "mixtral": """
from transformers import MixtralConfig, MixtralForCausalLM
cfg = MixtralConfig(vocab_size=4096, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, num_local_experts=4,
                    num_experts_per_tok=2, max_position_embeddings=256)
m = MixtralForCausalLM(cfg)
""",
}

_CHILD = r'''
import glob, gzip, json, math, os, sys, torch, transformers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry
aten = torch.ops.aten
case, out, dev = sys.argv[1], sys.argv[2], sys.argv[3]

class Uncounted(TorchDispatchMode):
    # matmul FLOPs of the ops FlopCounterMode has no formula for, by hand: grouped matmuls (MoE
    # experts, 2 FLOPs per multiply-add, K = a's last dim; two 2-D operands: the groups split K) and
    # CPU flash attention (4*B*H*Sq*Sk*D forward, 10*B*H*Sq*Sk*D backward)
    def __init__(self):
        super().__init__()
        self.flops, self.ops = 0, {}
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        res = func(*args, **(kwargs or {}))
        p = func.overloadpacket
        if p in flop_registry:
            return res
        if p is aten._grouped_mm:
            a, w = args[0], args[1]
            self.flops += (2 * a.shape[0] * a.shape[1] * w.shape[1] if a.dim() == 2 and w.dim() == 2
                           else 2 * math.prod(res.shape) * a.shape[-1])
        elif p is aten._scaled_dot_product_flash_attention_for_cpu:
            (b, h, sq, d), sk = args[0].shape, args[1].shape[2]
            self.flops += 4 * b * h * sq * sk * d
        elif p is aten._scaled_dot_product_flash_attention_for_cpu_backward:
            (b, h, sq, d), sk = args[1].shape, args[2].shape[2]
            self.flops += 10 * b * h * sq * sk * d
        else:
            return res
        self.ops[str(p)] = self.ops.get(str(p), 0) + 1
        return res

torch.manual_seed(0)
BUILD
m = m.to(dev)
ids = torch.randint(0, cfg.vocab_size, (8, 128), device=dev)
def step(model):
    with torch.autocast(dev, dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
with FlopCounterMode(display=False) as fc, Uncounted() as unc:
    step(m)
m.zero_grad()
eager = int(fc.get_total_flops()) + unc.flops
print("cuda initialized before compile:", torch.cuda.is_initialized() if dev == "cuda" else None, file=sys.stderr)
f = torch.compile(m, backend="inductor_perf")
for _ in range(6):
    step(f)
    m.zero_grad()
if dev == "cuda":
    torch.cuda.synchronize()
import inductor_perf
graphs = inductor_perf.graph_table()
json.dump([g.to_dict() for g in graphs], open(os.path.join(out, "tags.json"), "w"))
print("JSON:" + json.dumps({"eager_step_flops": eager, "by_hand": unc.ops, "frames": len({g.frame_id for g in graphs}),
                            "graphs": len(graphs), "torch": torch.__version__,
                            "transformers": transformers.__version__,
                            "device_name": torch.cuda.get_device_name() if dev == "cuda" else "cpu"}))
'''


def _compiled_kernels(events: list, on_gpu: bool) -> list[dict]:
    """Device kernels (GPU) or outermost ops (CPU) launched inside our graph markers."""
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    marks = [e for e in xs if str(e.get("name", "")).startswith("## inductor_perf graph=")]
    by_tid: dict = {}
    for mk in marks:
        by_tid.setdefault(mk.get("tid"), []).append((mk["ts"], mk["ts"] + mk["dur"]))

    def inside(e: dict) -> bool:
        return any(a <= e["ts"] and e["ts"] + e.get("dur", 0) <= b for a, b in by_tid.get(e.get("tid"), ()))

    if on_gpu:
        corr = {e["args"].get("correlation") for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and isinstance(e.get("args"), dict) and inside(e)}
        corr.discard(None)
        return [e for e in xs if e.get("cat") == "kernel" and (e.get("args") or {}).get("correlation") in corr]
    out, end = [], -1.0
    for e in sorted((e for e in xs if e.get("cat") == "cpu_op" and not e["name"].startswith("## ") and inside(e)),
                    key=lambda e: (e.get("tid"), e["ts"], -e["dur"])):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def run_case(case: str, out: str, dev: str, timeout: float) -> dict:
    import glob
    import gzip

    d = os.path.join(out, case)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=d)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD.replace("BUILD", _BUILD[case]), case, d, dev], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"case": case, "error": f"timed out after {timeout:.0f} s"}
    res: dict = {"case": case, "wall_s": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(d, "stderr.txt"), "w") as fh:
        fh.write(p.stderr)
    got = [ln[5:] for ln in p.stdout.splitlines() if ln.startswith("JSON:")]
    if p.returncode or not got:
        return res | {"error": f"rc={p.returncode}", "stderr": p.stderr[-3000:]}
    res.update(json.loads(got[-1]))
    traces = glob.glob(os.path.join(d, "*.trace.json.gz"))
    res["files"] = sorted(os.path.basename(f).split(".", 1)[1] for f in glob.glob(os.path.join(d, "*_*.*")))
    if not traces:
        return res | {"error": "no trace written", "stderr": p.stderr[-3000:]}
    trace = json.load(gzip.open(traces[0], "rt"))
    kernels = _compiled_kernels(trace["traceEvents"], dev == "cuda")
    bad = {"no_flop": [], "no_bytes": [], "no_source": [], "no_module_path": []}
    for e in kernels:
        a = e.get("args") or {}
        for key, ok in (("no_flop", "kernel_flop" in a), ("no_bytes", (a.get("kernel_num_gb") or 0) > 0),
                        ("no_source", bool(a.get("source"))), ("no_module_path", a.get("module_path") is not None)):
            if not ok:
                bad[key].append(e["name"][:80])
    steps = sum(1 for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
                and e.get("cat") != "gpu_user_annotation")  # a GPU trace repeats each range on the device
    recorded = sum((e.get("args") or {}).get("kernel_matmul_flop", 0) for e in kernels)
    res.update(kernels=len(kernels), untagged={k: v[:5] for k, v in bad.items() if v},
               untagged_counts={k: len(v) for k, v in bad.items()}, recorded_steps=steps,
               matmul_flop_recorded=recorded, matmul_flop_expected=res["eager_step_flops"] * steps,
               stderr_warnings=[ln for ln in p.stderr.splitlines() if "Warning" in ln][:5])
    if res["matmul_flop_expected"]:
        res["matmul_ratio"] = round(recorded / res["matmul_flop_expected"], 6)
    summ = glob.glob(os.path.join(d, "*.summary.json"))
    if summ:
        s = json.load(open(summ[0]))
        res["summary"] = {k: s.get(k) for k in ("busy_pct", "flops_pct_of_peak", "mfu_pct", "hfu_pct",
                                                "model_flop_per_step", "kernel_count")}
        res["summary"]["device"] = (s.get("peak") or {}).get("device")
    return res


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    dev = "cpu" if "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1] == "cpu" else "cuda"
    if dev == "cpu" and "cpu" in args:
        args.remove("cpu")
    if not args:
        print(__doc__)
        return 2
    out, cases = args[0], args[1:] or list(CASES)
    os.makedirs(out, exist_ok=True)
    timeout = float(os.environ.get("MODELS_TIMEOUT", "300"))
    ok = True
    with open(os.path.join(out, "models.jsonl"), "a") as fh:
        for case in cases:
            r = run_case(case, out, dev, timeout)
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            good = ("error" not in r and r["kernels"] > 0 and not any(r["untagged_counts"].values())
                    and (r["frames"] != 1 or r.get("matmul_ratio") == 1.0))
            ok &= good
            print(f"{case}: {'ok' if good else 'CHECK'} " + json.dumps({k: v for k, v in r.items() if k != 'stderr'})[:1500],
                  flush=True)
            if "stderr" in r:
                print(r["stderr"][-1500:], flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
