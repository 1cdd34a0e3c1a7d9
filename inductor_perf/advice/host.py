"""Findings about the host: the data loader, launch gaps, syncs, the optimizer's step and pageable
copies (docs/advisor.md), from the summary's :class:`~inductor_perf.summary.signals.AdviceSignals`.
Each detector is ``find_*(record, summary) -> list[Finding]``. Torch-free."""

from __future__ import annotations

from typing import Any, Mapping

from ..model.events import NO_HOST_EVENT
from .finding import Finding
from .per_step import Step, us

STATE_TENSORS = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2, "Adadelta": 2, "SparseAdam": 2,
                 "SGD": 1, "RMSprop": 1, "Adagrad": 1, "Rprop": 2, "ASGD": 2}
"""Per-parameter state tensors each optimizer keeps (torch.optim); others count as 2."""
MIN_OPS = 50
"""An optimizer step of fewer ops is not worth fusing."""
MIN_PARAMS = 8


def _signals(summary: Any) -> Any:
    return getattr(summary, "signals", None)


def finding(kind: str, title: str, total_us: float, step: Step, evidence: str, fix: str,
            source: str | None = None, module: str | None = None) -> Finding:
    """A finding whose saving is ``total_us`` over the window, per ``step``."""
    saving = step.per_step(total_us)
    pct, why = step.pct(saving)
    return Finding(kind=kind, title=title, source=source, module=module, saving_us_per_step=saving,
                   saving_pct_of_step=pct, one_time_s=None, evidence=evidence + (f" Saving as {why}." if why else ""),
                   fix=fix)


def _who(sig: Any) -> str:
    return "the device" if sig.on_device else "the CPU's compute thread"


