"""The roofs a kernel is drawn and judged against on the report's roofline chart: a compute roof per
dtype (matrix and vector units) and a memory roof per level of the memory hierarchy.

:func:`roofs_for` builds them from a :class:`~inductor_perf.device_spec.DeviceSpec`; :func:`place`
puts one kernel against them. Torch-free (a DeviceSpec is plain data).

>>> r = roofs_for(spec)                       # doctest: +SKIP
>>> place(flop=2e9, nbytes=4e6, total_us=100.0, count=10, dtype="float32", roofs=r)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAIN_MEMORY = ("DRAM", "HBM")
"""Level names of a device's main memory (CPU: DRAM; GPU: HBM or GDDR, called HBM here)."""


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

    def main_memory(self) -> MemoryRoof | None:
        return self.memory[-1] if self.memory else None

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
                "memory": [asdict(m) for m in self.memory], "note": self.note}


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


def _key_name(k: Any) -> str:
    return str(k).removeprefix("torch.")


def roofs_for(device: Any) -> Roofs | None:
    """The roofs of ``device`` (a DeviceSpec, or anything with ``name``, ``peak_tflops``,
    ``mem_bandwidth_gbs``, optionally ``vector_tflops``, ``peak_source``, ``device_type``); None
    without one."""
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
    bw = getattr(device, "mem_bandwidth_gbs", None)
    if isinstance(bw, (int, float)) and bw > 0:
        level = "DRAM" if getattr(device, "device_type", "cuda") == "cpu" else "HBM"
        memory.append(MemoryRoof(level, float(bw), None, source))
    return Roofs(getattr(device, "name", None), tuple(compute), tuple(memory),
                 note=f"peaks: {source}")


def place(flop: float | None, nbytes: float | None, total_us: float | None, count: int | None,
          dtype: str | None, roofs: Roofs | None, *, matrix: bool = False) -> Placement:
    """Put a kernel (its totals over ``count`` launches) against ``roofs``: the main memory roof (the
    memory levels above it are for CPU kernels whose working set, ``nbytes / count``, fits one), the
    compute roof of its ``dtype`` and unit, the binding one and the percentage of it achieved."""
    mem = roofs.main_memory() if roofs is not None else None
    comp = roofs.compute_roof(dtype, matrix) if roofs is not None else None
    gbps = mem.gbps if mem is not None else None
    tflops = comp.tflops if comp is not None else None
    if not total_us or total_us <= 0 or (not flop and not nbytes):
        return Placement(mem.level if mem else None, gbps, tflops, "unknown", None)
    ach_tflops = (flop or 0) / (total_us * 1e6)
    ach_gbps = (nbytes or 0) / (total_us * 1e3)
    # The binding roof at this intensity: min(compute, intensity x bandwidth).
    if tflops is not None and gbps is not None and nbytes:
        bound = "compute" if (flop or 0) / nbytes * gbps / 1e3 >= tflops else "memory"
    elif tflops is not None and flop:
        bound = "compute"
    elif gbps is not None and nbytes:
        bound = "memory"
    else:
        return Placement(mem.level if mem else None, gbps, tflops, "unknown", None)
    pct = 100.0 * (ach_tflops / tflops if bound == "compute" else ach_gbps / gbps)
    reason = None
    if pct > 100.0:
        reason = (f"above the {mem.level if bound == 'memory' and mem else 'compute'} roof: "
                  "the roof or the kernel's counted work is wrong")
    return Placement(mem.level if mem else None, gbps, tflops, bound, pct, reason)
