"""What differs between torch releases, and what inductor_perf needs from the installed one.

Almost everything we hook into is private Inductor API. Rather than trusting a version number,
the backend checks at its first compile that each internal in :data:`INTERNALS` is present with
the shape we use (:func:`backend_support`):

- torch older than :data:`MIN_TORCH`: :class:`~inductor_perf.errors.UnsupportedTorchError`.
- every internal present: tag, mark and capture as usual; a release newer than the newest in
  :data:`TESTED_TORCH` is logged once as untested.
- one missing or changed: warn once naming it, and compile exactly as ``backend="inductor"``
  would (no tags). The user's model never breaks because of us.
- one with a ``fallback`` missing or changed (the hooks that serve tags from an AOTAutograd cache
  hit): tag as usual without what it adds, saying once what that costs (:attr:`BackendSupport.degraded`).

Per-release differences belong here too, each behind a function named for what it adapts, so the
rest of the package never reads ``torch.__version__``. (None is needed for 2.11 - 2.15: the one
difference met, torch 2.15's flop_registry formula for CPU flash attention, is handled by tagging/node_costs.py
asking flop_registry before its own formulas.)
tests/integration/test_internals.py runs every check against the installed torch.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable

log = logging.getLogger(__name__)

MIN_TORCH = (2, 11)
"""The oldest release line we support: older ones raise UnsupportedTorchError."""

TESTED_TORCH = ((2, 11), (2, 12), (2, 13), (2, 14), (2, 15))
"""Release lines CI tests (``make test`` on 2.13, ``make test-matrix`` on the others)."""


def parse_version(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string.

    >>> parse_version("2.11.0+cu130")
    (2, 11)
    """
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"cannot parse torch version {version!r}")
    return int(match.group(1)), int(match.group(2))


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def installed_torch_version() -> str:
    import torch

    return str(torch.__version__)


def check_torch_version(version: str | None = None) -> None:
    """Raise UnsupportedTorchError when ``version`` (default: installed torch) is older than
    :data:`MIN_TORCH`. Newer releases are not refused: :func:`backend_support` checks them."""
    from .errors import UnsupportedTorchError

    version = installed_torch_version() if version is None else version
    if parse_version(version) < MIN_TORCH:
        raise UnsupportedTorchError(
            f"inductor_perf supports torch >={_fmt(MIN_TORCH)} (tested: "
            f"{', '.join(_fmt(v) for v in TESTED_TORCH)}); found torch {version}. "
            f"Upgrade torch or use backend='inductor'.")


def is_tested(version: str) -> bool:
    return parse_version(version) in TESTED_TORCH


# --- the internals we use ------------------------------------------------------------------------
@dataclass(frozen=True)
class Internal:
    """One private torch API we rely on: its name, who uses it, and a check of its shape."""

    name: str
    used_by: str
    check: Callable[[], None]
    """Raises (AttributeError, ImportError, AssertionError...) when the internal is missing or changed."""
    fallback: str | None = None
    """What the backend does without it, when it can still tag; None: it compiles as plain Inductor."""


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def _check_silent_externs() -> None:
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    for name in ("generate_scatter_fallback", "generate_index_put_fallback"):
        _require(_params(getattr(PythonWrapperCodegen, name))[:2] == ["self", "node"],
                 f"PythonWrapperCodegen.{name}(self, node)")


def _check_provenance_hook() -> None:
    import torch._inductor.debug as debug

    fn = debug.set_kernel_post_grad_provenance_tracing
    _require(_params(fn)[:3] == ["node_schedule", "kernel_name", "is_extern"],
             f"parameters are {_params(fn)}")


def _check_cpp_codegen_hook() -> None:
    import torch._inductor.codegen.cpp as cpp
    import torch._inductor.debug as debug

    _require(getattr(cpp, "set_kernel_post_grad_provenance_tracing", None) is not None,
             "torch._inductor.codegen.cpp no longer imports the hook by name")
    held = cpp.set_kernel_post_grad_provenance_tracing
    original = getattr(held, "_inductor_perf_original", held)
    current = debug.set_kernel_post_grad_provenance_tracing
    _require(original is getattr(current, "_inductor_perf_original", current),
             "codegen.cpp holds another function than torch._inductor.debug's")


