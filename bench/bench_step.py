"""Step time of a compiled model with no profiler running: inductor vs inductor_perf.

All variants are compiled in one process and timed in interleaved blocks (the order rotates every
round), so machine-load drift falls on every variant alike. Reports the median per-step time of
each variant and its ratio to plain inductor. The tiny model's step is an inference forward (the
case where a per-call wrapper shows most); the medium model's step is forward + backward.

--models mlp conv block --modes inference training: the CPU models of bench/models.py (what `make
bench` runs), each variant compiled fresh, the steps per timed block chosen so a block takes --block-s.

Variants:
  inductor              backend="inductor"
  inductor_perf         backend="inductor_perf" with defaults (kernel_profile="auto": off here,
                        since no capture is configured; markers on, gated on the profiler flag)
  inductor_perf+kprof   options={"inductor_perf.kernel_profile": True} (named CPU kernels; cpu only:
                        it names C++ kernels, and a GPU model has none)

--device cuda: the models and inputs on the GPU, the tiny model as on cpu (a launch-bound step, where
per-call overhead shows most) and the medium one at models.CUDA_BLOCK_DIMS; each timed block starts
and ends with torch.cuda.synchronize().

    .venv/bin/python bench/bench_step.py
    python3 bench/bench_step.py --device cuda --json step.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.pop("INDUCTOR_PERF_TRACE_DIR", None)  # "auto" must mean off for the default row

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (bench/models.py: the block and the setup the benches share)
from models import Block  # noqa: E402

TARGET_RATIO = 1.01


class Tiny(nn.Module):
    """Per-call overhead dominates: an inference forward of about 100 us."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 32), nn.Linear(32, 32)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


VARIANTS = {
    "inductor": dict(backend="inductor"),
    "inductor_perf": dict(backend="inductor_perf"),
    "inductor_perf+kprof": dict(backend="inductor_perf", options={"inductor_perf.kernel_profile": True}),
}
CPU_ONLY_VARIANTS = ("inductor_perf+kprof",)
SIZES = {
    # name: (model, input, steps per timed block, training step?)
    "tiny": (Tiny, lambda: torch.randn(8, 32), 200, False),
    "medium": (Block, lambda: torch.randn(4, 32, 128, requires_grad=True), 20, True),
}
_D = models.CUDA_BLOCK_DIMS
CUDA_SIZES = {
    "tiny": (lambda: Tiny().cuda(), lambda: torch.randn(8, 32, device="cuda"), 200, False),
    "medium": (lambda: Block(e=_D["embed"], h=_D["heads"]).cuda(),
               lambda: torch.randn(_D["batch"], _D["seq"], _D["embed"], device="cuda", requires_grad=True),
               20, True),
}


def variants_for(device: str) -> dict[str, dict]:
    return {v: kw for v, kw in VARIANTS.items() if device == "cpu" or v not in CPU_ONLY_VARIANTS}


def block_time(step, x, steps: int, sync=None) -> float:
    if sync is not None:  # cuda: start with an idle GPU, stop when the last step's kernels are done
        sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(x)
    if sync is not None:
        sync()
    return (time.perf_counter() - t0) / steps


def bench_size(name: str, rounds: int, device: str = "cpu") -> dict[str, list[float]]:
    """Per-round seconds per step of each variant."""
    factory, make_input, steps, training = (SIZES if device == "cpu" else CUDA_SIZES)[name]
    sync = models.cuda_sync(device)
    variants = variants_for(device)
    x = make_input()
    fns = {}
    for variant, kw in variants.items():
        torch.manual_seed(0)
        model = factory()
        compiled = torch.compile(model, **kw)

        def step(inp, compiled=compiled, model=model):
            compiled(inp).sum().backward()
            model.zero_grad(set_to_none=True)

        def infer(inp, compiled=compiled):
            with torch.no_grad():
                compiled(inp)

        step = step if training else infer

        for _ in range(5):  # compile + warm up
            step(x)
        if sync is not None:
            sync()
        fns[variant] = step
    per: dict[str, list[float]] = {v: [] for v in variants}
    names = list(variants)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for v in order:
            per[v].append(block_time(fns[v], x, steps, sync))
    return per


