"""Which peaks to use: the public :class:`DeviceSpec` lookup, user overrides and :func:`resolve_device`.

Three ways to a :class:`DeviceSpec`, in the order :func:`resolve_device` prefers them:

1. a user override (``options=`` dict, or a JSON/TOML file named by ``INDUCTOR_PERF_DEVICE_FILE``);
2. a calibration measured on this machine (:mod:`inductor_perf.devices.calibrate`, cached per machine);
3. the datasheet row for the GPU's reported name (:func:`lookup_device`, the rows of
   :mod:`inductor_perf.devices.table`), or, on CPU, peaks computed from the ISA, the clock and the
   threads torch uses (:mod:`inductor_perf.devices.cpu_peaks`).

Peaks are DENSE and keyed by dtype name ("bfloat16"; TF32's key is the string :data:`TF32`);
:func:`matmul_peak_tflops` and :func:`vector_peak_tflops` take a name or a ``torch.dtype``.
docs/devices.md lists the sources and the rules.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import torch

from . import calibrate
from .. import config
from ..errors import DeviceSpecError
from .cpu_caches import estimate_roofs, read_caches
from .cpu_peaks import cpu_model_name, current_cpu_spec, read_cpuinfo, read_max_freq_khz
from .table import (BF16, DEVICE_TABLE, F16, F32, I8, PEAK_SOURCES, TF32, DeviceSpec, PeakKey, _peaks, _tokens,
                    dtype_name, matmul_peak_tflops, tf32_enabled, vector_peak_tflops)
from .table import lookup as lookup_device

log = logging.getLogger(__name__)

__all__ = ["PEAK_SOURCES", "TF32", "DeviceSpec", "PeakKey", "dtype_name", "DEVICE_TABLE", "lookup_device",
           "matmul_peak_tflops", "vector_peak_tflops", "tf32_enabled", "resolve_device"]


# --------------------------------------------------------------------------------------------
# User override: dict or JSON/TOML file
# --------------------------------------------------------------------------------------------
_OVERRIDE_KEYS = ("name", "base", "match", "vendor", "device_type", "peak_tflops", "vector_tflops",
                  "mem_bandwidth_gbs", "mem_gb", "source_url", "source_note", "host_link_gbs", "interconnect_gbs")


def _dtype_from_name(name: Any, where: str) -> PeakKey:
    """A user's peak key (a torch dtype name, :data:`TF32`, or a torch.dtype) as a dtype name."""
    if name == TF32:
        return TF32
    if isinstance(name, (str, torch.dtype)):
        if isinstance(getattr(torch, dtype_name(name), None), torch.dtype):
            return dtype_name(name)
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
    links = {k: _number(row[k], f"{where}.{k}") if row.get(k) is not None else getattr(base, k, None)
             for k in ("host_link_gbs", "interconnect_gbs")}
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
                      peak_source="user", device_type=device_type, **links)
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


# --------------------------------------------------------------------------------------------
# The device of a run of our compiled graphs: one rule for the capture and compare()
# --------------------------------------------------------------------------------------------
def run_device_type(trace: Mapping[str, Any]) -> str:
    """``"cuda"`` when a trace of our own run has device kernels (an event of category ``kernel``),
    else ``"cpu"``: the device whose peaks its figures are measured against.

    >>> run_device_type({"traceEvents": [{"ph": "X", "cat": "kernel"}]}), run_device_type({"traceEvents": []})
    ('cuda', 'cpu')
    """
    kernels = (isinstance(e, dict) and e.get("cat") == "kernel" for e in trace.get("traceEvents", ()))
    return "cuda" if any(kernels) else "cpu"


def run_device(trace: Mapping[str, Any], graphs: Iterable[int], registry: Any) -> tuple[DeviceSpec | None, str | None]:
    """The peaks a trace of our own compiled run is measured against, by one rule for the capture
    (:func:`inductor_perf.capture.session.process_trace`) and ``compare()``: the ``inductor_perf.device``
    option of the first of ``graphs`` (the instance ids of the graphs called in the trace) compiled
    with one (``registry.device_override``, a :class:`~inductor_perf.model.tags.TagRegistry`), else
    :func:`resolve_device` for :func:`run_device_type`. (the row, None), or (None, why there is none):
    peaks are optional, so a failure to resolve them is logged, never raised."""
    try:
        override = registry.device_override(graphs)
        device = resolve_device(run_device_type(trace), override=override)
    except Exception as e:  # peaks are optional: the trace is still useful without them
        log.warning("inductor_perf: could not determine device peaks (%s)", e)
        return None, f"could not determine device peaks: {e}"
    return (device, None) if device is not None else (None, "no peaks known for this device")


