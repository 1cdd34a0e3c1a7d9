"""The roofs a kernel is drawn and judged against on the report's roofline chart: a compute roof per
dtype (matrix and vector units) and a memory roof per level of the memory hierarchy.

:func:`roofs_for` builds them from a :class:`~inductor_perf.devices.spec.DeviceSpec`; :func:`place`
puts one kernel against them. Torch-free (a DeviceSpec is plain data).

>>> r = roofs_for(spec)                       # doctest: +SKIP
>>> place(flop=2e9, nbytes=4e6, total_us=100.0, count=10, dtype="float32", roofs=r)  # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from ..devices.spec import TF32
from ..model.kernel_kinds import KIND_ATTENTION, KIND_CONV, KIND_EXTERN_MATMUL, KIND_MATMUL

MATRIX_KINDS = frozenset({KIND_EXTERN_MATMUL, KIND_MATMUL, KIND_CONV, KIND_ATTENTION})
"""Kernel kinds measured against the matrix units' compute roof (``place(..., matrix=True)``)."""

LINK_LEVELS = {"host_link": "host link", "interconnect": "interconnect"}
"""A kernel's ``memory_roof`` arg -> the level name of its link roof (:attr:`Roofs.links`)."""

MAIN_MEMORY = ("DRAM", "HBM")
"""Level names of a device's main memory (CPU: DRAM; GPU: HBM or GDDR, called HBM here)."""

TIMER_FLOOR_US = 2.0
"""Launches shorter than this are not timed reliably: a CPU op's profiler span includes entering and
leaving the record_function (about a microsecond on the machines this was measured on), and the
kernels' own work is then a fraction of the measured duration either way."""


TF32_NAME_TOKENS = ("tf32", "TF32", "xf32", "XF32", "s1688gemm")
"""Parts of a GEMM kernel's name that say it multiplies float32 inputs on TF32 tensor cores: cuBLAS /
CUTLASS ``*_tf32*`` (``sm80_xmma_gemm_f32f32_tf32f32_f32_*``, ``cutlass3x_sm90_*tf32gemm*``),
hipBLASLt / rocBLAS ``XF32``, and CUTLASS's sm80 ``tensorop_s1688gemm`` (``s``: float32 operands,
``1688``: the 16x8x8 TF32 MMA shape), the kernels cuBLAS runs for float32 matmuls under
``allow_tf32``. docs/devices.md ("TF32 and vector roofs")."""


def tf32_kernel(name: object) -> bool:
    """Whether a GEMM kernel's name says it ran on TF32 tensor cores (:data:`TF32_NAME_TOKENS`);
    meaningful for kernels launched by a float32 matmul op only.

    >>> tf32_kernel("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(...)")
    True
    >>> tf32_kernel("ampere_sgemm_128x64_nn"), tf32_kernel("cutlass_80_tensorop_bf16_s16816gemm_relu")
    (False, False)
    """
    return isinstance(name, str) and _TF32_IN_NAME.search(name) is not None


_TF32_IN_NAME = re.compile("|".join(map(re.escape, TF32_NAME_TOKENS)))


@dataclass(frozen=True)
class ComputeRoof:
    """A compute roof: ``tflops`` for ``dtype`` ("float32", "bfloat16"...) on the ``unit`` that
    runs it ("matrix": tensor / matrix cores, GEMM-like kernels; "vector": everything else).
    ``source``: where the figure comes from ("datasheet", "measured", "computed", "user")."""

    dtype: str
    tflops: float
    unit: str
    source: str


@dataclass(frozen=True)
class MemoryRoof:
    """A bandwidth roof: ``gbps`` out of ``level`` ("L1", "L2", "L3", "DRAM", "HBM"). ``capacity_bytes``:
    the level's size as the kernel sees it (None for main memory). ``source`` as for ComputeRoof, or
    "estimate" with how it was estimated."""

    level: str
    gbps: float
    capacity_bytes: int | None
    source: str


