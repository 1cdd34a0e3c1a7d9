"""Running a model eagerly and compiled under the profiler, and the entry points that compare runs or
saved traces: :func:`compare`, :func:`compare_file`, :func:`diff_traces`, :func:`diff_files`.

This is the I/O edge of the comparison: it runs the model, writes and reads trace files, and hands
trace dicts to the pure ``units`` / ``rows`` stages.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InductorPerfError
from ..model import events as evs
from ..model.event_cost import EventCost
from ..model.tags import aten_op_name
from ..summary.steps import median
from ..traces import files as tf
from ..traces.engines import check_engine
from .rows import Comparison, compare_units
from .sides import costed_units, two_sides
from .units import VIEW_OPS, trace_units

log = logging.getLogger(__name__)


# --- trace files -----------------------------------------------------------------------------------
def diff_traces(a: Mapping[str, Any], b: Mapping[str, Any], *, by: str = "module",
                labels: tuple[str, str] = ("A", "B")) -> Comparison:
    """Compare two trace dicts (eager vs compiled, or two compiled runs), matched ``by`` module path,
    source line, op or kernel name (pure).

    >>> c = diff_traces(load_trace("eager.json.gz"), load_trace("compiled.json.gz"))  # doctest: +SKIP
    >>> print(c.to_text())  # doctest: +SKIP
    """
    ua, note_a = costed_units(a)
    ub, note_b = costed_units(b)
    result = compare_units(ua, ub, by=by, labels=labels)
    result.notes += [f"{side}: {note}" for side, note in zip(labels, (note_a, note_b)) if note]
    return result


def diff_files(path_a: str | os.PathLike, path_b: str | os.PathLike, *, by: str = "module",
               engine: str = "auto") -> Comparison:
    """:func:`diff_traces` of two ``.json`` / ``.json.gz`` trace files: the same Comparison (within
    float rounding), built from each file's aggregated units (:mod:`.sides`: two large files are
    read at once, the second by a worker process, each in windows). ``engine``: ``"full"`` loads
    each trace whole, one after the other, and cuts it as :func:`diff_traces` does; ``"stream"``
    streams whatever the size; ``"auto"`` (default) streams a large file
    (:func:`inductor_perf.traces.engines.streams`)."""
    la = os.path.basename(os.fspath(path_a))
    lb = os.path.basename(os.fspath(path_b))
    if la == lb:
        la, lb = os.fspath(path_a), os.fspath(path_b)
    check_engine(engine, "diff")
    kernels = by == "kernel"  # only --by kernel reads the kernels themselves
    if engine == "full":
        ua, note_a = costed_units(tf.load_trace(path_a), kernels)  # one trace in memory at a time
        ub, note_b = costed_units(tf.load_trace(path_b), kernels)
    else:
        (ua, note_a), (ub, note_b) = two_sides(path_a, path_b, engine, kernels)
    result = compare_units(ua, ub, by=by, labels=(la, lb))
    result.notes += [f"{side}: {note}" for side, note in zip((la, lb), (note_a, note_b)) if note]
    return result


# --- compare(): profile eager and compiled runs of one model ---------------------------------------
def _also_modules(tag: Any) -> tuple[str, ...]:
    """The modules of a kernel's (non-view) FX nodes other than the tag's own module, in node order:
    the fusion map names them. The kernel's module itself is decided once, in tagging
    (``KernelTag.module_path``)."""
    others: dict[str, None] = {}
    for node in tag.nodes:
        op = aten_op_name(node.original_aten or node.target)
        if node.module_path is None or op in VIEW_OPS or node.module_path == tag.module_path:
            continue
        others.setdefault(node.module_path, None)
    return tuple(others)


def _kernel_infos(costs: Mapping[int, EventCost]) -> dict[int, dict[str, Any]]:
    """Per kernel event index: module, other modules, ops, kernel name, node keys and source line, read
    from the tag each cost was evaluated from (``EventCost.tag``)."""
    infos: dict[int, dict[str, Any]] = {}
    for i, cost in costs.items():
        t = cost.tag
        if t is None:
            continue
        node_keys = tuple((n.module_path, aten_op_name(n.original_aten or n.target) or "", n.source) for n in t.nodes)
        infos[i] = {"module": t.module_path, "also_modules": _also_modules(t), "ops": t.eager_ops,
                    "kernel": t.kernel_name, "node_keys": node_keys,
                    "source": t.source}
    return infos


def _as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    return (example_inputs,)


def _default_loss(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out.float().sum() if not out.is_floating_point() else out.sum()
    tensors = [t for t in (out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else ())
               if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not tensors:
        raise InductorPerfError(f"the model returned {type(out).__name__}; pass loss_fn=(output -> scalar "
                                "tensor) to compare the backward, or backward=False")
    return sum(t.sum() for t in tensors)


class _SavedState:
    """Everything a compare run could change on the user's model, restored on exit: .grad objects,
    training flags, buffers (BatchNorm running stats) and the CPU RNG state (dropout)."""

    def __init__(self, model: Any) -> None:
        import torch

        self.model = model
        self.params = list(model.parameters())
        self.grads = [p.grad for p in self.params]
        self.training = [(m, m.training) for m in model.modules()]
        self.buffers = [(b, b.detach().clone()) for b in model.buffers()]
        self.rng = torch.get_rng_state()

    def clear_grads(self) -> None:
        # Fresh .grad tensors for our runs; the user's own .grad objects are never written to.
        for p in self.params:
            p.grad = None

    def restore(self) -> None:
        import torch

        for p, g in zip(self.params, self.grads):
            p.grad = g
        for m, flag in self.training:
            m.training = flag
        with torch.no_grad():
            for b, saved in self.buffers:
                b.copy_(saved)
        torch.set_rng_state(self.rng)


def _run_steps(fn: Any, inputs: tuple[Any, ...], n: int, backward: bool, loss_fn: Any,
               state: _SavedState, *, marks: bool, first_index: int = 0,
               after_step: Callable[[], None] | None = None) -> list[float]:
    """Run ``n`` steps (forward, loss, backward), returning each step's wall time in µs."""
    import torch

    from .eager import phase_range, step_range

    times = []
    for k in range(n):
        state.clear_grads()
        t0 = time.perf_counter()
        with step_range(first_index + k) if marks else _null():
            if backward:
                with phase_range("forward") if marks else _null():
                    out = fn(*inputs)
                with phase_range("loss") if marks else _null():
                    loss = (loss_fn or _default_loss)(out)
                    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                        raise InductorPerfError(f"loss_fn must return a scalar tensor, got {type(loss).__name__}"
                                                f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
                    if not loss.requires_grad:
                        raise InductorPerfError("the loss does not require grad (no parameters with "
                                                "requires_grad, or the model ran under no_grad); use backward=False")
                with phase_range("backward") if marks else _null():
                    loss.backward()
            else:
                with torch.no_grad(), phase_range("forward") if marks else _null():
                    fn(*inputs)
        times.append((time.perf_counter() - t0) * 1e6)
        if after_step is not None:
            after_step()
    return times


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()


def _flat_tensors(inputs: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    return [x for x in tree_flatten(inputs)[0] if isinstance(x, torch.Tensor)]




def _check_compare_args(model: Any, example_inputs: Any, by: str, steps: Any, warmup: Any) -> None:
    """Refuse what compare() cannot measure, saying what it accepts."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise InductorPerfError(f"compare() needs an nn.Module, got {type(model).__name__}")
    if by not in ("module", "line", "op"):
        raise InductorPerfError(f"compare(by={by!r}): expected 'module', 'line' or 'op' "
                                "(by='kernel' is for diffs of two compiled traces)")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise InductorPerfError(f"steps must be an integer >= 1, got {steps!r}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 1:
        raise InductorPerfError(f"warmup must be an integer >= 1 (the compiled run compiles there), got {warmup!r}")
    tensors = [t for t in (*model.parameters(), *model.buffers(), *_flat_tensors(example_inputs))
               if isinstance(t, torch.Tensor)]
    if any(t.device.type != "cpu" for t in tensors):
        # Timing a GPU model needs synchronization and CUDA activities; until compare() has them,
        # refuse rather than report launch times as kernel times.
        raise InductorPerfError("compare() supports CPU models and inputs for now; move the model and "
                                "inputs to CPU, or profile GPU runs with inductor_perf.profile() and "
                                "compare the traces with 'inductor-perf diff'")


@dataclass(frozen=True)
class _Runs:
    """What the eager and compiled runs of compare() recorded."""

    eager_trace: dict
    compiled_raw: dict
    """The compiled run's trace as the profiler wrote it (not augmented yet)."""
    eager_times: list[float]
    compiled_times: list[float]
    """Step times without the profiler, µs (empty without ``timing``)."""
    n_modules: int
    """Modules wrapped in eager module ranges."""


def _profile_both(model: Any, inputs: tuple[Any, ...], *, backward: bool, steps: int, warmup: int,
                  loss_fn: Callable[[Any], Any] | None, opts: Mapping[str, Any], mode: str | None,
                  timing: bool) -> _Runs:
    """Warm up, profile and (with ``timing``) time eager then compiled runs; the model's state is
    restored and the temporary trace files removed whatever happens."""
    import torch

    from .eager import module_ranges

    state = _SavedState(model)
    tmp = tempfile.mkdtemp(prefix="inductor_perf_compare_")
    try:
        # --- eager ---
        with module_ranges(model) as n_modules:
            _run_steps(model, inputs, warmup, backward, loss_fn, state, marks=False)
            eager_path = os.path.join(tmp, "eager.json")
            _profile_to(eager_path, model, inputs, steps, backward, loss_fn, state)
        eager_times = _run_steps(model, inputs, steps, backward, loss_fn, state, marks=False) if timing else []
        # --- compiled ---
        compiled = torch.compile(model, backend="inductor_perf", options=dict(opts), mode=mode)
        _run_steps(compiled, inputs, warmup, backward, loss_fn, state, marks=False)
        compiled_path = os.path.join(tmp, "compiled.json")
        _profile_to(compiled_path, compiled, inputs, steps, backward, loss_fn, state)
        compiled_times = _run_steps(compiled, inputs, steps, backward, loss_fn, state, marks=False) if timing else []
        eager_trace = tf.load_trace(eager_path)
        raw = tf.load_trace(compiled_path)
    finally:
        state.restore()
        for f in ("eager.json", "compiled.json"):
            p = os.path.join(tmp, f)
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(tmp)
    return _Runs(eager_trace=eager_trace, compiled_raw=raw, eager_times=eager_times,
                 compiled_times=compiled_times, n_modules=n_modules)


def _augmented_compiled(raw: dict, notes: list[str]) -> tuple[dict, dict[int, dict[str, Any]]]:
    """The compiled trace augmented from its tags (costs, module path, eager ops on each kernel
    event) and, per kernel event index, what the tags say about it (for :func:`trace_units`)."""
    from ..augment.core import augment_trace
    from ..costs.from_tags import costs_from_tags
    from ..devices.resolve import run_device
    from ..model.tags import REGISTRY

    costs, jstats = costs_from_tags(raw, REGISTRY.get)
    notes += jstats.warnings()
    if not costs:
        notes.append("no compiled kernel was joined to its tags: is the inductor_perf backend installed "
                     "(entry point) and did the model compile?")
    # The augmented trace carries the same attribution the table uses: the tag's own module_path.
    infos = _kernel_infos(costs)
    # the capture's rule: the graphs' inductor_perf.device option, else this machine's device of the trace
    device, _ = run_device(raw, (i for i, _ in jstats.per_marker_counts), REGISTRY)
    compiled_trace, _ = augment_trace(raw, costs, device)  # writes eager_ops from the tags too
    return compiled_trace, infos


def _add_unprofiled_times(result: Comparison, eager_times: list[float], compiled_times: list[float]) -> None:
    """Put the median unprofiled step times on the result, and a note when the profiler slowed one
    side much more than the other."""
    result.a.unprofiled_step_us = median(eager_times)
    result.b.unprofiled_step_us = median(compiled_times)
    ra = result.a.step_us / result.a.unprofiled_step_us
    rb = result.b.step_us / result.b.unprofiled_step_us
    if max(ra, rb) > 2 * min(ra, rb):
        result.notes.append(
            f"the profiler slowed eager steps {ra:.1f}x and compiled steps {rb:.1f}x: the profiled "
            "speedups are distorted; trust the unprofiled step times (on an oversubscribed CPU, "
            "OpenMP threads waiting for each other inflate profiled eager ops: try "
            "torch.set_num_threads)")


def compare(model: Any, example_inputs: Any, *, backward: bool = True, steps: int = 3, warmup: int = 2,
            by: str = "module", loss_fn: Callable[[Any], Any] | None = None,
            options: Mapping[str, Any] | None = None, mode: str | None = None,
            trace_dir: str | os.PathLike | None = None, timing: bool = True) -> Comparison:
    """Profile eager and compiled runs of ``model`` under the same conditions and compare them.

    Both runs do ``warmup`` untimed steps (the compiled run compiles there), then ``steps`` profiled
    steps of forward, ``loss_fn(output)`` (default ``output.sum()``) and backward (``backward=False``:
    forward only, under no_grad). No optimizer step. The model is compiled through a wrapper
    (``torch.compile`` returns a new module), and its ``.grad``s, training flags, buffers and the RNG
    state are restored afterwards. ``options`` / ``mode`` go to ``torch.compile``; ``trace_dir`` keeps
    the two traces (``eager.trace.json.gz``, ``compiled.trace.json.gz``) for ``inductor-perf diff``.
    With ``timing``, each side also runs ``steps`` steps without the profiler (the speed you get).

    >>> c = inductor_perf.compare(model, (x,))  # doctest: +SKIP
    >>> print(c.to_text())  # doctest: +SKIP
    """
    _check_compare_args(model, example_inputs, by, steps, warmup)
    inputs = _as_tuple(example_inputs)
    opts = {"inductor_perf.kernel_profile": True, **dict(options or {})}
    runs = _profile_both(model, inputs, backward=backward, steps=steps, warmup=warmup, loss_fn=loss_fn,
                         opts=opts, mode=mode, timing=timing)
    notes: list[str] = []
    compiled_trace, infos = _augmented_compiled(runs.compiled_raw, notes)
    ua = trace_units(runs.eager_trace)
    ub = trace_units(compiled_trace, kernel_info=infos.get)
    result = compare_units(ua, ub, by=by, labels=("eager", "compiled"))
    result.notes = notes + result.notes
    result.notes.append(f"eager module ranges on {runs.n_modules} modules cost ~1 µs each per call; they are in "
                        f"the eager side's {evs.UNATTRIBUTED} time")
    if timing and runs.eager_times and runs.compiled_times:
        _add_unprofiled_times(result, runs.eager_times, runs.compiled_times)
    if trace_dir is not None:
        d = os.fspath(trace_dir)
        os.makedirs(d, exist_ok=True)
        tf.save_trace(runs.eager_trace, os.path.join(d, "eager.trace.json.gz"), inputs=())
        tf.save_trace(compiled_trace, os.path.join(d, "compiled.trace.json.gz"), inputs=())
    return result


def _profile_to(path: str, fn: Any, inputs: tuple[Any, ...], steps: int, backward: bool, loss_fn: Any,
                state: _SavedState) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ..capture.session import finish_waiting_windows, quiet_profile

    finish_waiting_windows()  # an env-var capture over the loop before this call may still be stopping
    if torch.autograd.profiler._is_profiler_enabled:
        raise InductorPerfError("compare() runs its own profiler; call it outside torch.profiler.profile()")
    # The first profiler session of a process pays one-time set-up inside the first ops it records;
    # a throw-away one-step session keeps that out of both measured sessions.
    with quiet_profile(profile(activities=[ProfilerActivity.CPU], record_shapes=False)):
        _run_steps(fn, inputs, 1, backward, loss_fn, state, marks=False)
    # record_shapes off: it costs µs per op and would tax eager (more ops) more than compiled.
    with quiet_profile(profile(activities=[ProfilerActivity.CPU], record_shapes=False)) as prof:
        _run_steps(fn, inputs, steps, backward, loss_fn, state, marks=True)
    prof.export_chrome_trace(path)


# --- model files (inductor-perf compare FILE.py) --------------------------------------------------
def load_model_file(path: str | os.PathLike) -> tuple[Any, tuple[Any, ...], Callable[[Any], Any] | None]:
    """(model, inputs, loss_fn or None) from a file defining ``make_model()`` and ``make_inputs()``
    (a tuple of positional inputs; a single tensor is accepted) and optionally ``loss_fn(output)``."""
    import runpy

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InductorPerfError(f"{p}: no such file; expected a Python file defining make_model() and make_inputs()")
    try:
        ns = runpy.run_path(p, run_name="__inductor_perf_model__")
    except InductorPerfError:
        raise
    except Exception as e:
        raise InductorPerfError(f"{p}: running the file failed: {type(e).__name__}: {e}") from e
    missing = [f for f in ("make_model", "make_inputs") if not callable(ns.get(f))]
    if missing:
        raise InductorPerfError(f"{p}: defines no {' or '.join(f + '()' for f in missing)}; expected "
                                "make_model() -> nn.Module and make_inputs() -> tuple of inputs")
    loss_fn = ns.get("loss_fn")
    if loss_fn is not None and not callable(loss_fn):
        raise InductorPerfError(f"{p}: loss_fn must be a function output -> scalar tensor")
    return ns["make_model"](), _as_tuple(ns["make_inputs"]()), loss_fn


def compare_file(path: str | os.PathLike, **kwargs: Any) -> Comparison:
    """:func:`compare` on the model of a model file (see :func:`load_model_file`)."""
    model, inputs, loss_fn = load_model_file(path)
    if loss_fn is not None:
        kwargs.setdefault("loss_fn", loss_fn)
    return compare(model, inputs, **kwargs)
