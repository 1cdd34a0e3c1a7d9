"""The backend itself: entry-point registration, numerics, options=, mode=, training graphs."""

from __future__ import annotations

import pytest
import torch
from conftest import run_child, run_compiled

ENTRY_POINT_CHILD = r"""
import json, sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
x = torch.randn(4, 8)
loaded_before = "inductor_perf" in sys.modules
with torch.no_grad():
    ref = m(x)
    y = torch.compile(m, backend="inductor_perf")(x)
import inductor_perf
graphs = inductor_perf.graph_table()
print("JSON:" + json.dumps({
    "loaded_before": loaded_before,
    "close": bool(torch.allclose(y, ref, atol=1e-6, rtol=1e-5)),
    "graphs": len(graphs),
    "tagged": [g.tagged for g in graphs],
    "kernels": sum(len(g.kernels) for g in graphs),
}))
"""


def test_entry_point_needs_no_import() -> None:
    """torch finds the backend through the torch_dynamo_backends entry point alone."""
    r = run_child(ENTRY_POINT_CHILD)
    assert r["loaded_before"] is False
    assert r["close"] is True
    assert r["graphs"] == 1 and r["tagged"] == [True]
    assert r["kernels"] >= 1


@pytest.mark.parametrize("name", ["mlp", "conv", "attn"])
def test_numerics_equal_inductor(name: str, request: pytest.FixtureRequest) -> None:
    perf = request.getfixturevalue(f"{name}_perf")
    ind = request.getfixturevalue(f"{name}_inductor")
    torch.testing.assert_close(perf.output, ind.output)
    assert perf.grads.keys() == ind.grads.keys() and perf.grads
    for key in perf.grads:
        torch.testing.assert_close(perf.grads[key], ind.grads[key], msg=f"gradient of {key}")


def test_training_tags_forward_and_backward(mlp_perf) -> None:
    assert len(mlp_perf.fwd) == 1 and len(mlp_perf.bwd) == 1
    fwd, bwd = mlp_perf.fwd[0], mlp_perf.bwd[0]
    assert fwd.tagged and bwd.tagged, (fwd.error, bwd.error)
    assert fwd.graph_id == bwd.graph_id
    assert fwd.kernels and bwd.kernels
    assert all(not k.is_backward for k in fwd.kernels)
    assert all(k.is_backward for k in bwd.kernels)
    # call_index is the position among the graph's call sites
    assert [k.call_index for k in fwd.kernels] == list(range(len(fwd.kernels)))


def _chain(exc: BaseException) -> list[BaseException]:
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def test_unknown_option_lists_valid_keys() -> None:
    from inductor_perf.errors import OptionsError

    f = torch.compile(lambda x: x + 1, backend="inductor_perf", options={"not_a_real_key": 1})
    with pytest.raises(Exception) as info:
        f(torch.randn(3))
    # Dynamo wraps backend errors (BackendCompilerFailed): assert on the message.
    msg = str(info.value)
    assert "not_a_real_key" in msg
    assert "Valid keys" in msg and "inductor_perf.tagging" in msg and "inductor_perf.kernel_profile" in msg
    assert any(isinstance(e, OptionsError) for e in _chain(info.value))


def test_misspelled_option_suggests_the_right_one() -> None:
    f = torch.compile(lambda x: x + 2, backend="inductor_perf", options={"inductor_perf.taging": False})
    with pytest.raises(Exception) as info:
        f(torch.randn(3))
    assert "Did you mean" in str(info.value) and "inductor_perf.tagging" in str(info.value)


def test_ill_typed_option_says_what_is_expected() -> None:
    f = torch.compile(lambda x: x + 3, backend="inductor_perf", options={"inductor_perf.kernel_profile": "yes"})
    with pytest.raises(Exception) as info:
        f(torch.randn(3))
    assert "'inductor_perf.kernel_profile' must be True, False or 'auto'" in str(info.value)


def test_unknown_mode_is_rejected() -> None:
    f = torch.compile(lambda x: x + 4, backend="inductor_perf", mode="fastest-please")
    with pytest.raises(Exception) as info:
        f(torch.randn(3))
    assert "unknown mode 'fastest-please'" in str(info.value) and "max-autotune" in str(info.value)


def test_inductor_option_passes_through(mlp_perf) -> None:
    """An Inductor config key reaches Inductor: with fx_graph_cache off, no graph has a cache key
    (with the default on, the same model's graphs do)."""
    from conftest import make

    assert all(g.cache_key for g in mlp_perf.graphs)
    model, inputs = make("mlp")
    run = run_compiled(model, inputs, "inductor_perf", options={"fx_graph_cache": False})
    assert len(run.graphs) == 2
    assert all(g.tagged and g.kernels for g in run.graphs)
    assert all(g.cache_key is None for g in run.graphs)


