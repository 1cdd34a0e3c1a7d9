"""Two threads, each running its own compiled model, inside one inductor_perf.profile() block."""
import json
import os
import sys
import threading

import torch
import torch.nn as nn

import inductor_perf

out = sys.argv[1]
torch.manual_seed(0)
models = [torch.compile(nn.Sequential(nn.Linear(32, 32), nn.ReLU()), backend="inductor_perf",
                        options={"inductor_perf.kernel_profile": True}) for _ in range(2)]
x = torch.randn(16, 32)
with torch.no_grad():
    for m in models:
        m(x)  # compile outside the window


def work(m: nn.Module) -> None:
    with torch.no_grad():
        for _ in range(20):
            m(x)


with inductor_perf.profile(out) as p:
    threads = [threading.Thread(target=work, args=(m,), name=f"worker{i}") for i, m in enumerate(models)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.step()
print(p.result.summary_text)
print("WARNINGS", p.result.warnings)
with open(os.path.join(out, "in_process.json"), "w") as f:
    json.dump(p.result.summary.to_dict(), f)
