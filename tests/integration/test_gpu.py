"""GPU checks (skipped with a reason when no CUDA device is present; run on a lent GPU)."""

from __future__ import annotations

import pytest
import torch
from conftest import run_compiled

from inductor_perf.model.tags import evaluate

pytestmark = pytest.mark.gpu


def test_triton_kernel_tagged() -> None:
    def f(x):
        return torch.sin(x)

    x = torch.randn(2**20, device="cuda")
    run = run_compiled(f, (x,), "inductor_perf", backward=False)
    assert len(run.graphs) == 1 and run.graphs[0].tagged, run.graphs[0].error
    (k,) = run.graphs[0].kernels
    assert k.kind == "generated" and k.device == "cuda"
    assert k.kernel_name.startswith("triton_")
    assert k.profiler_name == k.kernel_name  # Triton kernels appear under their own name
    # read 2^20 floats, write 2^20 floats
    assert evaluate(k.bytes_read) + evaluate(k.bytes_written) == 8_388_608


def test_split_reduction_counts_the_input_once() -> None:
    # Triton splits a full sum of 2^24 floats (one output) into a first kernel over the input and
    # later kernels over partial results (docs/costs.md, "split reduction"). By hand: the first
    # counts one mul and one add per input element, every later one an element per float it reads.
    def f(x):
        return (x * 2).sum()

    n = 2**24
    run = run_compiled(f, (torch.randn(n, device="cuda"),), "inductor_perf", backward=False)
    assert run.graphs[0].tagged, run.graphs[0].error
    kernels = [k for k in run.graphs[0].kernels if k.kind == "generated"]
    assert len(kernels) >= 2, [k.kernel_name for k in kernels]  # split, or this proves nothing
    first = [k for k in kernels if evaluate(k.bytes_read) == 4 * n]
    assert len(first) == 1 and evaluate(first[0].flops) == 2 * n
    for k in kernels:
        if k is not first[0]:
            assert evaluate(k.flops) == evaluate(k.bytes_read) // 4 < n, k


def test_extern_gemm_flops_equal_flop_counter() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    def f(a, b):
        return torch.mm(a, b)

    a = torch.randn(256, 512, device="cuda")
    b = torch.randn(512, 768, device="cuda")
    with FlopCounterMode(display=False) as fc:
        f(a, b)
    run = run_compiled(f, (a, b), "inductor_perf", backward=False)
    assert run.graphs[0].tagged, run.graphs[0].error
    mm = [k for k in run.graphs[0].kernels if evaluate(k.matmul_flops)]
    assert len(mm) == 1 and mm[0].device == "cuda"
    assert evaluate(mm[0].matmul_flops) == fc.get_total_flops() == 201_326_592


def test_gpu_training_step_flops(request) -> None:
    """MLP training on CUDA: forward and backward matmul FLOPs equal FlopCounterMode."""
    from conftest import MLP
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = MLP().cuda()
    x = torch.randn(8, 32, device="cuda", requires_grad=True)
    with FlopCounterMode(display=False) as f_fwd:
        out = model(x)
    with FlopCounterMode(display=False) as f_bwd:
        out.sum().backward()
    model.zero_grad()
    x.grad = None
    run = run_compiled(model, (x,), "inductor_perf")
    assert all(g.tagged for g in run.graphs)
    assert sum(evaluate(k.matmul_flops) for g in run.fwd for k in g.kernels) == f_fwd.get_total_flops()
    assert sum(evaluate(k.matmul_flops) for g in run.bwd for k in g.kernels) == f_bwd.get_total_flops()


def _tags(run) -> list:
    return [k for g in run.graphs for k in g.kernels]


