"""Accuracy of the costs on kernel tags: matmul FLOPs against torch's FlopCounterMode on the bench
models, and bytes moved against hand arithmetic on small cases.

    python bench/bench_accuracy.py [--models mlp conv block] [--json acc.json]

FLOPs: each model of bench/models.CPU_MODELS is compiled with backend="inductor_perf" and run once
(forward + backward of the sum); the matmul FLOPs of the forward graphs' and backward graphs' tags
are summed and set against FlopCounterMode over the eager forward and the eager backward. The block's
SDPA runs the CPU flash kernel in the compiled graph; FlopCounterMode on torch < 2.15 has no formula
for it, so the eager reference runs under the MATH backend (two bmms forward, four backward), and the
flash backward's recomputation of Q·Kᵀ (2·B·H·S·S·D, by hand) is added to the backward reference.

Bytes: the cases of tests/integration/test_tags_bytes.py, each one fused kernel whose reads and
writes are stated by hand (the expected numbers are written out here, not computed by our code).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (bench/models.py)

N = 2**20
# name -> (function, input shapes, hand bytes read + written, how)
BYTE_CASES = {
    "sin(x), 2^20 fp32": (lambda x: torch.sin(x), [(N,)], 2 * N * 4, "read x + write y: 2·2^20·4 B"),
    "a*b+c, 2^20 fp32": (lambda a, b, c: a * b + c, [(N,), (N,), (N,)], 4 * N * 4,
                         "3 inputs read + 1 output written: 4·2^20·4 B"),
    "(x.sin()*2).cos(), 2^20 fp32": (lambda x: (x.sin() * 2).cos(), [(N,)], 2 * N * 4,
                                     "the two intermediates stay in registers: 2·2^20·4 B"),
    "x.sum(dim=1), 1024x256 fp32": (lambda x: x.sum(dim=1), [(1024, 256)], 1024 * 256 * 4 + 1024 * 4,
                                    "read 1024·256·4 + write 1024·4 B"),
}


def _new_graphs(before: set[int]) -> list:
    from inductor_perf import graph_table

    return [g for g in graph_table() if g.instance_id not in before]


def _ids() -> set[int]:
    from inductor_perf import graph_table

    return {g.instance_id for g in graph_table()}


def _matmul(graphs, backward: bool) -> int:
    from inductor_perf.model.tags import evaluate

    return sum(evaluate(k.matmul_flops) for g in graphs if g.is_backward == backward for k in g.kernels)


def model_flops(name: str) -> dict:
    """Ours and FlopCounterMode's matmul FLOPs of one forward and one backward of model ``name``."""
    model, x = models.cpu_model(name)
    before = _ids()
    torch.compile(model, backend="inductor_perf")(x).sum().backward()
    graphs = _new_graphs(before)
    model, x = models.cpu_model(name)
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as fwd:
            out = model(x)
        with FlopCounterMode(display=False) as bwd:
            out.sum().backward()
    ref_bwd, note = int(bwd.get_total_flops()), ""
    if name == "block":
        b, s, e = x.shape
        h = model.h
        extra = 2 * b * h * s * s * (e // h)
        ref_bwd += extra
        note = f"backward reference + {extra:,} (flash recomputes Q·Kᵀ: 2·B·H·S·S·D)"
    return {"ours_fwd": _matmul(graphs, False), "ref_fwd": int(fwd.get_total_flops()),
            "ours_bwd": _matmul(graphs, True), "ref_bwd": ref_bwd, "note": note}


def case_bytes(fn, shapes) -> int:
    from inductor_perf.model.tags import evaluate

    before = _ids()
    with torch.no_grad():
        torch.compile(fn, backend="inductor_perf", dynamic=False)(*[torch.randn(*s) for s in shapes])
    kernels = [k for g in _new_graphs(before) for k in g.kernels]
    return sum(evaluate(k.bytes_read) + evaluate(k.bytes_written) for k in kernels)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=list(models.CPU_MODELS), default=list(models.CPU_MODELS))
    ap.add_argument("--bytes", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    models.ensure_backend()
    flops = {}
    for name in args.models:
        flops[name] = r = model_flops(name)
        print(f"{name:<6} fwd ours {r['ours_fwd']:>12,} ref {r['ref_fwd']:>12,}   "
              f"bwd ours {r['ours_bwd']:>12,} ref {r['ref_bwd']:>12,}  {r['note']}")
    nbytes = {}
    for case, (fn, shapes, hand, how) in (BYTE_CASES.items() if args.bytes else ()):
        # a fresh function object per case: Dynamo caches by code object
        nbytes[case] = {"ours": case_bytes(lambda *a, fn=fn: fn(*a), shapes), "hand": hand, "how": how}
        print(f"{case:<32} ours {nbytes[case]['ours']:>12,} hand {hand:>12,}")
    models.write_json(args.json, {"bench": "accuracy", **models.environment("cpu"), "flops": flops,
                                  "bytes": nbytes})
    return 0


if __name__ == "__main__":
    sys.exit(main())
