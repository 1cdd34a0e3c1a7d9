"""Dynamic shapes: tagging must not add guards (same frames/graphs as plain Inductor), and symbolic
tags evaluate to what FlopCounterMode reports at the size a call had."""

from __future__ import annotations

import pytest
import torch
from conftest import MLP, eager_flops, finish_child, graph_ids, new_graphs, start_child

from inductor_perf.model.markers import parse_marker
from inductor_perf.model.tags import evaluate

COUNTERS_CHILD = r"""
import json, torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)
    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))
out = {}
for label, kw in (("dynamic", {"dynamic": True}), ("default", {})):
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    m = M()
    c = torch.compile(m, backend=BACKEND, **kw)
    with torch.no_grad():  # forward only: halves the compiles (backward: see the in-process tests)
        for n in (4, 8, 16):
            c(torch.randn(n, 16))
    out[label] = {"unique_graphs": counters["stats"]["unique_graphs"],
                  "frames": dict(counters["frames"]),
                  "recompiles": sum(v for k, v in counters["recompiles"].items())}
print("JSON:" + json.dumps(out))
"""


# README.md's loop over kernel_table(), verbatim, on a model compiled with dynamic=True (a fresh
# process: kernel_table() holds every graph this process compiled). The model lives in a file, so
# its frames have a source line.
README_MODEL = """
import torch
import torch.nn.functional as F
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)
    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))
"""
README_CHILD = r"""
import contextlib, io, json, sys, torch
import inductor_perf
sys.path.insert(0, MODEL_DIR)
from readme_model import M
torch.manual_seed(0)
c = torch.compile(M(), backend="inductor_perf", dynamic=True)
with torch.no_grad():
    c(torch.randn(4, 16))
out = io.StringIO()
with contextlib.redirect_stdout(out):
    for tag in inductor_perf.kernel_table():
        print(tag.kernel_name, tag.flops, tag.bytes_read + tag.bytes_written, tag.module_path, tag.source)
table = inductor_perf.kernel_table()
(sym,) = inductor_perf.graph_table()[0].symbol_locators
total = sum(t.flops for t in table)
print("JSON:" + json.dumps({
    "lines": out.getvalue().splitlines(), "symbol": sym, "total": str(total),
    "doubled": [str(2 * t.flops) for t in table], "plus_one": [str(t.flops + 1) for t in table],
    "at_8": [[t.evaluated({sym: 8}).flops, t.evaluated({sym: 8}).bytes_read + t.evaluated({sym: 8}).bytes_written]
             for t in table],
    "total_at_8": inductor_perf.model.tags.evaluate(total, {sym: 8}),
}))
"""


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme_model")
    (folder / "readme_model.py").write_text(README_MODEL)
    return folder / "readme_model.py", start_child(README_CHILD.replace("MODEL_DIR", repr(str(folder))))


def test_readme_loop_under_dynamic_shapes(readme_run) -> None:
    """The loop prints an expression for each kernel's FLOPs and for its bytes read + written (it
    joined the two strings before, and failed where one was a number)."""
    path, child = readme_run
    r = finish_child(child)
    s = r["symbol"]
    line = next(i for i, text in enumerate(README_MODEL.splitlines(), 1) if "self.fc2(F.gelu" in text)
    src = f"{path}:{line}"
    # batch s; fc1 = Linear(16, 32), fc2 = Linear(32, 8), float32 (4 B)
    assert r["lines"] == [
        # 2·16·32·s FLOPs; reads x 16·4·s + W 16·32·4 + b 32·4, writes 32·4·s: 192·s + 2176 B
        f"extern_kernels.addmm 1024*{s} 192*{s} + 2176 fc1 {src}",
        # GELU (erf form) is 5 pointwise ops (x·0.5, x·2^-1/2, erf, +1, ·) on 32·s elements;
        # reads and writes 32·4·s B
        f"cpp_fused_gelu_0 160*{s} 256*{s}  {src}",
        # 2·32·8·s FLOPs; reads x 32·4·s + W 32·8·4 + b 8·4, writes 8·4·s: 160·s + 1056 B
        f"extern_kernels.addmm 512*{s} 160*{s} + 1056 fc2 {src}",
    ]
    assert r["total"] == f"1696*{s}"  # 1024 + 160 + 512
    assert r["doubled"] == [f"2048*{s}", f"320*{s}", f"1024*{s}"]
    assert r["plus_one"] == [f"1024*{s} + 1", f"160*{s} + 1", f"512*{s} + 1"]
    # at batch 8: 8192 FLOPs, 192·8 + 2176 B; 1280, 2048; 4096, 160·8 + 1056
    assert r["at_8"] == [[8192, 3712], [1280, 2048], [4096, 2336]]
    assert r["total_at_8"] == 13568