@dataclass(frozen=True)
class Roofs:
    """Every roof of one device. ``memory`` is ordered from the smallest level to main memory (last).
    ``note``: one line on where the roofs come from, shown on the page."""

    device: str | None
    compute: tuple[ComputeRoof, ...]
    memory: tuple[MemoryRoof, ...]
    note: str = ""
    links: tuple[MemoryRoof, ...] = ()
    """The link roofs (level "host link", "interconnect"): host copies and collectives are measured
    against these, never against a memory level; not drawn on the chart."""

    def main_memory(self) -> MemoryRoof | None:
        return self.memory[-1] if self.memory else None

    def link(self, roof: str) -> MemoryRoof | None:
        """The link roof named by a kernel's ``memory_roof`` arg ("host_link", "interconnect")."""
        level = LINK_LEVELS.get(roof)
        return next((m for m in self.links if m.level == level), None)

    def compute_roof(self, dtype: str | None, matrix: bool) -> ComputeRoof | None:
        """The roof for ``dtype`` on the matrix (GEMM-like kernels) or vector unit, falling back to the
        other unit, then to float32."""
        units = ("matrix", "vector") if matrix else ("vector", "matrix")
        for want in ((dtype,) if dtype else ()) + ("float32",):
            for unit in units:
                for c in self.compute:
                    if c.dtype == want and c.unit == unit:
                        return c
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "compute": [asdict(c) for c in self.compute],
                "memory": [asdict(m) for m in self.memory], "note": self.note,
                "links": [asdict(m) for m in self.links]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Roofs":
        """The inverse of :meth:`to_dict` (a report reading roofs back from JSON)."""
        try:
            return cls(d.get("device"), tuple(ComputeRoof(**c) for c in d.get("compute") or ()),
                       tuple(MemoryRoof(**m) for m in d.get("memory") or ()), str(d.get("note") or ""),
                       tuple(MemoryRoof(**m) for m in d.get("links") or ()))
        except (TypeError, AttributeError) as e:
            raise ValueError(f"roofs: expected the dict Roofs.to_dict() writes ({e})") from None


@dataclass(frozen=True)
class Placement:
    """One kernel against its roofs. ``level``: the memory level whose roof applies (the one its
    working set fits); ``bound``: "compute", "memory" (the roof that is lower at the kernel's
    arithmetic intensity) or "unknown"; ``pct_of_roof``: achieved FLOP/s or GB/s as a percentage of that
    binding roof (None without a count or a duration); ``above_roof_reason``: why a kernel shows above
    100 %, when it does (never None then)."""

    level: str | None
    memory_gbps: float | None
    compute_tflops: float | None
    bound: str
    pct_of_roof: float | None
    above_roof_reason: str | None = None
    compute_roof: str | None = None
    """The compute roof's name: its dtype and unit ("tf32 matrix", "float32 vector")."""

    @property
    def roof(self) -> str | None:
        """The name of the roof that binds: the memory level, or the compute roof; None when unknown."""
        if self.bound == "memory":
            return self.level
        return self.compute_roof if self.bound == "compute" else None


def _key_name(k: Any) -> str:
    return str(k).removeprefix("torch.")


def _cache_roofs(rows: Iterable[Any]) -> list[MemoryRoof]:
    """A CPU's cache levels as MemoryRoofs, smallest capacity first; a malformed row, or a level no
    larger than the one before it (no working set could be placed there), is left out."""
    out: list[MemoryRoof] = []
    for row in rows:
        try:
            level, gbps, cap, source = row
            roof = MemoryRoof(str(level), float(gbps), int(cap), str(source))
        except (TypeError, ValueError):
            continue
        if math.isfinite(roof.gbps) and roof.gbps > 0 and cap > 0:
            out.append(roof)
    out.sort(key=lambda m: m.capacity_bytes or 0)
    kept: list[MemoryRoof] = []
    for m in out:
        if not kept or (m.capacity_bytes or 0) > (kept[-1].capacity_bytes or 0):
            kept.append(m)
    return kept


def _levels_note(levels: list[MemoryRoof]) -> str:
    """Where the cache roofs come from, in one phrase: calibrated at <date>, estimated, or both."""
    if not levels:
        return ""
    names = "/".join(m.level for m in levels)
    dates = sorted({d.group(1) for m in levels if (d := re.match(r"measured at (\S+): ", m.source))})
    if dates and all(m.source.startswith("measured") for m in levels):
        return f"; {names} read bandwidth calibrated at {', '.join(dates)}"
    if all(m.source.startswith("estimate") for m in levels):
        return (f"; {names} bandwidth estimated from cache sizes and clock (`inductor-perf calibrate` "
                "measures them)")
    return f"; {names}: " + ", ".join(
        f"{m.level} {'calibrated' if m.source.startswith('measured') else 'estimated'}" for m in levels)


