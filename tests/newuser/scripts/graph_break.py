"""A training loop whose forward has a graph break (a Python-side `.item()` check), captured with
INDUCTOR_PERF_TRACE_DIR as a user would: no inductor_perf import, no change beyond the backend."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        if h.mean().item() > 100.0:  # a data-dependent branch: Dynamo breaks the graph here
            h = h * 0.5
        return self.fc2(h)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model, backend="inductor_perf")
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
for step in range(8):
    loss = F.cross_entropy(compiled(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done", loss.item())