@pytest.fixture(scope="module")
def counter_runs(tmp_path_factory):
    procs = {}
    for backend in ("inductor", "inductor_perf"):
        env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp(f"cache_{backend}"))}
        procs[backend] = start_child(COUNTERS_CHILD.replace("BACKEND", repr(backend)), env)
    return {b: finish_child(p) for b, p in procs.items()}


@pytest.mark.parametrize("mode", ["dynamic", "default"])
def test_same_frames_and_graphs_as_inductor(counter_runs, mode: str) -> None:
    ours, plain = counter_runs["inductor_perf"][mode], counter_runs["inductor"][mode]
    assert plain["unique_graphs"] >= 1
    assert ours == plain


def test_default_mode_recompiles_once_then_stays_dynamic(counter_runs) -> None:
    # batch 4 static, batch 8 recompiles with a dynamic batch, batch 16 reuses it
    assert counter_runs["inductor"]["default"]["unique_graphs"] == 2
    assert counter_runs["inductor"]["dynamic"]["unique_graphs"] == 1


@pytest.fixture(scope="module")
def dynamic_mlp():
    torch.manual_seed(0)
    model = MLP()
    before = graph_ids()
    compiled = torch.compile(model, backend="inductor_perf", dynamic=True)
    compiled(torch.randn(8, 32, requires_grad=True)).sum().backward()
    graphs = new_graphs(before)
    return compiled, graphs


def _flop_sum(graph, symbols) -> int:
    return sum(evaluate(k.evaluated(symbols).matmul_flops) for k in graph.kernels)


def test_dynamic_tags_are_symbolic(dynamic_mlp) -> None:
    _, graphs = dynamic_mlp
    assert len(graphs) == 2 and all(g.tagged for g in graphs)
    for g in graphs:
        mm = [k for k in g.kernels if k.kind == "extern"]
        assert mm and all(k.is_symbolic for k in mm), [k.matmul_flops for k in mm]
        assert g.symbol_locators  # the batch size can be read back from a call's inputs


@pytest.mark.parametrize("n", [3, 16])
def test_evaluated_tags_match_flop_counter(dynamic_mlp, n: int) -> None:
    _, graphs = dynamic_mlp
    fwd = next(g for g in graphs if not g.is_backward)
    bwd = next(g for g in graphs if g.is_backward)
    ref = eager_flops("mlp", (torch.randn(n, 32, requires_grad=True),))
    # The batch symbol is the only free symbol of the forward's matmul costs.
    syms = {s for k in fwd.kernels if isinstance(k.matmul_flops, str)
            for s in __import__("sympy").sympify(k.matmul_flops).free_symbols}
    assert len(syms) == 1
    sym = str(syms.pop())
    assert _flop_sum(fwd, {sym: n}) == ref.fwd_total
    bwd_symbols = {s: n for s in bwd.symbol_locators} if sym in bwd.symbol_locators else {sym: n}
    assert _flop_sum(bwd, bwd_symbols) == ref.bwd_total


def test_symbol_values_from_a_real_call(dynamic_mlp) -> None:
    """The marker of a profiled call carries GraphTags.symbol_values(inputs) of the real inputs:
    evaluating the tags with them gives FlopCounterMode's count at that batch size."""
    compiled, graphs = dynamic_mlp
    by_id = {g.instance_id: g for g in graphs}
    n = 5
    before = graph_ids()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        compiled(torch.randn(n, 32, requires_grad=True)).sum().backward()
    assert new_graphs(before) == []  # no recompile: tagging added no guard on the batch size
    markers = [parse_marker(e.name) for e in prof.events()]
    markers = [m for m in markers if m is not None and m[0] in by_id]
    assert {m[1] for m in markers} == {False, True}, markers
    ref = eager_flops("mlp", (torch.randn(n, 32, requires_grad=True),))
    for instance_id, is_backward, symbols in markers:
        assert n in symbols.values(), symbols
        total = _flop_sum(by_id[instance_id], symbols)
        assert total == (ref.bwd_total if is_backward else ref.fwd_total)
