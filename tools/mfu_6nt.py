"""Our model FLOPs per step against the usual estimates, on a small GPT trained on CPU.

    python tools/mfu_6nt.py [--layers 2] [--d-model 128] [--heads 4] [--seq 64] [--batch 8] [--vocab 512]
                            [--device cpu|cuda] [--bf16] [--steps 3]

Trains the GPT (pre-norm blocks: causal self-attention by ``scaled_dot_product_attention``, a 4x MLP;
an untied LM head) compiled with ``backend="inductor_perf"`` under ``inductor_perf.profile()`` for
three steps, and prints the summary's model FLOPs per step (``model_flop_per_step``) beside
``6·N·T`` (N: the parameters of the matmuls, the LM head included, embeddings not; T: the tokens of
a step) and ``6·N·T + 12·L·H·Q·T·S`` (PaLM's appendix B: the attention's QK^T and PV, forward and
backward, over the full S x S score matrix; Q the head dim, S the sequence length), and
FlopCounterMode's count of the eager step; with the steps' MFU and, over the median step, the
TFLOP/s that 6·N·T and 6·N·T + attention imply. docs/summary.md ("MFU and HFU") has the CPU figures,
docs/gpu.md the H200's (``--device cuda --bf16 --layers 4 --d-model 1024 --heads 16 --seq 1024
--batch 8 --vocab 32768 --steps 5``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 2), ("d-model", 128), ("heads", 4), ("seq", 64), ("batch", 8), ("vocab", 512)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--bf16", action="store_true", help="train under bf16 autocast")
    ap.add_argument("--steps", type=int, default=3, help="profiled steps (default 3)")
    a = ap.parse_args(argv)
    import contextlib

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    import inductor_perf

    torch.manual_seed(0)
    L, D, H, S, B, V = a.layers, a.d_model, a.heads, a.seq, a.batch, a.vocab

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.up, self.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(self.ln1(x)).view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, S, D))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(S, D)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            x = self.tok(idx) + self.pos(torch.arange(S, device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    dev = a.device
    m = GPT().to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    idx, tgt = torch.randint(0, V, (B, S), device=dev), torch.randint(0, V, (B, S), device=dev)

    def step(f: nn.Module) -> None:
        with torch.autocast(dev, dtype=torch.bfloat16) if a.bf16 else contextlib.nullcontext():
            loss = F.cross_entropy(f(idx).view(-1, V).float(), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    with FlopCounterMode(display=False) as fc:
        step(m)
    f = torch.compile(m, backend="inductor_perf")
    step(f)
    step(f)
    with tempfile.TemporaryDirectory() as out:
        with inductor_perf.profile(out, name="gpt") as p:
            for _ in range(a.steps):
                step(f)
                p.step()
        if dev == "cuda":
            torch.cuda.synchronize()
        s = p.result.summary
    n = sum(mod.weight.numel() for mod in m.modules() if isinstance(mod, nn.Linear))
    tokens = B * S
    six_nt = 6 * n * tokens
    attn = 12 * L * H * (D // H) * S * tokens
    ours = s.model_flop_per_step
    row = {"N": n, "T": tokens, "ours": ours, "6NT": six_nt, "6NT+12LHQST": six_nt + attn,
           "flop_counter": fc.get_total_flops(), "ours/6NT": ours / six_nt if ours else None,
           "ours/(6NT+attn)": ours / (six_nt + attn) if ours else None, "mfu_pct": s.mfu_pct,
           "mfu_note": s.mfu_note, "hfu_pct": s.hfu_pct,
           "steps": [{k: v for k, v in (st if isinstance(st, dict) else vars(st)).items()
                      if k in ("name", "dur_us", "model_flop", "hardware_flop", "mfu_pct", "hfu_pct")} for st in s.steps],
           "peak": vars(s.peak) if hasattr(s.peak, "__dict__") else str(s.peak), "device": dev, "bf16": a.bf16,
           "torch": torch.__version__}
    durs = sorted(v for st in row["steps"] for k, v in st.items() if k in ("dur_us", "duration_us") and v)
    if durs:
        med = durs[len(durs) // 2] if len(durs) % 2 else (durs[len(durs) // 2 - 1] + durs[len(durs) // 2]) / 2
        row["median_step_us"] = med
        row["six_nt_tflops_per_s"] = six_nt / med / 1e6
        row["six_nt_attn_tflops_per_s"] = (six_nt + attn) / med / 1e6
    json.dump(row, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