def bench_model(name: str, mode: str, rounds: int, variants: list[str], block_s: float) -> dict:
    """Per-round seconds per step of each variant on CPU model ``name`` (bench/models.CPU_MODELS) in
    ``mode`` ("inference": a no-grad forward; "training": forward + backward of the sum). Steps per
    timed block are chosen so that a block of plain inductor takes about ``block_s`` seconds."""
    fns = {}
    x = None
    for variant in variants:
        model, x = models.cpu_model(name)
        compiled = torch.compile(model, **VARIANTS[variant])

        def train(inp, compiled=compiled, model=model):
            compiled(inp).sum().backward()
            model.zero_grad(set_to_none=True)

        def infer(inp, compiled=compiled):
            with torch.no_grad():
                compiled(inp)

        fns[variant] = train if mode == "training" else infer
        for _ in range(5):  # compile + warm up
            fns[variant](x)
    one = block_time(fns[variants[0]], x, 5)
    steps = max(1, int(block_s / max(one, 1e-7)))
    per: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds):
        for v in variants[r % len(variants):] + variants[:r % len(variants)]:
            per[v].append(block_time(fns[v], x, steps))
    return {"steps_per_block": steps, "rounds_s": per}


def main_models(args) -> int:
    """``--models``: each CPU model in each ``--modes``, the ``--variants`` interleaved; JSON per case."""
    models.ensure_backend()
    status = models.tagging_status()
    results = {}
    for name in args.models:
        for mode in args.modes:
            res = bench_model(name, mode, args.rounds, args.variants, args.block_s)
            med = {v: statistics.median(ts) for v, ts in res["rounds_s"].items()}
            base = med[args.variants[0]]
            for v, t in med.items():
                print(f"{name + '-' + mode:<16}{v:<22}{t * 1e6:>12.1f} us{t / base:>8.3f}")
            results[f"{name}-{mode}"] = res
    models.write_json(args.json, {"bench": "step", **models.environment("cpu"), "rounds": args.rounds,
                                  **status, "tagged": models.tagged_counts(), "target_ratio": TARGET_RATIO,
                                  "results": results})
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=models.DEVICES, default="cpu")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--json", metavar="PATH", help="also write the medians and ratios here")
    ap.add_argument("--models", nargs="+", choices=list(models.CPU_MODELS),
                    help="instead of --sizes: these CPU models (bench/models.py) in each of --modes")
    ap.add_argument("--modes", nargs="+", choices=("inference", "training"), default=["inference", "training"])
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["inductor", "inductor_perf"],
                    help="with --models; the first is the baseline of the ratios")
    ap.add_argument("--block-s", type=float, default=0.02, help="with --models: seconds per timed block")
    args = ap.parse_args(argv)
    if args.models:
        return main_models(args)
    models.setup_device(args.device, "bench_step")
    registration = models.ensure_backend()
    status = models.tagging_status()
    where = "" if args.device == "cpu" else f", {torch.cuda.get_device_name(0)}"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} interleaved rounds{where}")
    if args.device != "cpu" or not status["tagging"]:
        print(f"inductor_perf: {registration}; tagging {'on' if status['tagging'] else 'OFF'} {status}")
    print(f"{'model':<8}{'variant':<22}{'median us/step':>16}{'ratio':>8}")
    results = {}
    for size in args.sizes:
        per = bench_size(size, args.rounds, args.device)
        med = {v: statistics.median(ts) for v, ts in per.items()}
        for v, t in med.items():
            print(f"{size:<8}{v:<22}{t * 1e6:>16.1f}{t / med['inductor']:>8.3f}")
        steps = (SIZES if args.device == "cpu" else CUDA_SIZES)[size][2]
        results[size] = {"steps_per_block": steps,
                         "median_us": {v: t * 1e6 for v, t in med.items()},
                         "ratio": {v: t / med["inductor"] for v, t in med.items()},
                         "rounds_us": {v: [t * 1e6 for t in ts] for v, ts in per.items()}}
    tagged = models.tagged_counts()
    if args.device != "cpu" or not tagged["graphs"]:
        print(f"inductor_perf tagged {tagged['graphs']} graph(s), {tagged['kernels']} kernel(s)")
    models.write_json(args.json, {
        "bench": "step", **models.environment(args.device), "rounds": args.rounds,
        "backend_registration": registration, **status, "tagged": tagged,
        "target_ratio": TARGET_RATIO,
        "worst_ratio": max(r["ratio"][v] for r in results.values() for v in r["ratio"]),
        "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
