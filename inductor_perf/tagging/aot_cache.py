"""Our compiles with Inductor's AOTAutograd cache on: a hit serves each graph with the tags a miss makes.

A hit of the AOTAutograd cache skips tracing and partitioning the joint graph and never calls our
inner compile, where tags are collected and markers installed (:mod:`.compiler`). It hands
AOTAutograd each compiled graph through the ``load`` of the cache entry's parts
(``compat.AOT_LOADABLES``: one part per graph, naming it by FX graph cache key or bundling it whole).
While one of our compiles runs, :func:`serving` wraps those ``load`` methods, and each graph loaded is
checked for the tags stored beside its FX graph cache key (:mod:`.store`). A graph without them turns
the hit into a miss (AOTAutograd's own ``FXGraphCacheMiss``, which is what it raises itself when an
FX graph cache entry is gone): the compile then goes through our inner compile, which tags the graph
and stores the tags under that key, so the next process hits. After a hit, the compiler registers
each served graph from its stored tags and installs its marker (:meth:`Recorder.served`), as a miss
would: a backward graph that a miss compiles lazily, at its first call, is registered at its first
call too (:func:`on_first_call`), so ``kernel_table()`` lists the graphs in the order a miss does.

The hit is ours alone: the AOTAutograd key hashes Inductor's config, where our namespace pass and its
``uuid()`` stand (``compiler._namespace_pass``: the hash of tagging/'s code and our options), so an
entry written by plain Inductor, by other tagging code or under other options is a miss.

A torch whose parts are not what we wrap fails ``compat``'s check of ``compat.AOT_CACHE_HITS``, and
a hit that is served without calling them (:meth:`Recorder.served` returns None) marks this process
broken: either way our compiles run with the AOTAutograd cache off, as before this module, and one
log line says so. No graph is ever served without its tags unsaid: the one a broken hit served is
registered as untagged, with the reason.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from . import store as tag_store
from ..compat import AOT_CACHE_HITS, AOT_LOADABLES, AOT_RESULT_MODULE

log = logging.getLogger(__name__)

_ACTIVE: contextvars.ContextVar["Recorder | None"] = contextvars.ContextVar(
    "inductor_perf_aot_recorder", default=None)


@dataclass(frozen=True)
class Served:
    """One compiled graph an AOTAutograd cache hit served."""

    compiled: Any
    """The CompiledFxGraph the entry loaded."""
    stored: dict[str, Any] | None
    """Its stored tags (:func:`.store.load`); None only under ``strict_autograd_cache``, where a
    miss would be an error."""
    is_backward: bool
    lazy: bool
    """A backward graph that a miss compiles at its first call (AOTAutograd lowers a backward eagerly
    only when it saves size symbols for it, or when told to): register it then."""


class Recorder:
    """What one of our compiles saw of the AOTAutograd cache (one per ``compile_fx`` call)."""

    def __init__(self) -> None:
        self.loaded: list[Served] = []
        self.inner_compiles = 0
        self._hits = _hit_count()
        self._graph_id = next_graph_id()

    def on_load(self, loadable: Any, compiled: Any) -> None:
        """A graph the entry loaded: keep it with its stored tags, or turn the hit into a miss."""
        from torch._functorch import config as functorch_config
        from torch._functorch._aot_autograd.autograd_cache import FXGraphCacheMiss

        key = getattr(compiled, "_fx_graph_cache_key", None)
        stored = tag_store.load(key)
        if stored is None and not functorch_config.strict_autograd_cache:  # strict: the miss would raise
            log.info("inductor_perf: AOTAutograd cache entry without stored tags (FX graph %s); "
                     "compiling the graph to tag it", key)
            raise FXGraphCacheMiss(f"inductor_perf: no stored tags for FX graph {key}")
        mod = importlib.import_module(AOT_RESULT_MODULE)
        is_backward = isinstance(loadable, mod.GenericCompiledBackward)
        lazy = is_backward and not (loadable.num_symints_saved_for_bw_ > 0
                                    or functorch_config.force_non_lazy_backward_lowering)
        self.loaded.append(Served(compiled, stored, is_backward, lazy))

    def served(self) -> list[Served] | None:
        """After the compile: the graphs a hit served, forward first; empty after a miss (our inner
        compile tagged every graph; torch may have loaded some before missing); None when a hit was
        served without calling the ``load`` methods we wrap."""
        if self.inner_compiles:
            return []
        if self.loaded:
            return list(self.loaded)
        return None if _hit_count() > self._hits else []

    def graph_id(self, compiled: Any) -> int:
        """The graph id this compile took (what a miss passes to the inner compile): Inductor's
        counter before the compile, when the compile advanced it by exactly one; else the id the
        entry was compiled with."""
        if self._graph_id is not None and next_graph_id() == self._graph_id + 1:
            return self._graph_id
        kwargs = getattr(compiled, "fx_kwargs", None) or {}
        graph_id = kwargs.get("graph_id")
        return graph_id if isinstance(graph_id, int) else -1


def note_inner_compile() -> None:
    """Called by our inner compile: the compile in progress on this thread is a miss."""
    recorder = _ACTIVE.get()
    if recorder is not None:
        recorder.inner_compiles += 1


def _hit_count() -> int:
    from torch._dynamo.utils import counters

    return int(counters["aot_autograd"]["autograd_cache_hit"])


_COUNT = re.compile(r"^count\((\d+)\)$")


def next_graph_id() -> int | None:
    """The graph id Inductor's next ``compile_fx`` takes (its counter, read without advancing it)."""
    try:
        from torch._inductor import compile_fx

        m = _COUNT.match(repr(compile_fx._graph_counter))
        return int(m.group(1)) if m else None
    except Exception:
        return None