def roofs_for(device: Any) -> Roofs | None:
    """The roofs of ``device`` (a DeviceSpec, or anything with ``name``, ``peak_tflops``,
    ``mem_bandwidth_gbs``, optionally ``vector_tflops``, ``peak_source``, ``device_type``,
    ``cache_roofs``); None without one. A CPU's cache levels (``cache_roofs``) come before its DRAM
    roof, smallest first; a GPU has its single HBM roof."""
    if device is None:
        return None
    source = getattr(device, "peak_source", None) or "datasheet"
    compute: list[ComputeRoof] = []
    for unit, table in (("matrix", getattr(device, "peak_tflops", None) or {}),
                        ("vector", getattr(device, "vector_tflops", None) or {})):
        for k, v in table.items():
            if isinstance(v, (int, float)) and v > 0:
                compute.append(ComputeRoof(_key_name(k), float(v), unit, source))
    memory: list[MemoryRoof] = []
    note = f"peaks: {source}"
    bw = getattr(device, "mem_bandwidth_gbs", None)
    if isinstance(bw, (int, float)) and bw > 0:
        cpu = getattr(device, "device_type", "cuda") == "cpu"
        if cpu:
            memory = _cache_roofs(getattr(device, "cache_roofs", None) or ())
            note += _levels_note(memory)
        memory.append(MemoryRoof("DRAM" if cpu else "HBM", float(bw), None, source))
    links = tuple(MemoryRoof(LINK_LEVELS[key], float(v), None, source)
                  for key, v in (("host_link", getattr(device, "host_link_gbs", None)),
                                 ("interconnect", getattr(device, "interconnect_gbs", None)))
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)
    return Roofs(getattr(device, "name", None), tuple(compute), tuple(memory), note=note, links=links)


def _level_for(roofs: Roofs | None, working_set: float | None) -> MemoryRoof | None:
    """The smallest level whose capacity holds ``working_set`` bytes; main memory when none does or
    the working set is unknown."""
    if roofs is None:
        return None
    if working_set is not None:
        for m in roofs.memory:
            if m.capacity_bytes is not None and working_set <= m.capacity_bytes:
                return m
    return roofs.main_memory()


def _bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _source_words(source: str) -> str:
    """What a roof's source says of its figure, for a reason: "a datasheet figure", "computed from the
    ISA, clock and threads", ..."""
    if source.startswith("estimate"):
        return f"an estimate ({source.split(';')[0]})"
    return {"datasheet": "a datasheet figure", "computed": "computed from the ISA, clock and threads (not measured)",
            "user": "given by the user"}.get(source, source)


COPY_UNCOUNTED = 1.5
"""A copy counted as 2 bytes a byte (read, write) moves up to 3 through DRAM (the written line is read
first), so a kernel can move up to this many times a measured copy roof."""


