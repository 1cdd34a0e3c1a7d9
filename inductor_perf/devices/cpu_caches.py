"""The CPU's data cache levels from its own description, and a bandwidth estimate per level.

Where the sizes come from, in order: Linux sysfs (``/sys/devices/system/cpu/cpu0/cache/index*/``:
``level``, ``type``, ``size``, ``shared_cpu_list``), else ``lscpu -C -B`` (util-linux), else nothing.
Only data and unified caches count (instruction caches hold no kernel data). Each level says how many
logical CPUs share one instance, so the capacity a kernel running on N threads sees can be worked out
(:meth:`CacheLevel.capacity_for`): per-core caches add up over the cores the threads run on, a shared
last-level cache does not.

Without a calibration (:mod:`inductor_perf.devices.calibrate` measures each level), :func:`estimate_roofs`
gives bytes/cycle/core x clock x cores used, with the constants and their sources in
:data:`BYTES_PER_CYCLE`. docs/roofline.md explains both. Torch-free.

>>> levels = read_sysfs("/sys/devices/system/cpu")     # doctest: +SKIP
>>> [(c.name, c.size_bytes, c.shared_cpus) for c in levels]  # doctest: +SKIP
[('L1', 49152, 1), ('L2', 2097152, 1), ('L3', 503316480, 2)]
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import DeviceSpecError
from .cpu_peaks import _clock_ghz, _cpuinfo_blocks, _identify, _physical_cores, _vector_isa

log = logging.getLogger(__name__)

SYSFS_CPU = "/sys/devices/system/cpu"

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


@dataclass(frozen=True)
class CacheLevel:
    """One data (or unified) cache level: ``level`` 1, 2, 3...; ``size_bytes`` of ONE instance;
    ``shared_cpus`` logical CPUs share one instance; ``cpus`` logical CPUs online on the machine;
    ``source``: where the numbers were read ("sysfs /sys/.../index0", "lscpu -C")."""

    level: int
    kind: str
    size_bytes: int
    shared_cpus: int
    cpus: int
    source: str

    @property
    def name(self) -> str:
        """"L1", "L2", "L3": the level name roofs and placements use."""
        return f"L{self.level}"

    @property
    def instances(self) -> int:
        """How many instances the machine has (at least one)."""
        return max(1, self.cpus // max(1, self.shared_cpus))

    def capacity_for(self, threads: int) -> int:
        """Bytes of this level a kernel running on ``threads`` threads can hold: one instance per
        thread up to the machine's instances (threads spread over cores first, as Linux and OpenMP
        place them), so per-core L1/L2 add up and a shared L3 counts once.

        >>> CacheLevel(2, "Unified", 2 << 20, 1, 8, "x").capacity_for(2) == 2 * (2 << 20)
        True
        """
        return min(max(1, int(threads)), self.instances) * self.size_bytes


def parse_size(text: str) -> int:
    """Bytes of a cache size as sysfs / lscpu write it: "48K", "2048K", "32M", "1 MiB", "49152".

    >>> parse_size("48K"), parse_size("2 MiB"), parse_size("32M")
    (49152, 2097152, 33554432)
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?(?:I?B)?)\s*", str(text).upper())
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"cache size: expected a number with an optional K/M/G unit such as '48K', got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def parse_cpu_list(text: str) -> frozenset[int]:
    """CPU numbers of a kernel CPU list: "0-1" -> {0, 1}; "0,2" -> {0, 2}; "0-3,8-11".

    >>> sorted(parse_cpu_list("0-2,5"))
    [0, 1, 2, 5]
    """
    out: set[int] = set()
    for part in str(text).strip().split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"cpu list: expected numbers and ranges such as '0-3,8', got {text!r}")
        out.update(range(int(lo), int(hi if sep else lo) + 1))
    return frozenset(out)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _online_cpus(cpu_root: Path) -> int:
    text = _read(cpu_root / "online")
    try:
        return len(parse_cpu_list(text)) if text else (os.cpu_count() or 1)
    except ValueError:
        return os.cpu_count() or 1


def read_sysfs(cpu_root: str | os.PathLike = SYSFS_CPU) -> tuple[CacheLevel, ...]:
    """The data/unified cache levels of cpu0 under ``cpu_root`` (a directory laid out like
    /sys/devices/system/cpu: ``online`` and ``cpu0/cache/index*/``), smallest level first; () where
    there is no such directory. An unreadable or malformed index is skipped with a log line."""
    root = Path(cpu_root)
    cpus = _online_cpus(root)
    found: dict[int, CacheLevel] = {}
    for index in sorted((root / "cpu0" / "cache").glob("index*")):
        kind, level, size = (_read(index / f) for f in ("type", "level", "size"))
        if kind not in ("Data", "Unified"):
            continue
        try:
            shared = _read(index / "shared_cpu_list")
            lvl = int(level or "")
            found.setdefault(lvl, CacheLevel(lvl, kind, parse_size(size or ""),
                                              len(parse_cpu_list(shared)) if shared else 1, cpus,
                                              f"sysfs {index}"))
        except ValueError as e:
            log.info("skipping cache description %s: %s", index, e)
    return tuple(found[k] for k in sorted(found))


