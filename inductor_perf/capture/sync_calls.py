"""Marks, while a capture records a GPU, each of the user's calls that can wait for the device
(``.item()``, ``.cpu()``, ``.tolist()``, ``nonzero``, ``float(t)``, ...) and each host-to-device copy
call (``.to()``, ``.cuda()`` of a host tensor, ``dst.copy_(src)``) with a profiler range naming the user's line
(:func:`inductor_perf.model.markers.call_marker_name`). A sync outside compiled code (``loss.item()``
in the training loop) or a pageable copy (``batch.cuda()``) then has its own line in the trace without
``with_stack=True``, which records every Python call and slows the profiled steps.

Python 3.12 and newer: :mod:`sys.monitoring` (PEP 669) reports each call before it runs (``CALL``) and
each return of a C function (``C_RETURN``, ``C_RAISE``). The first time a call site calls anything
else, its callback returns ``DISABLE`` and that site never calls back again, so after the first
(warm-up) step only the call sites of the listed functions run the callback: one dict lookup each,
and for a tensor on the GPU a range about the call (``_RecordFunctionFast``, ~0.25 µs). Every other
call still runs instrumented, ~15 ns slower (docs/benchmarks.md, "Sync-call marks"). The range
opens before the call and closes when it returns, so the sync's runtime calls nest inside it, as a
python stack event's would. On an older Python, or when both of the tool ids left free for tools
like this one are taken (a debugger and coverage use others), nothing is marked and the summary
names such a sync by the kernels it waited for.

The callbacks never raise into the user's code. Torch is imported only by :meth:`SyncCalls.start`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any, Callable

from ..model.markers import call_marker_name, is_library_path

log = logging.getLogger(__name__)

TOOL_IDS = (4, 3)
"""The sys.monitoring tool ids that Python names for no kind of tool (0 debugger, 1 coverage,
2 profiler, 5 optimizer): the first free one is ours for the capture."""
TENSOR_CALLS = ("item", "tolist", "cpu", "numpy", "nonzero", "to", "copy_", "masked_select", "equal", "allclose",
                "__bool__", "__int__", "__float__")
"""Tensor methods that copy to the host or need a value from it (a GPU tensor's call waits for the device)."""
TORCH_CALLS = ("nonzero", "masked_select", "equal", "allclose", "argwhere")
"""``torch.<name>`` functions that need a size or a value from the device."""
BUILTIN_CALLS = (bool, int, float)
"""``float(loss)`` and the like: a sync only when the argument is a GPU tensor."""
COPY_CALLS = ("to", "cuda", "copy_")
"""Tensor methods that copy a host tensor to the GPU (from pageable memory unless it is pinned): marked
for a tensor on the host as well, so that the summary gives a pageable copy its line. (``cuda`` of a
GPU tensor copies nothing: not marked.) ``dst.copy_(src)`` is marked whatever ``dst`` is, as the
call shows only it: into a GPU tensor (a host-to-device copy: the static inputs of a CUDA graph are
filled so) or out of one into a host tensor (a device-to-host copy, which waits for the device);
a host-to-host or device-to-device one gets a range that holds no copy or sync, which the summary
never names."""
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


COMPILER_DIRS = tuple(os.sep + os.path.join("torch", d) + os.sep for d in ("_dynamo", "_inductor", "_functorch"))
"""Torch's compiler: a call made below one of its frames is the compiler's (a compile in the window) or
compiled code's (Inductor's generated wrapper calls ``buf.item()`` for a data-dependent size)."""


def user_line(frame: Any, compiler: tuple[str, ...] = COMPILER_DIRS) -> str | None:
    """``file.py:LINE`` of the innermost frame, from ``frame`` out, of the user's code (not torch's,
    an installed package's, Python's or ours); the innermost frame's own where every frame is a library's.

    None (no range) where the way out to the user's frame passes a frame of torch's compiler (a path
    that contains one of ``compiler``: :attr:`SyncCalls.compiler` adds Inductor's cache folder, where
    its generated code lives): the summary names a sync in compiled code by the kernels before it (our
    tags' source line), which a range here would override with the generated file's line or the line
    that called the model."""
    first = None
    while frame is not None:
        path = frame.f_code.co_filename
        if any(d in path for d in compiler):
            return None
        here = f"{path}:{frame.f_lineno}"
        if not is_library_path(path) and not path.startswith(_OUR_DIR):
            return here
        first = first or here
        frame = frame.f_back
    return first


def tensor_on(device_type: str) -> Callable[[Any], bool]:
    """The test of a call's first argument: a real tensor on ``device_type`` ("cuda" for the capture).

    A compile that runs in the window (the first step, a recompile) calls ``.to()``, ``.item()``, ...
    on the fake tensors it traces with (FakeTensor, FunctionalTensor), from torch's own code under the
    user's line: those are not the user's calls and wait for nothing, so they get no range."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    base, tracing = torch._C.TensorBase, (FakeTensor, FunctionalTensor)
    if device_type == "cuda":
        return lambda t: isinstance(t, base) and t.is_cuda and not isinstance(t, tracing)
    return lambda t: isinstance(t, base) and t.device.type == device_type and not isinstance(t, tracing)


class SyncCalls:
    """The sys.monitoring tool that marks the calls (:meth:`start`, :meth:`stop`; one window at a time).

    ``names``: id of a callable -> the name its marker gives the call; ``on_device``: whether the
    call's first argument is a tensor whose call waits for the device; ``record``: a context-manager
    factory of a profiler range by name; ``copies``: ids (of ``names``) of the calls also marked when
    ``on_host`` holds for the first argument (the host-to-device copies, :data:`COPY_CALLS`), and
    ``host_only``: those of them marked for a host tensor only. All default to torch's (:meth:`start`
    fills them)."""

    def __init__(self, names: dict[int, str] | None = None, on_device: Callable[[Any], bool] | None = None,
                 record: Callable[[str], Any] | None = None, on_host: Callable[[Any], bool] | None = None,
                 copies: set[int] | None = None, host_only: set[int] | None = None) -> None:
        self.names = names
        self.on_device = on_device
        self.record = record
        self.on_host = on_host
        self.copies = copies
        self.host_only = host_only if host_only is not None else set()
        self.builtins = {id(b) for b in BUILTIN_CALLS}
        self.compiler = COMPILER_DIRS
        """Path parts of the compiler's frames (:func:`user_line`); :meth:`start` adds Inductor's cache folder."""
        self.tool: int | None = None
        self._local = threading.local()

    def start(self) -> bool:
        """Take a free tool id and start marking; False (nothing marked) where that cannot be done."""
        mon = getattr(sys, "monitoring", None)
        if mon is None or self.tool is not None:
            return False
        try:
            if self.names is None or self.on_device is None or self.record is None:
                self._torch_defaults()
            if self.copies is None or self.on_host is None:  # calls given without copies: none marked as such
                self.copies, self.host_only = set(), set()
            self.compiler = COMPILER_DIRS + _inductor_cache()
            for tool in TOOL_IDS:
                try:
                    mon.use_tool_id(tool, "inductor_perf")
                except ValueError:  # taken
                    continue
                self.tool = tool
                break
            else:
                log.debug("inductor_perf: sys.monitoring tool ids %s are taken; syncs get no line", TOOL_IDS)
                return False
            ev = mon.events
            mon.register_callback(tool, ev.CALL, self._on_call)
            mon.register_callback(tool, ev.C_RETURN, self._on_return)
            mon.register_callback(tool, ev.C_RAISE, self._on_return)
            mon.set_events(tool, ev.CALL | ev.C_RETURN | ev.C_RAISE)
            return True
        except Exception as e:  # a Python whose sys.monitoring differs: no marks, the run goes on
            log.debug("inductor_perf: could not mark sync calls (%s)", e)
            self.stop()
            return False

    def _torch_defaults(self) -> None:
        import torch

        base = torch._C.TensorBase
        names = {id(b): b.__name__ for b in BUILTIN_CALLS}
        for name in TENSOR_CALLS + COPY_CALLS:
            f = getattr(base, name, None)
            if f is not None:
                names[id(f)] = name
        copies = {id(getattr(base, name)) for name in COPY_CALLS if hasattr(base, name)}
        host_only = {id(getattr(base, name)) for name in COPY_CALLS if name not in TENSOR_CALLS and hasattr(base, name)}
        for name in TORCH_CALLS:
            f = getattr(torch, name, None)
            if f is not None:
                names[id(f)] = name
        self.names = self.names if self.names is not None else names
        self.on_device = self.on_device or tensor_on("cuda")
        if self.copies is None:
            self.copies, self.host_only = copies, host_only
            self.on_host = self.on_host or tensor_on("cpu")
        self.record = self.record or torch._C._profiler._RecordFunctionFast

    def stop(self) -> None:
        """Stop marking: events off, the tool id given back, and this thread's open ranges closed."""
        tool, self.tool = self.tool, None
        mon = getattr(sys, "monitoring", None)
        if tool is None or mon is None:
            return
        try:
            mon.set_events(tool, 0)
            for event in (mon.events.CALL, mon.events.C_RETURN, mon.events.C_RAISE):
                mon.register_callback(tool, event, None)
            mon.free_tool_id(tool)
        except Exception as e:
            log.debug("inductor_perf: could not release sys.monitoring tool %s (%s)", tool, e)
        stack = self._local.__dict__.get("open")
        while stack:
            self._exit(stack.pop()[1])

    # --- the callbacks (they never raise: an exception here would surface in the user's call) -----------
    def _on_call(self, code: Any, offset: int, callable_: Any, arg0: Any) -> Any:
        try:
            key = id(callable_)
            name = self.names.get(key)  # type: ignore[union-attr]
            if name is None:
                return sys.monitoring.DISABLE  # this site calls something else: never again
            if not (key in self.copies and self.on_host(arg0)  # type: ignore[operator,misc]
                    or key not in self.host_only and self.on_device(arg0)):  # type: ignore[misc]
                # float(3) here: a site of plain numbers; a CPU tensor's .item(): keep watching the site
                return sys.monitoring.DISABLE if key in self.builtins and not _is_tensor_like(arg0) else None
            source = user_line(sys._getframe(1), self.compiler)
            if source is None:
                return None
            rng = self.record(call_marker_name(name, source))  # type: ignore[misc]
            rng.__enter__()
            self._local.__dict__.setdefault("open", []).append((callable_, rng))
        except Exception:
            pass
        return None

    def _on_return(self, code: Any, offset: int, callable_: Any, arg0: Any) -> Any:
        try:
            stack = self._local.__dict__.get("open")
            if stack and stack[-1][0] is callable_:
                self._exit(stack.pop()[1])
        except Exception:
            pass
        return None

    @staticmethod
    def _exit(rng: Any) -> None:
        try:
            rng.__exit__(None, None, None)
        except Exception:
            pass


def _inductor_cache() -> tuple[str, ...]:
    """Inductor's cache folder (its generated code's files), where torch's Inductor is already loaded."""
    if "torch._inductor" not in sys.modules:
        return ()
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        return (os.path.join(os.path.realpath(cache_dir()), ""), os.path.join(cache_dir(), ""))
    except Exception:  # an older or newer layout: the compiler's own folders still catch the call
        return ()


def _is_tensor_like(x: Any) -> bool:
    """Whether ``x`` could be a tensor at another call of the same site (any object with a ``device``)."""
    return hasattr(type(x), "device")
