"""A torch newer than those we test: tags when every internal is there, plain Inductor with one
warning when one is missing. Each case runs in a fresh interpreter (the check runs once per process)."""

from __future__ import annotations

import pytest
from conftest import run_child

pytestmark = pytest.mark.slow

_MODEL = """
import logging, json, torch
records = []
class H(logging.Handler):
    def emit(self, r):
        records.append((r.levelname, r.getMessage()))
logging.getLogger("inductor_perf").addHandler(H())
logging.getLogger("inductor_perf").setLevel(logging.INFO)
{setup}
import inductor_perf
torch.manual_seed(0)
outs = []
for width in (16, 24):  # two models, two compiles: the message must come once
    m = torch.nn.Sequential(torch.nn.Linear(width, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
    x = torch.randn(3, width)
    got = torch.compile(m, backend="inductor_perf")(x)
    ref = m(x)
    outs.append(float((got - ref).abs().max()))
graphs = inductor_perf.graph_table()
print("JSON:" + json.dumps({{"records": records, "max_err": max(outs), "graphs": len(graphs),
                            "tagged": [g.tagged and bool(g.kernels) for g in graphs]}}))
"""

_HOOK_CHANGED = """
import torch._inductor.debug as debug, torch._inductor.codegen.cpp as cpp
orig = debug.set_kernel_post_grad_provenance_tracing
def changed(*args, **kwargs):  # a future release with another signature
    return orig(*args, **kwargs)
debug.set_kernel_post_grad_provenance_tracing = changed
cpp.set_kernel_post_grad_provenance_tracing = changed
"""


def test_missing_internal_compiles_as_plain_inductor_with_one_warning() -> None:
    got = run_child(_MODEL.format(setup=_HOOK_CHANGED), env={"TORCHINDUCTOR_FX_GRAPH_CACHE": "0"})
    assert got["max_err"] < 1e-5
    assert got["graphs"] == 0  # no tags: nothing registered, as with backend="inductor"
    warnings = [msg for level, msg in got["records"] if level == "WARNING"]
    assert len(warnings) == 1, got["records"]
    assert "torch._inductor.debug.set_kernel_post_grad_provenance_tracing" in warnings[0]
    assert "backend='inductor'" in warnings[0]


def test_newer_torch_with_every_internal_tags_and_says_untested_once() -> None:
    got = run_child(_MODEL.format(setup="torch.__version__ = '2.16.0'"),
                    env={"TORCHINDUCTOR_FX_GRAPH_CACHE": "0"})
    assert got["max_err"] < 1e-5
    assert got["graphs"] == 2 and all(got["tagged"])
    warnings = [msg for level, msg in got["records"] if level == "WARNING"]
    assert len(warnings) == 1 and "2.16.0 is newer than the releases we test" in warnings[0], warnings


def test_older_torch_is_a_clear_error() -> None:
    code = """
import json, torch
torch.__version__ = '2.10.0'
m = torch.nn.Linear(4, 4)
try:
    torch.compile(m, backend="inductor_perf")(torch.randn(2, 4))
    print("JSON:" + json.dumps({"error": None}))
except Exception as e:
    print("JSON:" + json.dumps({"error": f"{type(e).__name__}: {e}"}))
"""
    got = run_child(code)
    assert got["error"] and "torch >=2.11" in got["error"] and "found torch 2.10.0" in got["error"]

