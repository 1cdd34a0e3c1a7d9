"""Codegen-time collection: kernel call site -> FX nodes -> :class:`~inductor_perf.model.tags.KernelTag`.

Every generated and extern kernel passes through Inductor's
``set_kernel_post_grad_provenance_tracing(node_schedule, kernel_name, is_extern)`` while the
wrapper code is written, in call-site order, whatever the provenance-tracking level. We wrap that
function in every module that imported it by name, only while our own compile runs, and read the
scheduler / IR nodes it receives while they are still alive.

Everything here is private Inductor API pinned to the torch range in :mod:`inductor_perf.compat`;
tests/integration/test_internals.py fails loudly when one of these hooks moves.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import torch

from . import kernel_io
from . import node_costs as costs
from .. import compat
from ..costs.ops.convention import is_matmul_op
from ..model.tags import EXTERN, GENERATED, KernelTag, NodeInfo
from .module_paths import _parameter_of, node_module_path

log = logging.getLogger(__name__)

HOOK_NAME = "set_kernel_post_grad_provenance_tracing"
# Modules that hold a reference to the hook (imported by name). ir.py and scheduler.py import it
# from torch._inductor.debug at call time, so patching debug covers them.
HOOK_MODULES = (
    "torch._inductor.debug",
    "torch._inductor.codegen.cpp",
    "torch._inductor.codegen.triton",
)

_ACTIVE: contextvars.ContextVar["TagCollector | None"] = contextvars.ContextVar(
    "inductor_perf_tag_collector", default=None)


class InjectedTaggingFailure(RuntimeError):
    """Raised on purpose (INDUCTOR_PERF_INJECT_TAGGING_FAILURE) to test the fallback path."""


# --- source / module helpers ----------------------------------------------------------------------
_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def innermost_frame(stack_trace: str | None) -> str | None:
    """``file:line`` of the last frame of an FX stack trace (the innermost user frame)."""
    if not stack_trace:
        return None
    frames = _FRAME_RE.findall(stack_trace)
    if not frames:
        return None
    # Dynamo records user frames; skip any frame inside torch itself should one appear.
    user = [f for f in frames if not f[0].startswith(_TORCH_DIR)] or frames
    path, line = user[-1]
    return f"{path}:{line}"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def node_info(node: torch.fx.Node) -> NodeInfo:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    shapes = tuple(tuple(costs.to_quantity(s) for s in v.shape) for v in vals
                   if isinstance(v, torch.Tensor))
    dtypes = tuple(_dtype_name(v.dtype) for v in vals if isinstance(v, torch.Tensor))
    orig = node.meta.get("original_aten")
    return NodeInfo(
        name=node.name,
        target=_target_name(node.target),
        original_aten=_target_name(orig) if orig is not None else None,
        shapes=shapes,
        dtypes=dtypes,
        module_path=node_module_path(node),
        source=innermost_frame(node.meta.get("stack_trace")),
    )


def _target_name(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.OpOverloadPacket):
        return f"{target._qualified_op_name.replace('::', '.')}"
    return getattr(target, "__name__", str(target))


# --- the collector ------------------------------------------------------------------------------
@dataclass
class _Pending:
    kernel_name: str
    kind: str
    nodes: list[torch.fx.Node]
    flops: costs.Expr
    matmul_flops: costs.Expr
    bytes_read: costs.Expr
    bytes_written: costs.Expr
    profiler_name: str
    device: str
    op: str | None
    wrapper_id: int
    recompute_flops: costs.Expr = 0


@dataclass
class TagCollector:
    """Collects one compiled graph's kernels while Inductor writes its wrapper code."""

    graph_id: int
    is_backward: bool
    inject_failure: bool = False
    pending: list[_Pending] = field(default_factory=list)
    error: BaseException | None = None
    profiler_graph_id: int | None = None
    # Qualified names of the parameters/buffers among the graph's inputs (:func:`parameter_names`).
    param_names: Mapping[int | str, str] = field(default_factory=dict)

    # Called by the hook, for every kernel call site, in call order.
    def on_kernel(self, node_schedule: Any, kernel_name: str, is_extern: bool) -> None:
        if self.error is not None:
            return
        try:
            if self.inject_failure:
                raise InjectedTaggingFailure("injected tagging failure (INDUCTOR_PERF_INJECT_TAGGING_FAILURE)")
            if is_extern:
                self.pending.append(self._extern(node_schedule, kernel_name))
            else:
                self.pending.append(self._generated(node_schedule, kernel_name))
        except BaseException as e:  # never let tagging break the compile
            self.error = e

    def _graph_order(self) -> dict[torch.fx.Node, int]:
        from torch._inductor.virtualized import V

        graph = V.graph
        cache = getattr(graph, "_inductor_perf_node_order", None)
        if cache is None:
            cache = {n: i for i, n in enumerate(graph.graph.nodes)}
            graph._inductor_perf_node_order = cache
        return cache

    def _generated(self, node_schedule: Sequence[Any], kernel_name: str) -> _Pending:
        from torch._inductor.virtualized import V

        snodes = [s for s in node_schedule if getattr(s, "node", None) is not None]
        subs = [sub for s in snodes for sub in (s.get_nodes() if hasattr(s, "get_nodes") else [s])
                if getattr(sub, "node", None) is not None]
        order = self._graph_order()
        nodes, flops, mm, rc = _generated_costs(subs, V.graph, order, self.is_backward)
        args = kernel_io.find_kernel_args()
        if args is not None:
            read, written = kernel_io.kernel_args_bytes(args)
        else:
            read, written = kernel_io.read_writes_bytes(snodes)
        device = _device_of(snodes[0].node) if snodes else "cpu"
        gid = V.graph.graph_id
        if self.profiler_graph_id is None:
            self.profiler_graph_id = gid
        prefix = f"graph_{gid}_" if (device == "cpu" and gid is not None) else ""
        return _Pending(kernel_name, GENERATED, nodes, flops, mm, read, written,
                        prefix + kernel_name, device, None, id(V.graph.wrapper_code), rc)

    def _extern(self, kernel: Any, kernel_name: str) -> _Pending:
        from torch._inductor.virtualized import V

        if self.profiler_graph_id is None:
            self.profiler_graph_id = V.graph.graph_id
        op = getattr(kernel, "op_overload", None)
        origins = list(getattr(kernel, "origins", ()) or ())
        order = self._graph_order()
        origins.sort(key=lambda n: order.get(n, math.inf))
        # origins over-include nearby view/pointwise nodes: prefer the node that IS the op.
        main = None
        packet = getattr(op, "overloadpacket", None)
        origin_node = getattr(kernel, "origin_node", None)
        candidates = ([origin_node] if origin_node is not None else []) + origins
        for n in candidates:
            if packet is not None and _same_op(getattr(n.target, "overloadpacket", None), packet):
                main = n
                break
        if main is None:
            for n in candidates:
                if is_matmul_op(n.target):
                    main = n
                    break
        if main is None and origin_node is not None:
            main = origin_node
        nodes = [main] if main is not None else origins
        if main is not None:
            c = costs.node_cost(main)
            flops, mm = c.flops, c.matmul_flops
            scatter = costs.scatter_io_bytes(main, getattr(packet, "__name__", "").split(".")[-1])
            read, written = scatter if scatter is not None else costs.node_io_bytes(main)
        else:
            flops = mm = 0
            read, written = kernel_io.extern_ir_bytes(kernel)
        target = op if op is not None else (main.target if main is not None else None)
        schema_name = getattr(getattr(target, "_schema", None), "name", None)
        # Under cpp_wrapper the trace shows the C shim (aoti_torch_cpu_addmm_out), which is
        # the kernel name Inductor passes us; the Python wrapper calls the aten op itself.
        profiler_name = kernel_name if V.graph.cpp_wrapper else (schema_name or kernel_name)
        rc = mm if main is not None and compat.is_recomputed_forward(main, self.is_backward) else 0
        return _Pending(kernel_name, EXTERN, nodes, flops, mm, read, written, profiler_name,
                        _device_of(kernel), _target_name(target) if target is not None else None,
                        id(V.graph.wrapper_code), rc)

    def finish(self) -> list[KernelTag]:
        """The collected call sites as tags. Raises the first collection error, if any."""
        if self.error is not None:
            raise self.error
        pending = _drop_repeated_pass(self.pending)
        tags = []
        for i, p in enumerate(pending):
            infos = tuple(node_info(n) for n in p.nodes)
            module_path, source, stack = _attribution(p.nodes, self.param_names)
            tags.append(KernelTag(
                graph_id=self.graph_id,
                is_backward=self.is_backward,
                kernel_name=p.kernel_name,
                kind=p.kind,
                call_index=i,
                nodes=infos,
                flops=costs.to_quantity(p.flops),
                matmul_flops=costs.to_quantity(p.matmul_flops),
                bytes_read=costs.to_quantity(p.bytes_read),
                bytes_written=costs.to_quantity(p.bytes_written),
                source=source,
                stack_trace=stack,
                module_path=module_path,
                profiler_name=p.profiler_name,
                device=p.device,
                op=p.op,
                recompute_flops=costs.to_quantity(p.recompute_flops),
            ))
        return tags