def _check_compiled_fx_graph() -> None:
    import dataclasses

    from torch._inductor.output_code import CompiledFxGraph

    fields = {f.name for f in dataclasses.fields(CompiledFxGraph)}
    _require({"current_callable", "_fx_graph_cache_key"} <= fields, f"fields: {sorted(fields)}")


def _check_compile_fx() -> None:
    from torch._inductor.compile_fx import _CompileFxKwargs, compile_fx, compile_fx_inner

    params = _params(compile_fx)
    _require("inner_compile" in params and "config_patches" in params, f"compile_fx{params}")
    _require(_params(compile_fx_inner)[:2] == ["gm", "example_inputs"], "compile_fx_inner's parameters")
    keys = set(_CompileFxKwargs.__annotations__)
    _require({"graph_id", "is_backward"} <= keys, f"_CompileFxKwargs keys: {sorted(keys)}")


def _check_kernel_args() -> None:
    from torch._inductor.codegen.common import KernelArgs, RemovedArg  # noqa: F401

    args = KernelArgs()
    for attr in ("input_buffers", "output_buffers", "inplace_buffers"):
        _require(isinstance(getattr(args, attr), dict), attr)


def _check_graph_lowering() -> None:
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V  # noqa: F401

    for attr in ("get_numel", "get_dtype", "get_output_names"):
        _require(callable(getattr(GraphLowering, attr, None)), f"GraphLowering.{attr}")


def _check_autograd_cache_switch() -> None:
    import torch

    _require(hasattr(torch._functorch.config, "enable_autograd_cache"), "enable_autograd_cache")


# What an AOTAutograd cache hit loads each compiled graph through (tagging.aot_cache wraps their
# ``load``): the entry's part that names a graph by its FX graph cache key, and the part that bundles
# a graph whole (``torch._functorch.config.bundled_autograd_cache``).
AOT_RESULT_MODULE = "torch._functorch._aot_autograd.aot_autograd_result"
AOT_LOADABLES = ("FxGraphCacheLoadable", "BundledOutputCodeLoadable")
AOT_CACHE_HITS = f"{AOT_RESULT_MODULE}.{'/'.join(AOT_LOADABLES)}.load"
"""The name of the :data:`INTERNALS` entry a hit of the AOTAutograd cache is served through."""


def _check_aot_cache_loads() -> None:
    import dataclasses
    import importlib

    from torch._functorch import config as functorch_config
    from torch._functorch._aot_autograd.autograd_cache import FXGraphCacheMiss
    from torch._inductor import compile_fx

    mod = importlib.import_module(AOT_RESULT_MODULE)
    for name in AOT_LOADABLES:
        load = getattr(mod, name).__dict__.get("load")
        _require(load is not None and _params(load) == ["self", "example_inputs"], f"{name}.load(self, example_inputs)")
    backward = {f.name for f in dataclasses.fields(mod.GenericCompiledBackward)}
    _require("num_symints_saved_for_bw_" in backward, "GenericCompiledBackward.num_symints_saved_for_bw_")
    _require(issubclass(FXGraphCacheMiss, Exception), "autograd_cache.FXGraphCacheMiss")
    for flag in ("strict_autograd_cache", "force_non_lazy_backward_lowering"):
        _require(hasattr(functorch_config, flag), f"torch._functorch.config.{flag}")
    _require(re.fullmatch(r"count\(\d+\)", repr(getattr(compile_fx, "_graph_counter", None))) is not None,
             "compile_fx._graph_counter is an itertools.count")


def _check_custom_graph_pass() -> None:
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    _require({"__call__", "uuid"} <= set(dir(CustomGraphPass)), "CustomGraphPass.uuid")
    _require(hasattr(config, "post_grad_custom_post_pass"), "config.post_grad_custom_post_pass")


def _check_kernel_profile_switch() -> None:
    from torch._inductor import config

    _require(hasattr(config.cpp, "enable_kernel_profile"), "config.cpp.enable_kernel_profile")


