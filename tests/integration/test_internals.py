"""Fail loudly when an Inductor internal that inductor_perf relies on moves or changes shape.

Each check names what uses the internal, so a failure after a torch upgrade points at the code to
revisit. The first test runs the backend's own checks (inductor_perf.compat.INTERNALS, what it
verifies at the first compile); the others restate them independently, by hand.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from inductor_perf import compat


@pytest.mark.parametrize("internal", compat.INTERNALS, ids=lambda i: i.name)
def test_backend_check_passes_on_installed_torch(internal) -> None:
    assert compat.check_internal(internal) is None, internal.used_by


def test_backend_support_enables_tagging() -> None:
    support = compat.backend_support()
    assert support.tagging and support.missing == ()


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_provenance_hook_exists_with_expected_parameters() -> None:
    # tagging/collector.py wraps it to see every kernel call site at codegen time
    import torch._inductor.debug as debug

    fn = getattr(debug, "set_kernel_post_grad_provenance_tracing")
    assert _params(fn)[:3] == ["node_schedule", "kernel_name", "is_extern"]


def test_cpp_codegen_holds_the_hook_by_name() -> None:
    # so tagging.collector.collecting must patch torch._inductor.codegen.cpp as well as debug
    import torch._inductor.codegen.cpp as cpp
    import torch._inductor.debug as debug

    assert hasattr(cpp, "set_kernel_post_grad_provenance_tracing")
    assert cpp.set_kernel_post_grad_provenance_tracing is debug.set_kernel_post_grad_provenance_tracing


def test_hook_is_restored_after_a_compile() -> None:
    # our wrapper must not outlive our compile (other backends never see it)
    import torch._inductor.codegen.cpp as cpp
    import torch._inductor.debug as debug

    from inductor_perf.tagging.collector import HOOK_MODULES, TagCollector, collecting

    before = {m: getattr(__import__(m, fromlist=["x"]), "set_kernel_post_grad_provenance_tracing")
              for m in HOOK_MODULES if _importable(m)}
    with collecting(TagCollector(graph_id=0, is_backward=False)):
        assert cpp.set_kernel_post_grad_provenance_tracing is not before["torch._inductor.codegen.cpp"]
    assert debug.set_kernel_post_grad_provenance_tracing is before["torch._inductor.debug"]
    assert cpp.set_kernel_post_grad_provenance_tracing is before["torch._inductor.codegen.cpp"]


def _importable(name: str) -> bool:
    try:
        __import__(name)
        return True
    except Exception:  # triton codegen may be unimportable without triton
        return False


def test_compiled_fx_graph_attributes() -> None:
    # tagging.instrument.instrument wraps current_callable; backend reads _fx_graph_cache_key
    import dataclasses

    from torch._inductor.output_code import CompiledFxGraph

    fields = {f.name for f in dataclasses.fields(CompiledFxGraph)}
    assert {"current_callable", "_fx_graph_cache_key"} <= fields


def test_compile_fx_accepts_inner_compile_and_config_patches() -> None:
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    from torch._inductor.compile_fx import _CompileFxKwargs

    params = _params(compile_fx)
    assert "inner_compile" in params and "config_patches" in params
    assert _params(compile_fx_inner)[:2] == ["gm", "example_inputs"]
    # _tagging_inner_compile reads these keyword arguments of inner_compile
    assert {"graph_id", "is_backward", "cpp_wrapper"} <= set(_CompileFxKwargs.__annotations__)


def test_kernel_args_buffers() -> None:
    # tagging.kernel_io.kernel_args_bytes reads the kernel's buffers
    from torch._inductor.codegen.common import KernelArgs, RemovedArg  # noqa: F401

    args = KernelArgs()
    for attr in ("input_buffers", "output_buffers", "inplace_buffers"):
        assert isinstance(getattr(args, attr), dict), attr


def test_autograd_cache_switch_exists() -> None:
    # tagging.aot_cache.serving turns the AOTAutograd cache off where a hit cannot be served with its
    # tags (a hit skips inner_compile)
    assert hasattr(torch._functorch.config, "enable_autograd_cache")
    with torch._functorch.config.patch(enable_autograd_cache=False):
        assert torch._functorch.config.enable_autograd_cache is False


def test_aot_autograd_cache_hit_loads_each_graph_through_a_loadable() -> None:
    # tagging.aot_cache wraps these load methods while our compiles run, tells a backward by its class,
    # raises FXGraphCacheMiss to turn a hit without stored tags into a miss, and reads the graph id
    # the compile took off compile_fx's counter
    import itertools

    import torch._functorch._aot_autograd.aot_autograd_result as result
    from torch._functorch._aot_autograd.autograd_cache import (AOTAutogradCache, BypassAOTAutogradCache,
                                                               FXGraphCacheMiss)
    from torch._inductor import compile_fx

    for cls in (result.FxGraphCacheLoadable, result.BundledOutputCodeLoadable):
        assert _params(cls.__dict__["load"]) == ["self", "example_inputs"]
    for cls in (result.CompiledBackward, result.BundledCompiledBackward):
        assert issubclass(cls, result.GenericCompiledBackward)
    for cls in (result.CompiledForward, result.BundledCompiledForward):
        assert not issubclass(cls, result.GenericCompiledBackward)
    assert "num_symints_saved_for_bw_" in result.GenericCompiledBackward.__dataclass_fields__
    assert issubclass(FXGraphCacheMiss, BypassAOTAutogradCache)
    source = inspect.getsource(AOTAutogradCache.try_load)
    assert 'counters["aot_autograd"]["autograd_cache_hit"]' in source and "except FXGraphCacheMiss" in source
    assert isinstance(compile_fx._graph_counter, itertools.count)


def test_custom_graph_pass_and_fx_cache_counters() -> None:
    # tagging.compiler._namespace_pass subclasses CustomGraphPass; _cache_hits reads this counter
    from torch._dynamo.utils import counters
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    assert {"__call__", "uuid"} <= set(dir(CustomGraphPass))
    assert hasattr(config, "post_grad_custom_post_pass")
    assert isinstance(counters["inductor"]["fxgraph_cache_hit"], int)


def test_flop_registry_and_our_own_formulas_never_overlap() -> None:
    # costs/ops/convention.py fills flop_registry's gaps (CPU flash attention before torch 2.15, mkldnn/mkl ops);
    # where torch has a formula, ours must not be used, so an op is never counted twice.
    from torch.utils.flop_counter import flop_registry

    from inductor_perf.costs.ops import convention

    aten = torch.ops.aten
    for packet in (aten.mm, aten.addmm, aten.bmm, aten.convolution, aten.convolution_backward):
        assert packet in flop_registry
    for packet in (aten._scaled_dot_product_flash_attention_for_cpu,
                   aten._scaled_dot_product_flash_attention_for_cpu_backward):
        formula = convention.matmul_formula(packet.default)
        assert formula is not None
        if packet in flop_registry:
            assert formula is flop_registry[packet]
        else:
            assert formula is convention._extras()[packet]
