"""Kernels that read only graph inputs (Inductor's weight-layout copies before a CPU convolution)
belong to the module owning the first parameter they read, and name that parameter as source."""

from __future__ import annotations

import torch
import torch.nn as nn

from inductor_perf.model.tags import REGISTRY


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        # Our own forward, so every computed node has a user stack frame to be a source.
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.conv2(y) + y)


def test_every_kernel_of_a_conv_training_step_has_module_and_source():
    torch.manual_seed(0)
    model = _ConvNet()
    torch._dynamo.reset()
    before = {g.instance_id for g in REGISTRY.graphs()}
    compiled = torch.compile(model, backend="inductor_perf")
    compiled(torch.randn(2, 3, 8, 8)).sum().backward()
    graphs = [g for g in REGISTRY.graphs() if g.instance_id not in before]
    assert graphs and all(g.tagged for g in graphs) and any(g.is_backward for g in graphs)
    kernels = [k for g in graphs for k in g.kernels]
    assert [(k.kernel_name, k.module_path, k.source) for k in kernels
            if k.module_path is None or k.source is None] == []

    # AOTAutograd names graph inputs primals_N; a kernel of those alone reads only inputs.
    param_only = [k for k in kernels if k.nodes and all(n.name.startswith("primals_") for n in k.nodes)]
    assert param_only, [(k.kernel_name, [n.name for n in k.nodes]) for k in kernels]
    # The first conv weight is the first parameter such a layout copy reads (named by the model).
    first_conv_weight = next(name for name, p in model.named_parameters() if p.dim() == 4)
    assert first_conv_weight == "conv1.weight"
    for k in param_only:
        assert k.source == first_conv_weight, (k.kernel_name, [n.name for n in k.nodes])
        owner, _, leaf = k.source.rpartition(".")
        assert k.module_path == owner and hasattr(model.get_submodule(owner), leaf)


def test_every_extern_call_in_the_output_code_has_a_tag():
    """A scatter_reduce with an "amax" reduction compiles to Inductor's ScatterFallback, whose codegen
    skips the provenance hook (so does max-pool backward's scatter on some releases); it must still
    be tagged. Expected: the extern calls in the wrapper code Inductor wrote (run_and_get_code), not
    our own list."""
    import re
    from collections import Counter

    from torch._inductor.utils import run_and_get_code

    import inductor_perf

    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x, idx):
            return torch.zeros(4, 16).scatter_reduce(0, idx, self.fc(x), reduce="amax", include_self=False)

    torch.manual_seed(0)
    torch._dynamo.reset()
    f = torch.compile(Pool(), backend="inductor_perf")
    x, idx = torch.randn(8, 16), torch.randint(0, 4, (8, 16))
    before = {g.instance_id for g in inductor_perf.graph_table()}
    with torch._inductor.config.patch(fx_graph_cache=False), torch.no_grad():
        _, codes = run_and_get_code(lambda: f(x, idx))
    call = re.compile(r"\b(extern_kernels\.\w+|torch\.ops\.aten\.\w+\.\w+|aten\.\w+\.\w+)\(")
    in_code = Counter(m.group(1) for c in codes for line in c.splitlines()
                      if not line.lstrip().startswith("#") for m in [call.search(line)] if m)
    tags = Counter(k.kernel_name for g in inductor_perf.graph_table() if g.instance_id not in before
                   for k in g.kernels if k.kind == "extern")
    assert in_code["aten.scatter_reduce_.two"] == 1  # the case this test is about is really there
    assert tags == in_code