def parse_lscpu(text: str, cpus: int) -> tuple[CacheLevel, ...]:
    """The data/unified levels of ``lscpu -C`` output (the NAME ONE-SIZE ALL-SIZE ... TYPE LEVEL table,
    sizes with or without -B) on a machine with ``cpus`` logical CPUs: sharing is worked out from
    ALL-SIZE / ONE-SIZE instances."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    if not lines or lines[0][:1] != ["NAME"]:
        raise ValueError("lscpu text: expected the `lscpu -C` table (a header starting with NAME)")
    col = {name: i for i, name in enumerate(lines[0])}
    missing = {"ONE-SIZE", "ALL-SIZE", "TYPE", "LEVEL"} - set(col)
    if missing:
        raise ValueError(f"lscpu text: the table lacks column(s) {', '.join(sorted(missing))}")
    found: dict[int, CacheLevel] = {}
    for row in lines[1:]:
        if len(row) < len(col) or row[col["TYPE"]] not in ("Data", "Unified"):
            continue
        one, total, lvl = parse_size(row[col["ONE-SIZE"]]), parse_size(row[col["ALL-SIZE"]]), int(row[col["LEVEL"]])
        instances = max(1, total // one) if one else 1
        found.setdefault(lvl, CacheLevel(lvl, row[col["TYPE"]], one, max(1, cpus // instances), cpus, "lscpu -C"))
    return tuple(found[k] for k in sorted(found))


def read_caches(cpu_root: str | os.PathLike = SYSFS_CPU) -> tuple[CacheLevel, ...]:
    """This machine's cache levels: sysfs, else ``lscpu -C -B``, else () (then only main memory has a roof)."""
    levels = read_sysfs(cpu_root)
    if levels:
        return levels
    lscpu = shutil.which("lscpu")
    if lscpu is None:
        return ()
    try:
        out = subprocess.run([lscpu, "-C", "-B"], capture_output=True, text=True, timeout=5, check=True).stdout
        return parse_lscpu(out, os.cpu_count() or 1)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        log.info("no cache sizes: sysfs has none and `lscpu -C -B` failed (%s)", e)
        return ()


# Peak bytes per cycle per core of each level, by the widest vector width, upper bounds on purpose
# (a roof no kernel may pass). L1: two vector loads + one vector store per cycle — AVX-512 Intel
# cores since Skylake-SP 2x64 + 64 = 192 B (Intel 64 and IA-32 Architectures Optimization
# Reference Manual, Skylake Server cache table, "L1 peak bandwidth 192 bytes/cycle"); AVX2 cores
# (Intel since Haswell, AMD Zen 2-4: "two 256-bit loads and one 256-bit store per cycle", AMD
# Software Optimization Guides) 96 B; 128-bit NEON/SSE cores 48 B. L2: one 64-byte line per cycle
# (the same Intel table's L2 peak; AMD's guides give 32 B/cycle, so an upper bound there). L3: 32
# B/cycle per core (the Intel manual's Skylake client LLC peak; AMD Zen's 32 B/cycle per core).
BYTES_PER_CYCLE: dict[int, dict[int, int]] = {512: {1: 192, 2: 64, 3: 32}, 256: {1: 96, 2: 64, 3: 32},
                                              128: {1: 48, 2: 64, 3: 32}}
LAST_LEVEL_BYTES_PER_CYCLE = 32
"""Levels beyond L3 (an L4) use the L3 figure."""


def estimate_roofs(levels: tuple[CacheLevel, ...], cpuinfo: str, threads: int, *,
                   max_freq_khz: float | None = None) -> tuple[tuple[str, float, int, str], ...]:
    """(level, GB/s, capacity bytes, source) per cache level without a measurement:
    GB/s = :data:`BYTES_PER_CYCLE` x GHz x cores used, cores used = min(threads, physical cores);
    capacity = :meth:`CacheLevel.capacity_for` ``threads``. () without a clock.

    >>> lv = (CacheLevel(1, "Data", 32768, 1, 1, "x"),)
    >>> estimate_roofs(lv, "processor: 0\\nflags: avx2 fma\\ncpu MHz: 2000\\n", 1)[0][:3]
    ('L1', 192.0, 32768)
    """
    if not isinstance(threads, int) or threads < 1:
        raise DeviceSpecError(f"threads: expected an integer >= 1, got {threads!r}")
    blocks = [b for b in _cpuinfo_blocks(cpuinfo) if b]
    if not blocks or not levels:
        return ()
    cpu = _identify(blocks[0])
    ghz, clock_src = _clock_ghz(blocks, cpu.model_name, max_freq_khz)
    if not ghz or ghz <= 0:
        return ()
    width, isa = _vector_isa(cpu.flags)
    cores = min(threads, _physical_cores(blocks))
    out = []
    for lv in levels:
        bpc = BYTES_PER_CYCLE[width].get(lv.level, LAST_LEVEL_BYTES_PER_CYCLE)
        gbps = bpc * ghz * cores
        out.append((lv.name, gbps, lv.capacity_for(threads),
                    f"estimate: {bpc} B/cycle/core ({isa}) x {ghz:.2f} GHz ({clock_src}) x {cores} core(s); "
                    f"size {lv.size_bytes // 1024} KiB x {min(threads, lv.instances)} instance(s) ({lv.source})"))
    return tuple(out)
