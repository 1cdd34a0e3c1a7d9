"""bf16 autocast on the CPU around a compiled transformer-style block."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.ln(x))))


model = Block()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
compiled = torch.compile(model, backend="inductor_perf")
x = torch.randn(4, 16, 64)
for step in range(8):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = compiled(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done", loss.item())