def _resolve_uncached(device_type: str, index: int, override: object | None) -> DeviceSpec | None:
    name = _reported_name(device_type, index) if device_type != "cpu" else None
    if override is not None:
        return parse_device_override(override, name)
    user = _from_env_override(device_type, name if device_type != "cpu" else cpu_model_name())
    if user is not None:
        return user
    if device_type == "cpu":
        base: DeviceSpec | None = _with_cache_estimates(current_cpu_spec())
        cache_key = calibrate.machine_key("cpu")
    else:
        if name is None:
            return None
        base = lookup_device(name)
        cache_key = calibrate.machine_key(device_type, index)
    measured = calibrate.load_cached(cache_key)
    if measured is not None:
        return apply_measurement(base, measured)
    return base


def _with_cache_estimates(spec: DeviceSpec) -> DeviceSpec:
    """``spec`` with estimated cache-level roofs (:func:`inductor_perf.devices.cpu_caches.estimate_roofs`) for
    the cache sizes this machine describes and the threads torch uses now."""
    roofs = estimate_roofs(read_caches(), read_cpuinfo(), torch.get_num_threads(),
                           max_freq_khz=read_max_freq_khz())
    return dataclasses.replace(spec, cache_roofs=roofs)


def apply_measurement(base: DeviceSpec | None, m: calibrate.Measurement) -> DeviceSpec:
    """``base`` (or nothing) with the measured roofs of ``m``; peak_source "measured".

    Measured dtypes replace their peaks; other dtypes keep the base's (datasheet/computed) peaks
    and the source_note says which are which.
    """
    measured: dict[PeakKey, float] = {}
    for name, value in m.gemm_tflops.items():
        if isinstance(getattr(torch, name, None), torch.dtype) and value > 0:
            measured[name] = value
    kept = {} if base is None else {k: v for k, v in base.peak_tflops.items() if k not in measured}
    levels = "".join(f", {r[0]}" for r in m.cache_roofs())
    note = (f"measured {', '.join(sorted(m.gemm_tflops))} GEMM, copy{levels} bandwidth at {m.measured_at} "
            f"({m.seconds:.1f} s budget)")
    if kept:
        note += f"; {', '.join(sorted(kept))} from {base.peak_source}"
    vector = dict(base.vector_tflops) if base is not None else {}
    if F32 in measured:
        # The measured fp32 GEMM rate is also the best vector roof evidence we have.
        vector[F32] = max(vector.get(F32, 0.0), measured[F32])
    return DeviceSpec(
        name=base.name if base is not None else str(m.key.get("model", "unknown device")),
        vendor=base.vendor if base is not None else "unknown",
        peak_tflops=_peaks(*{**kept, **measured}.items()), vector_tflops=_peaks(*vector.items()),
        mem_bandwidth_gbs=m.mem_bandwidth_gbs, mem_gb=base.mem_gb if base is not None else None,
        source_url=f"calibration cache ({calibrate.cache_path(m.key).name})", source_note=note,
        sparse_halved=(), peak_source="measured",
        host_link_gbs=getattr(base, "host_link_gbs", None), interconnect_gbs=getattr(base, "interconnect_gbs", None),
        # Measured cache levels, else the base's estimates (a cache file from before levels were measured).
        cache_roofs=m.cache_roofs() or (base.cache_roofs if base is not None else ()),
        device_type=str(m.key.get("device_type", base.device_type if base is not None else "cpu")))


def table_rows() -> tuple[DeviceSpec, ...]:
    """The built-in table (for `inductor-perf devices`)."""
    return DEVICE_TABLE


def replace(spec: DeviceSpec, **changes: Any) -> DeviceSpec:
    """A copy of ``spec`` with ``changes`` (dataclasses.replace, re-exported for callers)."""
    return dataclasses.replace(spec, **changes)
