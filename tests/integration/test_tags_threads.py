"""Two threads compiling at once: each graph gets all its tags, and no hook outlives the compiles.

The hooks (the provenance wrapper in Inductor's modules, the silent externs' codegen methods) are
process-wide: installed by the first compile that collects and removed by the last. Dynamo's
``compile_lock`` serializes compiles made through ``torch.compile`` (torch 2.13: frames and lazy
backward graphs), so overlapping inner compiles come from callers outside it - a backend that runs
``compile_fx`` in threads (pytorch#168042 does) - which the second test plays, holding each thread at
its first kernel so the two compiles really overlap.

Expected bytes by hand (docs/costs.md: a generated kernel reads and writes its buffers; an extern
scatter reads its index and source, and writes as many elements of ``self`` as its source has, read
too when it accumulates).
"""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from inductor_perf.model.tags import REGISTRY, evaluate


class Scatter(torch.nn.Module):
    def forward(self, x, idx):
        return x.new_zeros(4, 16).scatter_reduce(0, idx, x * 2, reduce="amax", include_self=False)


class IndexPut(torch.nn.Module):
    def forward(self, x, idx):
        # int64 values: up to torch 2.14 Inductor cannot add them atomically on the CPU, so index_put_
        # stays an extern call; torch 2.15 fuses it into a generated kernel (_index_put_form)
        return x.new_zeros(4, 16).index_put((idx,), x * 2, accumulate=True)  # x is int64


def _inputs(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if name == "scatter":
        return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8, 16), generator=g)
    return torch.randint(0, 9, (8, 16), generator=g), torch.randint(0, 4, (8,), generator=g)


# (kind, op, bytes read, bytes written) per kernel, in call order
EXPECTED = {
    # x*2 and zeros in one kernel: read x 8·16·4 = 512; write zeros 4·16·4 = 256 + x*2 512.
    # scatter_reduce_: read index 8·16·8 = 1024 + source 512 + the 128 floats it updates (amax
    # accumulates) 512; write 128·4 = 512.
    "scatter": [("generated", None, 512, 768), ("extern", "aten.scatter_reduce_.two", 2048, 512)],
    "index_put": [],  # by the form Inductor chose: _index_put_form
}
INDEX_PUT_FORMS = {
    # x*2 and zeros (int64): read x 8·16·8 = 1024; write zeros 4·16·8 = 512 + x*2 1024.
    # index_put_(accumulate=True): read indices 8·8 = 64 + values 1024 + the 128 int64 it updates
    # 1024; write 128·8 = 1024.
    "extern": [("generated", None, 1024, 1536), ("extern", "aten.index_put_.default", 2112, 1024)],
    # one kernel: zeros, x*2 and the accumulation, the buffer never read from memory: read indices
    # 64 + x 1024; write the 4·16 int64 result 512.
    "fused": [("generated", None, 1088, 512)],
}


def _index_put_form() -> str:
    """Whether Inductor calls aten.index_put_ or generates the accumulation itself, read from the code
    plain Inductor writes for the model (not from our tags)."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    with torch.no_grad():
        _, code = run_and_get_code(torch.compile(IndexPut()), *_inputs("index_put"))
    torch._dynamo.reset()
    return "extern" if any("aten.index_put_" in c for c in code) else "fused"


def _expected() -> dict[str, list]:
    return {**EXPECTED, "index_put": INDEX_PUT_FORMS[_index_put_form()]}


def _kernels(graphs) -> list[tuple]:
    (g,) = graphs
    assert g.tagged, g.error
    return [(k.kind, k.op, evaluate(k.bytes_read), evaluate(k.bytes_written)) for k in g.kernels]


def _assert_nothing_patched() -> None:
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    from inductor_perf.tagging.collector import HOOK_MODULES, HOOK_NAME, SILENT_EXTERNS

    for name in HOOK_MODULES:
        mod = sys.modules.get(name)
        hook = getattr(mod, HOOK_NAME, None)
        assert not hasattr(hook, "_inductor_perf_original"), f"{name}.{HOOK_NAME} left wrapped"
    for name in SILENT_EXTERNS:
        method = PythonWrapperCodegen.__dict__.get(name)
        assert not hasattr(method, "_inductor_perf_original"), f"PythonWrapperCodegen.{name} left wrapped"


def _run_threads(work, start=None) -> dict[str, list]:
    """Run ``work(name)`` for both models on two threads, each starting when ``start(name)``
    returns (default: both at once); the graphs compiled meanwhile, by model."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)
    before = {g.instance_id for g in REGISTRY.graphs()}

    def run(name: str) -> None:
        try:
            if start is None:
                barrier.wait(timeout=60)
            else:
                start(name)
            work(name)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,), name=n) for n in EXPECTED]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    graphs: dict[str, list] = {name: [] for name in EXPECTED}
    for g in REGISTRY.graphs():
        if g.instance_id not in before:
            graphs[_model_of(g)].append(g)
    return graphs


