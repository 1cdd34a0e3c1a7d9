"""CPU peaks computed from the ISA: /proc/cpuinfo parsing, FMA widths and units, clock, cores used.

peak FLOP/s = FMA units per core × vector lanes × 2 FLOP × clock × cores used, with AMX,
AVX512_BF16/FP16 and VNNI rates for bf16, fp16 and int8 where the flags say so (docs/devices.md,
"CPU peaks"). The result is a :class:`~inductor_perf.devices.table.DeviceSpec` with peak_source
"computed"; :func:`inductor_perf.devices.resolve.resolve_device` prefers a calibration or a user row over it.
Also the CPU's model name, which keys the calibration cache (:mod:`inductor_perf.devices.calibrate`).
Imports torch only to ask how many threads it uses (:func:`current_cpu_spec`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import DeviceSpecError
from .table import BF16, F16, F32, F64, I8, DeviceSpec, PeakKey, _peaks

# Rough stand-in for DRAM bandwidth when nothing better is known: ~8 GB/s per core in use sits
# between a desktop (2 channels DDR4-3200 = 51 GB/s for 6-8 cores) and a server socket (8-12
# channels DDR5 for 32-96 cores). `inductor-perf calibrate` replaces it with a measurement.
CPU_BANDWIDTH_GBS_PER_CORE_ESTIMATE = 8.0


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            cur.setdefault(key.strip().lower(), value.strip())
    if cur:
        blocks.append(cur)
    return blocks


def _fma_units_heuristic(vendor: str, family: int | None, model_name: str, width: int) -> int:
    """FMA pipes per core for the widest vector width (see docs/devices.md, 'CPU formula')."""
    if width == 512:
        if vendor == "amd":
            # Zen 4 executes 512-bit ops on two 256-bit pipes (= one 512-bit FMA per cycle);
            # Zen 5 (family 0x1A) has full 512-bit datapaths, two of them.
            return 2 if family is not None and family >= 26 else 1
        if "xeon" in model_name.lower():
            # Skylake/Cascade Lake Bronze, Silver and Gold 5100/5200 have one 512-bit FMA.
            if re.search(r"bronze|silver|gold\s+5[12]\d\d", model_name, re.I):
                return 1
            return 2
        return 1  # client cores with AVX-512 (Ice/Tiger/Rocket Lake): port 0+1 fused
    return 2  # AVX2-era cores (Haswell+, Zen 1-3) and NEON cores: two FMA pipes


@dataclass(frozen=True)
class _Cpu:
    """What the first cpuinfo block says about the CPU's identity and ISA."""

    vendor: str
    model_name: str
    family: int | None
    flags: frozenset[str]


def _identify(first: dict[str, str]) -> _Cpu:
    vendor_id = first.get("vendor_id", "")
    vendor = ("intel" if "Intel" in vendor_id else "amd" if "AMD" in vendor_id
              else "arm" if ("features" in first or "cpu implementer" in first) else "unknown")
    model_name = first.get("model name") or first.get("cpu model") or first.get("hardware") or (
        f"Arm CPU (implementer {first['cpu implementer']}, part {first.get('cpu part', '?')})"
        if "cpu implementer" in first else "unknown CPU")
    try:
        family: int | None = int(first.get("cpu family", ""))
    except ValueError:
        family = None
    flags = frozenset((first.get("flags") or first.get("features") or "").split())
    return _Cpu(vendor, model_name, family, flags)


def _physical_cores(blocks: list[dict[str, str]]) -> int:
    """Physical cores: distinct (socket, core id) pairs, else the processor count."""
    cores = {(b.get("physical id", "0"), b["core id"]) for b in blocks if "core id" in b}
    n_proc = sum(1 for b in blocks if "processor" in b) or len(blocks)
    return len(cores) if cores else n_proc


