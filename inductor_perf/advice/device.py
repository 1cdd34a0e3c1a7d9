"""Findings about the device's own work: kernels far under their roof, float32 matmuls with a faster
path, collectives compute does not hide (docs/advisor.md). Each detector is
``find_*(record, summary) -> list[Finding]``. Torch-free."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..model.kernel_kinds import KIND_COLLECTIVE, KIND_CONV, KIND_MEMCPY, KIND_MEMSET, name_kind, op_kind
from .finding import Finding
from .host import finding, unfused_optimizer
from .per_step import Step, us

FAR_UNDER_PCT = 50.0
"""A kernel below this % of the roof that binds it has headroom."""
HEADROOM_LINES = 3
"""Source lines reported (the rest are in none: the kernel table has them)."""
FAST_PATH_RATIO = 1.5
"""A tf32 / bf16 matmul roof at least this many times float32's is a faster path."""
_NOT_COMPUTE = (KIND_MEMCPY, KIND_MEMSET, KIND_COLLECTIVE)
HOST_COMM_NOTE = (" These are host collectives (gloo): their reductions run on the CPU cores the compute needs, so "
                  "overlap hides them only as far as cores are free beside the compute, and buys less than this "
                  "bound on a CPU job (docs/advisor.md, Calibration).")
"""Said of host collectives (the communication view's source ``host``): measured with DDP on two ranks of one
core each, overlap bought under a third of the bound."""

COMM_FIX = ("overlap communication with compute: DDP(bucket_cap_mb=..., gradient_as_bucket_view=True), FSDP "
            "forward/backward prefetch, async collectives issued early; or fewer, larger collectives")


HEADROOM_FIX = ("look at these kernels in the kernel table: shapes too small to fill the device (batch more, fuse "
                "them: more of the step in one compiled graph), layouts that stride memory, or mode=\"max-autotune\"")
CONV_FIX = ("convolutions: the channels_last layout (model.to(memory_format=torch.channels_last) and inputs "
            "x.contiguous(memory_format=torch.channels_last)), which the convolution libraries run fastest, "
            "depthwise ones most of all; then ")
"""Said first when a convolution is among the kernels (measured: a depthwise 3x3 conv compiled on one CPU thread,
30.2 ms in NCHW, 3.1 ms in channels_last; docs/advisor.md, headroom)."""


def roof_caveat(summary: Any) -> str:
    """Said in the evidence of an estimate that rests on the device's roofs when they are computed (a
    CPU's: from the ISA and clock, the DRAM bandwidth a guess), not measured; "" otherwise."""
    peak = getattr(summary, "peak", None)
    if getattr(peak, "peak_source", None) != "computed":
        return ""
    return (" The roofs are computed from the ISA and clock (the DRAM bandwidth estimated), not measured, and this "
            "estimate is only as good as they are: `inductor-perf calibrate` on the machine that recorded the trace "
            "measures them (docs/advisor.md, Calibration).")


def _is_conv(kind: str, name: str) -> bool:
    """A convolution by its kind, the op it is (``aten::convolution`` on a CPU trace) or the exact tokens
    of a library kernel's name (``sm90_xmma_fprop_implicit_gemm``): never by substrings, which would take
    cuDNN's flash-attention kernels (``..._sdpa_..._flash_fprop_...``) for one."""
    return KIND_CONV in (kind, op_kind(name), name_kind(name))