def _memory_reasons(roofs: Roofs, mem: MemoryRoof, ach_gbps: float, working_set: float | None) -> list[str]:
    """Why a memory-bound kernel can show above ``mem``'s roof, from what the numbers establish."""
    why: list[str] = []
    if mem.level in LINK_LEVELS.values():
        return why
    if working_set is None and len(roofs.memory) > 1:
        why.append(f"launch count unknown: placed against {mem.level}, though its data may have stayed in a cache")
    faster = [m for m in roofs.memory if m.capacity_bytes is not None and m.gbps > mem.gbps
              and (mem.capacity_bytes is None or m.capacity_bytes < mem.capacity_bytes)]
    within = [m for m in faster if ach_gbps <= m.gbps]
    # Main memory carries what no cache level can hold: that share's rate, at the least, is DRAM traffic
    held = max(faster, key=lambda m: m.capacity_bytes or 0) if faster else None
    beyond = working_set - ((held.capacity_bytes or 0) if held else 0) if working_set else 0.0
    least_gbps = ach_gbps * beyond / working_set if working_set and beyond > 0 else 0.0
    if mem.capacity_bytes is None and least_gbps > mem.gbps:
        # no cache explains it: a roof that is an estimate or a measured lower bound does, else nothing
        if mem.source == "measured" and least_gbps <= COPY_UNCOUNTED * mem.gbps:
            return why + [f"the {mem.level} roof is calibrate's best copy/add rate ({mem.gbps:.0f} GB/s), which "
                          "does not count the read of each line it writes into (a cache reads the line first: up to "
                          f"{COPY_UNCOUNTED:g}x the count), and this kernel moved more"]
        if not (mem.source.startswith("estimate") or mem.source == "computed"):
            return why
        what = (f"{_bytes(beyond)} of its {_bytes(working_set or 0)} a launch cannot fit in {held.level} "
                f"({_bytes(held.capacity_bytes or 0)})" if held else f"its {_bytes(working_set or 0)} a launch")
        return why + [f"{what}, so it came through {mem.level} at {least_gbps:.0f} GB/s or more: the {mem.level} "
                      f"roof is an estimate ({mem.gbps:.0f} GB/s, {mem.source.split(';')[0]}) too low for the "
                      "machine that recorded the trace; `inductor-perf calibrate` there measures it"]
    if within:
        f = within[-1]  # the nearest faster level whose roof it stays under
        ws = f" (working set {_bytes(working_set)}, {f.level} {_bytes(f.capacity_bytes or 0)})" if working_set else ""
        why.append(f"counted bytes exceed what moved through {mem.level}: its rate is within the {f.level} roof "
                   f"({100.0 * ach_gbps / f.gbps:.0f} %), so part of its data was served from {f.level}{ws} — "
                   "inputs read more than once, or left there by the kernel before")
    elif mem.capacity_bytes is None and mem.source in ("datasheet", "measured") and not faster:
        # No device moves more through its main memory than its datasheet (or a measured copy) allows:
        # the counted bytes include reads served by the caches in front of it.
        why.append(f"the {mem.level} roof is {_source_words(mem.source)} ({mem.gbps:.0f} GB/s) that no kernel's "
                   f"{mem.level} traffic exceeds, so its counted bytes include data served from the on-chip "
                   "caches (inputs or rows read more than once count each time)")
    if mem.source.startswith("estimate") or mem.source == "computed":  # a datasheet figure is no estimate
        why.append(f"the {mem.level} roof is an estimate ({mem.gbps:.0f} GB/s, {mem.source.split(';')[0]}): "
                   "`inductor-perf calibrate` on the machine that recorded the trace measures it")
    return why


def _compute_reasons(roofs: Roofs, comp: ComputeRoof, ach_tflops: float, dtype_known: bool) -> list[str]:
    """Why a compute-bound kernel can show above ``comp``'s roof (``dtype_known`` False: the kernel
    has no dtype, and float32's roof stood in for its own)."""
    if comp.source == "measured":
        return [f"the {comp.dtype} {comp.unit} roof is calibrate's best GEMM rate, a lower bound of the peak, "
                "and this kernel ran faster"]
    why: list[str] = []
    if not dtype_known and comp.dtype == "float32":
        # what a float32 program runs its GEMMs in without asking for it: autocast, or TF32 allowed
        faster = sorted({(c.tflops, c.dtype) for c in roofs.compute if c.unit == comp.unit
                         and c.dtype in ("bfloat16", "float16", TF32) and c.tflops >= ach_tflops}, reverse=True)
        if faster:
            return ["the trace records no dtype for it (no kernel_dtype, no launching op with input types), so the "
                    "float32 roof stands in; it ran in one with a higher roof: "
                    + ", ".join(f"{d} {t:g} TFLOP/s" for t, d in faster)]
    if comp.dtype == "float32" and comp.unit == "matrix":
        tf32 = roofs.compute_roof(TF32, True)
        if tf32 is not None and tf32.dtype == TF32 and ach_tflops <= tf32.tflops:
            why.append(f"faster than float32 units allow: it ran on TF32 tensor cores (roof {tf32.tflops:g} "
                       f"TFLOP/s, {100.0 * ach_tflops / tf32.tflops:.0f} % of it), though its name does not say "
                       "so (docs/devices.md, TF32)")
    if comp.source == "computed":
        why.append(f"the {comp.dtype} {comp.unit} roof is {_source_words(comp.source)}: `inductor-perf calibrate` "
                   "on the machine that recorded the trace measures it")
    elif comp.source == "datasheet" and not why:
        why.append(f"the {comp.dtype} {comp.unit} roof is a datasheet peak ({comp.tflops:g} TFLOP/s) no kernel "
                   "exceeds on those units: it ran on faster units than its dtype's roof assumes, or its counted "
                   "FLOPs exceed the work done")
    return why


