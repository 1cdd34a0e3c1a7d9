"""The advisor's GPU kinds against measured fixes, on a CUDA machine (docs/advisor.md): as
bench/advisor_calibration.py does on CPU, a training loop with a problem planted is captured with
``INDUCTOR_PERF_TRACE_DIR`` set (a child process) and then timed with the problem and with the fix in
paired rounds (time.perf_counter around blocks of steps, each block ended by one
torch.cuda.synchronize(): a training loop does not wait for the device each step, and a wait in the
timing would hide what a planted sync costs; the capture runs the bare steps).

    python bench/advisor_calibration_gpu.py        # prints the table (needs CUDA)

Cases: ``host_bound`` (a launch-bound MLP, fixed by mode="reduce-overhead"), ``sync`` (loss.item()
each step, fixed by not asking), ``memcpy`` (a pageable batch copied each step, fixed by a pinned one
copied non_blocking), ``precision`` (float32 matmuls with TF32 off, fixed by turning it on).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import advisor_calibration as cal  # noqa: E402


def _mlp(layers: int = 24, width: int = 256) -> nn.Module:
    return nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.GELU())]).cuda()


def _train(model: nn.Module, compiled: Callable, batch: Callable[[], torch.Tensor], item: bool = False) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> None:
        loss = compiled(batch()).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if item:
            loss.item()
    return step


def host_bound_loops() -> cal.Case:
    torch.manual_seed(0)
    x = torch.randn(32, 256, device="cuda")
    a, b = _mlp(), _mlp()
    b.load_state_dict(a.state_dict())
    plain = _train(a, torch.compile(a, backend="inductor_perf"), lambda: x)
    graphs = _train(b, torch.compile(b, backend="inductor_perf", mode="reduce-overhead"), lambda: x)
    return cal.Case("host_bound", "24 x Linear(256)+GELU, batch 32 -> mode=reduce-overhead", plain, graphs,
                    want=lambda f: "reduce-overhead" in f["fix"], sync=torch.cuda.synchronize)


def sync_loops() -> cal.Case:
    torch.manual_seed(0)
    x = torch.randn(32, 256, device="cuda")
    m = _mlp(8)
    c = torch.compile(m, backend="inductor_perf")
    return cal.Case("sync", "loss.item() every step -> none", _train(m, c, lambda: x, item=True),
                    _train(m, c, lambda: x), sync=torch.cuda.synchronize)


def memcpy_loops() -> cal.Case:
    torch.manual_seed(0)
    host = torch.randn(4096, 4096)
    pinned = host.pin_memory()
    m = _mlp(4, 4096)
    c = torch.compile(m, backend="inductor_perf")
    return cal.Case("memcpy", "64 MB pageable batch .cuda() -> pinned, non_blocking",
                    _train(m, c, lambda: host.cuda()), _train(m, c, lambda: pinned.cuda(non_blocking=True)),
                    sync=torch.cuda.synchronize)


def precision_loops() -> cal.Case:
    torch.manual_seed(0)
    x = torch.randn(4096, 4096, device="cuda")
    m = _mlp(4, 4096)
    c = torch.compile(m, backend="inductor_perf")
    step = _train(m, c, lambda: x)

    def with_tf32(on: bool) -> Callable[[], None]:
        def run() -> None:
            torch.backends.cuda.matmul.allow_tf32 = on  # what set_float32_matmul_precision("high") turns on
            step()
        return run
    return cal.Case("precision", "float32 matmuls 4096^2, TF32 off -> set_float32_matmul_precision(\"high\")",
                    with_tf32(False), with_tf32(True), sync=torch.cuda.synchronize)


def host_bound_case(rounds: int = 6, per_round: int = 10) -> cal.Result:
    return cal.run_case(host_bound_loops, rounds, per_round, warm=5, cpu_roofs=False)


def sync_case(rounds: int = 6, per_round: int = 10) -> cal.Result:
    return cal.run_case(sync_loops, rounds, per_round, warm=5, cpu_roofs=False)


def memcpy_case(rounds: int = 6, per_round: int = 10) -> cal.Result:
    return cal.run_case(memcpy_loops, rounds, per_round, warm=5, cpu_roofs=False)


def precision_case(rounds: int = 6, per_round: int = 10) -> cal.Result:
    return cal.run_case(precision_loops, rounds, per_round, warm=5, cpu_roofs=False)


CASES = (host_bound_case, sync_case, memcpy_case, precision_case)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the advisor's GPU calibration cases (docs/advisor.md; needs "
                                             "CUDA) and print the table.")
    names = [c.__name__.removesuffix("_case") for c in CASES]
    ap.add_argument("cases", nargs="*", choices=names, help="the cases to run (default: all)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("advisor_calibration_gpu: no CUDA device", file=sys.stderr)
        return 1
    results = []
    for case in CASES:
        if args.cases and case.__name__.removesuffix("_case") not in args.cases:
            continue
        try:
            results.append(case())
        except Exception as e:  # one case's failure still prints the others
            print(f"{case.__name__}: {type(e).__name__}: {e}", file=sys.stderr)
    print(cal.table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