def find_input_wait(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """The device (on CPU, the compute thread) idle while the host is in a DataLoader ``next()``."""
    sig = _signals(summary)
    if sig is None or sig.input_wait_us <= 0:
        return []
    step = Step.of(summary)
    wait = step.per_step(sig.input_wait_us)
    return [finding(
        "input_wait", f"{_who(sig)} waits {us(wait)} a step for the data loader", sig.input_wait_us, step,
        f"{sig.loader_calls} DataLoader next() call(s) ({sig.loader_name}) took {us(step.per_step(sig.loader_us))} "
        f"a step, {us(wait)} of it with no kernel running; step = {step.basis}. Model: a loader that keeps "
        "batches ready ahead of the step removes that idle time.",
        "load batches ahead of the step: DataLoader(..., num_workers=N, pin_memory=True, prefetch_factor=2, "
        "persistent_workers=True), or make Dataset.__getitem__ / collate_fn cheaper")]


def _top(named: Mapping[str, float], step: Step, n: int = 4) -> str:
    return ", ".join(f"{k} {us(step.per_step(v))}" for k, v in list(named.items())[:n])


def find_host_bound(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """Device idle between kernels while the host launches them: inside compiled code (CUDA graphs
    replay it: ``mode="reduce-overhead"``), and in the eager work outside it."""
    sig = _signals(summary)
    if sig is None or not sig.on_device:
        return []
    step = Step.of(summary)
    out = []
    if sig.launch_gap_us > 0 and not sig.graph_launches:
        out.append(finding(
            "host_bound", f"launch-bound: the device idles {us(step.per_step(sig.launch_gap_us))} a step "
            "between the compiled graphs' kernels while the host launches them", sig.launch_gap_us, step,
            f"device idle while the host was inside compiled-graph calls (and not in a loader or a sync): "
            f"{us(step.per_step(sig.launch_gap_us))} a step; step = {step.basis}. Model: a CUDA graph replays "
            "the graph's kernels back to back, so the launch gaps between them go.",
            'torch.compile(model, backend="inductor_perf", mode="reduce-overhead") (CUDA graphs); keep the '
            "step's shapes static so the graphs are reused"))
    if sig.eager_idle_total_us > 0:
        where = _top(sig.eager_idle_us, step)
        unrecorded = sig.eager_idle_us.get(NO_HOST_EVENT, 0.0)
        model = "Model: that work launched from compiled code (or replayed in a graph) would not leave the device idle."
        if unrecorded > sig.eager_idle_total_us / 2:
            # No op to name or compile: Python outside torch, I/O, a JIT compile, a sleep.
            title = (f"the device idles {us(step.per_step(sig.eager_idle_total_us))} a step while the host runs "
                     f"no recorded op ({us(step.per_step(unrecorded))} of it)")
            fix = ("find what the host does in those gaps (the longest idle gaps table; with_stack=True, or "
                   "py-spy, names the code): Python work outside torch, I/O or logging in the step; take it out "
                   "of the step or overlap it (DataLoader workers for data preparation)")
            model = ("Model: that host work out of the step (or overlapped with the device's) would not leave the "
                     "device idle; compiling does not remove it, as it runs no op.")
        elif sig.graph_launches:
            title = (f"the device idles {us(step.per_step(sig.eager_idle_total_us))} a step outside the CUDA "
                     "graphs, while the host runs eager work (loss, optimizer, copies)")
            fix = ("the compiled code already replays as CUDA graphs: move the eager work between them into "
                   "the compiled region (compute the loss inside the compiled function; step the optimizer with "
                   "fused=True, or compile the optimizer step; keep host-device copies non_blocking and out of "
                   "the step)")
        elif sig.compiled_calls:
            title = (f"the device idles {us(step.per_step(sig.eager_idle_total_us))} a step while the host runs "
                     "eager work outside the compiled graphs")
            fix = ("compile the eager work too (the loss inside the compiled function, the optimizer step with "
                   "fused=True or compiled), and keep host-device copies non_blocking")
        else:
            title = (f"launch-bound: the device idles {us(step.per_step(sig.eager_idle_total_us))} a step while "
                     "the host runs the model eagerly")
            fix = ('torch.compile(model, backend="inductor_perf") (fewer, fused kernels to launch), then '
                   'mode="reduce-overhead" to replay them as CUDA graphs; fused=True for the optimizer')
        out.append(finding(
            "host_bound", title, sig.eager_idle_total_us, step,
            f"device idle outside compiled-graph calls, loaders and syncs, by the host's outermost activity "
            f"(threads overlap): {where}; step = {step.basis}. {model}", fix))
    return out


def find_sync(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """Host-device syncs inside the step, one finding per source line."""
    sig = _signals(summary)
    if sig is None or not sig.on_device:
        return []
    step = Step.of(summary)
    out = []
    for site in sig.syncs:
        saving = min(site.drain_us, site.host_us)
        if saving <= 0:
            continue
        where = site.source or (f"an unknown line (after the kernels of {site.after})" if site.after
                                else "an unknown line")
        out.append(finding(
            "sync", f"host-device sync at {where} ({site.what}) holds the host {us(step.per_step(site.host_us))} "
            f"and leaves the device idle {us(step.per_step(site.drain_us))} a step", saving, step,
            f"{site.count} sync(s) ({site.what}); the host waited {us(step.per_step(site.host_us))} a step and the "
            f"device then sat idle {us(step.per_step(site.drain_us))} a step until the next kernel; step = "
            f"{step.basis}. Model: without the sync the step loses the lesser of the two - a device-bound step "
            "the idle after it (the host launches ahead and the queue never drains), a host-bound step the wait "
            "(the device idles between launches either way)." + (
                "" if site.source or not site.after else
                f" The sync ran outside compiled code and the trace says nothing of its line (our capture marks "
                f"each such call with its line on Python 3.12 and newer; with_stack=True records a python stack): "
                f"{site.after} is the line of the last kernel before it, the work it waited for."),
            "keep values on the device inside the step: no .item() / .cpu() / print(tensor) / if tensor: in the "
            "loop (log every N steps), torch.where or masks instead of nonzero / boolean indexing, "
            "non_blocking=True copies", source=site.source))
    return out


def unfused_optimizer(sig: Any) -> tuple[Any, float, float, int] | None:
    """(the optimizer step, ops per parameter, the share of its time a fused step saves, the fused step's
    tensor passes) when it is an unfused per-parameter one worth fusing, else None."""
    opt = sig.optimizer if sig is not None else None
    if opt is None or opt.fused or not opt.per_param or opt.calls == 0:
        return None
    ops = opt.top_ops / opt.calls
    if ops < MIN_OPS or opt.per_param < MIN_PARAMS:
        return None
    per_param_ops = ops / opt.per_param
    fused_passes = 3 + 2 * STATE_TENSORS.get(_optimizer_class(opt.name), 2)
    share = 1.0 - fused_passes / (3 * per_param_ops)
    return (opt, per_param_ops, share, fused_passes) if share > 0 else None


def _optimizer_class(name: str) -> str:
    """``AdamW`` of ``Optimizer.step#AdamW.step``."""
    return name.split("#", 1)[-1].split(".", 1)[0]


def find_optimizer(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """An unfused optimizer step that updates many parameters one at a time."""
    sig = _signals(summary)
    got = unfused_optimizer(sig)
    if got is None:
        return []
    opt, per_param_ops, share, fused_passes = got
    ops = opt.top_ops / opt.calls
    cls = _optimizer_class(opt.name)
    unfused_passes = 3 * per_param_ops
    step = Step.of(summary)
    fix = (f"torch.optim.{cls}(params, fused=True)" + (" (foreach=True runs the same per-tensor kernels on CPU)"
                                                       if not sig.on_device else " (or foreach=True)"))
    return [finding(
        "optimizer", f"{opt.name} updates {opt.per_param} parameters one at a time ({ops:.0f} ops a step)",
        opt.time_us * share, step,
        f"{opt.calls} step(s) took {us(step.per_step(opt.time_us))} a step, ~{per_param_ops:.1f} ops per parameter. "
        f"Model: each unfused op streams ~3 tensors (2 in, 1 out); a fused step streams each tensor once "
        f"(param and grad in, param out, {STATE_TENSORS.get(cls, 2)} state tensor(s) in and out: {fused_passes} "
        f"passes against {unfused_passes:.0f}), at the bandwidth the unfused ops achieved: saving = step time x "
        f"(1 - {fused_passes}/{unfused_passes:.0f}) = {share:.0%} of it; step = {step.basis}.", fix)]


def find_memcpy(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """Host-to-device copies from pageable memory, one finding per line of the user's code that made
    them (one for all where the trace does not say which)."""
    sig = _signals(summary)
    sites = [(c.source, c.count, c.us) for c in sig.pageable if c.us > 0] if sig is not None else []
    if not sites:
        return []
    step = Step.of(summary)
    out = []
    for source, count, total in sites:
        where = f" at {source}" if source else ""
        line = ("" if source else " Which line made them is not in the trace (our capture's range around "
                ".to()/.cuda()/.copy_() names it on Python 3.12+, as does with_stack=True).")
        out.append(finding(
            "memcpy", f"{count} host-to-device copies from pageable memory{where} take "
            f"{us(step.per_step(total))} a step", total, step,
            f"Memcpy HtoD (Pageable -> Device): {count} copies{where}, {us(step.per_step(total))} a "
            f"step; step = {step.basis}. Model: a copy from pinned memory with non_blocking=True runs beside the "
            "compute, so its time leaves the step (an upper bound when the next kernel needs the data at once)."
            + line,
            "pin the host tensors (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with "
            ".to(device, non_blocking=True) (or dst.copy_(src, non_blocking=True))", source=source))
    return out
