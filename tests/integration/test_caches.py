"""Inductor's caches must never hide our hooks: two processes share TORCHINDUCTOR_CACHE_DIR."""

from __future__ import annotations

import pytest
from conftest import finish_child, start_child

CHILD = r"""
import json, sys, torch
import torch.nn.functional as F
backend = sys.argv[1] if len(sys.argv) > 1 else "inductor_perf"
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)
    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))
torch.manual_seed(0)
m, x = M(), torch.randn(4, 16, requires_grad=True)
torch.compile(m, backend=BACKEND)(x).sum().backward()
from torch._dynamo.utils import counters
out = {"fx_hits": counters["inductor"]["fxgraph_cache_hit"],
       "fx_misses": counters["inductor"]["fxgraph_cache_miss"]}
if BACKEND == "inductor_perf":
    import inductor_perf
    out["graphs"] = [g.to_dict() for g in inductor_perf.graph_table()]
print("JSON:" + json.dumps(out))
"""


def _child(backend: str) -> str:
    return CHILD.replace("BACKEND", repr(backend))


def _env(cache_dir) -> dict[str, str]:
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}


def _kernels(result) -> list[list[dict]]:
    """Per graph (fwd, bwd), the kernel dicts: every field, graph_id included (both processes are
    fresh, so graph ids agree)."""
    return [g["kernels"] for g in sorted(result["graphs"], key=lambda g: g["is_backward"])]


@pytest.fixture(scope="module")
def cache_runs(tmp_path_factory):
    shared = tmp_path_factory.mktemp("shared_cache")
    plain = tmp_path_factory.mktemp("plain_then_ours")
    # Round 1: ours into `shared`, plain inductor into `plain` (in parallel: independent dirs).
    p1 = start_child(_child("inductor_perf"), _env(shared))
    q1 = start_child(_child("inductor"), _env(plain))
    r1, s1 = finish_child(p1), finish_child(q1)
    # Round 2: ours again in both.
    p2 = start_child(_child("inductor_perf"), _env(shared))
    q2 = start_child(_child("inductor_perf"), _env(plain))
    r2, s2 = finish_child(p2), finish_child(q2)
    return {"cold": r1, "warm": r2, "plain": s1, "after_plain": s2}


def test_cold_compile_tags_complete(cache_runs) -> None:
    cold = cache_runs["cold"]
    assert cold["fx_misses"] >= 2 and cold["fx_hits"] == 0
    assert len(cold["graphs"]) == 2
    assert all(g["tagged"] and g["kernels"] and not g["cache_hit"] for g in cold["graphs"])


def test_second_process_hits_cache_with_identical_tags(cache_runs) -> None:
    cold, warm = cache_runs["cold"], cache_runs["warm"]
    assert warm["fx_hits"] >= 2, warm  # the FX graph cache really served the second process
    assert len(warm["graphs"]) == 2
    for g in warm["graphs"]:
        assert g["tagged"], g["error"]
        assert g["cache_hit"] is True
    assert _kernels(warm) == _kernels(cold)
    assert [g["cache_key"] for g in warm["graphs"]] == [g["cache_key"] for g in cold["graphs"]]


def test_plain_inductor_entry_never_hides_our_hooks(cache_runs) -> None:
    assert cache_runs["plain"]["fx_misses"] >= 2  # process 1 wrote plain-inductor entries
    after = cache_runs["after_plain"]
    assert len(after["graphs"]) == 2
    assert all(g["tagged"] and g["kernels"] for g in after["graphs"]), after["graphs"]
    assert _kernels(after) == _kernels(cache_runs["cold"])
