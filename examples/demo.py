"""inductor_perf demo: a small transformer trained with torch.compile(backend="inductor_perf").

Run it the way a user would run their own script:

    INDUCTOR_PERF_TRACE_DIR=inductor_perf_out python examples/demo.py

(``make demo`` does exactly that). The model code has no inductor_perf import: the backend is found
through its entry point. The demo then prints what inductor_perf knew at compile time and the
summary it wrote after the profiling window.
"""

from __future__ import annotations

import glob
import os
import sys
import time

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
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 512, dim: int = 128, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> int:
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, backend="inductor_perf")
    idx = torch.randint(0, 512, (8, 64))
    target = torch.randint(0, 512, (8, 64))
    t0 = time.perf_counter()
    for step in range(8):
        logits = compiled(idx)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step == 0:
            print(f"step 0 (includes compile): {time.perf_counter() - t0:.1f} s, loss {loss.item():.3f}")
    print(f"8 steps done, loss {loss.item():.3f}")

    import inductor_perf

    tags = inductor_perf.kernel_table()
    print(f"\nCompile-time kernel tags: {len(tags)} call sites in "
          f"{len(inductor_perf.graph_table())} graphs. The five with the most FLOPs:")
    for t in sorted(tags, key=lambda t: -int(t.flops))[:5]:
        print(f"  {'bwd' if t.is_backward else 'fwd'} {t.kernel_name[:48]:48s} {int(t.flops):>12,} FLOP "
              f"{int(t.bytes_read) + int(t.bytes_written):>10,} B  {t.module_path or '(root)'}")

    out_dir = os.environ.get("INDUCTOR_PERF_TRACE_DIR")
    if not out_dir:
        print("\nSet INDUCTOR_PERF_TRACE_DIR=<dir> to also get an augmented trace and a summary.")
        return 0
    # The capture finished inside the loop above (after its warm-up and recorded steps).
    summaries = sorted(glob.glob(os.path.join(out_dir, "*.summary.txt")), key=os.path.getmtime)
    if not summaries:
        print(f"\nno summary in {out_dir}: see the warnings above", file=sys.stderr)
        return 1
    print(f"\n--- {summaries[-1]} ---")
    with open(summaries[-1]) as f:
        print(f.read())
    print("Open the .trace.json.gz in Perfetto (ui.perfetto.dev), HTA or torch-tb-profiler: each kernel's args "
          "carry kernel_flop, kernel_num_gb, achieved_*_pct, roofline_bound, source and module_path.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
