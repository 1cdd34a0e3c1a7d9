"""inductor_perf.profile() around a training loop, p.step() after each step, as the README shows;
then the in-process summary is saved beside the outputs for the test to compare with the CLI's."""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import inductor_perf

out = sys.argv[1]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model, backend="inductor_perf", options={"inductor_perf.kernel_profile": True})
loader = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(4)]


def train_step(batch):
    x, y = batch
    loss = F.cross_entropy(compiled(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()


train_step(loader[0])  # compile outside the window
with inductor_perf.profile(out) as p:
    for batch in loader:
        train_step(batch)
        p.step()
print(p.result.summary_text)
with open(os.path.join(out, "in_process.json"), "w") as f:
    json.dump(p.result.summary.to_dict(), f)
