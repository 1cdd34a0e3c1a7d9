"""Module paths of FX nodes, in the model's own names, also for frames other than its forward.

Dynamo names a node's modules relative to the frame it compiles: in the model's forward that is the
model (``L['self'].encoder.layer0``), but after a graph break the rest runs in other frames - a
submodule's forward called eagerly, or a resume function whose modules are locals
(``L['___stack0']``) - and their paths say nothing about where they sit in the model. Each entry of
``nn_module_stack`` is keyed by the module object's ``id``, so the backend resolves it against the
model's own ``named_modules()``: the model is the outermost module whose ``__call__`` is on the
Python stack of the compile, and the frame's own module (for nodes with no module entry) the
innermost. The names hold for the compile in progress (a ContextVar set by :func:`naming`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")


@dataclass(frozen=True)
class FrameModules:
    """The model's module names by ``str(id(module))``, and the path of the frame's own module."""

    names: Mapping[str, str]
    frame_module: str


_CURRENT: contextvars.ContextVar[FrameModules | None] = contextvars.ContextVar("inductor_perf_module_paths",
                                                                                default=None)


def _calling_modules() -> list[tuple[Any, bool]]:
    """The modules whose ``__call__`` is on this thread's stack, innermost first, each with whether
    it is the model torch.compile wrapped (an OptimizedModule, unwrapped here)."""
    import torch

    out = []
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_name == "_call_impl" and code.co_filename.endswith(_MODULE_PY):
            mod = f.f_locals.get("self")
            if isinstance(mod, torch.nn.Module):
                inner = getattr(mod, "_orig_mod", None)
                out.append((inner, True) if isinstance(inner, torch.nn.Module) else (mod, False))
        f = f.f_back
    return out


def from_stack() -> FrameModules | None:
    """The names for a compile running now on this thread, or None when no module is being called
    (a compiled function, or a backward graph compiled by the autograd engine). The model is the
    innermost module torch.compile wrapped (so ``DDP(torch.compile(m))`` names ``m``'s modules as
    before), else the outermost module called."""
    mods = _calling_modules()
    if not mods:
        return None
    root = next((m for m, compiled in mods if compiled), mods[-1][0])
    names: dict[str, str] = {}
    for name, m in root.named_modules(remove_duplicate=False):
        names.setdefault(str(id(m)), name)  # a shared module keeps its first name
    return FrameModules(names=names, frame_module=names.get(str(id(mods[0][0])), ""))


@contextlib.contextmanager
def naming(modules: FrameModules | None) -> Iterator[None]:
    token = _CURRENT.set(modules)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def module_of(stack_key: Any) -> str | None:
    """The model path of the module ``nn_module_stack`` keys as ``stack_key``, or None if unknown."""
    cur = _CURRENT.get()
    return cur.names.get(str(stack_key)) if cur is not None else None


def frame_module() -> str:
    """The path of the module whose frame is compiling ("" for the model itself or when unknown)."""
    cur = _CURRENT.get()
    return cur.frame_module if cur is not None else ""


_SELF_PREFIX = re.compile(r"^L\[['\"][^'\"]+['\"]\]")
_MODULES_ITEM = re.compile(r"\._modules\[['\"]([^'\"]+)['\"]\]")
_GETATTR = re.compile(r"getattr\((.+), ['\"]([^'\"]+)['\"]\)")
_INDEX = re.compile(r"\[['\"]?([^'\"\]]+)['\"]?\]")


def normalize_module_path(path: str) -> str:
    """Dynamo's module path -> a plain FQN.

    >>> normalize_module_path("L['self'].encoder.layers[0].attn")
    'encoder.layers.0.attn'
    >>> normalize_module_path("L['self']._modules['fc']")
    'fc'
    """
    p = path.strip()
    while True:  # getattr(L['self'].layers, '0') -> L['self'].layers.0
        m = _GETATTR.search(p)
        if not m:
            break
        p = p[:m.start()] + f"{m.group(1)}.{m.group(2)}" + p[m.end():]
    p = _SELF_PREFIX.sub("", p)
    p = _MODULES_ITEM.sub(r".\1", p)
    p = _INDEX.sub(r".\1", p)
    return p.strip(".")


def node_module_path(node: torch.fx.Node) -> str | None:
    """FQN of the innermost nn.Module a node came from; "" for the root module; None if unknown.
    Backward nodes carry only ``fwd_nn_module_stack`` (the forward node's stack). Paths are the
    model's own (:func:`module_of`), also in frames that run after a graph break."""
    meta = node.meta
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack")
    if not stack:
        return frame_module() if meta.get("stack_trace") else None
    key, last = list(stack.items())[-1]
    named = module_of(key)  # its path in the model, also after a graph break
    if named is not None:
        return named
    path = last[0] if isinstance(last, tuple) else str(last)
    return normalize_module_path(path)


# A Dynamo graph input that holds a module's parameter or buffer, by its source name:
# L['self']._modules['layer1']._modules['0']._parameters['weight'] -> ("layer1.0", "weight").
_PARAM_SOURCE = re.compile(r"^L\[['\"][^'\"]+['\"]\]((?:\._modules\[['\"][^'\"]+['\"]\])*)"
                           r"\._(?:parameters|buffers)\[['\"]([^'\"]+)['\"]\]$")


def parameter_names(gm: torch.fx.GraphModule) -> dict[int | str, str]:
    """Qualified names (``layer1.0.weight``) of the parameters and buffers a Dynamo graph takes.

    Keyed as AOTAutograd's input descriptors name them: by placeholder index (``PlainAOTInput.idx``;
    Dynamo passes inlined modules' parameters as inputs) and by graph attribute (``ParamAOTInput``/
    ``BufferAOTInput.target``, for modules Dynamo did not inline). Never raises, so tagging cannot
    break a compile: when the sources cannot be read, one warning, and no names.
    """
    names: dict[int | str, str] = {}
    try:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for i, node in enumerate(placeholders):
            source = getattr(node.meta.get("grapharg"), "source", None)
            text = getattr(source, "name", None)
            text = text() if callable(text) else text  # a method in older torch, a property in 2.13
            m = _PARAM_SOURCE.match(text) if isinstance(text, str) else None
            if m:
                names[i] = ".".join([*_MODULES_ITEM.findall(m.group(1)), m.group(2)])
        for flat, fqn in (gm.meta.get("dynamo_flat_name_to_original_fqn") or {}).items():
            names[str(flat)] = str(fqn)
    except Exception as e:
        _warn_no_parameter_names(f"{type(e).__name__}: {e}")
        return {}
    return names


@functools.lru_cache(maxsize=1)
def _warn_no_parameter_names(why: str) -> None:
    # lru_cache(maxsize=1) logs the first failure, and a different one only when it changes.
    log.warning("inductor_perf: cannot read the parameter names of Dynamo's graph inputs (%s); "
                "kernels that read only parameters get no module or source", why)


def _parameter_of(node: torch.fx.Node, names: Mapping[int | str, str]) -> str | None:
    """The qualified name of the parameter or buffer an AOT graph placeholder holds, or None."""
    if node.op != "placeholder" or not names:
        return None
    desc = node.meta.get("desc")
    kind = type(desc).__name__
    if kind == "PlainAOTInput":
        return names.get(getattr(desc, "idx", None))  # type: ignore[arg-type]
    if kind in ("ParamAOTInput", "BufferAOTInput"):
        return names.get(getattr(desc, "target", None))  # type: ignore[arg-type]
    return None