def _generated_costs(subs: Sequence[Any], graph: Any, order: Mapping[torch.fx.Node, int], is_backward: bool = False,
                     ) -> tuple[list[torch.fx.Node], costs.Expr, costs.Expr, costs.Expr]:
    """The FX nodes (in graph order), FLOPs, matmul FLOPs and, of those, recomputed forward matmul
    FLOPs (a backward graph's nodes :func:`compat.is_recomputed_forward`) of a generated kernel's IR nodes.

    docs/costs.md has the rules. An FX node counts in full where the kernel computes it: a
    pointwise node in every IR node that inlines it (recomputation is work), a reduction in an IR
    node that reduces its input, a matmul only in a template node (a layout copy or an epilogue
    may list the matmul among its origins; the extern kernel counts it). A reduction met only in
    the pointwise tail of its lowering (``var_mean``'s ``m2 / N`` inlined into a consumer) counts 1
    FLOP per element of those IR nodes. A later stage of a split reduction counts the elements it
    reads (:func:`tagging.kernel_io.later_stage_work`), and its FX nodes nothing more here."""
    origins: set[torch.fx.Node] = set()
    full: set[torch.fx.Node] = set()
    computed_mm: set[torch.fx.Node] = set()
    tails: dict[torch.fx.Node, costs.Expr] = {}
    later: list[tuple[set[torch.fx.Node], costs.Expr]] = []
    for sub in subs:
        own = set(sub.node.origins)
        origins |= own
        if sub.is_template():
            computed_mm |= own
        work = kernel_io.later_stage_work(sub, graph)
        if work is not None:
            later.append((own, work))
            continue
        if kernel_io.is_reduction_ir(sub):
            full |= own
            continue
        reductions = {n for n in own if costs.is_reduction(n)}
        elements = kernel_io.ir_elements(sub.node) if reductions else None
        if elements is None:
            full |= own
            continue
        full |= own - reductions
        for n in reductions:
            tails[n] = tails.get(n, 0) + elements
    flops: costs.Expr = 0
    mm: costs.Expr = 0
    rc: costs.Expr = 0
    for own, work in later:
        if not own <= full:  # its first stage ran in another kernel
            flops = flops + work
    nodes = sorted(origins, key=lambda n: order.get(n, math.inf))
    for n in nodes:
        if n in full:
            if is_matmul_op(n.target) and n not in computed_mm:
                continue
            c = costs.node_cost(n)
            flops, mm = flops + c.flops, mm + c.matmul_flops
            if is_backward and compat.is_recomputed_forward(n, is_backward):
                rc = rc + c.matmul_flops
        elif n in tails:
            flops = flops + tails[n]
    return nodes, flops, mm, rc


