"""Measure this machine's achievable GEMM TFLOP/s and memory bandwidth, and cache them per machine.

Datasheet and computed peaks are upper bounds nobody reaches; a measured roof says what this
machine, with this torch and these threads, actually achieves. ``inductor-perf calibrate`` runs
the measurement within a time budget and writes one small JSON file per machine key (CPU model +
threads + torch version, or GPU name + torch version) under ``$INDUCTOR_PERF_CACHE_DIR`` or
``~/.cache/inductor_perf``. This module only measures and caches: :func:`inductor_perf.devices.resolve.resolve_device`
reads the cache and turns a measurement into a DeviceSpec (:func:`inductor_perf.devices.resolve.apply_measurement`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .. import config
from ..errors import DeviceSpecError, InductorPerfError
from ..traces.files import write_atomic
from .cpu_caches import CacheLevel, read_caches
from .cpu_peaks import cpu_model_name

log = logging.getLogger(__name__)

CACHE_VERSION = 1


@dataclass(frozen=True)
class Measurement:
    """What a calibration measured: best GEMM TFLOP/s per dtype name, best copy/add GB/s."""

    key: Mapping[str, Any]
    gemm_tflops: Mapping[str, float]
    mem_bandwidth_gbs: float
    seconds: float
    measured_at: str
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def cache_roofs(self) -> tuple[tuple[str, float, int, str], ...]:
        """(level, GB/s, capacity bytes, source) per measured cache level (``details["cache_levels"]``,
        written by :func:`calibrate` on CPU), smallest first; () for a GPU or a cache file written before
        levels were measured. An entry that is not a positive finite figure is left out."""
        out = []
        for row in self.details.get("cache_levels") or ():
            try:
                level, gbps, cap = str(row["level"]), float(row["gbps"]), int(row["capacity_bytes"])
                buf, threads = int(row["buffer_bytes_per_thread"]), int(row["threads"])
                how = (f": {float(row['gbps_all_threads']):.0f} GB/s on {threads} threads together, "
                       f"{float(row['gbps_one_thread']):.0f} on one" if "gbps_one_thread" in row else "")
            except (KeyError, TypeError, ValueError):
                log.info("ignoring a malformed cache level in the calibration: %r", row)
                continue
            if math.isfinite(gbps) and gbps > 0 and cap > 0:
                out.append((level, gbps, cap, f"measured at {self.measured_at}: read of {buf // 1024} KiB "
                                              f"per thread{how}"))
        return tuple(sorted(out, key=lambda r: r[2]))

    def to_dict(self) -> dict[str, Any]:
        return {"version": CACHE_VERSION, "key": dict(self.key), "gemm_tflops": dict(self.gemm_tflops),
                "mem_bandwidth_gbs": self.mem_bandwidth_gbs, "seconds": self.seconds,
                "measured_at": self.measured_at, "details": dict(self.details)}


def cache_dir() -> Path:
    """``$INDUCTOR_PERF_CACHE_DIR`` or ``~/.cache/inductor_perf``."""
    configured = config.get_str(config.CACHE_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "inductor_perf"


def machine_key(device_type: str = "cpu", index: int = 0, *, threads: int | None = None,
                cpuinfo: str | None = None) -> dict[str, Any]:
    """What a cached measurement is valid for. CPU: model + threads + torch; GPU: name + torch.

    Never initializes CUDA for "cpu".
    """
    import torch

    if device_type == "cpu":
        return {"device_type": "cpu", "model": cpu_model_name(cpuinfo),
                "threads": torch.get_num_threads() if threads is None else int(threads),
                "torch": torch.__version__}
    if device_type == "cuda":
        name = torch.cuda.get_device_name(index) if torch.cuda.is_available() else "unavailable"
    elif device_type == "xpu":
        xpu = getattr(torch, "xpu", None)
        name = xpu.get_device_name(index) if xpu is not None and xpu.is_available() else "unavailable"
    else:
        raise DeviceSpecError(f"device: expected 'cpu', 'cuda' or 'xpu', got {device_type!r}")
    return {"device_type": device_type, "model": name, "torch": torch.__version__}


def cache_path(key: Mapping[str, Any], directory: Path | None = None) -> Path:
    """The cache file of machine ``key`` in ``directory`` (default :func:`cache_dir`)."""
    digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True).encode()).hexdigest()[:16]
    return (directory or cache_dir()) / f"calibration-{key.get('device_type', 'x')}-{digest}.json"


def load_cached(key: Mapping[str, Any], directory: Path | None = None) -> Measurement | None:
    """The cached measurement for ``key``, or None (missing, unreadable or for another key)."""
    path = cache_path(key, directory)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable calibration cache %s: %s", path, e)
        return None
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("key") != dict(key):
        log.info("ignoring calibration cache %s: written for another machine key or version", path)
        return None
    try:
        gemm = {str(k): float(v) for k, v in data["gemm_tflops"].items() if float(v) > 0}
        bw = float(data["mem_bandwidth_gbs"])
        return Measurement(key=MappingProxyType(dict(key)), gemm_tflops=MappingProxyType(gemm),
                           mem_bandwidth_gbs=bw, seconds=float(data.get("seconds", 0.0)),
                           measured_at=str(data.get("measured_at", "")),
                           details=MappingProxyType(dict(data.get("details") or {})))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        log.warning("ignoring malformed calibration cache %s: %s", path, e)
        return None


def save(measurement: Measurement, directory: Path | None = None) -> Path:
    """Write ``measurement`` to its per-machine cache file (atomically) and return the path."""
    path = cache_path(measurement.key, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(measurement.to_dict(), indent=2, allow_nan=False).encode("utf-8")
    write_atomic(path, lambda f: f.write(data), inputs=())
    return path


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------
def _best_rate(fn: Callable[[], None], sync: Callable[[], None], work: float, budget_s: float) -> float:
    """Best work/second of ``fn`` over repeated timed runs within ``budget_s`` (after one warm-up).

    The best, not the mean: a roof is what the machine can do, and the slow runs are the ones
    other processes (or frequency ramps) got in the way of.
    """
    fn()
    sync()
    best = 0.0
    deadline = time.perf_counter() + budget_s
    while True:  # at least one timed run, however small the budget
        t0 = time.perf_counter()
        fn()
        sync()
        t1 = time.perf_counter()
        if t1 > t0:
            best = max(best, work / (t1 - t0))
        if t1 >= deadline:
            break
    return best


def _gemm_sizes(device_type: str) -> tuple[int, ...]:
    # Several sizes, best kept: the fastest size depends on the BLAS and the caches (on a 2-vCPU
    # EPYC VM a 512^3 fp32 GEMM ran at 0.21 TFLOP/s and a 1024^3 one at 0.08, consistently).
    # Large enough that one GEMM is far from launch/threading overhead.
    return (512, 1024) if device_type == "cpu" else (4096, 8192)


# Bytes each timed call reads per thread when measuring a cache level: enough that one call runs for
# a few hundred microseconds (far above the ~1 µs an op costs to dispatch), few enough for many calls.
_CACHE_READ_BYTES_PER_CALL = 32 << 20


def cache_buffer_bytes(levels: tuple[CacheLevel, ...], threads: int) -> dict[str, int]:
    """Bytes per thread each level is measured on: half the level's share per thread (it fits, with
    room for the rest of the process), at most 4x the previous level's share (a shared last-level
    cache of a server or VM is shared with other cores and tenants; 4x the private L2 surely misses
    L2 and is the size a kernel placed at L3 has), and at least 2x the previous level's share (so the
    previous level cannot hold it). A level whose share cannot be both is left out.

    >>> l1 = CacheLevel(1, "Data", 48 << 10, 1, 2, "x"); l2 = CacheLevel(2, "Unified", 2 << 20, 1, 2, "x")
    >>> {k: v >> 10 for k, v in cache_buffer_bytes((l1, l2), 2).items()}  # KiB: 48/2; min(1024, 4x48)
    {'L1': 24, 'L2': 192}
    """
    out: dict[str, int] = {}
    prev = 0
    for lv in levels:
        share = lv.capacity_for(threads) // max(1, threads)
        size = share // 2 if not prev else min(share // 2, 4 * prev)
        if size >= 2 * prev and size >= 4096:
            out[lv.name] = size - size % 64
        else:
            log.info("not measuring %s: %d bytes per thread cannot exceed the previous level's %d", lv.name,
                     share, prev)
        prev = share
    return out


def _read_rate(threads: int, numel: int, budget_s: float) -> float:
    """Best bytes/s of reading a ``numel``-float buffer per thread over and over: one sum over a
    stride-0 repeated view reads the same (cache-resident) buffer many times in a single call, each
    thread its own buffer (the sum is split over its outputs, one row of buffers per thread)."""
    import torch

    repeat = max(2, _CACHE_READ_BYTES_PER_CALL // (numel * 4))
    x = torch.ones(threads, numel)
    view = x[:, None, :].expand(threads, repeat, numel)
    out = torch.empty(threads, repeat)
    return _best_rate(lambda: torch.sum(view, dim=2, out=out), lambda: None, 4.0 * threads * repeat * numel,
                      budget_s)


def _cache_bandwidths(levels: tuple[CacheLevel, ...], budget_s: float) -> list[dict[str, Any]]:
    """Read GB/s of each cache level as kernels use it: on all of torch's threads (Inductor's C++
    kernels split any loop of 512+ iterations per thread over every thread).

    The roof is the better of all threads together and ``threads`` x one thread. On an idle machine
    the two agree (2 threads read L1 at 373 GB/s, one at 189; L2 268 and 136), but a run on all
    threads waits for the slowest one at every call, so one busy core (another process) drags the
    all-thread figure far below what the caches deliver (8.5 GB/s for L1 on a shared 2-core VM),
    while one thread finds a free core. Each thread has its own path to every cache level, so the
    product is what the level delivers with every core in use; an overestimate only makes the roof
    looser, an underestimate would put kernels above it. Main memory, which a few cores saturate, is
    measured on all threads only (:func:`calibrate`)."""
    import torch

    threads = torch.get_num_threads()
    sizes = cache_buffer_bytes(levels, threads)
    rows: list[dict[str, Any]] = []
    each = budget_s / max(1, len(sizes))
    for lv in levels:
        if lv.name not in sizes:
            continue
        numel = sizes[lv.name] // 4
        all_rate = _read_rate(threads, numel, each * 2 / 3)
        prev = torch.get_num_threads()
        try:
            torch.set_num_threads(1)
            one_rate = _read_rate(1, numel, each / 3)
        finally:
            torch.set_num_threads(prev)
        rows.append({"level": lv.name, "gbps": max(all_rate, threads * one_rate) / 1e9,
                     "gbps_all_threads": all_rate / 1e9, "gbps_one_thread": one_rate / 1e9,
                     "buffer_bytes_per_thread": numel * 4, "threads": threads,
                     "capacity_bytes": lv.capacity_for(threads), "size_bytes": lv.size_bytes,
                     "shared_cpus": lv.shared_cpus, "sizes_from": lv.source})
        log.info("calibrate: %s read %.1f GB/s on %d thread(s) together, %.1f GB/s on one, %d KiB per thread",
                 lv.name, all_rate / 1e9, threads, one_rate / 1e9, numel * 4 // 1024)
    return rows


def _device_and_sync(torch: Any, device_type: str, index: int) -> tuple[Any, Callable[[], None]]:
    """The torch device to calibrate and how to wait for the work queued on it; an
    :class:`InductorPerfError` when there is no such device."""
    if device_type == "cpu":
        return torch.device("cpu"), lambda: None
    if device_type == "cuda":
        if not torch.cuda.is_available():
            raise InductorPerfError("calibrate --device cuda: no CUDA device is available")
        device = torch.device("cuda", index)
        return device, lambda: torch.cuda.synchronize(device)
    if device_type == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is None or not xpu.is_available():
            raise InductorPerfError("calibrate --device xpu: no XPU device is available")
        device = torch.device("xpu", index)
        return device, lambda: xpu.synchronize(device)
    raise InductorPerfError(f"--device: expected 'cpu', 'cuda' or 'xpu', got {device_type!r}")


def _gemm_tflops(torch: Any, device: Any, sync: Callable[[], None], dtypes: list[Any], sizes: tuple[int, ...],
                 budget: float) -> dict[str, float]:
    """The best GEMM rate in TFLOP/s of each dtype (by name) over square GEMMs of ``sizes``, each
    size given ``budget`` seconds."""
    gemm: dict[str, float] = {}
    # Measure fp32 as fp32: TF32 would be a different roof than the one named "float32".
    prev_prec = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        for dtype in dtypes:
            best = 0.0
            for n in sizes:
                a = torch.randn(n, n, device=device).to(dtype)
                b = torch.randn(n, n, device=device).to(dtype)
                out = torch.empty(n, n, device=device, dtype=dtype)
                best = max(best, _best_rate(lambda: torch.mm(a, b, out=out), sync, 2.0 * n ** 3, budget))
                del a, b, out
            gemm[str(dtype).removeprefix("torch.")] = best / 1e12
    finally:
        torch.set_float32_matmul_precision(prev_prec)
    return gemm


def calibrate(device_type: str = "cpu", seconds: float = 5.0, *, index: int = 0,
              gemm_n: int | None = None, copy_mib: int | None = None,
              cache_levels: tuple[CacheLevel, ...] | None = None) -> Measurement:
    """Measure GEMM TFLOP/s (float32, and bfloat16 where supported), copy/add GB/s and, on CPU, the
    read GB/s of each cache level (``cache_levels``, default :func:`~inductor_perf.devices.cpu_caches.read_caches`).

    The budget is split: half to GEMMs, half to memory; the cache levels take a fifth of it on top.
    Does not write the cache (see :func:`save`).
    """
    import torch

    if not (seconds > 0):
        raise InductorPerfError(f"--seconds: expected a positive number, got {seconds!r}")
    key = machine_key(device_type, index)
    device, sync = _device_and_sync(torch, device_type, index)
    dtypes = [torch.float32]
    if device_type != "cuda" or torch.cuda.is_bf16_supported():
        dtypes.append(torch.bfloat16)
    sizes = (gemm_n,) if gemm_n else _gemm_sizes(device_type)
    details: dict[str, Any] = {"gemm_sizes": list(sizes)}
    t_start = time.perf_counter()
    gemm = _gemm_tflops(torch, device, sync, dtypes, sizes, seconds * 0.5 / (len(dtypes) * len(sizes)))

    # Memory: a buffer far larger than the last-level cache, so the copy streams from DRAM.
    # 256 MiB per buffer: beyond the last-level cache even of cache-stacked server parts (a 64 MiB
    # buffer measured 76 GB/s on a 2-vCPU EPYC VM where 256 MiB gave 33 GB/s: that was cache).
    if copy_mib is None:
        copy_mib = 256 if device_type == "cpu" else 1024
    mib = copy_mib
    numel = mib * (1 << 20) // 4
    x = torch.ones(numel, device=device)
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    mem_budget = seconds * 0.5 / 2
    copy_rate = _best_rate(lambda: y.copy_(x), sync, 2.0 * nbytes, mem_budget)  # read x, write y
    add_rate = _best_rate(lambda: torch.add(x, y, out=z), sync, 3.0 * nbytes, mem_budget)
    del x, y, z
    details.update(copy_mib=mib, copy_gbs=copy_rate / 1e9, add_gbs=add_rate / 1e9,
                   threads=torch.get_num_threads())
    if device_type == "cpu":
        levels = read_caches() if cache_levels is None else tuple(cache_levels)
        details["cache_levels"] = _cache_bandwidths(levels, seconds * 0.2)
    elapsed = time.perf_counter() - t_start
    log.info("calibrated %s in %.2f s: %s, %.1f GB/s", key.get("model"), elapsed, gemm,
             max(copy_rate, add_rate) / 1e9)
    return Measurement(key=MappingProxyType(key), gemm_tflops=MappingProxyType(gemm),
                       mem_bandwidth_gbs=max(copy_rate, add_rate) / 1e9, seconds=float(seconds),
                       measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                       details=MappingProxyType(details))
