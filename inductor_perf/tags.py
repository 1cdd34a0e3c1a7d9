"""The kernel-tag data model: what each kernel of a compiled graph computes and where it came from.

Pure data. Built at compile time by :mod:`inductor_perf.tagging`, read by augmentation and the
summaries. Costs of graphs compiled with dynamic shapes stay symbolic (a sympy expression in the
graph's size symbols, kept as a string) and are evaluated with the sizes a call actually had.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Union

# An integer, or the string form of a sympy expression over size symbols such as "s0".
Quantity = Union[int, str]

GENERATED = "generated"
EXTERN = "extern"


# What a cost expression may contain: size symbols, integers, arithmetic and sympy/Inductor
# function names (FloorDiv, Max, ...). sympify evaluates its input, and tags are read back from
# the cache directory, so anything else (quotes, brackets, dunders) is refused before parsing.
_EXPR_OK = re.compile(r"^[A-Za-z0-9_+\-*/(). ,]*$")


@functools.lru_cache(maxsize=4096)
def _parse(expr: str) -> Any:
    import sympy

    if not _EXPR_OK.match(expr) or "__" in expr:
        raise ValueError(f"not a size expression: {expr!r}")
    return sympy.sympify(expr, locals=_sympy_functions())


@functools.lru_cache(maxsize=1)
def _sympy_functions() -> dict[str, Any]:
    """Inductor's own sympy functions (FloorDiv, ModularIndexing, ...) by the names str() prints,
    so expressions read back evaluate instead of becoming undefined functions."""
    import inspect

    import sympy
    import torch.utils._sympy.functions as fns

    return {name: obj for name, obj in vars(fns).items()
            if inspect.isclass(obj) and issubclass(obj, sympy.Basic)}


def evaluate(value: Quantity, symbols: Mapping[str, int] | None = None) -> int:
    """An integer for ``value``, substituting ``symbols`` (name -> size) into expressions.

    >>> evaluate("2*s0*512", {"s0": 8})
    8192
    """
    if isinstance(value, int):
        return value
    expr = _parse(value)
    if symbols:
        expr = expr.subs({name: int(v) for name, v in symbols.items()})
    if not expr.is_number:
        missing = sorted(str(s) for s in expr.free_symbols)
        raise ValueError(f"cannot evaluate {value!r}: no value for symbols {missing}")
    return int(expr)


def aten_op_name(target: str | None) -> str | None:
    """``aten.native_layer_norm.default`` -> ``aten::native_layer_norm``: an op as eager traces
    spell it.

    >>> aten_op_name("aten._scaled_dot_product_flash_attention_for_cpu.default")
    'aten::_scaled_dot_product_flash_attention_for_cpu'
    """
    if not target:
        return None
    if "::" in target:
        return target.split(".")[0]
    parts = target.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "mkldnn", "mkl", "quantized", "torch"):
        return f"{parts[0]}::{parts[1]}"
    return target


@dataclass(frozen=True)
class NodeInfo:
    """One FX node a kernel computes."""

    name: str
    target: str
    """The op, e.g. ``aten.mm.default``."""
    original_aten: str | None
    """The aten op the node was decomposed from, when Inductor recorded one."""
    shapes: tuple[tuple[Quantity, ...], ...]
    """Output shape(s); symbolic dimensions as strings."""
    dtypes: tuple[str, ...]
    module_path: str | None = None
    """Normalized nn.Module path of this node ("" for the root module)."""
    source: str | None = None
    """``file:line`` of the innermost user frame of this node."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "original_aten": self.original_aten,
            "shapes": [list(s) for s in self.shapes],
            "dtypes": list(self.dtypes),
            "module_path": self.module_path,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NodeInfo":
        return cls(
            name=d["name"],
            target=d["target"],
            original_aten=d.get("original_aten"),
            shapes=tuple(tuple(s) for s in d.get("shapes", ())),
            dtypes=tuple(d.get("dtypes", ())),
            module_path=d.get("module_path"),
            source=d.get("source"),
        )


@dataclass(frozen=True)
class KernelTag:
    """One kernel call site of one compiled graph."""

    graph_id: int
    is_backward: bool
    kernel_name: str
    """Inductor's name: ``cpp_fused_gelu_0``, ``triton_poi_fused_add_0``, ``extern_kernels.mm``."""
    kind: str
    """``"generated"`` or ``"extern"``."""
    call_index: int
    """Position of this call site among the graph's kernel calls, in call order."""
    nodes: tuple[NodeInfo, ...]
    flops: Quantity
    matmul_flops: Quantity
    bytes_read: Quantity
    bytes_written: Quantity
    source: str | None
    """``file:line`` of the innermost user frame."""
    stack_trace: str | None
    module_path: str | None
    """Normalized nn.Module path, e.g. ``encoder.layers.0.attn``."""
    profiler_name: str
    """The event name this call has in a profiler trace (``graph_0_cpp_fused_gelu_0``, ``aten::mm``)."""
    device: str = "cpu"
    """``cpu`` or ``cuda``: where the kernel runs."""
    op: str | None = None
    """For extern kernels, the overload Inductor calls (``aten.addmm.out``)."""

    @property
    def eager_ops(self) -> tuple[str, ...]:
        """The eager ops this kernel's FX nodes came from (``original_aten``, else the node's own
        op), in node order, without repeats: what fused into this kernel."""
        seen: dict[str, None] = {}
        for node in self.nodes:
            op = aten_op_name(node.original_aten or node.target)
            if op:
                seen.setdefault(op, None)
        return tuple(seen)

    @property
    def is_symbolic(self) -> bool:
        return any(isinstance(v, str) for v in
                   (self.flops, self.matmul_flops, self.bytes_read, self.bytes_written))

    def evaluated(self, symbols: Mapping[str, int] | None = None) -> "KernelTag":
        """A copy with every cost an int, for the given size-symbol values."""
        if not self.is_symbolic:
            return self
        return dataclasses.replace(
            self,
            flops=evaluate(self.flops, symbols),
            matmul_flops=evaluate(self.matmul_flops, symbols),
            bytes_read=evaluate(self.bytes_read, symbols),
            bytes_written=evaluate(self.bytes_written, symbols),
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["nodes"] = [n.to_dict() for n in self.nodes]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KernelTag":
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in fields}
        kwargs["nodes"] = tuple(NodeInfo.from_dict(n) for n in d.get("nodes", ()))
        return cls(**kwargs)


