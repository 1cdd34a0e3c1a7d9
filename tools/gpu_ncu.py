"""Our FLOP/byte estimates against Nsight Compute's hardware counters, kernel by kernel.

On a machine with CUDA and ncu (tools/gpu_check.sh runs this):

    python3 tools/gpu_ncu.py OUT_DIR [CASE ...]
    python3 tools/gpu_ncu.py --table-only OUT_DIR [CASE ...]     (the table again from a run's files)

For each case a child process compiles the model with backend="inductor_perf", warms it up, and
runs one training step between cudaProfilerStart/Stop; ``ncu --profile-from-start off`` reads the
DRAM bytes and floating-point instruction counters of every kernel of that step. The child also
writes the step's kernel tags in call order (forward graph, then backward graph). Tags are
aligned to the profiled kernels by name (Triton kernels keep their name on the device); an extern
call site takes the non-Triton kernels between its Triton neighbours. Writes
``OUT_DIR/ncu_<case>.csv`` (raw), ``OUT_DIR/ncu_table.json`` and ``OUT_DIR/ncu_table.md``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import statistics
import subprocess
import sys

# Counters we want, if this ncu knows them (checked against `ncu --query-metrics`).
BYTES = ("dram__bytes_read.sum", "dram__bytes_write.sum")
FP = {  # metric -> FLOPs per counted thread instruction
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 2,
}
# Tensor-core work: Hopper's ops_path counters count multiply-add operations' FLOPs directly
# (one "op" = one FMA = 2 FLOPs is how ncu's roofline section scales them).
TENSOR_PREFIXES = ("sm__ops_path_tensor_src_", "sm__ops_path_tensor_op_")
EXTRA = ("gpu__time_duration.sum", "lts__t_sector_hit_rate.pct")
TENSOR_FLOPS_PER_OP = 1
"""The ops_path tensor counters count FLOPs (2 per multiply-add): on the H100 an 8192^3 bf16 GEMM
(exactly 2*8192^3 FLOPs) read 1.0156x that, which is exactly the padding of its 320-wide tiles
(26*320/8192); counting 2 per "op" doubled it."""


def _counted_tensor_metric(name: str) -> bool:
    """One family only (sm__ops_path_tensor_src_<in>_dst_<acc>.sum, no sparsity split): the other
    candidates overlap it and are kept in the CSV for reference."""
    return re.fullmatch(r"sm__ops_path_tensor_src_[a-z0-9]+_dst_[a-z0-9]+\.sum", name) is not None

_CHILD = r'''
import json, os, sys, torch
sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
case, out = sys.argv[1], sys.argv[2]
import importlib.util
spec = importlib.util.spec_from_file_location("zoo_models", os.path.join("tools", "gpu_zoo_models.py"))
zm = importlib.util.module_from_spec(spec); spec.loader.exec_module(zm)
model, x, autocast, mode = zm.build(case)
import inductor_perf
kw = {"mode": mode} if mode else {}
compiled = torch.compile(model, backend="inductor_perf", **kw)
opt = torch.optim.SGD(model.parameters(), lr=1e-3) if case != "sanity" else None
for _ in range(3):
    zm.step(case, compiled, x, autocast)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
zm.step(case, compiled, x, autocast)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
from inductor_perf.model.tags import evaluate
rows = []
for g in inductor_perf.graph_table():
    for k in g.kernels:
        rows.append({"graph": g.instance_id, "bwd": g.is_backward, "name": k.kernel_name, "kind": k.kind,
                     "flops": evaluate(k.flops), "matmul_flops": evaluate(k.matmul_flops),
                     "bytes": evaluate(k.bytes_read) + evaluate(k.bytes_written),
                     "dtypes": sorted({d for n in k.nodes for d in n.dtypes}), "module": k.module_path})
json.dump(rows, open(os.path.join(out, f"tags_{case}.json"), "w"))
print("tags", len(rows))
'''


def available_metrics() -> set[str]:
    p = subprocess.run(["ncu", "--query-metrics", "--chip", "gh100"], capture_output=True, text=True)
    names = set()
    for line in p.stdout.splitlines():
        m = re.match(r"^(\S+)\s", line)
        if m:
            names.add(m.group(1))
    return names


def metric_list(avail: set[str]) -> list[str]:
    want = [m for m in BYTES + tuple(FP) if m.rsplit(".", 1)[0] in avail]
    tensor = sorted(n for n in avail if n.startswith(TENSOR_PREFIXES))
    want += [t + ".sum" for t in tensor]
    want += [m for m in EXTRA if m.rsplit(".", 1)[0] in avail]
    return want


def profile(case: str, out: str, metrics: list[str]) -> list[dict]:
    csv_path = os.path.join(out, f"ncu_{case}.csv")
    cmd = ["ncu", "--profile-from-start", "off", "--csv", "--page", "raw", "--metrics", ",".join(metrics),
           "--clock-control", "none", sys.executable, "-c", _CHILD, case, out]
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join("/tmp/ncu-cache", case))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=420)
    with open(os.path.join(out, f"ncu_{case}.log"), "w") as f:
        f.write(p.stderr[-20000:])
    text = p.stdout
    start = text.find('"ID"')
    if start < 0:
        raise RuntimeError(f"no ncu CSV for {case} (exit {p.returncode}): {p.stderr[-1500:]} {text[-1500:]}")
    with open(csv_path, "w") as f:
        f.write(text[start:])
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    return [r for r in rows if r.get("ID", "").strip().isdigit()]


def _num(s: str | None) -> float:
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return 0.0


def measured(row: dict) -> dict:
    read = _num(row.get("dram__bytes_read.sum"))
    write = _num(row.get("dram__bytes_write.sum"))
    fp = sum(_num(row.get(m)) * k for m, k in FP.items())
    tensor = sum(_num(v) * TENSOR_FLOPS_PER_OP for k, v in row.items() if _counted_tensor_metric(k))
    return {"name": row.get("Kernel Name", ""), "dram_bytes": read + write, "fp_flops": fp,
            "tensor_flops": tensor, "us": _num(row.get("gpu__time_duration.sum")) / 1e3,
            "l2_hit_pct": _num(row.get("lts__t_sector_hit_rate.pct"))}


def align(tags: list[dict], kernels: list[dict]) -> list[tuple[dict, list[dict]]]:
    """Pair each tag with the profiled kernels it launched (see the module docstring)."""
    pairs: list[tuple[dict, list[dict]]] = []
    pos = 0
    pending_extern: list[dict] = []
    for tag in tags:
        if tag["name"].startswith("triton"):
            j = next((i for i in range(pos, len(kernels)) if kernels[i]["name"] == tag["name"]), None)
            if j is None:
                continue
            between = [k for k in kernels[pos:j] if not k["name"].startswith("triton")]
            if len(pending_extern) == 1 and between:
                pairs.append((pending_extern[0], between))
            pending_extern = []
            pairs.append((tag, [kernels[j]]))
            pos = j + 1
        else:
            pending_extern.append(tag)
    return pairs


def table(out: str, cases: list[str]) -> dict:
    rows = []
    for case in cases:
        tpath = os.path.join(out, f"tags_{case}.json")
        cpath = os.path.join(out, f"ncu_{case}.csv")
        if not (os.path.exists(tpath) and os.path.exists(cpath)):
            continue
        tags = json.load(open(tpath))
        with open(cpath) as f:
            kern = [measured(r) for r in csv.DictReader(f) if r.get("ID", "").strip().isdigit()]
        for tag, ks in align(tags, kern):
            m_bytes = sum(k["dram_bytes"] for k in ks)
            m_flops = sum(k["fp_flops"] + k["tensor_flops"] for k in ks)
            rows.append({"case": case, "kernel": tag["name"], "kind": tag["kind"], "bwd": tag["bwd"],
                         "launches": len(ks), "device_kernels": sorted({k["name"][:60] for k in ks}),
                         "our_bytes": tag["bytes"], "dram_bytes": m_bytes,
                         "bytes_ratio": tag["bytes"] / m_bytes if m_bytes else None,
                         "our_flops": tag["flops"], "counted_flops": m_flops,
                         "flops_ratio": tag["flops"] / m_flops if m_flops else None,
                         "us": sum(k["us"] for k in ks), "l2_hit_pct": ks[0]["l2_hit_pct"] if ks else None,
                         "dtypes": tag["dtypes"], "module": tag["module"]})

    def spread(key: str, kind: str | None = None) -> dict:
        vals = sorted(r[key] for r in rows if r[key] and (kind is None or r["kind"] == kind))
        if not vals:
            return {}
        q = statistics.quantiles(vals, n=4) if len(vals) > 1 else [vals[0]] * 3
        return {"n": len(vals), "median": statistics.median(vals), "p25": q[0], "p75": q[2],
                "min": vals[0], "max": vals[-1]}

    res = {"rows": rows, "bytes": spread("bytes_ratio"), "flops": spread("flops_ratio"),
           "bytes_generated": spread("bytes_ratio", "generated"), "flops_extern": spread("flops_ratio", "extern"),
           "flops_generated": spread("flops_ratio", "generated")}
    with open(os.path.join(out, "ncu_table.json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = ["| case | kernel | kind | our bytes | DRAM bytes | ratio | our FLOPs | counted FLOPs | ratio | L2 hit % | us |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        def f(v: float | None, nd: int = 2) -> str:
            return "" if v is None else f"{v:.{nd}f}"
        lines.append(f"| {r['case']} | `{r['kernel']}`{' (bwd)' if r['bwd'] else ''} | {r['kind']} | "
                     f"{r['our_bytes']:,} | {int(r['dram_bytes']):,} | {f(r['bytes_ratio'])} | {r['our_flops']:,} | "
                     f"{int(r['counted_flops']):,} | {f(r['flops_ratio'])} | {f(r['l2_hit_pct'], 1)} | {f(r['us'], 1)} |")
    with open(os.path.join(out, "ncu_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return res


def main() -> int:
    if sys.argv[1] == "--table-only":  # rebuild the table from a run's CSVs and tags (no GPU needed)
        res = table(sys.argv[2], sys.argv[3:] or ["sanity", "gpt_bf16", "resnet_block"])
        print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))
        return 0
    out = sys.argv[1]
    cases = sys.argv[2:] or ["sanity", "gpt_bf16", "resnet_block"]
    os.makedirs(out, exist_ok=True)
    avail = available_metrics()
    metrics = metric_list(avail)
    with open(os.path.join(out, "ncu_metrics.txt"), "w") as f:
        f.write("\n".join(metrics) + "\n\n# all tensor/fp/dram metrics this ncu knows:\n")
        f.write("\n".join(sorted(n for n in avail if re.search(r"tensor|_op_[fhd](add|mul|fma)|dram__bytes", n))))
    print("metrics:", metrics, flush=True)
    for case in cases:
        try:
            n = len(profile(case, out, metrics))
            print(f"{case}: {n} kernels profiled", flush=True)
        except Exception as e:  # one case failing must not lose the others
            print(f"{case}: FAILED {e}", flush=True)
    res = table(out, cases)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