def find_headroom(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """Kernels far under their roof, summed by source line (by module path where a kernel has no source
    line): their time now less their time at the roof."""
    step = Step.of(summary)
    groups: dict[tuple[str | None, str | None], _Headroom] = {}
    sig = getattr(summary, "signals", None)
    unfused = unfused_optimizer(sig)
    # on a CPU trace an unfused optimizer's ops are kernels too: their time is the optimizer finding's
    theirs = unfused[0].op_time_us if unfused is not None and not sig.on_device else {}
    for r in summary.all_kernels or summary.top_kernels:
        p = r.placement
        if r.kind in _NOT_COMPUTE or p is None or p.pct_of_roof is None or r.above_roof_reason:
            continue
        if p.pct_of_roof >= FAR_UNDER_PCT or not r.total_us:
            continue
        now = r.total_us - theirs.get(r.name, 0.0)
        if now <= 0:
            continue
        g = groups.setdefault((r.source, None if r.source else r.module_path), _Headroom())
        g.now += now
        g.at_roof += now * p.pct_of_roof / 100.0
        g.names += 1
        g.conv = g.conv or _is_conv(r.kind, r.name)
        if r.module_path:
            g.modules[r.module_path] = g.modules.get(r.module_path, 0.0) + now
    out = []
    for (src, module), g in sorted(groups.items(), key=lambda kv: -(kv[1].now - kv[1].at_roof))[:HEADROOM_LINES]:
        pct = 100.0 * g.at_roof / g.now
        where = f"of {src}" if src else f"of module {module}" if module else "without a source line or module"
        module = module or (max(g.modules, key=g.modules.__getitem__) if g.modules else None)
        out.append(finding(
            "headroom", f"{g.names} kernel(s) {where} run at {pct:.0f} % of their roof", g.now - g.at_roof, step,
            f"{us(step.per_step(g.now))} a step in {g.names} kernel name(s) under {FAR_UNDER_PCT:.0f} % of the roof "
            f"that binds each (time-weighted {pct:.0f} %); step = {step.basis}. Model: each kernel at its roof "
            "(time x % of roof), an upper bound: small, latency-bound kernels rarely get there." + roof_caveat(summary),
            CONV_FIX + HEADROOM_FIX if g.conv else HEADROOM_FIX,
            source=src, module=module))
    return out


@dataclass
class _Headroom:
    """The kernels under their roof of one source line (or module): time now, time at the roof."""

    now: float = 0.0
    at_roof: float = 0.0
    names: int = 0
    conv: bool = False
    modules: dict[str, float] = field(default_factory=dict)


def find_precision(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """Compute-bound float32 matmuls on a device whose tf32 / bf16 matmul roof is much higher."""
    sig = getattr(summary, "signals", None)
    peaks = sig.peaks if sig is not None else {}
    fp32 = peaks.get("float32")
    # the smaller change first: TF32 keeps float32 tensors; bfloat16 where the device has no TF32
    fast_dt, fast = next(((dt, peaks.get(dt)) for dt in ("tf32", "bfloat16")
                          if fp32 and (peaks.get(dt) or 0.0) >= fp32 * FAST_PATH_RATIO), (None, None))
    if not fp32 or not fast:
        return []
    now = 0.0
    names = 0
    for r in summary.all_kernels or summary.top_kernels:
        if r.dtype != "float32" or r.above_roof_reason or not r.flop or r.bound != "compute":
            continue
        now += r.total_us
        names += 1
    if now <= 0:
        return []
    step = Step.of(summary)
    saving = now * (1.0 - fp32 / fast)
    how = ("torch.set_float32_matmul_precision(\"high\") (TF32 matmuls)" if fast_dt == "tf32"
           else "torch.autocast(device_type, dtype=torch.bfloat16) around the forward")
    return [finding(
        "precision", f"{names} compute-bound float32 matmul kernel(s) take {us(step.per_step(now))} a step; "
        f"{fast_dt} runs {fast / fp32:.1f}x faster here", saving, step,
        f"{us(step.per_step(now))} a step in compute-bound float32 kernels with FLOPs; the device's matmul roofs: "
        f"float32 {fp32:g}, {fast_dt} {fast:g} TFLOP/s; step = {step.basis}. Model: the same kernels at the same "
        f"share of the {fast_dt} roof: time x (1 - {fp32:g}/{fast:g})." + roof_caveat(summary),
        f"{how}, if the model tolerates the precision")]


def find_exposed_comm(record: Mapping[str, Any] | None, summary: Any) -> list[Finding]:
    """Collective time not overlapped with compute on this rank."""
    comm = summary.comm
    exposed = getattr(comm, "exposed_comm_us", None) if comm is not None else None
    if not exposed or exposed <= 0:
        return []
    step = Step.of(summary)
    total, where = comm.comm_us, ""
    if summary.steps and len(comm.step_exposed_us) == len(summary.steps):
        # within the recorded steps, as the cross-rank view and the steps table count them: one figure
        # for a rank wherever it is read (collectives before or after the steps are no step's)
        exposed, total, where = sum(comm.step_exposed_us), sum(comm.step_comm_us), " within the recorded steps"
        if exposed <= 0:
            return []
    return [finding(
        "exposed_comm", f"{us(step.per_step(exposed))} a step of collectives run with no compute beside them",
        exposed, step,
        f"collectives {us(step.per_step(total))} a step{where}, {us(step.per_step(exposed))} of it exposed "
        f"(no compute kernel running); step = {step.basis}. Model: collectives fully overlapped with compute "
        "on this rank; part of it may be waiting for a later rank (the cross-rank view, inductor-perf summary DIR, "
        "gives what the job loses: the exposed time of the rank the others wait for)."
        + (HOST_COMM_NOTE if comm.source == "host" else ""),
        COMM_FIX)]


def find_job_exposed_comm(ranks: Sequence[Any], per: str = "step") -> Finding | None:
    """The cross-rank ``exposed_comm``: what a synchronous job loses per ``per`` (``step`` or ``window``)
    to collectives no compute hides, from the cross-rank view's rows (each with ``rank``, ``step_us``,
    ``comm_us``, ``exposed_comm_us``, per ``per``); None when no rank ran collectives or nothing is exposed.

    The model (docs/advisor.md): the job's step is as slow as its slowest rank, and a collective ends on
    every rank once the last rank has arrived. The rank that arrives last, the one with the least
    collective time (:func:`inductor_perf.ranks.view.find_straggler`'s candidate), waits for no one: its
    exposed collective time is the transfer no compute hides, which overlap takes off the job's step.
    The other ranks' exposed time beyond it is waiting for that rank: its lateness, which overlapping
    their communication would not remove."""
    with_comm = [r for r in ranks if r.comm_us > 0]
    if not with_comm:
        return None
    last = min(with_comm, key=lambda r: (r.comm_us, r.rank))
    saving = last.exposed_comm_us
    if saving <= 0:
        return None
    step = statistics.median(r.step_us for r in ranks)
    pct = round(100.0 * saving / step, 3) if step else None
    others = [r for r in with_comm if r is not last]
    waits = ""
    if others:
        worst = max(others, key=lambda r: (r.exposed_comm_us, -r.rank))
        theirs = statistics.median(r.exposed_comm_us for r in others)
        waits = (f" The {len(others)} other rank(s) with collectives: median {us(theirs)} exposed a {per}, most on "
                 f"rank {worst.rank} ({us(worst.exposed_comm_us)}); their median excess over rank {last.rank}, "
                 f"{us(max(theirs - saving, 0.0))}, is waiting for it to arrive: its lateness (the straggler section "
                 "says where its time goes), which overlap on those ranks would not remove.")
    evidence = (f"rank {last.rank} spends the least time in collectives ({us(last.comm_us)} a {per}), so it is the "
                f"last to arrive at them and waits for no other rank; {us(saving)} a {per} of its collective time has "
                f"no compute kernel beside it; {per} = the median over the {len(ranks)} ranks ({us(step)}).{waits} Model: a "
                "synchronous job's step is as slow as its slowest rank, and a collective ends on every rank once the "
                "last rank arrives, so the last rank's exposed collective time is what the job loses to "
                "communication; collectives fully overlapped with compute take it off the step (an upper bound: "
                "a collective cannot overlap the compute it waits for)."
                + (HOST_COMM_NOTE if getattr(last, "collectives", None) == "host" else ""))
    return Finding(
        kind="exposed_comm", title=f"the job loses {us(saving)} a {per} to collectives no compute hides (on rank "
        f"{last.rank}, the last to arrive at them)", source=None, module=None, saving_us_per_step=round(saving, 3),
        saving_pct_of_step=pct, one_time_s=None, evidence=evidence, fix=COMM_FIX)