def _check_fast_record_function() -> None:
    import torch

    _require(callable(getattr(torch._C._profiler, "_RecordFunctionFast", None)), "_RecordFunctionFast")
    _require(hasattr(torch.autograd.profiler, "_is_profiler_enabled"), "_is_profiler_enabled")


DYNAMO_RECORDS = "torch._dynamo.utils.get_compilation_metrics/graph_break_reasons"
"""The name of the :data:`INTERNALS` entry Dynamo's own records of its compiles are read through."""
_METRIC_FIELDS = ("compile_id", "co_name", "co_filename", "co_firstlineno", "entire_frame_compile_time_s",
                  "recompile_reason", "restart_reasons", "start_time_us", "fail_type", "fail_reason", "is_forward",
                  "is_runtime")


def _check_dynamo_records() -> None:
    import dataclasses

    from torch._dynamo import utils
    from torch._dynamo.output_graph import GraphCompileReason

    fields = {f.name for f in dataclasses.fields(utils.CompilationMetrics)}
    _require(set(_METRIC_FIELDS) <= fields, f"CompilationMetrics lacks {sorted(set(_METRIC_FIELDS) - fields)}")
    _require(callable(utils.get_compilation_metrics), "utils.get_compilation_metrics")
    _require(isinstance(utils.graph_break_reasons, list), "utils.graph_break_reasons is a list")
    reason_fields = {f.name for f in dataclasses.fields(GraphCompileReason)}
    _require({"reason", "user_stack"} <= reason_fields, f"GraphCompileReason fields: {sorted(reason_fields)}")


def _check_cache_dir() -> None:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    _require(callable(cache_dir), "cache_dir")


def _check_partitioner_tags() -> None:
    from torch._functorch import partitioners

    _require(callable(getattr(partitioners, "_has_tag_is_forward", None)), "partitioners._has_tag_is_forward")


def is_recomputed_forward(node: Any, is_backward: bool) -> bool:
    """Whether FX ``node`` of a graph being compiled is forward work that a backward graph recomputes:
    the AOTAutograd partitioner marks every node of the joint graph forward or backward
    (``node.meta["partitioner_tag"]``) and copies a node's meta into the backward graph it extracts, so
    a backward graph's node marked forward was recomputed there (activation checkpointing, or the
    min-cut partitioner's own choice). False for a forward graph, and where torch lacks the mark."""
    if not is_backward:
        return False
    try:
        from torch._functorch.partitioners import _has_tag_is_forward
    except ImportError:
        return False
    return bool(_has_tag_is_forward(node))


