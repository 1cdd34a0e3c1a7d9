"""GPU checks (skipped with a reason when no CUDA device is present; run on a lent GPU)."""

from __future__ import annotations

import pytest
import torch
from conftest import run_compiled

from inductor_perf.tags import evaluate

pytestmark = pytest.mark.gpu


def test_triton_kernel_tagged() -> None:
    def f(x):
        return torch.sin(x)

    x = torch.randn(2**20, device="cuda")
    run = run_compiled(f, (x,), "inductor_perf", backward=False)
    assert len(run.graphs) == 1 and run.graphs[0].tagged, run.graphs[0].error
    (k,) = run.graphs[0].kernels
    assert k.kind == "generated" and k.device == "cuda"
    assert k.kernel_name.startswith("triton_")
    assert k.profiler_name == k.kernel_name  # Triton kernels appear under their own name
    # read 2^20 floats, write 2^20 floats
    assert evaluate(k.bytes_read) + evaluate(k.bytes_written) == 8_388_608


def test_extern_gemm_flops_equal_flop_counter() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    def f(a, b):
        return torch.mm(a, b)

    a = torch.randn(256, 512, device="cuda")
    b = torch.randn(512, 768, device="cuda")
    with FlopCounterMode(display=False) as fc:
        f(a, b)
    run = run_compiled(f, (a, b), "inductor_perf", backward=False)
    assert run.graphs[0].tagged, run.graphs[0].error
    mm = [k for k in run.graphs[0].kernels if evaluate(k.matmul_flops)]
    assert len(mm) == 1 and mm[0].device == "cuda"
    assert evaluate(mm[0].matmul_flops) == fc.get_total_flops() == 201_326_592


def test_gpu_training_step_flops(request) -> None:
    """MLP training on CUDA: forward and backward matmul FLOPs equal FlopCounterMode."""
    from conftest import MLP
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = MLP().cuda()
    x = torch.randn(8, 32, device="cuda", requires_grad=True)
    with FlopCounterMode(display=False) as f_fwd:
        out = model(x)
    with FlopCounterMode(display=False) as f_bwd:
        out.sum().backward()
    model.zero_grad()
    x.grad = None
    run = run_compiled(model, (x,), "inductor_perf")
    assert all(g.tagged for g in run.graphs)
    assert sum(evaluate(k.matmul_flops) for g in run.fwd for k in g.kernels) == f_fwd.get_total_flops()
    assert sum(evaluate(k.matmul_flops) for g in run.bwd for k in g.kernels) == f_bwd.get_total_flops()
