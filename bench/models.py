"""Models shared by the benchmarks (kept out of the timed code so every bench measures the same)."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A transformer block: LayerNorm, qkv Linear, SDPA, out proj, GELU MLP."""

    def __init__(self, e: int = 128, h: int = 4) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(e), nn.LayerNorm(e)
        self.qkv, self.proj = nn.Linear(e, 3 * e), nn.Linear(e, e)
        self.fc1, self.fc2 = nn.Linear(e, 4 * e), nn.Linear(4 * e, e)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.h, e // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, e))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