def _clock_ghz(blocks: list[dict[str, str]], model_name: str,
               max_freq_khz: float | None) -> tuple[float | None, str]:
    """(GHz, where it came from): cpuinfo_max_freq, else the highest "cpu MHz", else the model name."""
    if max_freq_khz is not None and max_freq_khz > 0:
        return max_freq_khz / 1e6, "cpuinfo_max_freq"
    mhz = []
    for b in blocks:
        try:
            mhz.append(float(b.get("cpu mhz", "")))
        except ValueError:
            pass
    m = re.search(r"@\s*([\d.]+)\s*GHz", model_name)
    ghz = max(mhz) / 1e3 if mhz else float(m.group(1)) if m else None
    return ghz, "cpu MHz" if mhz else "model name" if m else "unknown"


def _vector_isa(flags: frozenset[str]) -> tuple[int, str]:
    """(widest vector width in bits, ISA name)."""
    if "avx512f" in flags:
        return 512, "AVX-512"
    if "avx2" in flags or "avx" in flags:
        return 256, "AVX2" if "avx2" in flags else "AVX"
    if "asimd" in flags or "neon" in flags:
        return 128, "NEON"
    return 128, "SSE"


def _low_precision_peaks(flags: frozenset[str], f32_cycle: int, width: int, units: int,
                         scale: float) -> tuple[list[tuple[PeakKey, float]], list[str]]:
    """bf16, fp16 and int8 matmul peaks (AMX, AVX512_BF16/FP16, VNNI) and the notes naming the path."""
    if "amx_bf16" in flags:
        bf16_cycle, bf16_src = 1024, "AMX"  # Intel: 1024 BF16 FLOP/cycle/core on the TMUL
    elif "avx512_bf16" in flags:
        bf16_cycle, bf16_src = 2 * f32_cycle, "AVX512_BF16"  # dot-product of bf16 pairs
    else:
        bf16_cycle, bf16_src = f32_cycle, "fp32 rate (converted)"
    if "amx_fp16" in flags:
        f16_cycle, f16_src = 1024, "AMX-FP16"
    elif "avx512_fp16" in flags:
        f16_cycle, f16_src = 2 * f32_cycle, "AVX512_FP16"
    else:
        f16_cycle, f16_src = f32_cycle, "fp32 rate (converted)"
    pairs: list[tuple[PeakKey, float]] = [(BF16, bf16_cycle * scale), (F16, f16_cycle * scale)]
    notes = [f"bf16 via {bf16_src}, fp16 via {f16_src}"]
    if "amx_int8" in flags:
        pairs.append((I8, 2048 * scale))  # 2048 INT8 ops/cycle/core
        notes.append("int8 via AMX")
    elif "avx512_vnni" in flags and width == 512:
        pairs.append((I8, units * 64 * 2 * scale))  # vpdpbusd: 64 u8×s8 MACs per 512-bit op
        notes.append("int8 via AVX512_VNNI")
    elif "avx_vnni" in flags:
        pairs.append((I8, units * 32 * 2 * scale))
        notes.append("int8 via AVX-VNNI")
    return pairs, notes