def _wrap_load(original: Any) -> Any:
    def load(self: Any, example_inputs: Any) -> Any:
        compiled = original(self, example_inputs)
        recorder = _ACTIVE.get()
        if recorder is not None:
            recorder.on_load(self, compiled)
        return compiled

    load._inductor_perf_original = original  # type: ignore[attr-defined]
    return load


class _Hooks:
    """The wrapped ``load`` methods: installed by the first of our compiles to start and removed by
    the last to end (a count under a lock, as ``collector._Hooks``); a load on a thread where none of
    our compiles runs passes through untouched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved: list[tuple[Any, Any]] = []  # (class, its own load)

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                try:
                    mod = importlib.import_module(AOT_RESULT_MODULE)
                    for name in AOT_LOADABLES:
                        cls = getattr(mod, name)
                        own = cls.__dict__["load"]
                        if not hasattr(own, "_inductor_perf_original"):  # else another copy of us wrapped it
                            cls.load = _wrap_load(own)
                            self._saved.append((cls, own))
                except BaseException:  # half installed: take back what was
                    self._uninstall()
                    raise
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._uninstall()

    def _uninstall(self) -> None:
        for cls, own in self._saved:
            if getattr(cls.__dict__.get("load"), "_inductor_perf_original", None) is own:
                cls.load = own
        self._saved = []


_HOOKS = _Hooks()
_broken: str | None = None  # set when our hooks failed in this process: the cache is off for it from then on
_broken_lock = threading.Lock()


def mark_broken(reason: str, served_untagged: bool = True) -> None:
    """Our hooks failed this process: say so once, and run our later compiles with the AOTAutograd
    cache off. ``served_untagged``: a hit served a graph without the hooks seeing it (else they
    could not be installed, and nothing was served)."""
    global _broken
    with _broken_lock:
        first, _broken = _broken is None, _broken or reason
    if not first:
        return
    if served_untagged:
        log.warning("inductor_perf: an AOTAutograd cache hit served a graph without its tags (%s); that "
                    "graph's kernels are untagged, and our later compiles in this process run with the "
                    "AOTAutograd cache off", reason)
    else:
        log.warning("inductor_perf: %s; our compiles in this process run with the AOTAutograd cache off, "
                    "as before: a warm restart traces the joint graph again (every kernel is still tagged)",
                    reason)


@contextlib.contextmanager
def serving(support: Any) -> Iterator[Recorder | None]:
    """Around one of our ``compile_fx`` calls: the AOTAutograd cache as the user has it (on by default,
    as for ``backend="inductor"``) with our ``load`` hooks, yielding the :class:`Recorder`; or, when
    ``support`` (``compat.backend_support()``, which said so once) lacks the hooks' internals or a hit
    got past them in this process, the cache off for the compile, yielding None."""
    import torch

    recorder = None
    if not support.lacks(AOT_CACHE_HITS) and _broken is None:
        try:
            recorder = Recorder()
            _HOOKS.acquire()
        except Exception as e:  # the check passed, yet they would not go in: as if it had failed
            recorder = None
            mark_broken(f"could not hook the AOTAutograd cache ({type(e).__name__}: {e})".splitlines()[0],
                        served_untagged=False)
    if recorder is None:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            yield None
        return
    token = _ACTIVE.set(recorder)
    try:
        yield recorder
    finally:
        _ACTIVE.reset(token)
        _HOOKS.release()


def on_first_call(compiled: Any, register: Callable[[], None]) -> None:
    """Run ``register`` at the first call of ``compiled`` (a CompiledFxGraph), before the call: it
    may install the graph's marker, which this call then goes through. Later calls cost nothing more
    (the callable is put back)."""
    fn = compiled.current_callable
    if fn is None:
        raise ValueError("the compiled graph has no callable")
    lock = threading.Lock()

    def first_call(inputs: Any) -> Any:
        with lock:
            if compiled.current_callable is first_call:
                compiled.current_callable = fn
                try:
                    register()
                except Exception as e:  # never break the user's backward
                    log.warning("inductor_perf: could not register a cached backward graph's tags (%s)", e)
        return compiled.current_callable(inputs)

    compiled.current_callable = first_call
