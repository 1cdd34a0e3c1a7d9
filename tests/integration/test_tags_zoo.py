"""A sweep of layer types through the backend: every graph tagged, and the per-step matmul FLOPs
of all tags equal FlopCounterMode's total for the same eager step (forward + backward)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import inductor_perf
from inductor_perf.model.tags import REGISTRY


class _Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e, self.l = nn.Embedding(100, 32), nn.Linear(32, 100)

    def forward(self, idx):
        return self.l(self.e(idx))


class _Break(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        x = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        return self.b(x)


class _Einsum(nn.Module):
    def forward(self, a, b):
        return torch.einsum("bij,bjk->bik", a, b)


def _ce(out):
    return F.cross_entropy(out.reshape(-1, 100), torch.zeros(out.shape[0] * out.shape[1], dtype=torch.long))


CASES = {
    "conv-batchnorm": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                             nn.Conv2d(8, 4, 3, stride=2)),
                       lambda: (torch.randn(2, 3, 16, 16),), None, False),
    "embedding-cross-entropy": (_Embed, lambda: (torch.randint(0, 100, (4, 8)),), _ce, False),
    "bf16-autocast-mlp": (lambda: nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)),
                          lambda: (torch.randn(4, 32),), None, True),
    "graph-break": (_Break, lambda: (torch.randn(4, 16),), None, False),
    "dropout-layernorm": (lambda: nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.LayerNorm(32),
                                                nn.Linear(32, 4)),
                          lambda: (torch.randn(4, 16),), None, False),
    "conv-transpose-groupnorm": (lambda: nn.Sequential(nn.ConvTranspose2d(4, 8, 3, stride=2),
                                                       nn.GroupNorm(2, 8), nn.SiLU()),
                                 lambda: (torch.randn(2, 4, 8, 8),), None, False),
    "einsum-bmm": (_Einsum, lambda: (torch.randn(4, 8, 16, requires_grad=True),
                                     torch.randn(4, 16, 8, requires_grad=True)), None, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_graph_tagged_and_matmul_flops_match(case):
    make_model, make_inputs, loss_fn, bf16 = CASES[case]
    loss_fn = loss_fn or (lambda o: o.float().sum())
    torch.manual_seed(0)
    model, inputs = make_model(), make_inputs()

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    with FlopCounterMode(display=False) as counter:
        with autocast():
            out = model(*inputs)
        loss_fn(out).backward()
    model.zero_grad()
    torch._dynamo.reset()
    before = {g.instance_id for g in REGISTRY.graphs()}
    compiled = torch.compile(model, backend="inductor_perf")
    with autocast():
        out = compiled(*inputs)
    loss_fn(out).backward()
    graphs = [g for g in REGISTRY.graphs() if g.instance_id not in before]
    assert graphs and all(g.tagged for g in graphs), [(g.graph_id, g.error) for g in graphs]
    assert any(g.is_backward for g in graphs)
    matmul = sum(int(k.matmul_flops) for g in graphs for k in g.kernels)
    assert matmul == counter.get_total_flops()
    # Every matmul-like extern kernel knows its module (Inductor's RNG-seed kernel has none).
    assert all(k.module_path is not None for g in graphs for k in g.kernels
               if k.kind == "extern" and int(k.matmul_flops) > 0)
    assert inductor_perf.kernel_table()  # the public view sees them