def test_reductions_pointwise_and_persistent_reductions_tagged() -> None:
    """softmax over a short row (persistent reduction), a long row sum (looped reduction), a
    pointwise epilogue: every Triton kernel carries bytes and a source line."""

    def f(x, y):
        return torch.softmax(x, dim=-1) * 2, y.sum(dim=-1), torch.relu(x) + 1

    x = torch.randn(4096, 512, device="cuda")
    y = torch.randn(1024, 8192, device="cuda")  # enough rows that Inductor does not split it
    run = run_compiled(f, (x, y), "inductor_perf", backward=False)
    tags = _tags(run)
    names = [k.kernel_name for k in tags]
    assert tags and all(n.startswith("triton_") for n in names), names
    prefixes = {n.split("_")[1] for n in names}
    assert {"per", "red"} <= prefixes, names  # persistent and looped reductions
    for k in tags:
        assert evaluate(k.bytes_read) > 0 and evaluate(k.bytes_written) > 0, k.kernel_name
        assert k.source and ".py:" in k.source, (k.kernel_name, k.source)
    # the row sum reads y once and writes 1024 floats
    red = [k for k in tags if evaluate(k.bytes_written) == 1024 * 4]
    assert len(red) == 1, [(k.kernel_name, evaluate(k.bytes_read), evaluate(k.bytes_written)) for k in tags]
    assert evaluate(red[0].bytes_read) == y.numel() * 4


def test_max_autotune_triton_mm_template_flops() -> None:
    """mode="max-autotune-no-cudagraphs" may pick a Triton mm template: whichever kernel computes
    the matmul (template or extern) carries FlopCounterMode's count, exactly once."""
    from torch.utils.flop_counter import FlopCounterMode

    def f(a, b):
        return torch.relu(a @ b)

    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.bfloat16)
    with FlopCounterMode(display=False) as fc:
        f(a, b)
    run = run_compiled(f, (a, b), "inductor_perf", backward=False, mode="max-autotune-no-cudagraphs")
    tags = _tags(run)
    assert sum(evaluate(k.matmul_flops) for k in tags) == fc.get_total_flops() == 2 * 1024 * 512 * 768


def test_bf16_autocast_attention_and_conv_training_flops() -> None:
    """bf16 autocast, SDPA (flash / cuDNN attention on the GPU), cuDNN convolution: forward and
    backward matmul-like FLOPs per graph equal FlopCounterMode's."""
    from conftest import AttentionBlock, ConvNet
    from torch.utils.flop_counter import FlopCounterMode

    for factory, shape in ((AttentionBlock, (4, 128, 64)), (ConvNet, (8, 3, 8, 8))):
        torch.manual_seed(0)
        model = factory(*((64, 4) if factory is AttentionBlock else ())).cuda()
        x = torch.randn(*shape, device="cuda", requires_grad=factory is AttentionBlock)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with FlopCounterMode(display=False) as fwd:
                out = model(x)
        with FlopCounterMode(display=False) as bwd:
            out.float().sum().backward()
        model.zero_grad()
        x.grad = None
        before = set(g.instance_id for g in __import__("inductor_perf").graph_table())
        compiled = torch.compile(model, backend="inductor_perf")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = compiled(x)
        out.float().sum().backward()
        graphs = [g for g in __import__("inductor_perf").graph_table() if g.instance_id not in before]
        assert graphs and all(g.tagged for g in graphs), [g.error for g in graphs]
        got_f = sum(evaluate(k.matmul_flops) for g in graphs if not g.is_backward for k in g.kernels)
        got_b = sum(evaluate(k.matmul_flops) for g in graphs if g.is_backward for k in g.kernels)
        assert (got_f, got_b) == (fwd.get_total_flops(), bwd.get_total_flops()), factory.__name__
        dtypes = {d for g in graphs for k in g.kernels for n in k.nodes for d in n.dtypes}
        assert "bfloat16" in dtypes


def test_dynamic_batch_tags_evaluate_per_call() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32)).cuda()
    before = set(g.instance_id for g in __import__("inductor_perf").graph_table())
    compiled = torch.compile(model, backend="inductor_perf", dynamic=True)
    with torch.no_grad():
        compiled(torch.randn(8, 64, device="cuda"))
    graphs = [g for g in __import__("inductor_perf").graph_table() if g.instance_id not in before]
    (g,) = graphs
    assert g.symbol_locators, "a dynamic graph locates its size symbols in the inputs"
    for n in (8, 24, 100):
        x = torch.randn(n, 64, device="cuda")
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            model(x)
        values = {name: n for name in g.symbol_locators}  # the batch is the only dynamic size
        assert sum(evaluate(k.evaluated(values).matmul_flops) for k in g.kernels) == fc.get_total_flops()