def cpu_spec_from_cpuinfo(text: str, threads: int, *, max_freq_khz: float | None = None,
                          fma_units: int | None = None,
                          mem_bandwidth_gbs: float | None = None) -> DeviceSpec:
    """Peaks of this CPU computed from a /proc/cpuinfo text (peak_source "computed").

    peak = FMA units × lanes × 2 FLOP × GHz × cores used, cores used = min(``threads``, physical
    cores). The clock is ``max_freq_khz`` (cpufreq's cpuinfo_max_freq) when given, else the highest
    "cpu MHz". bf16/fp16/int8 use AMX, AVX512_BF16/AVX512_FP16/VNNI rates where the flags say so.

    >>> spec = cpu_spec_from_cpuinfo("processor: 0\\nvendor_id: GenuineIntel\\nflags: avx2 fma\\n"
    ...                              "cpu MHz: 2000\\n", threads=1)
    >>> spec.peak_tflops["float32"] * 1e3  # 2 units x 8 lanes x 2 x 2 GHz = 64 GFLOP/s
    64.0
    """
    if not isinstance(threads, int) or threads < 1:
        raise DeviceSpecError(f"threads: expected an integer >= 1, got {threads!r}")
    blocks = [b for b in _cpuinfo_blocks(text) if b]
    if not blocks:
        raise DeviceSpecError("cpuinfo text has no 'key : value' lines; expected /proc/cpuinfo contents")
    cpu = _identify(blocks[0])
    physical = _physical_cores(blocks)
    used = min(threads, physical)
    ghz, clock_src = _clock_ghz(blocks, cpu.model_name, max_freq_khz)
    width, isa = _vector_isa(cpu.flags)
    has_fma = "fma" in cpu.flags or "avx512f" in cpu.flags or isa == "NEON"
    units = fma_units if fma_units is not None else _fma_units_heuristic(cpu.vendor, cpu.family,
                                                                         cpu.model_name, width)
    if units < 1:
        raise DeviceSpecError(f"fma_units: expected an integer >= 1, got {units!r}")
    f32_lanes = width // 32
    # FLOP per cycle per core; without FMA a separate add and multiply pipe give the same 2 FLOP/lane.
    f32_cycle = units * f32_lanes * 2 if has_fma else f32_lanes * 2

    pairs: list[tuple[PeakKey, float]] = []
    vec: list[tuple[PeakKey, float]] = []
    note_parts = [f"{isa}, {units} FMA unit(s)/core, {used} core(s) used of {physical} "
                  f"(threads={threads}), clock from {clock_src}"]
    if ghz is not None and ghz > 0:
        scale = ghz * 1e9 * used / 1e12  # cycles/s × cores → TFLOP/s per FLOP/cycle
        f32 = f32_cycle * scale
        pairs += [(F64, f32 / 2), (F32, f32)]
        vec += [(F64, f32 / 2), (F32, f32)]
        low, notes = _low_precision_peaks(cpu.flags, f32_cycle, width, units, scale)
        pairs += low
        note_parts += notes
    else:
        note_parts.append("clock unknown: no peaks")
    if mem_bandwidth_gbs is None:
        bw = CPU_BANDWIDTH_GBS_PER_CORE_ESTIMATE * used
        note_parts.append(f"bandwidth ESTIMATED at {CPU_BANDWIDTH_GBS_PER_CORE_ESTIMATE:g} GB/s per core "
                          "(run `inductor-perf calibrate`)")
    else:
        bw = float(mem_bandwidth_gbs)
    name = f"{cpu.model_name} ({used} core{'s' if used != 1 else ''}"
    name += f" @ {ghz:.2f} GHz)" if ghz else ")"
    return DeviceSpec(name=name, vendor=cpu.vendor, device_type="cpu", peak_tflops=_peaks(*pairs),
                      vector_tflops=_peaks(*vec), mem_bandwidth_gbs=bw, mem_gb=None,
                      source_url="/proc/cpuinfo", source_note="; ".join(note_parts),
                      peak_source="computed")


def read_cpuinfo() -> str:
    """/proc/cpuinfo's text ("" where there is none, e.g. macOS)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_max_freq_khz() -> float | None:
    """cpufreq's cpuinfo_max_freq of cpu0 in kHz, or None where the VM does not expose it."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", encoding="ascii") as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def cpu_model_name(cpuinfo: str | None = None) -> str:
    """The CPU's model name from cpuinfo (used as part of the calibration cache key)."""
    blocks = _cpuinfo_blocks(read_cpuinfo() if cpuinfo is None else cpuinfo)
    if blocks:
        for key in ("model name", "cpu model", "hardware"):
            if blocks[0].get(key):
                return blocks[0][key]
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


def current_cpu_spec(threads: int | None = None) -> DeviceSpec:
    """The computed spec of this machine's CPU for the threads torch uses now."""
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    text = read_cpuinfo()
    if not text.strip():
        import platform

        text = f"processor: 0\nmodel name: {platform.processor() or platform.machine()}\n"
    return cpu_spec_from_cpuinfo(text, threads, max_freq_khz=read_max_freq_khz())