def _model_of(graph) -> str:
    """Which model a graph is: index_put's nodes are int64, scatter's float32."""
    dtypes = {d for k in graph.kernels for n in k.nodes for d in n.dtypes}
    return "index_put" if "int64" in dtypes and "float32" not in dtypes else "scatter"


def test_two_threads_torch_compile_at_once() -> None:
    torch._dynamo.reset()
    # torch registers an entry-point backend on first lookup without a lock: two threads looking
    # "inductor_perf" up first at once make one of them fail with "duplicate name" (torch 2.13).
    torch._dynamo.lookup_backend("inductor_perf")
    models = {"scatter": Scatter(), "index_put": IndexPut()}

    def work(name: str) -> None:
        with torch._inductor.config.patch(fx_graph_cache=False), torch.no_grad():
            torch.compile(models[name], backend="inductor_perf")(*_inputs(name))

    graphs = _run_threads(work)
    expected = _expected()
    for name in EXPECTED:
        assert _kernels(graphs[name]) == expected[name], name
    _assert_nothing_patched()


def test_overlapping_inner_compiles_keep_every_tag(monkeypatch) -> None:
    """Thread index_put starts compiling; once it generates code, thread scatter starts (tracing a
    graph is not thread-safe in torch: make_fx patches globals, so only codegen overlaps here),
    and index_put finishes while scatter is still generating code: scatter's silent extern
    (ScatterFallback) is emitted after index_put's compile ended."""
    from inductor_perf.tagging import collector as tagging
    from inductor_perf.backend import inductor_perf_backend

    in_codegen, scatter_started, index_put_done = threading.Event(), threading.Event(), threading.Event()
    overlapped: dict[str, bool] = {}
    original = tagging.TagCollector.on_kernel

    def on_kernel(self, *args):
        name = threading.current_thread().name
        if name not in overlapped:
            if name == "index_put":  # hold index_put in its codegen until scatter is in its own
                in_codegen.set()
                overlapped[name] = scatter_started.wait(timeout=120)
            else:
                scatter_started.set()
                overlapped[name] = index_put_done.wait(timeout=120)
        return original(self, *args)

    monkeypatch.setattr(tagging.TagCollector, "on_kernel", on_kernel)
    traced = {"scatter": torch.fx.symbolic_trace(Scatter()), "index_put": torch.fx.symbolic_trace(IndexPut())}

    def start(name: str) -> None:
        if name == "scatter":
            assert in_codegen.wait(timeout=120)

    def work(name: str) -> None:
        try:
            with torch.no_grad():
                inductor_perf_backend(traced[name], list(_inputs(name)))
        finally:
            if name == "index_put":
                index_put_done.set()

    # torch's config objects are patched with their own patch() (monkeypatch would delete their keys)
    with torch._functorch.config.patch(enable_autograd_cache=False), \
            torch._inductor.config.patch(fx_graph_cache=False):
        graphs = _run_threads(work, start)
    assert overlapped == {"index_put": True, "scatter": True}  # the two compiles really overlapped
    expected = _expected()
    for name in EXPECTED:
        assert _kernels(graphs[name]) == expected[name], name
    _assert_nothing_patched()


@pytest.fixture(autouse=True)
def _no_hooks_before() -> None:
    _assert_nothing_patched()
