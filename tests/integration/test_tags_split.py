"""FLOPs of split reductions: each stage counts the elements it reads, the FX node counts once.

On the GPU, Inductor splits a reduction with few outputs (``x.sum()``, a bias gradient) into a
first kernel that reduces chunks of the input and later kernels that reduce the partial results;
all of them carry the same FX origins. Inductor's C++ backend never splits (it reduces to a single
element in one kernel), so the child below makes it behave like Triton: it drops the C++ backend's
REDUCE_TO_SINGLE_ELEMENT feature (Inductor then splits) and flushes each scheduler node into its
own kernel (as Triton launches the stages). It runs in its own interpreter so that the patched
scheduling never reaches another test.

Expected numbers are hand arithmetic: docs/costs.md counts 1 FLOP per element for a pointwise op
and 1 FLOP per input element for a reduction; a stage that reduces partial results reads
``bytes_read / 4`` float32 elements.
"""

from __future__ import annotations

import pytest
from conftest import run_child

N = 2**20
FP32 = 4

CHILD = r"""
import json
import torch
from torch._inductor.codegen.common import BackendFeature
from torch._inductor.codegen.cpp import CppScheduling
from torch.utils._ordered_set import OrderedSet

CppScheduling.backend_features = OrderedSet([BackendFeature.INPLACE_BUFFERS])
CppScheduling.can_fuse_vertical = lambda self, a, b: False
CppScheduling.can_fuse_horizontal = lambda self, a, b: False
_codegen_node = CppScheduling.codegen_node
def codegen_node(self, node):
    _codegen_node(self, node)
    self._set_flush_status(True)  # the scheduler flushes the kernel group after every node
CppScheduling.codegen_node = codegen_node

import inductor_perf
from inductor_perf.model.tags import evaluate

N = 2**20
def graphs_of(fn, *inputs, backward=False, **kw):
    before = {g.instance_id for g in inductor_perf.graph_table()}
    out = torch.compile(fn, backend="inductor_perf", **kw)(*inputs)
    if backward:
        out.sum().backward()
    new = [g for g in inductor_perf.graph_table() if g.instance_id not in before]
    res = []
    for g in new:
        assert g.tagged, g.error
        res.append([{"name": k.kernel_name, "kind": k.kind, "bwd": g.is_backward,
                     "flops": evaluate(k.flops), "read": evaluate(k.bytes_read),
                     "targets": [n.target for n in k.nodes]} for k in g.kernels])
    return res

out = {}
out["sum"] = graphs_of(lambda x: (x * 2).sum(), torch.randn(N))
out["mean"] = graphs_of(lambda x: x.mean(), torch.randn(N))
out["sum_plus"] = graphs_of(lambda x: x.sum() + 1, torch.randn(N))
out["linear"] = graphs_of(torch.nn.Linear(4, 2), torch.randn(2**18, 4), backward=True)
out["batchnorm"] = graphs_of(torch.nn.BatchNorm2d(64), torch.randn(32, 64, 28, 28), dynamic=False)
print("JSON:" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def split_runs() -> dict:
    return run_child(CHILD)


def _generated(graphs: list) -> list[dict]:
    return [k for g in graphs for k in g if k["kind"] == "generated"]


def _check_stages(kernels: list[dict], first_flops: int) -> list[dict]:
    """The kernel reading the whole input counts the FX nodes; every other one, what it reads."""
    assert len(kernels) >= 2, kernels  # the reduction was split: otherwise this test proves nothing
    first = [k for k in kernels if k["read"] == N * FP32]
    assert len(first) == 1, kernels
    assert first[0]["flops"] == first_flops
    later = [k for k in kernels if k is not first[0]]
    for k in later:
        assert k["read"] < N * FP32
        assert k["flops"] == k["read"] // FP32, k
    return later


def test_sum_counts_its_input_once(split_runs) -> None:
    (graph,) = split_runs["sum"]
    kernels = _generated([graph])
    later = _check_stages(kernels, first_flops=2 * N)  # one mul and one add per element
    assert sum(k["flops"] for k in kernels) == 2 * N + sum(k["read"] // FP32 for k in later)
    # the later stage still belongs to the user's line: it lists the same FX nodes
    assert all(k["targets"] == kernels[0]["targets"] for k in later)


def test_mean_division_is_one_flop_per_output(split_runs) -> None:
    (graph,) = split_runs["mean"]
    kernels = _generated([graph])
    later = _check_stages(kernels, first_flops=N)
    # the partials' reduction, then mean's division of the one result (reads 1 float)
    assert sum(k["flops"] for k in later) == sum(k["read"] // FP32 for k in later)
    assert any(k["read"] == FP32 and k["flops"] == 1 for k in later)


def test_epilogue_of_another_node_keeps_its_cost(split_runs) -> None:
    (graph,) = split_runs["sum_plus"]
    kernels = _generated([graph])
    adds = [k for k in kernels if k["targets"] == ["aten.add.Tensor"]]
    assert len(adds) == 1 and adds[0]["flops"] == 1  # x.sum() + 1: one element
    _check_stages([k for k in kernels if k not in adds], first_flops=N)


def test_bias_gradient_over_many_rows(split_runs) -> None:
    graphs = split_runs["linear"]
    bwd = [k for g in graphs for k in g if k["bwd"] and k["kind"] == "generated"]
    # grad of the bias: a sum over 2^18 rows of the [2^18, 2] output gradient, 2^19 elements read
    rows = 2**18
    first = [k for k in bwd if k["read"] == rows * 2 * FP32]
    assert len(first) == 1 and first[0]["flops"] == rows * 2, bwd
    later = [k for k in bwd if k is not first[0]]
    assert later, bwd
    for k in later:
        assert k["flops"] == k["read"] // FP32, k


def test_batchnorm_tail_counts_per_channel(split_runs) -> None:
    # BatchNorm2d(64) training forward over [32, 64, 28, 28]: var_mean reduces 2^15·49 elements.
    # Its lowering leaves a pointwise tail (the variance is m2 / N) that Inductor inlines into the
    # running-variance update, a kernel over 64 channels: that kernel counts a few FLOPs per
    # channel, not var_mean's whole input again (1,605,632 before).
    n, c = 32 * 64 * 28 * 28, 64
    (graph,) = split_runs["batchnorm"]
    kernels = _generated([graph])
    per_channel = [k for k in kernels if k["read"] <= 4 * c * FP32]
    tails = [k for k in per_channel if "aten.var_mean.correction" in k["targets"]]
    assert tails, kernels  # the tail was inlined into a per-channel kernel: else this proves nothing
    for k in per_channel:
        assert 0 < k["flops"] <= 8 * c, k
    # the kernels that read the input count var_mean in full: 1 FLOP per input element
    assert any(k["flops"] == n for k in kernels if k["targets"] == ["aten.var_mean.correction"]), kernels
