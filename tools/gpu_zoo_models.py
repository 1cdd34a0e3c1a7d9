"""The GPU zoo's models, shared by tools/gpu_zoo.py (capture checks) and tools/gpu_ncu.py (counters)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """A GPT block: LayerNorm, causal SDPA, MLP with GELU."""

    def __init__(self, dim: int = 512, heads: int = 8) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class BasicBlock(nn.Module):
    """A ResNet basic block: conv-BN-ReLU-conv-BN, skip, ReLU."""

    def __init__(self, c: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class MLP(nn.Module):
    def __init__(self, d: int = 1024) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Sanity(nn.Module):
    """A large bf16 matmul (the compute roof) and a device-to-device copy (the memory roof)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a @ b, c.clone()


def build(case: str, dev: str = "cuda") -> tuple[nn.Module, Any, torch.dtype | None, str | None]:
    """(model on ``dev``, input, autocast dtype, torch.compile mode) of a zoo case."""
    torch.manual_seed(0)
    autocast = mode = None
    if case in ("gpt_bf16", "gpt_cudagraphs"):
        model, x = Block(), torch.randn(8, 256, 512, device=dev)
        autocast = torch.bfloat16
        mode = "reduce-overhead" if case == "gpt_cudagraphs" else None
    elif case == "resnet_block":
        model, x = BasicBlock(), torch.randn(16, 64, 56, 56, device=dev)
    elif case == "mlp_autotune":
        model, x = MLP(), torch.randn(512, 1024, device=dev)
        mode = "max-autotune-no-cudagraphs"
    elif case == "mlp_dynamic":
        model, x = MLP(256), torch.randn(16, 256, device=dev)
    elif case == "sanity":
        model = Sanity()
        x = (torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16),
             torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16),
             torch.randn(256 * 2**20, device=dev))
    else:
        raise ValueError(f"unknown zoo case {case!r}")
    return model.to(dev), x, autocast, mode


def step(case: str, m: Any, x: Any, autocast: torch.dtype | None) -> float:
    """One training step's forward and backward (inference only for ``sanity``)."""
    if case == "sanity":
        with torch.no_grad():
            m(*x)
        return 0.0
    if autocast is not None:
        with torch.autocast("cuda", dtype=autocast):
            loss = m(x).float().pow(2).mean()
    else:
        loss = m(x).float().pow(2).mean()
    loss.backward()
    return float(loss.detach())
