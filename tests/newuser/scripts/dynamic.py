"""dynamic=True with batches of changing size, then the README's loop over the kernel table."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import inductor_perf

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model, backend="inductor_perf", dynamic=True)
for step in range(8):
    x = torch.randn(4 + 2 * step, 32)
    loss = compiled(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()

for tag in inductor_perf.kernel_table():
    print(tag.kernel_name, tag.flops, tag.bytes_read + tag.bytes_written, tag.module_path, tag.source)
