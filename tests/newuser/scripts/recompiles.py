"""A model whose input length changes every few steps with dynamic=False: Dynamo recompiles for
each new shape (until its limit)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
compiled = torch.compile(model, backend="inductor_perf", dynamic=False)
for step in range(8):
    x = torch.randn(8 + 4 * (step % 3), 32)
    loss = F.mse_loss(compiled(x), x)
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done", loss.item())