@dataclass
class GraphTags:
    """The tags of one compiled graph (one call of Inductor's inner compile)."""

    instance_id: int
    """Unique per compiled graph in this process; runtime markers carry it."""
    graph_id: int
    is_backward: bool
    kernels: list[KernelTag] = field(default_factory=list)
    tagged: bool = True
    """False when tagging failed; ``error`` says why and ``kernels`` may be incomplete."""
    error: str | None = None
    cache_key: str | None = None
    """Inductor's FX graph cache key, when the graph went through the cache."""
    cache_hit: bool = False
    profiler_graph_id: int | None = None
    """The graph id baked into generated kernel names (differs from ``graph_id`` on a cache hit)."""
    symbol_locators: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Size symbol -> where to read it from a call's inputs: ``("int", i)`` or ``("size", i, dim)``."""
    compile_id: str | None = None
    """Dynamo's compile id (``"0/1"``: frame 0, its second compile), when torch says."""
    frame_id: int | None = None
    """Dynamo's frame id: the same for every recompile of one frame."""
    kernel_profile: bool = False
    """Whether C++ kernels of this graph were compiled to appear by name in profiler traces."""

    def symbol_values(self, inputs: Any) -> dict[str, int]:
        """The size-symbol values of one call, read from its flat input list."""
        values: dict[str, int] = {}
        for name, loc in self.symbol_locators.items():
            try:
                if loc[0] == "int":
                    values[name] = int(inputs[loc[1]])
                elif loc[0] == "size":
                    values[name] = int(inputs[loc[1]].shape[loc[2]])
                elif loc[0] == "stride":
                    values[name] = int(inputs[loc[1]].stride()[loc[2]])
            except Exception:  # a locator that no longer fits: leave that symbol out
                continue
        return values

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "graph_id": self.graph_id,
            "is_backward": self.is_backward,
            "tagged": self.tagged,
            "error": self.error,
            "cache_key": self.cache_key,
            "cache_hit": self.cache_hit,
            "profiler_graph_id": self.profiler_graph_id,
            "symbol_locators": {k: list(v) for k, v in self.symbol_locators.items()},
            "compile_id": self.compile_id,
            "frame_id": self.frame_id,
            "kernel_profile": self.kernel_profile,
            "kernels": [k.to_dict() for k in self.kernels],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "GraphTags":
        return cls(
            instance_id=d["instance_id"],
            graph_id=d["graph_id"],
            is_backward=d["is_backward"],
            kernels=[KernelTag.from_dict(k) for k in d.get("kernels", ())],
            tagged=d.get("tagged", True),
            error=d.get("error"),
            cache_key=d.get("cache_key"),
            cache_hit=d.get("cache_hit", False),
            profiler_graph_id=d.get("profiler_graph_id"),
            symbol_locators={k: tuple(v) for k, v in d.get("symbol_locators", {}).items()},
            compile_id=d.get("compile_id"),
            frame_id=d.get("frame_id"),
            kernel_profile=d.get("kernel_profile", False),
        )


class TagRegistry:
    """Every graph compiled by the backend in this process, by instance id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graphs: dict[int, GraphTags] = {}
        self._device_overrides: dict[int, Any] = {}
        self._next_id = 0

    def new_instance_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def add(self, graph: GraphTags, device_override: Any = None) -> None:
        """Record ``graph``; ``device_override`` is the ``inductor_perf.device`` option it was
        compiled with (a dict or file path; the capture of its calls uses those peaks)."""
        with self._lock:
            self._graphs[graph.instance_id] = graph
            if device_override is not None:
                self._device_overrides[graph.instance_id] = device_override

    def device_override(self, instance_ids: Iterable[int]) -> Any:
        """The first ``inductor_perf.device`` option among the graphs ``instance_ids``, or None."""
        with self._lock:
            return next((self._device_overrides[i] for i in instance_ids if i in self._device_overrides), None)

    def get(self, instance_id: int) -> GraphTags | None:
        with self._lock:
            return self._graphs.get(instance_id)

    def graphs(self) -> list[GraphTags]:
        with self._lock:
            return list(self._graphs.values())

    def clear(self) -> None:
        with self._lock:
            self._graphs.clear()
            self._device_overrides.clear()


# The process-wide registry that kernel_table() reads. It holds compile results (like Inductor's
# own caches), not session state: capture sessions only read it.
REGISTRY = TagRegistry()


def kernel_table() -> list[KernelTag]:
    """The tags of every kernel call site of every graph compiled with ``backend="inductor_perf"``
    in this process, in compile order then call order.

    >>> import torch, inductor_perf
    >>> f = torch.compile(lambda x: x.sin() + 1, backend="inductor_perf")
    >>> _ = f(torch.randn(8))
    >>> [t.kernel_name for t in inductor_perf.kernel_table()]  # doctest: +SKIP
    ['cpp_fused_add_sin_0']
    """
    return [k for g in REGISTRY.graphs() for k in g.kernels]


def graph_table() -> list[GraphTags]:
    """Every compiled graph's tags, including whether tagging succeeded."""
    return REGISTRY.graphs()