def test_env_var_capture_tags_every_kernel_event(tmp_path) -> None:
    """The env-var capture on CUDA: every device kernel of the compiled graphs carries our cost args,
    the summary names the GPU and gives % of peak."""
    import json

    from conftest import run_child

    code = """
import json, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
x = torch.randn(64, 256, device="cuda")
c = torch.compile(m, backend="inductor_perf")
for _ in range(6):
    c(x).sum().backward()
torch.cuda.synchronize()
print("JSON:" + json.dumps({"ok": True}))
"""
    run_child(code, env={"INDUCTOR_PERF_TRACE_DIR": str(tmp_path)})
    (summary,) = tmp_path.glob("*.summary.json")
    (trace,) = tmp_path.glob("*.trace.json.gz")
    import gzip

    events = json.load(gzip.open(trace, "rt"))["traceEvents"]
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel"]
    compiled = [e for e in kernels if e["name"].startswith("triton_") or "gemm" in e["name"].lower()
                or e["name"].startswith(("nvjet", "sm90", "cutlass"))]
    assert compiled and all("kernel_flop" in e["args"] for e in compiled), \
        [e["name"] for e in compiled if "kernel_flop" not in e["args"]]
    s = json.loads(summary.read_text())
    assert s["peak"]["device"] and "H100" in s["peak"]["device"] or "H200" in s["peak"]["device"]
    assert s["flops_pct_of_peak"] is not None and s["bandwidth_pct_of_peak"] is not None


def test_env_var_capture_gives_a_sync_outside_compiled_code_its_line(tmp_path) -> None:
    """``loss.item()`` in the training loop, outside compiled code: on Python 3.12+ the capture's call
    marker (capture/sync_calls.py) gives the sync finding that line; before 3.12 its line is unknown.
    Likewise the pageable copies of ``host.cuda()`` and ``static.copy_(host)`` and their memcpy
    findings, one a line. The expected lines are read
    from the script's text; after the window the sys.monitoring tool is free."""
    import gzip
    import json
    import sys

    from conftest import run_child

    code = """
import json, sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).cuda()
host = torch.randn(32, 256)
static = torch.empty(32, 256, device="cuda")
c = torch.compile(m, backend="inductor_perf")
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
for _ in range(10):
    x = host.cuda()  # the planted pageable copy
    static.copy_(host)  # the planted copy into a static buffer
    loss = c(x + static).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    value = loss.item()  # the planted sync
torch.cuda.synchronize()
mon = getattr(sys, "monitoring", None)
print("JSON:" + json.dumps({"tools": [mon.get_tool(t) for t in (3, 4)] if mon else []}))
"""
    line = 1 + code.splitlines().index("    value = loss.item()  # the planted sync")
    copy_line = 1 + code.splitlines().index("    x = host.cuda()  # the planted pageable copy")
    static_line = 1 + code.splitlines().index("    static.copy_(host)  # the planted copy into a static buffer")
    got = run_child(code, env={"INDUCTOR_PERF_TRACE_DIR": str(tmp_path)})
    assert got["tools"] == ([None, None] if sys.version_info >= (3, 12) else [])
    (summary,) = tmp_path.glob("*.summary.json")
    findings = json.loads(summary.read_text())["findings"]
    syncs = [f for f in findings if f["kind"] == "sync"]
    assert syncs, "no sync finding"
    copies = [f for f in findings if f["kind"] == "memcpy"]
    assert copies, "no memcpy finding"
    (trace,) = tmp_path.glob("*.trace.json.gz")
    names = {e.get("name") for e in json.load(gzip.open(trace, "rt"))["traceEvents"] if isinstance(e, dict)}
    marker = f"## inductor_perf call=item at=<string>:{line} ##"
    if sys.version_info >= (3, 12):
        assert marker in names
        assert f"<string>:{line}" in [f["source"] for f in syncs], [f["title"] for f in syncs]
        assert sorted(f["source"] for f in copies) == sorted(f"<string>:{n}" for n in (copy_line, static_line)), \
            [f["title"] for f in copies]
    else:
        assert marker not in names and None in [f["source"] for f in syncs]
        assert [f["source"] for f in copies] == [None]