def _same_op(packet: Any, called: Any) -> bool:
    """Whether an FX node's op ``packet`` is the op an extern kernel calls: the same, or its functional
    form when Inductor calls the in-place one (``scatter_reduce`` for ``scatter_reduce_``)."""
    if packet is None:
        return False
    if packet is called:
        return True
    name = getattr(packet, "_qualified_op_name", None)
    return name is not None and getattr(called, "_qualified_op_name", None) == name + "_"


def _drop_repeated_pass(pending: list[_Pending]) -> list[_Pending]:
    """Keep one codegen pass when Inductor generated the same wrapper twice (cpp_wrapper on GPU
    writes a Python wrapper to autotune, then the C++ one): the passes have different wrapper
    objects and identical call-site sequences. Nested subgraphs differ in their kernels and stay."""
    groups: dict[int, list[_Pending]] = {}
    for p in pending:
        groups.setdefault(p.wrapper_id, []).append(p)
    if len(groups) < 2:
        return pending
    seqs = list(groups.values())
    last = [(p.kernel_name, p.kind) for p in seqs[-1]]
    repeated = {id(g[0]) for g in seqs[:-1] if [(p.kernel_name, p.kind) for p in g] == last}
    if not repeated:
        return pending
    return [p for g in seqs if id(g[0]) not in repeated for p in g]


