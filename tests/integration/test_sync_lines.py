"""The sync-call marks (capture/sync_calls.py) with real torch: Dynamo, Inductor, the profiler and the
env-var capture together, on the CPU. sys.monitoring needs Python 3.12+, so on an older Python these
tests are skipped: tools/test_matrix.sh runs this file in its torch 2.11 tier on Python 3.12 (what the
GPU machines run), and tests/unit/capture/test_sync_calls.py drives the tool itself through any
Python 3.12+ found on the machine.

The capture marks the calls of GPU tensors only. Here the device test is "cpu" (a SyncCalls given an
explicit one starts without a GPU), so the CPU tensors' calls stand in for the GPU's. Expected lines are
read from the scripts' own text."""

from __future__ import annotations

import gzip
import json
import sys

import pytest

from inductor_perf.model.markers import CALL_PREFIX, parse_call_marker

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason=(
    "sys.monitoring needs Python 3.12+; tools/test_matrix.sh runs this file on Python 3.12 (torch 2.11 tier)"))

CAPTURE = """
import functools, json, sys, warnings, torch, torch.nn as nn
import inductor_perf.capture.session as session
from inductor_perf.capture.sync_calls import SyncCalls, tensor_on
session.SyncCalls = functools.partial(SyncCalls, on_device=tensor_on("cpu"))
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
f = torch.compile(m, backend="inductor_perf", dynamic=False)
warnings.simplefilter("error", UserWarning)  # a warning the capture causes in the step ends the run
for step in range(8):
    batch = 16 if step < 4 else 24  # a new shape inside the window: Dynamo compiles again there
    loss = f(torch.randn(batch, 32)).square().mean()  # MARK-compiled
    loss.backward(); opt.step(); opt.zero_grad()
    value = loss.item()  # MARK-item
    big = float(loss.detach()) > 1e9  # MARK-float
mon = sys.monitoring
print("JSON:" + json.dumps({"graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"],
                            "tools": [mon.get_tool(t) for t in (3, 4)]}))
"""


def _line(code: str, mark: str) -> str:
    (n,) = [i + 1 for i, text in enumerate(code.splitlines()) if text.endswith(f"# MARK-{mark}")]
    return f"<string>:{n}"


def _inside(outer: dict, events: list[dict]) -> list[dict]:
    end = outer["ts"] + outer["dur"]
    return [e for e in events if e is not outer and e["tid"] == outer["tid"]
            and e["ts"] >= outer["ts"] and e["ts"] + e["dur"] <= end]


def test_env_var_capture_marks_the_users_calls_and_not_the_compilers(tmp_path):
    """The env-var capture with a compile inside its window: each recorded step has one range for the
    loop's ``loss.item()`` and one for ``float(...)``, each naming its line and holding the op that
    reads the value; the recompile's own ``.item()``/``.to()`` calls on real and fake tensors under the
    model's call get none. The training runs under warnings as errors, and the tool id is given back."""
    from conftest import run_child

    got = run_child(CAPTURE, env={"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "2",
                                  "INDUCTOR_PERF_STEPS": "4"})
    assert got["tools"] == [None, None]
    assert got["graphs"] == 2
    (trace,) = tmp_path.glob("*.trace.json.gz")
    events = [e for e in json.load(gzip.open(trace, "rt"))["traceEvents"] if e.get("ph") == "X"]
    names = {e["name"] for e in events}
    # the second compile (compile id 0/1) ran inside the window
    assert "Torch-Compiled Region: 0/1" in names, sorted(n for n in names if "ompile" in n)[:20]
    marks = [e for e in events if e["name"].startswith(CALL_PREFIX)]
    item, flt = _line(CAPTURE, "item"), _line(CAPTURE, "float")
    assert {parse_call_marker(e["name"]) for e in marks} == {("item", item), ("float", flt)}
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert len(steps) >= 3
    for step in steps:  # the last step may be cut at the window's end
        inside = sorted(parse_call_marker(e["name"]) for e in _inside(step, marks))
        assert inside in ([("float", flt), ("item", item)], []) or step is max(steps, key=lambda s: s["ts"]), \
            (step["name"], inside)
    assert sum(1 for s in steps if _inside(s, marks)) >= 3
    for mark in marks:  # the range holds the call's own op: a sync's runtime calls nest inside it
        assert "aten::item" in {e["name"] for e in _inside(mark, events)}, mark


MARKS = """
import json, torch
import torch._dynamo.config as dynamo_config
from inductor_perf.capture.sync_calls import SyncCalls, tensor_on
dynamo_config.capture_scalar_outputs = True
seen = {"compiled": [], "copies": []}
def recorder(case):
    class Record:
        def __init__(self, name): seen[case].append(name)
        def __enter__(self): pass
        def __exit__(self, *a): pass
    return Record

# 1. a .item() in compiled code, beside an eager one
def positives(x):
    n = (x > 0).sum().item()  # inside the graph: Inductor's generated code calls buf.item()
    torch._check(n >= 0)
    return torch.ones(n) * 2
f = torch.compile(positives, backend="inductor_perf", fullgraph=True)
marks = SyncCalls(on_device=tensor_on("cpu"), record=recorder("compiled"))
assert marks.start()
for _ in range(3):
    size = f(torch.randn(64)).shape[0]
    total = torch.tensor(size).item()  # MARK-eager
marks.stop()

# 2. "meta" as the device: no tensor here is on it, so the only ranges are the host tensors' copy calls
m = torch.nn.Linear(8, 8).double()
g = torch.compile(m, backend="inductor_perf")
marks = SyncCalls(on_device=tensor_on("meta"), record=recorder("copies"))
assert marks.start()
for _ in range(3):
    batch = torch.randn(4, 8).to(torch.float64)  # MARK-copy
    staged = torch.empty(4, 8, dtype=torch.float64)
    staged.copy_(batch)  # MARK-copy_
    loss = g(staged).sum()
    value = loss.item()  # a host tensor's .item(): no copy, no range
marks.stop()
print("JSON:" + json.dumps(seen))
"""


@pytest.fixture(scope="module")
def marks_run(tmp_path_factory):
    """Both cases of :data:`MARKS` in one child (one torch start-up and its compiles)."""
    from conftest import run_child

    cache = tmp_path_factory.mktemp("inductor")  # Inductor's cache folder moved: start() must read it
    return run_child(MARKS, env={"TORCHINDUCTOR_CACHE_DIR": str(cache)})


def test_a_call_in_compiled_code_gets_no_range(marks_run):
    """A ``.item()`` that Inductor's generated wrapper makes (a data-dependent size) is compiled code:
    its range would name the generated file (or the line that called the model) where the summary
    names it by the kernels before it, so it gets none. The eager ``.item()`` beside it gets one a call."""
    from inductor_perf.model.markers import call_marker_name

    assert marks_run["compiled"] == [call_marker_name("item", _line(MARKS, "eager"))] * 3


def test_a_host_tensors_copy_call_gets_a_range(marks_run):
    """``.to()`` of a host tensor (``batch.to(device)`` copies it to the GPU; here to float64) and
    ``staged.copy_(batch)`` (a CUDA graph's static input filled from the host; here a host buffer) get
    a range naming their lines, so a pageable copy they start has that line; the host tensor's
    ``.item()`` and the compile's own ``.to()`` calls get none."""
    from inductor_perf.model.markers import call_marker_name

    assert marks_run["copies"] == [call_marker_name("to", _line(MARKS, "copy")),
                                   call_marker_name("copy_", _line(MARKS, "copy_"))] * 3
