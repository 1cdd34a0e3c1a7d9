"""Module paths for graphs of frames other than the model's own forward.

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
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")


@dataclass(frozen=True)
class FrameModules:
    """The model's module names by ``str(id(module))``, and the path of the frame's own module."""

    names: Mapping[str, str]
    frame_module: str


_CURRENT: contextvars.ContextVar[FrameModules | None] = contextvars.ContextVar("inductor_perf_frame_modules",
                                                                                default=None)


def _calling_modules() -> list[Any]:
    """The modules whose ``__call__`` is on this thread's stack, innermost first."""
    import torch

    out = []
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_name == "_call_impl" and code.co_filename.endswith(_MODULE_PY):
            mod = f.f_locals.get("self")
            if isinstance(mod, torch.nn.Module):
                out.append(getattr(mod, "_orig_mod", mod))  # torch.compile's OptimizedModule wraps it
        f = f.f_back
    return out


def from_stack() -> FrameModules | None:
    """The names for a compile running now on this thread, or None when no module is being called
    (a compiled function, or a backward graph compiled by the autograd engine)."""
    mods = _calling_modules()
    if not mods:
        return None
    root = mods[-1]
    names: dict[str, str] = {}
    for name, m in root.named_modules(remove_duplicate=False):
        names.setdefault(str(id(m)), name)  # a shared module keeps its first name
    return FrameModules(names=names, frame_module=names.get(str(id(mods[0])), ""))


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
