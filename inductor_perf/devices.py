"""The device table: dense peak throughput per dtype and memory bandwidth, with sources.

Three ways to a :class:`DeviceSpec`, in the order :func:`resolve_device` prefers them:

1. a user override (``options=`` dict, or a JSON/TOML file named by ``INDUCTOR_PERF_DEVICE_FILE``);
2. a calibration measured on this machine (:mod:`inductor_perf.calibrate`, cached per machine);
3. the datasheet row for the GPU's reported name (:func:`lookup_device`), or, on CPU, peaks computed
   from the ISA, the clock and the threads torch uses (:func:`cpu_spec_from_cpuinfo`).

Peaks are DENSE. Where a vendor published a figure only "with sparsity" (2:4 structured), the row
stores half of it and names the dtype in ``sparse_halved``. TF32 is not a torch dtype; its key is
the string :data:`TF32`. The datasheet rows and the name lookup live, torch-free and keyed by dtype
name, in :mod:`inductor_perf.device_table`; this module keys them by ``torch.dtype``.
docs/devices.md lists the sources and the rules.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import threading
from types import MappingProxyType
from typing import Any, Mapping

import torch

from . import config
from . import device_table as _table
from .device_table import (PEAK_SOURCES, TF32, DeviceSpec, PeakKey, _peaks, _tokens, dtype_name)
from .device_table import _ALIASES, _GFX_ARCH, _parse_name, _warned  # noqa: F401  (re-exported for tests)
from .errors import DeviceSpecError

log = logging.getLogger(__name__)

__all__ = ["PEAK_SOURCES", "TF32", "DeviceSpec", "PeakKey", "dtype_name", "DEVICE_TABLE", "lookup_device",
           "matmul_peak_tflops", "vector_peak_tflops", "resolve_device"]

F64, F32, BF16, F16, I8 = torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.int8
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
E4M3FNUZ, E5M2FNUZ = torch.float8_e4m3fnuz, torch.float8_e5m2fnuz


def _torch_key(key: PeakKey) -> PeakKey:
    """torch.bfloat16 for "bfloat16"; TF32 (and torch dtypes) unchanged."""
    if key == TF32 or not isinstance(key, str):
        return key
    value = getattr(torch, key, None)
    assert isinstance(value, torch.dtype), f"device table: {key!r} is not a torch dtype name"
    return value


def _with_torch_keys(row: DeviceSpec) -> DeviceSpec:
    """``row`` with its dtype-name keys replaced by torch dtypes."""
    return dataclasses.replace(
        row, peak_tflops=_peaks(*((_torch_key(k), v) for k, v in row.peak_tflops.items())),
        vector_tflops=_peaks(*((_torch_key(k), v) for k, v in row.vector_tflops.items())),
        sparse_halved=tuple(_torch_key(k) for k in row.sparse_halved))


DEVICE_TABLE: tuple[DeviceSpec, ...] = tuple(_with_torch_keys(r) for r in _table.DEVICE_TABLE)

_BY_NAME: Mapping[str, DeviceSpec] = MappingProxyType({d.name.casefold(): d for d in DEVICE_TABLE})
assert len(_BY_NAME) == len(DEVICE_TABLE), "duplicate device row names"


def lookup_device(name: str) -> DeviceSpec | None:
    """The datasheet row for a name a device reports, or None (logged once per name).

    Accepts ``torch.cuda.get_device_name()`` strings ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
    "Tesla V100-SXM2-16GB", "AMD Instinct MI300X"), ROCm ``gcnArchName`` ("gfx942:sramecc+:xnack-"),
    and the table's own row names. Peaks are keyed by ``torch.dtype`` (and :data:`TF32`).

    >>> lookup_device("NVIDIA H100 NVL").name
    'NVIDIA H100 NVL'
    >>> lookup_device("NVIDIA GB200") is None
    True
    """
    row = _table.lookup(name)
    return None if row is None else _BY_NAME[row.name.casefold()]


# --------------------------------------------------------------------------------------------
# TF32 and vector roofs
# --------------------------------------------------------------------------------------------
def tf32_enabled() -> bool:
    """True when float32 CUDA matmuls may run in TF32 (either torch switch allows it)."""
    try:
        if torch.backends.cuda.matmul.allow_tf32:
            return True
    except Exception:  # pragma: no cover - API moved; the precision setting below still answers
        pass
    return torch.get_float32_matmul_precision() != "highest"


def matmul_peak_tflops(spec: DeviceSpec, dtype: torch.dtype, *, tf32: bool | None = None) -> float | None:
    """The matmul roof for ``dtype`` (None when the row has no figure for it).

    float32 on a CUDA device with TF32 allowed (``torch.backends.cuda.matmul.allow_tf32`` or
    ``torch.get_float32_matmul_precision() != "highest"``) uses the row's TF32 peak. Offline
    analysis of a trace recorded elsewhere should pass ``tf32`` as it was at capture time, since
    this process's switches say nothing about that run.
    """
    if dtype == F32 and spec.device_type == "cuda" and TF32 in spec.peak_tflops and (
            tf32_enabled() if tf32 is None else tf32):
        return spec.peak_tflops[TF32]
    return spec.peak_tflops.get(dtype)


def vector_peak_tflops(spec: DeviceSpec, dtype: torch.dtype) -> float | None:
    """The roof for non-matmul work in ``dtype``: its vector (non-tensor-core) peak when the row
    has one, else the float32 vector roof (Inductor computes elementwise low-precision math in
    float32), else the float32 peak."""
    v = spec.vector_tflops.get(dtype)
    if v is not None:
        return v
    if dtype == F64:
        return spec.peak_tflops.get(F64)
    return spec.vector_tflops.get(F32, spec.peak_tflops.get(F32))


# --------------------------------------------------------------------------------------------
# CPU peaks from /proc/cpuinfo
# --------------------------------------------------------------------------------------------
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


def cpu_spec_from_cpuinfo(text: str, threads: int, *, max_freq_khz: float | None = None,
                          fma_units: int | None = None,
                          mem_bandwidth_gbs: float | None = None) -> DeviceSpec:
    """Peaks of this CPU computed from a /proc/cpuinfo text (peak_source "computed").

    peak = FMA units × lanes × 2 FLOP × GHz × cores used, cores used = min(``threads``, physical
    cores). The clock is ``max_freq_khz`` (cpufreq's cpuinfo_max_freq) when given, else the highest
    "cpu MHz". bf16/fp16/int8 use AMX, AVX512_BF16/AVX512_FP16/VNNI rates where the flags say so.

    >>> spec = cpu_spec_from_cpuinfo("processor: 0\\nvendor_id: GenuineIntel\\nflags: avx2 fma\\n"
    ...                              "cpu MHz: 2000\\n", threads=1)
    >>> spec.peak_tflops[torch.float32] * 1e3  # 2 units x 8 lanes x 2 x 2 GHz = 64 GFLOP/s
    64.0
    """
    if not isinstance(threads, int) or threads < 1:
        raise DeviceSpecError(f"threads: expected an integer >= 1, got {threads!r}")
    blocks = [b for b in _cpuinfo_blocks(text) if b]
    if not blocks:
        raise DeviceSpecError("cpuinfo text has no 'key : value' lines; expected /proc/cpuinfo contents")
    first = blocks[0]
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
    flags = set((first.get("flags") or first.get("features") or "").split())

    cores = {(b.get("physical id", "0"), b["core id"]) for b in blocks if "core id" in b}
    n_proc = sum(1 for b in blocks if "processor" in b) or len(blocks)
    physical = len(cores) if cores else n_proc
    used = min(threads, physical)

    if max_freq_khz is not None and max_freq_khz > 0:
        ghz: float | None = max_freq_khz / 1e6
        clock_src = "cpuinfo_max_freq"
    else:
        mhz = []
        for b in blocks:
            try:
                mhz.append(float(b.get("cpu mhz", "")))
            except ValueError:
                pass
        m = re.search(r"@\s*([\d.]+)\s*GHz", model_name)
        ghz = max(mhz) / 1e3 if mhz else float(m.group(1)) if m else None
        clock_src = "cpu MHz" if mhz else "model name" if m else "unknown"

    if "avx512f" in flags:
        width, isa = 512, "AVX-512"
    elif "avx2" in flags or "avx" in flags:
        width, isa = 256, "AVX2" if "avx2" in flags else "AVX"
    elif "asimd" in flags or "neon" in flags:
        width, isa = 128, "NEON"
    else:
        width, isa = 128, "SSE"
    has_fma = "fma" in flags or "avx512f" in flags or isa == "NEON"
    units = fma_units if fma_units is not None else _fma_units_heuristic(vendor, family, model_name, width)
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
        pairs += [(BF16, bf16_cycle * scale), (F16, f16_cycle * scale)]
        note_parts.append(f"bf16 via {bf16_src}, fp16 via {f16_src}")
        if "amx_int8" in flags:
            pairs.append((I8, 2048 * scale))  # 2048 INT8 ops/cycle/core
            note_parts.append("int8 via AMX")
        elif "avx512_vnni" in flags and width == 512:
            pairs.append((I8, units * 64 * 2 * scale))  # vpdpbusd: 64 u8×s8 MACs per 512-bit op
            note_parts.append("int8 via AVX512_VNNI")
        elif "avx_vnni" in flags:
            pairs.append((I8, units * 32 * 2 * scale))
            note_parts.append("int8 via AVX-VNNI")
    else:
        note_parts.append("clock unknown: no peaks")
    if mem_bandwidth_gbs is None:
        bw = CPU_BANDWIDTH_GBS_PER_CORE_ESTIMATE * used
        note_parts.append(f"bandwidth ESTIMATED at {CPU_BANDWIDTH_GBS_PER_CORE_ESTIMATE:g} GB/s per core "
                          "(run `inductor-perf calibrate`)")
    else:
        bw = float(mem_bandwidth_gbs)
    name = f"{model_name} ({used} core{'s' if used != 1 else ''}"
    name += f" @ {ghz:.2f} GHz)" if ghz else ")"
    return DeviceSpec(name=name, vendor=vendor, device_type="cpu", peak_tflops=_peaks(*pairs),
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
    threads = torch.get_num_threads() if threads is None else threads
    text = read_cpuinfo()
    if not text.strip():
        import platform

        text = f"processor: 0\nmodel name: {platform.processor() or platform.machine()}\n"
    return cpu_spec_from_cpuinfo(text, threads, max_freq_khz=read_max_freq_khz())


# --------------------------------------------------------------------------------------------
# User override: dict or JSON/TOML file
# --------------------------------------------------------------------------------------------
_OVERRIDE_KEYS = ("name", "base", "match", "vendor", "device_type", "peak_tflops", "vector_tflops",
                  "mem_bandwidth_gbs", "mem_gb", "source_url", "source_note")


def _dtype_from_name(name: Any, where: str) -> PeakKey:
    if name == TF32:
        return TF32
    if isinstance(name, str):
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            return value
    raise DeviceSpecError(f"{where}: unknown dtype name {name!r}; expected a torch dtype name such as "
                          "'float32', 'bfloat16', 'float16', 'float8_e4m3fn', 'int8', or 'tf32'")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DeviceSpecError(f"{where}: expected a positive number, got {value!r}")
    if value <= 0:
        raise DeviceSpecError(f"{where}: expected a positive number, got {value!r}")
    return float(value)


def _peak_map(obj: Any, where: str) -> Mapping[PeakKey, float]:
    if not isinstance(obj, Mapping):
        raise DeviceSpecError(f"{where}: expected a table of dtype name -> TFLOP/s, got {type(obj).__name__}")
    return _peaks(*[(_dtype_from_name(k, where), _number(v, f"{where}.{k}")) for k, v in obj.items()])


def _row_from_mapping(row: Mapping[str, Any], where: str) -> tuple[DeviceSpec, tuple[str, ...]]:
    if not isinstance(row, Mapping):
        raise DeviceSpecError(f"{where}: expected a table of device fields, got {type(row).__name__}")
    unknown = sorted(set(row) - set(_OVERRIDE_KEYS))
    if unknown:
        raise DeviceSpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                              f"expected some of {', '.join(_OVERRIDE_KEYS)}")
    base: DeviceSpec | None = None
    if "base" in row:
        base = lookup_device(str(row["base"]))
        if base is None:
            raise DeviceSpecError(f"{where}.base: {row['base']!r} is not a known device; expected a row "
                                  "name from `inductor-perf devices` or a reported device name")
    name = row.get("name", base.name if base else None)
    if not isinstance(name, str) or not name.strip():
        raise DeviceSpecError(f"{where}: missing 'name' (a non-empty string)")
    if "peak_tflops" in row:
        peaks = _peak_map(row["peak_tflops"], f"{where}.peak_tflops")
        if base is not None:  # a partial table on top of a base row replaces only what it names
            peaks = _peaks(*{**base.peak_tflops, **peaks}.items())
    elif base is not None:
        peaks = base.peak_tflops
    else:
        raise DeviceSpecError(f"{where}: missing 'peak_tflops' (dtype name -> dense TFLOP/s), "
                              "or give 'base' to start from a built-in row")
    if not peaks:
        raise DeviceSpecError(f"{where}.peak_tflops: expected at least one dtype")
    vector = (_peak_map(row["vector_tflops"], f"{where}.vector_tflops") if "vector_tflops" in row
              else base.vector_tflops if base else MappingProxyType({}))
    if "mem_bandwidth_gbs" in row:
        bw = _number(row["mem_bandwidth_gbs"], f"{where}.mem_bandwidth_gbs")
    elif base is not None:
        bw = base.mem_bandwidth_gbs
    else:
        raise DeviceSpecError(f"{where}: missing 'mem_bandwidth_gbs' (memory bandwidth in GB/s)")
    mem_gb = _number(row["mem_gb"], f"{where}.mem_gb") if row.get("mem_gb") is not None else (
        base.mem_gb if base else None)
    device_type = row.get("device_type", base.device_type if base else "cuda")
    if device_type not in ("cuda", "xpu", "cpu", "mps"):
        raise DeviceSpecError(f"{where}.device_type: expected 'cuda', 'xpu', 'cpu' or 'mps', got {device_type!r}")
    match = row.get("match", ())
    if isinstance(match, str):
        match = (match,)
    if not isinstance(match, (list, tuple)) or not all(isinstance(m, str) for m in match):
        raise DeviceSpecError(f"{where}.match: expected a list of reported device names")
    for key in ("vendor", "source_url", "source_note"):
        if key in row and not isinstance(row[key], str):
            raise DeviceSpecError(f"{where}.{key}: expected a string, got {row[key]!r}")
    spec = DeviceSpec(name=name.strip(), vendor=row.get("vendor", base.vendor if base else "unknown"),
                      peak_tflops=peaks, vector_tflops=vector, mem_bandwidth_gbs=bw, mem_gb=mem_gb,
                      source_url=row.get("source_url", "user override"),
                      source_note=row.get("source_note", f"user override ({where})"
                                          + (f" on top of '{base.name}'" if base else "")),
                      peak_source="user", device_type=device_type)
    return spec, tuple(match)


def _load_file(path: os.PathLike | str) -> Any:
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DeviceSpecError(f"device file {p!r}: cannot read it ({e.strerror or e})") from None
    if p.lower().endswith(".toml"):
        import tomllib

        try:
            return tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise DeviceSpecError(f"device file {p!r}: not valid TOML ({e})") from None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DeviceSpecError(f"device file {p!r}: not valid JSON ({e}); name TOML files *.toml") from None


def _rows(obj: Any) -> tuple[list[tuple[DeviceSpec, tuple[str, ...]]], str]:
    where = "device override"
    if isinstance(obj, (str, os.PathLike)):
        where = os.fspath(obj)
        obj = _load_file(obj)
    if isinstance(obj, Mapping) and "devices" in obj:
        rows = obj["devices"]
        if set(obj) != {"devices"}:
            raise DeviceSpecError(f"{where}: with 'devices', expected no other top-level keys, got "
                                  f"{sorted(set(obj) - {'devices'})}")
        if not isinstance(rows, list) or not rows:
            raise DeviceSpecError(f"{where}: 'devices' must be a non-empty list of device tables")
        return [_row_from_mapping(r, f"{where}: devices[{i}]") for i, r in enumerate(rows)], where
    if isinstance(obj, Mapping):
        return [_row_from_mapping(obj, where)], where
    raise DeviceSpecError(f"{where}: expected a dict of device fields or a path to a JSON/TOML file, "
                          f"got {type(obj).__name__}")


def parse_device_overrides(obj: Any) -> list[DeviceSpec]:
    """Every row of an override: a dict, or a JSON/TOML file with one row or a ``devices`` list."""
    return [spec for spec, _ in _rows(obj)[0]]


def parse_device_override(obj: Any, device_name: str | None = None) -> DeviceSpec:
    """One user row from a dict (``options=``) or a JSON/TOML file path; peak_source "user".

    With several rows (``devices = [...]``), ``device_name`` picks the row whose ``name`` or
    ``match`` entries equal it (compared as tokens). Raises DeviceSpecError naming what is wrong.

    >>> parse_device_override({"name": "my gpu", "peak_tflops": {"bfloat16": 100},
    ...                        "mem_bandwidth_gbs": 1000}).peak_source
    'user'
    """
    rows, where = _rows(obj)
    if len(rows) == 1:
        return rows[0][0]
    if device_name is None:
        raise DeviceSpecError(f"{where}: has {len(rows)} device rows; pass device_name to choose one")
    want = _tokens(device_name)
    for spec, match in rows:
        if any(_tokens(n) == want for n in (spec.name, *match)):
            return spec
    raise DeviceSpecError(f"{where}: no row's name or match equals {device_name!r}; rows: "
                          f"{', '.join(s.name for s, _ in rows)}")


# --------------------------------------------------------------------------------------------
# resolve_device: override > measured > datasheet / computed
# --------------------------------------------------------------------------------------------
_resolved: dict[tuple[str, int], DeviceSpec | None] = {}
_resolved_lock = threading.Lock()


def clear_device_cache() -> None:
    """Forget resolved devices (tests; after changing threads, TF32 does not matter here)."""
    with _resolved_lock:
        _resolved.clear()


def _reported_name(device_type: str, index: int) -> str | None:
    if device_type == "cuda":
        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name(index)
        if not name.strip() and torch.version.hip:
            name = getattr(torch.cuda.get_device_properties(index), "gcnArchName", "") or ""
        return name or None
    if device_type == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is None or not xpu.is_available():
            return None
        return xpu.get_device_name(index)
    return None


def _from_env_override(device_type: str, device_name: str | None) -> DeviceSpec | None:
    path = config.get_str(config.DEVICE_FILE)
    if path is None:
        return None
    rows, where = _rows(path)
    # A file's rows describe one kind of device each: a GPU row must not replace the CPU's peaks.
    rows = [(s, m) for s, m in rows if s.device_type == device_type]
    if len(rows) == 1 and not rows[0][1]:
        return rows[0][0]
    want = _tokens(device_name or "")
    for spec, match in rows:
        if want and any(_tokens(n) == want for n in (spec.name, *match)):
            return spec
    log.info("%s=%s has no row for %r; using the built-in peaks", config.DEVICE_FILE, where, device_name)
    return None


def resolve_device(device_type: str = "cpu", index: int = 0, override: object | None = None,
                   *, use_cache: bool = True) -> DeviceSpec | None:
    """The peaks to use now for ``device_type:index``; None when nothing is known.

    Order: ``override`` (dict or file path) > ``INDUCTOR_PERF_DEVICE_FILE`` > the calibration cache
    (peak_source "measured") > the datasheet row (GPU) or computed peaks (CPU). Resolved once per
    (device_type, index) per process unless ``use_cache=False`` or an ``override`` is given.
    Never initializes CUDA for device_type "cpu".
    """
    if device_type not in ("cpu", "cuda", "xpu"):
        raise DeviceSpecError(f"device_type: expected 'cpu', 'cuda' or 'xpu', got {device_type!r}")
    key = (device_type, int(index))
    if override is None and use_cache:
        with _resolved_lock:
            if key in _resolved:
                return _resolved[key]
    spec = _resolve_uncached(device_type, int(index), override)
    if override is None and use_cache:
        with _resolved_lock:
            _resolved[key] = spec
    return spec


def _resolve_uncached(device_type: str, index: int, override: object | None) -> DeviceSpec | None:
    from . import calibrate

    name = _reported_name(device_type, index) if device_type != "cpu" else None
    if override is not None:
        return parse_device_override(override, name)
    user = _from_env_override(device_type, name if device_type != "cpu" else cpu_model_name())
    if user is not None:
        return user
    if device_type == "cpu":
        base: DeviceSpec | None = current_cpu_spec()
        cache_key = calibrate.machine_key("cpu")
    else:
        if name is None:
            return None
        base = lookup_device(name)
        cache_key = calibrate.machine_key(device_type, index)
    measured = calibrate.load_cached(cache_key)
    if measured is not None:
        return calibrate.apply_measurement(base, measured)
    return base


def table_rows() -> tuple[DeviceSpec, ...]:
    """The built-in table (for `inductor-perf devices`)."""
    return DEVICE_TABLE


def replace(spec: DeviceSpec, **changes: Any) -> DeviceSpec:
    """A copy of ``spec`` with ``changes`` (dataclasses.replace, re-exported for callers)."""
    return dataclasses.replace(spec, **changes)