def _above_roof_reason(roofs: Roofs, bound: str, mem: MemoryRoof | None, comp: ComputeRoof | None,
                       pct: float, ach_gbps: float, ach_tflops: float, working_set: float | None,
                       mean_us: float | None, dtype_known: bool) -> str:
    """Why a kernel shows above its roof, each reason one the numbers establish (duration, working set
    against the levels, the roof's source); "unexplained: ..." when none does. Never advice to
    measure this machine: the trace may have been recorded on another."""
    why: list[str] = []
    if mean_us is not None and mean_us < TIMER_FLOOR_US:
        why.append(f"its mean launch ({mean_us:.2f} µs) is shorter than the profiler times reliably "
                   f"(~{TIMER_FLOOR_US:g} µs)")
    if bound == "memory" and mem is not None:
        why += _memory_reasons(roofs, mem, ach_gbps, working_set)
    elif bound == "compute" and comp is not None:
        why += _compute_reasons(roofs, comp, ach_tflops, dtype_known)
    if why:
        return "; ".join(why)
    roof = mem.level if bound == "memory" and mem is not None else "compute"
    return (f"unexplained: {pct - 100.0:.0f} % above the {roof} roof ({(mem or comp).source if (mem or comp) else '?'}); "
            "the roof or the kernel's counted work is wrong")


def place(flop: float | None, nbytes: float | None, total_us: float | None, count: int | None,
          dtype: str | None, roofs: Roofs | None, *, matrix: bool = False,
          memory_roof: str | None = None) -> Placement:
    """Put a kernel (its totals over ``count`` launches) against ``roofs``: the memory level is the
    smallest whose capacity holds its working set per launch (``nbytes / count``; main memory when it
    fits none or ``count`` is unknown), or the link its ``memory_roof`` names ("host_link",
    "interconnect": a host copy, a collective); the compute roof that of its ``dtype`` ("tf32" for a
    float32 GEMM that ran on TF32 tensor cores) and unit; ``bound`` is the lower of the two at its
    intensity and ``pct_of_roof`` the percentage of it achieved. Above 100 %, ``above_roof_reason``
    says why (:func:`_above_roof_reason`).

    >>> r = Roofs("cpu", (ComputeRoof("float32", 1.0, "vector", "measured"),),
    ...           (MemoryRoof("L2", 200.0, 4 << 20, "measured"), MemoryRoof("DRAM", 20.0, None, "measured")))
    >>> p = place(flop=1e6, nbytes=2e6, total_us=20.0, count=2, dtype="float32", roofs=r)
    >>> p.level, p.bound, round(p.pct_of_roof, 1)  # 1 MB per launch fits L2; 2e6 B / 20 µs = 100 GB/s
    ('L2', 'memory', 50.0)
    """
    working_set = nbytes / count if nbytes and count and count > 0 else None
    link = roofs.link(memory_roof) if roofs is not None and memory_roof in LINK_LEVELS else None
    if memory_roof in LINK_LEVELS:
        mem = link  # a host copy or a collective is never measured against a memory level
    else:
        mem = _level_for(roofs, working_set)
    comp = roofs.compute_roof(dtype, matrix) if roofs is not None else None
    gbps = mem.gbps if mem is not None else None
    tflops = comp.tflops if comp is not None else None
    level = mem.level if mem is not None else None
    name = f"{comp.dtype} {comp.unit}" if comp is not None else None
    if not total_us or total_us <= 0 or (not flop and not nbytes):
        return Placement(level, gbps, tflops, "unknown", None, compute_roof=name)
    ach_tflops = (flop or 0) / (total_us * 1e6)
    ach_gbps = (nbytes or 0) / (total_us * 1e3)
    # The binding roof at this intensity: min(compute, intensity x bandwidth of the level).
    if tflops is not None and gbps is not None and nbytes:
        bound = "compute" if (flop or 0) / nbytes * gbps / 1e3 >= tflops else "memory"
    elif tflops is not None and flop:
        bound = "compute"
    elif gbps is not None and nbytes:
        bound = "memory"
    else:
        return Placement(level, gbps, tflops, "unknown", None, compute_roof=name)
    pct = 100.0 * (ach_tflops / tflops if bound == "compute" else ach_gbps / gbps)
    reason = None
    if pct > 100.0 and roofs is not None:
        mean_us = total_us / count if count and count > 0 else None
        reason = _above_roof_reason(roofs, bound, mem, comp, pct, ach_gbps, ach_tflops, working_set, mean_us,
                                    dtype_known=bool(dtype))
    return Placement(level, gbps, tflops, bound, pct, reason, compute_roof=name)
