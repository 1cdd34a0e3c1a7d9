"""Matmul FLOPs of kernel tags against FlopCounterMode (per op and per training step) and against
hand arithmetic where FlopCounterMode has no formula (CPU flash attention).

FlopCounterMode shares flop_registry with our costs module, so agreement is consistency, not an
independent proof of the formulas; the hand-checked reference numbers (../shared/INTEROP.md) and the
attention arithmetic below are the independent part.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
import torch.nn.functional as F
from conftest import ATTN_SHAPE, eager_flops, make, op_packet, run_compiled

from inductor_perf.model.tags import evaluate

CPU_FLASH_FWD = "aten._scaled_dot_product_flash_attention_for_cpu"
CPU_FLASH_BWD = "aten._scaled_dot_product_flash_attention_for_cpu_backward"


def matmul_sum(graphs) -> int:
    return sum(evaluate(k.matmul_flops) for g in graphs for k in g.kernels)


def matmul_by_op(graphs) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for g in graphs:
        for k in g.kernels:
            mm = evaluate(k.matmul_flops)
            if k.kind == "extern" and mm:
                out[op_packet(k.op)] += mm
            else:  # generated kernels compute no matmul on CPU without max-autotune templates
                assert mm == 0, k
    return dict(out)


@pytest.mark.parametrize("name", ["mlp", "conv"])
def test_step_flops_equal_flop_counter(name: str, request: pytest.FixtureRequest) -> None:
    run = request.getfixturevalue(f"{name}_perf")
    ref = eager_flops(name)
    assert ref.fwd_total > 0 and ref.bwd_total > 0
    assert matmul_sum(run.fwd) == ref.fwd_total
    assert matmul_sum(run.bwd) == ref.bwd_total


@pytest.mark.parametrize("name", ["mlp", "conv"])
def test_per_op_flops_equal_flop_counter(name: str, request: pytest.FixtureRequest) -> None:
    run = request.getfixturevalue(f"{name}_perf")
    ref = eager_flops(name)
    assert matmul_by_op(run.fwd) == ref.fwd_by_op
    assert matmul_by_op(run.bwd) == ref.bwd_by_op


def test_mlp_hand_arithmetic(mlp_perf) -> None:
    # x[8,32] -> fc1 -> [8,64] -> fc2 -> [8,16]; an m×k @ k×n product is 2·m·k·n FLOPs.
    fwd = 2 * 8 * 32 * 64 + 2 * 8 * 64 * 16
    # backward: grad_input and grad_weight of each linear (x requires grad) = twice the forward
    assert matmul_sum(mlp_perf.fwd) == fwd == 49152
    assert matmul_sum(mlp_perf.bwd) == 2 * fwd


def test_elementwise_flops_are_counted_separately(mlp_perf) -> None:
    """flops = matmul part + elementwise part: no generated kernel has matmul FLOPs, and the
    elementwise kernels of the forward (gelu) carry at least 1 FLOP per element of fc1's output."""
    gen = [k for k in mlp_perf.fwd[0].kernels if k.kind == "generated"]
    assert gen and all(evaluate(k.matmul_flops) == 0 for k in gen)
    assert sum(evaluate(k.flops) for k in gen) >= 8 * 64
    for k in mlp_perf.fwd[0].kernels:
        assert evaluate(k.flops) >= evaluate(k.matmul_flops)


# --- attention ----------------------------------------------------------------------------------
def _attention_hand() -> tuple[int, int]:
    b, h, s, d = (ATTN_SHAPE[k] for k in "BHSD")
    # Forward: scores = Q·Kᵀ ([S,D]@[D,S]: 2·S·S·D per head) and out = P·V (2·S·S·D): 4·B·H·S·S·D.
    fwd = 4 * b * h * s * s * d
    # Flash backward recomputes scores = Q·Kᵀ (2·S·S·D), then dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K,
    # dK = dSᵀ·Q (4 × 2·S·S·D): 5 products, 10·B·H·S·S·D.
    bwd = 10 * b * h * s * s * d
    return fwd, bwd