def test_mode_max_autotune_no_cudagraphs_accepted() -> None:
    def f(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(64)
    run = run_compiled(f, (x,), "inductor_perf", backward=False, mode="max-autotune-no-cudagraphs")
    torch.testing.assert_close(run.output, f(x))
    assert len(run.graphs) == 1 and run.graphs[0].tagged
    assert [k.kind for k in run.graphs[0].kernels] == ["generated"]


# --- compile variants: graph breaks, recompiles, cpp_wrapper, freezing --------------------------
class _Broken(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        return self.b(y).sin()


def test_graph_break_gives_two_tagged_forward_graphs() -> None:
    torch.manual_seed(0)
    model, x = _Broken(), torch.randn(4, 8)
    run = run_compiled(model, (x,), "inductor_perf", backward=False)
    torch.testing.assert_close(run.output, model(x))
    assert len(run.fwd) == 2 and not run.bwd
    assert all(g.tagged and g.kernels for g in run.fwd)
    assert len({g.graph_id for g in run.fwd}) == 2
    # fc a: 2·4·8·8 in the first graph, fc b: 2·4·8·4 in the second
    flops = sorted(sum(k.matmul_flops for k in g.kernels) for g in run.fwd)
    assert flops == [256, 512]


def test_recompile_is_tagged_again() -> None:
    def f(x):
        return (x * 3).cos()

    c = torch.compile(f, backend="inductor_perf")
    from conftest import graph_ids, new_graphs

    before = graph_ids()
    with torch.no_grad():
        c(torch.randn(16))
        c(torch.randn(16, dtype=torch.float64))  # dtype change: guard fails, recompile
    graphs = new_graphs(before)
    assert len(graphs) == 2 and all(g.tagged for g in graphs)
    # 16 elements read + written: 4-byte floats, then 8-byte doubles
    assert [k.bytes_read + k.bytes_written for g in graphs for k in g.kernels] == [128, 256]


def test_cpp_wrapper_tags_complete_with_shim_names(mlp_perf) -> None:
    from conftest import make

    model, inputs = make("mlp")
    run = run_compiled(model, inputs, "inductor_perf", options={"cpp_wrapper": True})
    assert len(run.graphs) == 2 and all(g.tagged for g in run.graphs)
    # same call sites and costs as the Python wrapper, one compiled graph at a time
    for ours, ref in zip(run.graphs, mlp_perf.graphs):
        assert [(k.kind, k.flops, k.matmul_flops, k.bytes_read, k.bytes_written) for k in ours.kernels] \
            == [(k.kind, k.flops, k.matmul_flops, k.bytes_read, k.bytes_written) for k in ref.kernels]
    extern = [k for g in run.graphs for k in g.kernels if k.kind == "extern"]
    assert extern
    for k in extern:
        # under cpp_wrapper the trace shows the C shim, e.g. aoti_torch_cpu_addmm_out
        assert k.profiler_name.startswith("aoti_torch_cpu_"), k.profiler_name
        assert k.profiler_name.endswith("_out")


class _ConvLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def test_freezing_mkldnn_ops_are_tagged() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model, x = _ConvLinear().eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        ref = model(x)
    with torch.no_grad():
        run = run_compiled(model, (x,), "inductor_perf", backward=False, options={"freezing": True})
    torch.testing.assert_close(run.output, ref, rtol=1e-4, atol=1e-4)
    assert len(run.graphs) == 1 and run.graphs[0].tagged, run.graphs[0].error
    kernels = run.graphs[0].kernels
    ops = [k.op for k in kernels if k.kind == "extern"]
    assert any(op and ("mkldnn" in op or "mkl" in op or "convolution" in op) for op in ops), ops
    assert sum(k.matmul_flops for k in kernels) == fc.get_total_flops() > 0


class _Stop(Exception):
    pass


def _record_warm_and_check(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record, in order, when the backend starts Inductor's compile workers and when it checks torch;
    the check raises to end the compile there."""
    from torch._inductor import async_compile

    from inductor_perf import compat

    calls: list[str] = []
    monkeypatch.setattr(async_compile, "maybe_warm_pool", lambda: calls.append("warm"))

    def check() -> None:
        calls.append("check")
        raise _Stop

    monkeypatch.setattr(compat, "backend_support", check)
    return calls


def test_gpu_graph_starts_compile_workers_before_our_torch_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from inductor_perf.backend import inductor_perf_backend

    calls = _record_warm_and_check(monkeypatch)
    with FakeTensorMode():  # a CUDA input without a GPU
        x = torch.empty(4, 8, device="cuda")
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    with pytest.raises(_Stop):
        inductor_perf_backend(gm, [x])
    assert calls == ["warm", "check"]


def test_cpu_graph_starts_no_compile_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from inductor_perf.backend import inductor_perf_backend

    calls = _record_warm_and_check(monkeypatch)
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    with pytest.raises(_Stop):
        inductor_perf_backend(gm, [torch.randn(4, 8), 3])
    assert calls == ["check"]


def test_compile_workers_that_fail_to_start_do_not_fail_the_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._inductor import async_compile
    from torch._subclasses.fake_tensor import FakeTensorMode

    from inductor_perf.tagging.compiler import warm_compile_pool

    def broken() -> None:
        raise RuntimeError("no pool here")

    monkeypatch.setattr(async_compile, "maybe_warm_pool", broken)
    with FakeTensorMode():
        x = torch.empty(2, device="cuda")
    warm_compile_pool([x])  # logs at debug level, raises nothing
    monkeypatch.delattr(async_compile, "maybe_warm_pool")  # a torch without the internal
    warm_compile_pool([x])