def _attribution(nodes: Sequence[torch.fx.Node],
                 param_names: Mapping[int | str, str]) -> tuple[str | None, str | None, str | None]:
    """(module path, source, stack trace) of a kernel: the one rule for where a kernel belongs.

    A kernel of computed nodes belongs where its :func:`_lead_node` came from. A kernel that reads
    only graph inputs (Inductor's weight-layout copies: its nodes are placeholders, which carry no
    module or stack) belongs to the module owning the first parameter or buffer among them, and
    its source is that parameter's qualified name (``layer1.conv1.weight``).
    """
    if nodes and all(n.op == "placeholder" for n in nodes):
        for n in nodes:
            param = _parameter_of(n, param_names)
            if param is not None:
                return param.rpartition(".")[0], param, None
    lead = _lead_node(nodes)
    if lead is not None and not _has_origin(lead):
        lead = _first_user_with_origin(nodes) or _nearest_input_with_origin(nodes) or lead
    stack = lead.meta.get("stack_trace") if lead is not None else None
    return (node_module_path(lead) if lead is not None else None), innermost_frame(stack), stack


def _has_origin(node: torch.fx.Node) -> bool:
    meta = node.meta
    return bool(meta.get("stack_trace") or meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack"))


def _hops(nodes: Sequence[torch.fx.Node], neighbours: Callable[[torch.fx.Node], Iterable[torch.fx.Node]],
          depth: int) -> Iterator[list[torch.fx.Node]]:
    """The nodes 1, 2, ... ``depth`` hops away from ``nodes`` along ``neighbours``, one list per hop,
    each in the order found, none twice."""
    seen = set(nodes)
    frontier = list(nodes)
    for _ in range(depth):
        nxt = []
        for n in frontier:
            for m in neighbours(n):
                if m not in seen:
                    seen.add(m)
                    nxt.append(m)
        if not nxt:
            return
        yield nxt
        frontier = nxt


def _first_user_with_origin(nodes: Sequence[torch.fx.Node], depth: int = 4) -> torch.fx.Node | None:
    """For a kernel whose nodes Inductor made up (the RNG seeds that dropout reads: no user line,
    no module), the nearest node downstream that has them, breadth first within ``depth`` hops."""
    for hop in _hops(nodes, lambda n: n.users, depth):
        for u in hop:
            if _has_origin(u):
                return u
    return None


def _nearest_input_with_origin(nodes: Sequence[torch.fx.Node], depth: int = 4) -> torch.fx.Node | None:
    """For a kernel whose nodes Inductor made up and whose outputs only leave the graph (torch 2.11's
    post-grad pass folds a tied weight's two gradients, ``add(acc, mm(a, b))``, into an ``addmm``
    with no origin), the nearest inputs that have one, breadth first within ``depth`` hops, and among
    them the :func:`_lead_node`."""
    for hop in _hops(nodes, lambda n: n.all_input_nodes, depth):
        found = [a for a in hop if _has_origin(a)]
        if found:
            return _lead_node(found)
    return None


def _lead_node(nodes: Sequence[torch.fx.Node]) -> torch.fx.Node | None:
    """The node a kernel is attributed to (source line, module).

    The module is the one whose nodes do most of the kernel's work (matmul FLOPs, then all FLOPs,
    then the number of nodes that compute anything): a fused kernel often also holds views or
    cheap ops of a neighbouring module. Within that module, the node with the most FLOPs leads;
    ties go to the latest node in graph order (the kernel's output end).
    """
    scored = []
    for n in nodes:
        if not _has_origin(n):
            continue
        c = costs.node_cost(n)
        scored.append((n, node_module_path(n), _hint(c.matmul_flops), _hint(c.flops)))
    if not scored:
        return nodes[-1] if nodes else None
    per_module: dict[str | None, list[int]] = {}
    for _, mod, mm, fl in scored:
        acc = per_module.setdefault(mod, [0, 0, 0])
        acc[0] += mm
        acc[1] += fl
        acc[2] += 1 if fl else 0
    best_module = max(per_module, key=lambda m: tuple(per_module[m]))
    best = None
    best_key: tuple[int, int] | None = None
    for n, mod, mm, fl in scored:
        if mod == best_module and (best_key is None or (mm, fl) >= best_key):
            best, best_key = n, (mm, fl)
    return best


def _hint(x: costs.Expr) -> int:
    """A size hint for ranking only (never for a decision Dynamo could guard on)."""
    if isinstance(x, int):
        return x
    try:
        return int(x.subs({s: 64 for s in x.free_symbols}))
    except Exception:
        return 0


def _device_of(ir_node: Any) -> str:
    try:
        dev = ir_node.get_device()
        return dev.type if dev is not None else "cpu"
    except Exception:
        return "cpu"


# --- installing the hook ------------------------------------------------------------------------
def _make_hook(original: Any) -> Any:
    def set_kernel_post_grad_provenance_tracing(node_schedule: Any, kernel_name: str,
                                                is_extern: bool = False) -> Any:
        result = original(node_schedule, kernel_name, is_extern)
        collector = _ACTIVE.get()
        if collector is not None and kernel_name:
            collector.on_kernel(node_schedule, kernel_name, is_extern)
        return result

    set_kernel_post_grad_provenance_tracing._inductor_perf_original = original  # type: ignore[attr-defined]
    return set_kernel_post_grad_provenance_tracing


# Wrapper-codegen methods that emit an extern call without calling the provenance hook (their IR
# nodes' codegen skips codegen_comment): max-pool backward's scatter_reduce_, index_put_ with
# accumulate. Wrapped while collecting so those call sites get tags like every other extern.
SILENT_EXTERNS = ("generate_scatter_fallback", "generate_index_put_fallback")


def _announcing(method: Any) -> Any:
    def generate(self: Any, node: Any) -> Any:
        collector = _ACTIVE.get()
        name = getattr(node, "python_kernel_name", None) or str(getattr(node, "op_overload", "") or "")
        if collector is not None and name:
            collector.on_kernel(node, name, True)
        return method(self, node)

    generate._inductor_perf_original = method  # type: ignore[attr-defined]
    return generate


class _Hooks:
    """The process-wide installation of our wrappers: installed by the first compile that collects,
    removed by the last one to finish (a count under a lock). Two threads compiling at once share
    one installation, and each hook call goes to the collector of the thread that makes it
    (``_ACTIVE`` is a ContextVar). With an installation per compile, one thread finishing first
    removed the wrappers while the other still generated code (losing its silent externs' tags),
    and the other then restored the first one's wrapper, left in place for good. Dynamo's
    ``compile_lock`` serializes the compiles ``torch.compile`` makes itself; callers outside it (a
    backend running ``compile_fx`` on threads) overlap, and a compile nested in another shares the
    installation too. No lock is held during a compile: compiles on other threads are never
    made to wait for ours."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._hook: Any = None
        self._original: Any = None
        self._modules: list[tuple[Any, Any]] = []  # (module, what it held before)
        self._methods: list[tuple[str, Any]] = []  # (PythonWrapperCodegen method, original)

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                try:
                    self._install()
                except BaseException:  # half installed: take back what was, the compile goes untagged
                    self._uninstall()
                    raise
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._uninstall()

    def _install(self) -> None:
        import importlib

        import torch._inductor.debug as debug
        from torch._inductor.codegen.wrapper import PythonWrapperCodegen

        importlib.import_module("torch._inductor.codegen.cpp")
        current = getattr(debug, HOOK_NAME)
        self._original = getattr(current, "_inductor_perf_original", current)
        self._hook = _make_hook(self._original)
        for name in HOOK_MODULES:
            mod = sys.modules.get(name)
            if mod is None or not hasattr(mod, HOOK_NAME):
                continue
            self._modules.append((mod, getattr(mod, HOOK_NAME)))
            setattr(mod, HOOK_NAME, self._hook)
        for name in SILENT_EXTERNS:
            method = PythonWrapperCodegen.__dict__.get(name)
            if method is None or hasattr(method, "_inductor_perf_original"):
                continue  # absent in this torch, or already wrapped (another copy of this module)
            setattr(PythonWrapperCodegen, name, _announcing(method))
            self._methods.append((name, method))

    def _uninstall(self) -> None:
        hook, original = self._hook, self._original
        for mod, prev in reversed(self._modules if hook is not None else ()):
            if getattr(mod, HOOK_NAME, None) is hook:  # else someone else's since: theirs stays
                setattr(mod, HOOK_NAME, prev)
        # A module imported during a compile (e.g. codegen.triton) copied our hook by name.
        for name in HOOK_MODULES if hook is not None else ():
            mod = sys.modules.get(name)
            if mod is not None and getattr(mod, HOOK_NAME, None) is hook:
                setattr(mod, HOOK_NAME, original)
        if self._methods:
            from torch._inductor.codegen.wrapper import PythonWrapperCodegen
        for name, method in self._methods:
            current = PythonWrapperCodegen.__dict__.get(name)
            if getattr(current, "_inductor_perf_original", None) is method:
                setattr(PythonWrapperCodegen, name, method)
        self._modules, self._methods, self._hook, self._original = [], [], None, None


_HOOKS = _Hooks()


@contextlib.contextmanager
def collecting(collector: TagCollector) -> Iterator[TagCollector]:
    """Route Inductor's provenance hook (and the silent externs' codegen) to ``collector`` for the
    duration of one inner compile on this thread.

    The wrappers are installed in every module that imported the hook by name when the first such
    compile starts and removed when the last one ends (:class:`_Hooks`), so compiles by other
    backends in between never see them, and compiles on other threads only see wrappers that call
    the original and find no collector of theirs.
    """
    _HOOKS.acquire()
    token = _ACTIVE.set(collector)
    try:
        yield collector
    finally:
        _ACTIVE.reset(token)
        _HOOKS.release()
