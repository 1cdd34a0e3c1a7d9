"""mode="max-autotune": Inductor benchmarks GEMM choices at compile time (inference)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)).eval()
compiled = torch.compile(model, backend="inductor_perf", mode="max-autotune")
x = torch.randn(32, 64)
with torch.no_grad():
    for step in range(8):
        y = compiled(x)
print("done", y.sum().item())
