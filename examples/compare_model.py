"""A model file for ``inductor-perf compare``: a tiny two-block pre-norm transformer.

The convention: the file defines ``make_model()`` (returns an nn.Module) and ``make_inputs()``
(returns a tuple of positional inputs); optionally ``loss_fn(output)`` (returns a scalar tensor;
default ``output.sum()``). Run::

    inductor-perf compare examples/compare_model.py
    inductor-perf compare examples/compare_model.py --by op --format markdown
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

D_MODEL, HEADS, SEQ, BATCH = 32, 2, 16, 2


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, d: int = D_MODEL, heads: int = HEADS, layers: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return TinyTransformer()


def make_inputs() -> tuple:
    torch.manual_seed(1)
    return (torch.randn(BATCH, SEQ, D_MODEL),)


def loss_fn(output: torch.Tensor) -> torch.Tensor:
    return output.pow(2).mean()
