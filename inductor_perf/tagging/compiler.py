"""The compile of the ``inductor_perf`` backend: Inductor's compile_fx, plus compile-time kernel tags.

The backend itself (the ``torch_dynamo_backends`` entry point) is :mod:`inductor_perf.backend`: it calls
:func:`compile_tagged` with the :class:`StageHooks` through which a compile reaches what lies outside
tagging (arming the ``INDUCTOR_PERF_TRACE_DIR`` capture, checking an ``inductor_perf.device``
override). So tagging/ imports only what decides a tag, and the tag cache key (:mod:`.store`),
which hashes tagging/'s code, changes with a cost rule but not with the capture or the device table.

Tagging never breaks a compile: if it fails, the graph keeps Inductor's result, one warning is
logged for the process, and the graph is recorded as untagged (see ``inductor_perf.graph_table()``).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from . import store as tag_store
from .. import config as env
from ..errors import OptionsError
from ..model.tags import REGISTRY, GraphTags, KernelTag

log = logging.getLogger(__name__)

# Our own keys in torch.compile(options=...); every other key must be an Inductor config key.
OUR_OPTIONS: dict[str, str] = {
    "inductor_perf.tagging": "bool (default True): collect kernel tags",
    "inductor_perf.kernel_profile": "bool or 'auto' (default): name CPU kernels in profiler traces "
                                    "(auto: on when INDUCTOR_PERF_TRACE_DIR is set or a capture is active)",
    "inductor_perf.device": "dict or path to a JSON/TOML file: device peaks to use instead of the detected ones",
    "inductor_perf.markers": "bool (default True): per-call profiler markers that join kernels to tags",
}

_warned_lock = threading.Lock()
_warned = False


def _warn_once(msg: str, *args: Any) -> None:
    global _warned
    with _warned_lock:
        first, _warned = not _warned, True
    if first:
        log.warning(msg + " (further tagging failures are logged at debug level)", *args)
    else:
        log.debug(msg, *args)


def split_options(options: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(our options, Inductor config patches). Raises OptionsError naming the valid keys."""
    if options is None:
        return {}, {}
    if not isinstance(options, Mapping):
        raise OptionsError(f"options must be a dict, got {type(options).__name__}")
    from torch._inductor import config as inductor_config

    valid = set(inductor_config.get_config_copy())
    ours: dict[str, Any] = {}
    patches: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise OptionsError(f"options keys must be strings, got {key!r}")
        if key in OUR_OPTIONS:
            ours[key] = value
            continue
        attr = key.replace("-", "_")
        if attr in valid:
            patches[attr] = value
            continue
        near = difflib.get_close_matches(attr, list(valid) + list(OUR_OPTIONS), n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        err = OptionsError(
            f"unknown option {key!r}.{hint} Valid keys: {', '.join(OUR_OPTIONS)}, or any of the "
            f"{len(valid)} torch._inductor.config keys (torch._inductor.list_options())."
        )
        err.valid_keys = sorted(OUR_OPTIONS) + sorted(valid)  # type: ignore[attr-defined]
        raise err
    tagging = ours.get("inductor_perf.tagging", True)
    if not isinstance(tagging, bool):
        raise OptionsError(f"'inductor_perf.tagging' must be a bool, got {tagging!r}")
    kp = ours.get("inductor_perf.kernel_profile", "auto")
    if kp not in (True, False, "auto"):
        raise OptionsError(f"'inductor_perf.kernel_profile' must be True, False or 'auto', got {kp!r}")
    markers = ours.get("inductor_perf.markers", True)
    if not isinstance(markers, bool):
        raise OptionsError(f"'inductor_perf.markers' must be a bool, got {markers!r}")
    return ours, patches


def mode_patches(mode: str | None) -> dict[str, Any]:
    """Inductor config patches for a torch.compile ``mode=``, as backend="inductor" applies them."""
    if mode is None or mode == "default":
        return {}
    from torch._inductor import list_mode_options

    modes = list_mode_options()
    if mode not in modes:
        raise OptionsError(f"unknown mode {mode!r}; expected one of {', '.join(sorted(modes))}")
    return dict(list_mode_options(mode))


def _kernel_profile_wanted(ours: Mapping[str, Any]) -> bool:
    kp = ours.get("inductor_perf.kernel_profile", "auto")
    if kp != "auto":
        return bool(kp)
    from .instrument import capture_requested  # also true when INDUCTOR_PERF_TRACE_DIR is set

    return capture_requested()


def _nothing(*args: Any) -> None:
    return None


@dataclass(frozen=True)
class StageHooks:
    """What a compile asks of the stages outside tagging, passed in by :mod:`inductor_perf.backend`
    (the defaults do nothing: a compile with them tags as usual, arms no capture, checks no device row).

    ``arm_capture()``: arm the ``INDUCTOR_PERF_TRACE_DIR`` capture (called when that variable is set;
    an exception becomes one warning). ``check_device(override)``: raise for a bad
    ``inductor_perf.device`` row, saying what is wrong (it then fails the compile)."""

    arm_capture: Callable[[], Any] = _nothing
    check_device: Callable[[Any], Any] = _nothing


def options_digest(ours: Mapping[str, Any]) -> str:
    """A digest of our options (:data:`OUR_OPTIONS` keys given to this compile), for cache keys."""
    import hashlib
    import json

    text = json.dumps({k: ours[k] for k in sorted(ours)}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _namespace_pass(existing: Any, ours: Mapping[str, Any]) -> Any:
    """A post-grad pass that changes nothing but puts our cache entries in their own namespace: its
    uuid enters the FX graph cache key and the AOTAutograd cache key (both hash Inductor's config),
    so an entry written by plain backend="inductor" - which skips codegen and so our hook - is never
    served to us, nor one written by other tagging code (the hash of tagging/) or under other options
    of ours. Wraps a user's own pass."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    options = options_digest(ours)

    class _InductorPerfNamespace(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            if existing is not None:
                existing(graph)

        def uuid(self) -> Any:
            inner = existing.uuid() if existing is not None and hasattr(existing, "uuid") else None
            if existing is not None and inner is None:
                return None  # the user's pass is not cacheable: neither are we
            return f"inductor_perf-{tag_store.tag_code_hash()}-{options}-{inner}"

    return _InductorPerfNamespace()


def warm_compile_pool(example_inputs: Sequence[Any]) -> None:
    """Start Inductor's Triton compile workers now when the graph has a GPU input.

    Inductor compiles a Triton kernel in a worker only once its pool answers; until then it compiles
    in this process, one kernel after another. ``compile_fx`` wakes the pool when it starts, after
    what runs before it, here our first-compile torch check; started here, the pool comes up while
    the check runs (torch's registered ``"inductor"`` backend function likewise starts it first
    thing). A CPU graph starts nothing (``compile_fx`` does not either), and a torch without the
    internal skips it: it only saves time."""
    if not any(getattr(getattr(e, "device", None), "type", None) in ("cuda", "xpu") for e in example_inputs):
        return
    try:
        from torch._inductor.async_compile import maybe_warm_pool

        maybe_warm_pool()
    except Exception as e:  # an optional speed-up: the compile wakes the pool itself
        log.debug("inductor_perf: could not start Inductor's compile workers early (%s)", e)


def compile_tagged(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                   options: Mapping[str, Any] | None = None, mode: str | None = None,
                   hooks: StageHooks = StageHooks(), **kwargs: Any) -> Any:
    """Inductor's compile_fx with kernel tagging: the body of ``backend="inductor_perf"``
    (:func:`inductor_perf.backend.inductor_perf_backend`); ``kwargs`` go to compile_fx."""
    warm_compile_pool(example_inputs)
    from ..compat import backend_support

    support = backend_support()  # raises for torch older than we support; warns once otherwise
    ours, patches = split_options(options)
    patches = {**mode_patches(mode), **patches}
    device_override = ours.get("inductor_perf.device")
    if device_override is not None:
        hooks.check_device(device_override)  # a bad row fails the compile, saying what is wrong
    from torch._inductor.compile_fx import compile_fx

    tagging = ours.get("inductor_perf.tagging", True) and not env.get_flag(env.DISABLE_TAGGING)
    # A torch without an internal we hook: exactly backend="inductor" (backend_support warned once).
    tagging = tagging and support.tagging
    if not tagging:
        return compile_fx(gm, example_inputs, config_patches=patches or None, **kwargs)
    from torch._inductor import config as inductor_config

    patches["post_grad_custom_post_pass"] = _namespace_pass(
        patches.get("post_grad_custom_post_pass", inductor_config.post_grad_custom_post_pass), ours)
    if _kernel_profile_wanted(ours):
        patches.setdefault("cpp.enable_kernel_profile", True)
    kernel_profile = bool(patches.get("cpp.enable_kernel_profile", inductor_config.cpp.enable_kernel_profile))
    if env.get_str(env.TRACE_DIR):
        try:
            hooks.arm_capture()
        except Exception as e:
            _warn_once("inductor_perf: could not arm automatic capture (%s)", e)
    from .module_paths import parameter_names

    markers = ours.get("inductor_perf.markers", True)
    inner = functools.partial(_tagging_inner_compile, markers=markers, kernel_profile=kernel_profile,
                              device_override=device_override, param_names=parameter_names(gm))
    # An AOTAutograd cache hit skips inner_compile entirely: aot_cache serves each graph it loads
    # with its stored tags (or turns the hit into a miss), and we register them here.
    from . import aot_cache

    with aot_cache.serving(support) as recorder:
        compiled = compile_fx(gm, example_inputs, inner_compile=inner, config_patches=patches, **kwargs)
    if recorder is not None:
        _register_served(recorder, markers=markers, kernel_profile=kernel_profile,
                         device_override=device_override)
    return compiled


def _register_served(recorder: Any, *, markers: bool, kernel_profile: bool, device_override: Any) -> None:
    """Register the graphs an AOTAutograd cache hit served, from their stored tags, and install their
    markers: now, or at the first call of a backward that a miss compiles lazily."""
    from . import aot_cache
    from ..compat import current_frame_compile

    served = recorder.served()
    frame = current_frame_compile()
    if served is None:  # a hit our hooks did not see: say so, and list the graph as untagged
        aot_cache.mark_broken("the hit did not load its graphs through the methods we wrap")
        graph = GraphTags(instance_id=REGISTRY.new_instance_id(), graph_id=recorder.graph_id(None),
                          is_backward=False, kernel_profile=kernel_profile, tagged=False,
                          error="served by an AOTAutograd cache hit without its tags",
                          frame_id=frame[0] if frame else None, compile_id=frame[1] if frame else None)
        REGISTRY.add(graph, device_override)
        return
    for s in served:
        register = functools.partial(_register_one, s, graph_id=recorder.graph_id(s.compiled), frame=frame,
                                     markers=markers, kernel_profile=kernel_profile,
                                     device_override=device_override)
        if s.lazy:
            try:
                aot_cache.on_first_call(s.compiled, register)
                continue
            except Exception as e:  # no callable to wrap: register now
                log.debug("inductor_perf: could not defer a served backward's tags (%s)", e)
        register()


def _register_one(served: Any, *, graph_id: int, frame: tuple[int, str] | None, markers: bool,
                  kernel_profile: bool, device_override: Any) -> None:
    """Record one graph a hit served, with the tags stored when it was compiled, and install its marker."""
    compiled = served.compiled
    graph = GraphTags(instance_id=REGISTRY.new_instance_id(), graph_id=graph_id, is_backward=served.is_backward,
                      kernel_profile=kernel_profile, frame_id=frame[0] if frame else None,
                      compile_id=frame[1] if frame else None,
                      cache_key=getattr(compiled, "_fx_graph_cache_key", None), cache_hit=True)
    try:
        if served.stored is None:
            raise RuntimeError(f"AOTAutograd cache hit for FX graph {graph.cache_key} but no stored tags")
        graph.symbol_locators = {k: tuple(v) for k, v in served.stored["symbol_locators"].items()}
        _apply_stored(graph, served.stored)
    except Exception as e:
        graph.tagged, graph.error, graph.kernels = False, f"{type(e).__name__}: {e}", []
        _warn_once("inductor_perf: kernel tagging failed for graph %s (%s); the compiled model is "
                   "unaffected, its kernels are untagged", graph.graph_id, graph.error)
    REGISTRY.add(graph, device_override)
    if markers:
        _install_marker(compiled, graph)


def _install_marker(compiled: Any, graph: GraphTags) -> None:
    try:
        from .instrument import instrument

        instrument(compiled, graph)
    except Exception as e:
        _warn_once("inductor_perf: could not install profiler markers (%s)", e)


def _symbol_locators(example_inputs: Sequence[Any]) -> dict[str, tuple[Any, ...]]:
    """Where each plain size symbol of the graph can be read from a call's inputs."""
    import sympy

    locs: dict[str, tuple[Any, ...]] = {}
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt):
            expr = x.node.expr
            if isinstance(expr, sympy.Symbol):
                locs.setdefault(str(expr), ("int", i))
        elif isinstance(x, torch.Tensor):
            for d, s in enumerate(x.shape):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    locs.setdefault(str(s.node.expr), ("size", i, d))
            for d, s in enumerate(x.stride()):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    locs.setdefault(str(s.node.expr), ("stride", i, d))
    return locs


def _cache_hits() -> int:
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"])


def _tagging_inner_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                           markers: bool = True, kernel_profile: bool = False, device_override: Any = None,
                           param_names: Mapping[int | str, str] | None = None, **kwargs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx_inner

    from .aot_cache import note_inner_compile
    from .collector import TagCollector

    note_inner_compile()  # the compile in progress is not an AOTAutograd cache hit
    graph_id = kwargs.get("graph_id")
    is_backward = bool(kwargs.get("is_backward", False))
    from ..compat import current_frame_compile

    frame = current_frame_compile()
    graph = GraphTags(instance_id=REGISTRY.new_instance_id(),
                      graph_id=graph_id if graph_id is not None else -1,
                      is_backward=is_backward, kernel_profile=kernel_profile,
                      frame_id=frame[0] if frame else None, compile_id=frame[1] if frame else None)
    names = None
    collector = TagCollector(graph.graph_id, is_backward,
                             inject_failure=env.get_flag(env.INJECT_TAGGING_FAILURE),
                             param_names=param_names or {})
    try:
        graph.symbol_locators = _symbol_locators(example_inputs)
        names = _module_paths(graph)
        ctx = _collecting(collector, names)
        ctx.__enter__()
    except Exception as e:  # the hook could not be installed: compile untagged
        ctx = None
        collector.error = e
    hits = _cache_hits()
    try:
        compiled = compile_fx_inner(gm, example_inputs, **kwargs)
        cache_hit = _cache_hits() > hits
        if cache_hit and ctx is not None and collector.error is None \
                and tag_store.load(getattr(compiled, "_fx_graph_cache_key", None)) is None:
            compiled = _compile_again(gm, example_inputs, kwargs, compiled, graph.graph_id)
            cache_hit = False
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    try:
        from . import module_paths

        with module_paths.naming(names):  # finish() names the nodes' modules
            _finish_tags(graph, collector, compiled, cache_hit=cache_hit)
    except Exception as e:
        graph.tagged = False
        graph.error = f"{type(e).__name__}: {e}"
        graph.kernels = []
        _warn_once("inductor_perf: kernel tagging failed for graph %s (%s); the compiled model is "
                   "unaffected, its kernels are untagged", graph.graph_id, graph.error)
    REGISTRY.add(graph, device_override)
    if markers:
        _install_marker(compiled, graph)
    return compiled


def _compile_again(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kwargs: Mapping[str, Any],
                   hit: Any, graph_id: int) -> Any:
    """The graph compiled once more, without the FX graph cache, so codegen runs and is tagged: ``hit``
    came from an entry whose tags were never stored (deleted, or written by a process that crashed
    in between). Returns ``hit`` itself when the compile made its very code, so that the tags are
    stored under its key, for the next process and for an AOTAutograd entry, which names graphs by it
    (a C++ kernel's profiler name bakes in the graph id: the code may differ)."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner

    log.info("inductor_perf: FX graph cache hit without stored tags; recompiling graph %s", graph_id)
    # The first call already recorded its output strides in the tracing context.
    tracing = torch._guards.TracingContext.try_get()
    saved = list(tracing.output_strides) if tracing is not None and tracing.output_strides else None
    if saved is not None:
        tracing.output_strides.clear()
    try:
        with inductor_config.patch(fx_graph_cache=False):
            compiled = compile_fx_inner(gm, example_inputs, **kwargs)
    except Exception:
        if saved is not None:
            tracing.output_strides[:] = saved
        raise
    code = getattr(hit, "source_code", None)
    return hit if code is not None and code == getattr(compiled, "source_code", None) else compiled


# Per compile id, the module names its forward graph found on the stack: the backward graph of the
# same compile may be compiled later (by the autograd engine), with no module call on the stack.
_FRAME_NAMES: "OrderedDict[str, Any]" = OrderedDict()
_FRAME_NAMES_KEPT = 64
_FRAME_NAMES_LOCK = threading.Lock()  # compiles may run on several threads


def _module_paths(graph: GraphTags) -> Any:
    from . import module_paths

    names = None if graph.is_backward else module_paths.from_stack()
    key = graph.compile_id
    if key is None:
        return names
    with _FRAME_NAMES_LOCK:
        if names is not None:
            _FRAME_NAMES[key] = names
            while len(_FRAME_NAMES) > _FRAME_NAMES_KEPT:
                _FRAME_NAMES.popitem(last=False)
            return names
        return _FRAME_NAMES.get(key)


@contextlib.contextmanager
def _collecting(collector: Any, names: Any) -> Iterator[None]:
    """Tag collection for one graph, its module paths named in the model (:mod:`module_paths`)."""
    from . import module_paths
    from .collector import collecting

    with collecting(collector), module_paths.naming(names):
        yield


def _apply_stored(graph: GraphTags, stored: Mapping[str, Any]) -> None:
    """Give ``graph`` the kernels and profiler graph id stored for its cache entry (:mod:`.store`)."""
    graph.profiler_graph_id = stored.get("profiler_graph_id")
    graph.kernels = [_rebase(KernelTag.from_dict(k), graph) for k in stored["kernels"]]


def _finish_tags(graph: GraphTags, collector: Any, compiled: Any, cache_hit: bool) -> None:
    graph.cache_key = getattr(compiled, "_fx_graph_cache_key", None)
    graph.cache_hit = cache_hit
    if cache_hit:
        stored = tag_store.load(graph.cache_key)
        if stored is None:
            raise RuntimeError(f"FX graph cache hit for {graph.cache_key} but no stored tags")
        _apply_stored(graph, stored)
        return
    graph.kernels = collector.finish()
    graph.profiler_graph_id = collector.profiler_graph_id
    if graph.cache_key:
        try:
            tag_store.store(graph)
        except OSError as e:  # a full or read-only cache dir costs the next process a recompile
            _warn_once("inductor_perf: could not store kernel tags beside the FX graph cache (%s); "
                       "a later cache hit will recompile this graph to tag it", e)


def _rebase(tag: KernelTag, graph: GraphTags) -> KernelTag:
    import dataclasses

    return dataclasses.replace(tag, graph_id=graph.graph_id, is_backward=graph.is_backward)