INTERNALS: tuple[Internal, ...] = (
    Internal("torch._inductor.debug.set_kernel_post_grad_provenance_tracing",
             "tagging.collector.collecting: sees every kernel call site at codegen time", _check_provenance_hook),
    Internal("torch._inductor.codegen.wrapper.PythonWrapperCodegen.generate_scatter_fallback/"
             "generate_index_put_fallback", "tagging.collector.SILENT_EXTERNS, wrapped by its _Hooks", _check_silent_externs),
    Internal("torch._inductor.codegen.cpp.set_kernel_post_grad_provenance_tracing",
             "tagging.collector.HOOK_MODULES: the C++ backend holds the hook by name", _check_cpp_codegen_hook),
    Internal("torch._inductor.output_code.CompiledFxGraph.current_callable/_fx_graph_cache_key",
             "tagging.instrument.instrument and the tag store beside the FX graph cache", _check_compiled_fx_graph),
    Internal("torch._inductor.compile_fx.compile_fx(inner_compile=, config_patches=)",
             "tagging.compiler: our inner compile and its graph_id/is_backward keywords", _check_compile_fx),
    Internal("torch._inductor.codegen.common.KernelArgs",
             "tagging.kernel_io.kernel_args_bytes: the buffers a generated kernel reads and writes",
             _check_kernel_args),
    Internal("torch._inductor.graph.GraphLowering.get_numel/get_dtype/get_output_names",
             "tagging.kernel_io: buffer sizes of generated kernels", _check_graph_lowering),
    Internal("torch._functorch.config.enable_autograd_cache",
             "tagging.aot_cache.serving: the AOTAutograd cache off for our compiles where a hit cannot be "
             "served with its tags (a hit skips our inner compile)", _check_autograd_cache_switch),
    Internal(AOT_CACHE_HITS,
             "tagging.aot_cache: the tags of the graphs an AOTAutograd cache hit loads (the hit made a miss "
             "where they are not stored; a lazily compiled backward registered at its first call, as on a "
             "miss; the graph id read off compile_fx._graph_counter)", _check_aot_cache_loads,
             fallback="the AOTAutograd cache is off for our compiles, as before: a warm restart traces and "
             "partitions the joint graph again (slower than backend='inductor'; every kernel is still tagged)"),
    Internal("torch._inductor.custom_graph_pass.CustomGraphPass",
             "tagging.compiler._namespace_pass: our own FX graph cache namespace", _check_custom_graph_pass),
    Internal("torch._inductor.config.cpp.enable_kernel_profile",
             "tagging.compiler: CPU kernels named in profiler traces", _check_kernel_profile_switch),
    Internal("torch._C._profiler._RecordFunctionFast",
             "tagging.instrument: per-call profiler ranges", _check_fast_record_function),
    Internal("torch._inductor.runtime.cache_dir_utils.cache_dir",
             "tagging.store: where tags are stored", _check_cache_dir),
    Internal("torch._functorch.partitioners._has_tag_is_forward (node.meta['partitioner_tag'])",
             "tagging.collector: a backward kernel's recomputed forward matmuls (KernelTag.recompute_flops)",
             _check_partitioner_tags,
             fallback="recompute is not told apart: model FLOPs (MFU) include recomputed forward matmuls"),
    Internal(DYNAMO_RECORDS,
             "capture.compile_log: the graph breaks and recompiles a trace records (Dynamo's compilation "
             "metrics and graph-break reasons)", _check_dynamo_records,
             fallback="traces record no graph breaks or recompiles (no graph_break or recompile findings)"),
)


def check_internal(internal: Internal) -> str | None:
    """None when ``internal`` is usable, else why not (one line)."""
    try:
        internal.check()
    except Exception as e:  # any failure means "do not rely on it"
        return f"{type(e).__name__}: {e}".strip().splitlines()[0]
    return None


@dataclass(frozen=True)
class BackendSupport:
    """What the installed torch lets the backend do (see :func:`backend_support`)."""

    version: str
    tagging: bool
    """False: compile as plain Inductor."""
    missing: tuple[tuple[str, str], ...] = ()
    """(internal, why) of each internal that failed its check."""
    tested: bool = True
    degraded: tuple[tuple[str, str], ...] = ()
    """(internal, why) of each internal with a fallback that failed its check: tagging goes on without it."""

    def lacks(self, name: str) -> bool:
        """Whether internal ``name`` (an :data:`INTERNALS` name) failed its check."""
        return any(n == name for n, _ in self.missing + self.degraded)


@functools.lru_cache(maxsize=1)
def backend_support() -> BackendSupport:
    """Check the installed torch once per process; log what that means for the user, once.

    Raises UnsupportedTorchError for torch older than :data:`MIN_TORCH`."""
    version = installed_torch_version()
    check_torch_version(version)
    failed = [(i, why) for i in INTERNALS if (why := check_internal(i)) is not None]
    missing = tuple((i.name, why) for i, why in failed if i.fallback is None)
    degraded = tuple((i.name, why) for i, why in failed if i.fallback is not None)
    tested = is_tested(version)
    if not missing:
        for internal, why in failed:  # one line each: what we do without it
            log.warning("inductor_perf: torch %s lacks an internal we hook: %s (%s). So %s.", version,
                        internal.name, why, internal.fallback)
    if missing:
        names = "; ".join(f"{name} ({why})" for name, why in missing)
        log.warning("inductor_perf: torch %s lacks an internal we hook: %s. Compiling as "
                    "backend='inductor' (no kernel tags). Tested torch: %s.", version, names,
                    ", ".join(_fmt(v) for v in TESTED_TORCH))
    elif not tested:
        present = (f"all {len(INTERNALS)} internals we use are present" if not degraded else
                   f"{len(INTERNALS) - len(degraded)} of the {len(INTERNALS)} internals we use are present")
        log.warning("inductor_perf: torch %s is newer than the releases we test (%s); %s, so tagging "
                    "is on.", version, ", ".join(_fmt(v) for v in TESTED_TORCH), present)
    return BackendSupport(version, tagging=not missing, missing=missing, tested=tested, degraded=degraded)