def test_attention_flops(attn_perf) -> None:
    ref = eager_flops("attn")
    hand_fwd, hand_bwd = _attention_hand()
    assert (hand_fwd, hand_bwd) == (65536, 163840)
    # On CPU eager SDPA runs the flash kernel for CPU. torch 2.15's flop_registry counts it; older
    # releases leave it out, and FlopCounterMode counts only the projections. Either way: the
    # attention op by hand arithmetic (and torch's count, where it has one, must agree with it),
    # everything else by FlopCounterMode, each op exactly once.
    fwd = matmul_by_op(attn_perf.fwd)
    bwd = matmul_by_op(attn_perf.bwd)
    assert fwd[CPU_FLASH_FWD] == hand_fwd and bwd[CPU_FLASH_BWD] == hand_bwd
    ref_fwd, ref_bwd = dict(ref.fwd_by_op), dict(ref.bwd_by_op)
    assert ref_fwd.setdefault(CPU_FLASH_FWD, hand_fwd) == hand_fwd
    assert ref_bwd.setdefault(CPU_FLASH_BWD, hand_bwd) == hand_bwd
    assert fwd == ref_fwd
    assert bwd == ref_bwd
    assert matmul_sum(attn_perf.fwd) == sum(ref_fwd.values())
    assert matmul_sum(attn_perf.bwd) == sum(ref_bwd.values())


def test_attention_forward_equals_math_backend_count(attn_perf) -> None:
    """Under the MATH backend eager SDPA is two bmms that FlopCounterMode does count."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    model, inputs = make("attn")
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc, torch.no_grad():
        model(*inputs)
    assert matmul_sum(attn_perf.fwd) == fc.get_total_flops()


# --- reference number ---------------------------------------------------------------------------
def test_reference_conv_padding_and_stride() -> None:
    """conv 1×3×224×224 with 64×3×7×7, stride 2, padding 3 → 236,027,904 (INTEROP.md; a
    padding-blind formula gives 223,552,896): 112·112 outputs × 64 channels × 2·3·7·7."""
    assert 112 * 112 * 64 * 2 * 3 * 7 * 7 == 236_027_904
    w = torch.randn(64, 3, 7, 7)

    def f(x):
        return F.conv2d(x, w, stride=2, padding=3)

    run = run_compiled(f, (torch.randn(1, 3, 224, 224),), "inductor_perf", backward=False)
    assert len(run.graphs) == 1 and run.graphs[0].tagged
    assert matmul_by_op(run.graphs) == {"aten.convolution": 236_027_904}


def test_matmul_tags_carry_module_and_source(attn_perf) -> None:
    """Projection GEMMs are attributed to their nn.Linear (backward ones through the forward's
    module stack) and to the user line in conftest.py that calls it."""
    for graphs in (attn_perf.fwd, attn_perf.bwd):
        mm = [k for g in graphs for k in g.kernels if op_packet(k.op) in ("aten.mm", "aten.addmm")]
        assert mm
        assert {k.module_path for k in mm} == {"qkv", "out"}
        assert all(k.source and k.source.split(":")[0].endswith("conftest.py") for k in mm)


def test_grouped_mm_flops_by_hand() -> None:
    """MoE experts' grouped matmul (torch._grouped_mm; FlopCounterMode has no formula for it):
    2 x rows x K x N forward, and the same again for each of the two backward grouped matmuls
    (input gradient: (S, N) x (E, N, K); weight gradient: (K, S) x (S, N) split by group)."""
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("this torch has no torch._grouped_mm")
    import inductor_perf

    S, K, N, E = 24, 32, 16, 4
    offs = torch.tensor([6, 12, 18, 24], dtype=torch.int32)
    x = torch.randn(S, K, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(E, K, N, dtype=torch.bfloat16, requires_grad=True)
    torch._dynamo.reset()
    before = {g.instance_id for g in inductor_perf.graph_table()}
    f = torch.compile(lambda a, b: torch._grouped_mm(a, b, offs=offs), backend="inductor_perf")
    f(x, w).sum().backward()
    graphs = [g for g in inductor_perf.graph_table() if g.instance_id not in before]
    fwd = matmul_sum([g for g in graphs if not g.is_backward])
    bwd = matmul_sum([g for g in graphs if g.is_backward])
    assert (fwd, bwd) == (2 * S * K * N, 2 * (2 * S * K * N))
