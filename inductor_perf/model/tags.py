"""The kernel-tag data model: what each kernel of a compiled graph computes and where it came from.

Pure data. Built at compile time by :mod:`inductor_perf.tagging.collector`, read by augmentation and the
summaries. Costs of graphs compiled with dynamic shapes stay symbolic (a sympy expression in the
graph's size symbols, kept as its text in a :class:`SizeExpr`, which does arithmetic like a number)
and are evaluated with the sizes a call actually had.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import operator
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Union

# An integer, or the text of a sympy expression over size symbols such as "s0" (a SizeExpr once it
# is on a tag; plain strings are accepted where tags are built).
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


class SizeExpr(str):
    """A cost over size symbols, kept as its text (``"1024*s33"``), that does arithmetic like a number.

    It is stored, serialized, compared for equality and printed as that text, so JSON, the tag store
    and traces see plain strings. ``+ - * / //`` and unary minus with ints, floats or other
    expressions give a new expression (an int or float when the symbols cancel): ``tag.bytes_read +
    tag.bytes_written`` and ``sum(t.flops for t in table)`` work for static and dynamic tags alike.
    sympy parses the text at the first arithmetic (importing it takes a quarter of a second, so
    ``import inductor_perf`` does not). ``<``, ``>``, ``<=``, ``>=`` hold when they hold for every size
    (sizes are positive integers), else raise TypeError naming the symbols; ``int()`` raises
    ValueError naming them. Numbers come from :meth:`KernelTag.evaluated` or :func:`evaluate`.

    >>> SizeExpr("64*s33 + 2176") + SizeExpr("128*s33")
    '192*s33 + 2176'
    >>> 2 * SizeExpr("1024*s33") > 0
    True
    """

    __slots__ = ()

    def _arith(self, other: Any, op: Any, reflected: bool = False) -> Any:
        rhs = _operand(other, op)
        lhs = _parse(self)
        if op in (operator.truediv, operator.floordiv) and (lhs if reflected else rhs) == 0:
            raise ZeroDivisionError(f"division of the size expression {str(self)!r} by zero")
        return _quantity(op(rhs, lhs) if reflected else op(lhs, rhs))

    def __add__(self, other: Any) -> Any:
        return self._arith(other, operator.add)

    def __radd__(self, other: Any) -> Any:
        return self._arith(other, operator.add, True)

    def __sub__(self, other: Any) -> Any:
        return self._arith(other, operator.sub)

    def __rsub__(self, other: Any) -> Any:
        return self._arith(other, operator.sub, True)

    def __mul__(self, other: Any) -> Any:
        return self._arith(other, operator.mul)

    def __rmul__(self, other: Any) -> Any:
        return self._arith(other, operator.mul, True)

    def __truediv__(self, other: Any) -> Any:
        return self._arith(other, operator.truediv)

    def __rtruediv__(self, other: Any) -> Any:
        return self._arith(other, operator.truediv, True)

    def __floordiv__(self, other: Any) -> Any:
        return self._arith(other, operator.floordiv)

    def __rfloordiv__(self, other: Any) -> Any:
        return self._arith(other, operator.floordiv, True)

    def __neg__(self) -> Any:
        return _quantity(-_parse(self))

    def __pos__(self) -> "SizeExpr":
        return self

    def _order(self, other: Any, op: Any) -> bool:
        rhs = _operand(other, op)
        relation = op(_as_sizes(_parse(self)), _as_sizes(rhs))
        try:
            return bool(relation)
        except TypeError:  # sympy cannot decide it for every size
            names = sorted(str(s) for s in relation.free_symbols) or ["s0"]
            raise TypeError(
                f"{str(self)!r} {_SYMBOL[op]} {other!s} depends on the sizes {', '.join(names)}: evaluate "
                f"the tag first, e.g. tag.evaluated({{{names[0]!r}: 8}})") from None

    def __lt__(self, other: Any) -> bool:
        return self._order(other, operator.lt)

    def __le__(self, other: Any) -> bool:
        return self._order(other, operator.le)

    def __gt__(self, other: Any) -> bool:
        return self._order(other, operator.gt)

    def __ge__(self, other: Any) -> bool:
        return self._order(other, operator.ge)

    # str's, kept: defining __lt__ and friends must not change equality or hashing (text).
    __eq__ = str.__eq__
    __ne__ = str.__ne__
    __hash__ = str.__hash__

    def __int__(self) -> int:
        value = evaluate(self)  # raises ValueError naming the symbols without a value
        return int(value)

    def __float__(self) -> float:
        return float(evaluate(self))


_SYMBOL = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}


def _operand(other: Any, op: Any) -> Any:
    """``other`` as a sympy-ready operand, or TypeError: text is not a number (``str(x)`` to join it)."""
    if isinstance(other, SizeExpr):
        return _parse(other)
    if isinstance(other, numbers.Real):  # int, float, bool, numpy scalars
        return other
    sympy = sys.modules.get("sympy")  # a sympy expression can only come from an imported sympy
    if sympy is not None and isinstance(other, sympy.Basic):
        return other
    raise TypeError(f"unsupported operand for {_SYMBOL[op]}: size expression and {type(other).__name__} "
                    f"({other!r}); a size expression takes numbers and other size expressions "
                    f"(use str() to join it to text)")


def _quantity(expr: Any) -> Any:
    """A sympy result as a tag quantity: an int (or float) when it is a number, else a SizeExpr."""
    if isinstance(expr, (int, float)):
        return expr
    if expr.is_number:
        return float(expr) if expr.is_Float or (expr.is_Rational and not expr.is_Integer) else int(expr)
    return SizeExpr(str(expr))


def _as_sizes(expr: Any) -> Any:
    """``expr`` with its symbols made integer and positive (``s0``: Dynamo's sizes) or nonnegative
    (unbacked ``u0`` and the rest), so sympy can order an expression against a number."""
    import sympy

    if not isinstance(expr, sympy.Basic) or not expr.free_symbols:
        return expr
    return expr.subs({s: sympy.Symbol(s.name, integer=True, **({"positive": True} if s.name.startswith("s")
                                                                 else {"nonnegative": True}))
                      for s in expr.free_symbols})


def evaluate(value: Quantity, symbols: Mapping[str, int] | None = None) -> int | float:
    """An integer for ``value``, substituting ``symbols`` (name -> size) into expressions (a float
    for an expression a user divided, such as ``tag.flops / 1e9``, when it is not whole).

    >>> evaluate("2*s0*512", {"s0": 8})
    8192
    """
    if isinstance(value, (int, float)):
        return value
    expr = _parse(value)
    if symbols:
        expr = expr.subs({name: int(v) for name, v in symbols.items()})
    if not expr.is_number:
        missing = sorted(str(s) for s in expr.free_symbols)
        raise ValueError(f"cannot evaluate {str(value)!r}: no value for symbols {missing}")
    return float(expr) if expr.is_Float or (expr.is_Rational and not expr.is_Integer) else int(expr)


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


_COSTS = ("flops", "matmul_flops", "bytes_read", "bytes_written", "recompute_flops")


def _size(value: Any) -> Any:
    return SizeExpr(value) if type(value) is str else value


def _plain(value: Any) -> Any:
    """The serialized form: a SizeExpr as plain text (what JSON writers, msgspec included, expect)."""
    return str(value) if isinstance(value, SizeExpr) else value


@dataclass(frozen=True)
class NodeInfo:
    """One FX node a kernel computes."""

    name: str
    target: str
    """The op, e.g. ``aten.mm.default``."""
    original_aten: str | None
    """The aten op the node was decomposed from, when Inductor recorded one."""
    shapes: tuple[tuple[Quantity, ...], ...]
    """Output shape(s); a symbolic dimension is a :class:`SizeExpr`."""
    dtypes: tuple[str, ...]
    module_path: str | None = None
    """Normalized nn.Module path of this node ("" for the root module)."""
    source: str | None = None
    """``file:line`` of the innermost user frame of this node."""

    def __post_init__(self) -> None:
        if any(type(d) is str for shape in self.shapes for d in shape):
            object.__setattr__(self, "shapes", tuple(tuple(_size(d) for d in shape) for shape in self.shapes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "original_aten": self.original_aten,
            "shapes": [[_plain(d) for d in s] for s in self.shapes],
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
    recompute_flops: Quantity = 0
    """Of ``matmul_flops``, the forward matmuls a backward graph recomputes (nodes the AOTAutograd
    partitioner marked forward: :func:`inductor_perf.compat.is_recomputed_forward`); 0 elsewhere."""

    def __post_init__(self) -> None:
        # Symbolic costs (text, e.g. read back from JSON) become SizeExprs, which do arithmetic.
        for name in _COSTS:
            value = getattr(self, name)
            if type(value) is str:
                object.__setattr__(self, name, SizeExpr(value))

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
        return any(isinstance(getattr(self, name), str) for name in _COSTS)

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
            recompute_flops=evaluate(self.recompute_flops, symbols),
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["nodes"] = [n.to_dict() for n in self.nodes]
        for name in _COSTS:
            d[name] = _plain(d[name])
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

    def issued(self) -> int:
        """How many instance ids were handed out: one more at every graph compiled (cache hits too)."""
        with self._lock:
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