# --- adapters ------------------------------------------------------------------------------------
def current_frame_compile() -> tuple[int, str] | None:
    """(Dynamo frame id, compile id text) of the compile in progress, or None when this torch does
    not say. A recompile of a frame keeps its frame id and gets a new compile id; a graph break
    continues in a new frame. Capture counts steps by frame (see capture.auto.AutoCapture)."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        frame_id = getattr(cid, "frame_id", None)
        if cid is None or frame_id is None:
            return None
        return int(frame_id), str(cid)
    except Exception:  # an optional internal: without it, capture anchors on one graph
        return None


def dynamo_frame_compiles() -> list[dict[str, Any]] | None:
    """Dynamo's records of the frame compiles it still holds (its ``get_compilation_metrics()``, the
    last 64 by default), oldest first, each as plain data: ``compile_id`` ("frame/recompile"),
    ``frame`` (the code's name), ``file``, ``line`` (its first line), ``compile_s``,
    ``recompile_reason`` (the guard that failed), ``restart_reasons`` (sorted), ``start_us`` (wall
    clock, µs since the epoch), ``fail_type``, ``fail_reason``. Backward and run-time records are left
    out. None when this torch lacks them (:data:`DYNAMO_RECORDS`)."""
    if backend_support().lacks(DYNAMO_RECORDS):
        return None
    try:
        from torch._dynamo import utils

        metrics = utils.get_compilation_metrics()
    except Exception:  # checked at the first compile; a failure now means "no records"
        return None
    out = []
    for m in metrics:
        if m.is_forward is False or m.is_runtime:
            continue
        reasons = m.restart_reasons or ()
        out.append({"compile_id": None if m.compile_id is None else str(m.compile_id), "frame": m.co_name,
                    "file": m.co_filename, "line": m.co_firstlineno, "compile_s": m.entire_frame_compile_time_s,
                    "recompile_reason": m.recompile_reason, "restart_reasons": sorted(str(r) for r in reasons),
                    "start_us": m.start_time_us, "fail_type": m.fail_type, "fail_reason": m.fail_reason})
    return out


def dynamo_graph_breaks(start: int = 0) -> tuple[int, list[dict[str, Any]]] | None:
    """(how many graph-break reasons Dynamo holds now, those from index ``start`` on): each
    ``{"reason", "file", "line", "frame"}``, the user's line where the graph broke (the innermost
    frame of its user stack). Dynamo appends one each time it compiles a graph that ends in a break
    (a recompile of the frame appends it again) and empties the list at ``torch._dynamo.reset()``.
    None when this torch lacks it (:data:`DYNAMO_RECORDS`)."""
    if backend_support().lacks(DYNAMO_RECORDS):
        return None
    try:
        from torch._dynamo import utils

        held = utils.graph_break_reasons
        n = len(held)
        new = list(held[start:n]) if start <= n else list(held[:n])
    except Exception:
        return None
    out = []
    for r in new:
        frame = r.user_stack[-1] if getattr(r, "user_stack", None) else None
        out.append({"reason": str(r.reason), "file": getattr(frame, "filename", None),
                    "line": getattr(frame, "lineno", None), "frame": getattr(frame, "name", None)})
    return n, out


def dynamo_recompile_limit() -> int | None:
    """How many compiles of one frame Dynamo makes before it runs the frame eagerly
    (``torch._dynamo.config.recompile_limit``, called ``cache_size_limit`` before), or None."""
    try:
        from torch._dynamo import config

        value = getattr(config, "recompile_limit", None)
        if value is None:
            value = getattr(config, "cache_size_limit", None)
        return int(value) if value is not None else None
    except Exception:
        return None
