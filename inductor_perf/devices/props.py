"""Recognise a GPU from a trace's ``deviceProperties`` entry when the name it reports is not in the
device table (``NVIDIA A100-PG509-200`` is a board name; ROCm often reports ``AMD Radeon Graphics``
for Instinct parts).

The entry's vendor, compute capability (or gfx target), SM/CU count and memory size are matched
against the rows' :attr:`DeviceSpec.arch`, :attr:`~DeviceSpec.sm_count` and memory sizes. One row
fits: that row. Several fit: a board id or form factor in the name may single one out; else, when
every roof the rows carry agrees within the datasheets' rounding (1 %), a row named "A or B" with
those roofs, and the link roofs on which they differ left out; else nothing, never a guess.
Torch-free: offline tools never import torch. docs/devices.md ("Recognised from properties").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .spec import DeviceSpec, _peaks
from .table import DEVICE_TABLE, _parse_name, _tokens

# Reported memory is the nominal size less what the driver and ECC reserve: an A100 "40 GB" reports
# 39.6 GiB, a T4 "16 GB" (GDDR6 with ECC) about 14.7 GiB, an MI250 GCD "64 GB" 63.98 GiB. Within
# [0.90, 1.01] of a nominal size counts as that size; no two table sizes of one SM count overlap.
MEM_LOW, MEM_HIGH = 0.90, 1.01
# Datasheets round to three digits: MI210 FP64 vector "22.6" is the MI250's "45.3" halved (22.65).
ROOF_TOLERANCE = 0.01

_NVIDIA_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro"})
_AMD_WORDS = frozenset({"amd", "radeon", "instinct"})
_OTHER_VENDORS = {"intel": "intel", "arc": "intel"}

# Board ids NVIDIA's driver lists (https://github.com/NVIDIA/open-gpu-kernel-modules README,
# "Compatible GPUs"): "NVIDIA A100-SXM4-40GB | 20B0" and "NVIDIA A100-PG509-200 | 20B0 10DE 1450" --
# the same device id 20B0, a board variant of the SXM4 module; "NVIDIA A100-PCIE-40GB" is 20B1.
_BOARD_FORMS: Mapping[str, str] = {"pg509": "sxm"}
_GFX_RE = re.compile(r"gfx(\d{1,2})([0-9a-f])([0-9a-f])")


@dataclass(frozen=True)
class DeviceProperties:
    """What one ``deviceProperties`` entry says about a GPU (Kineto copies cudaDeviceProp /
    hipDeviceProp_t fields): ``vendor`` "nvidia" | "amd"; ``major``/``minor`` the compute
    capability (ROCm: GFXIP major/minor, 9.0 for gfx90a); ``gfx`` the LLVM target when the entry
    has ``gcnArchName``; ``sm_count`` SMs or CUs; ``mem_bytes`` ``totalGlobalMem``."""

    vendor: str
    major: int
    minor: int
    gfx: str | None
    sm_count: int
    mem_bytes: int

    @property
    def arch_label(self) -> str:
        """ "sm_80", or the gfx target ("gfx90a"), or "gfx9" when ROCm gave only capability 9.0."""
        if self.vendor == "nvidia":
            return f"sm_{self.major}{self.minor}"
        if self.gfx:
            return self.gfx
        return f"gfx{self.major}" if self.minor == 0 else f"gfx{self.major}{self.minor}"

    @property
    def unit(self) -> str:
        return "SMs" if self.vendor == "nvidia" else "CUs"

    @property
    def mem_gib(self) -> float:
        return self.mem_bytes / 2**30


def _count(entry: Mapping[str, Any], key: str, minimum: int) -> int | None:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if value >= minimum else None


def _vendor(name: str, entry: Mapping[str, Any]) -> tuple[str | None, str]:
    """The vendor from the name's words, checked against the entry (warpSize 64 or a gfx target
    means AMD); None and why when they disagree or nothing tells."""
    words = set(_tokens(name))
    gcn = entry.get("gcnArchName")
    amd_evidence = (isinstance(gcn, str) and gcn.strip().lower().startswith("gfx")) or entry.get("warpSize") == 64
    other = next((_OTHER_VENDORS[w] for w in words if w in _OTHER_VENDORS), None)
    if words & _NVIDIA_WORDS:
        if amd_evidence:
            return None, f"name {name!r} says NVIDIA but warpSize/gcnArchName say AMD"
        return "nvidia", ""
    if words & _AMD_WORDS or amd_evidence:
        return "amd", ""
    if other:
        return None, f"no {other} rows are matched by properties"
    return None, "vendor unknown (no vendor in the name, no gcnArchName, warpSize not 64)"


def parse_properties(entry: Any) -> tuple[DeviceProperties | None, str]:
    """The :class:`DeviceProperties` of a ``deviceProperties`` entry, or None and why.

    >>> p, _ = parse_properties({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0,
    ...                          "numSms": 104, "totalGlobalMem": 68702699520, "warpSize": 64})
    >>> p.arch_label, p.sm_count, round(p.mem_gib, 2)
    ('gfx9', 104, 63.98)
    """
    if not isinstance(entry, Mapping):
        return None, f"deviceProperties entry is a {type(entry).__name__}, not a table"
    name = entry.get("name") if isinstance(entry.get("name"), str) else ""
    vendor, why = _vendor(name, entry)
    if vendor is None:
        return None, why
    fields = {"computeMajor": 1, "computeMinor": 0, "numSms": 1, "totalGlobalMem": 1}
    values = {k: _count(entry, k, low) for k, low in fields.items()}
    missing = [k for k, v in values.items() if v is None]
    if missing:
        return None, f"deviceProperties lack a usable {', '.join(missing)}"
    gcn = entry.get("gcnArchName")
    gfx = gcn.strip().lower().split(":")[0] if isinstance(gcn, str) and gcn.strip().lower().startswith("gfx") else None
    return DeviceProperties(vendor, values["computeMajor"], values["computeMinor"], gfx, values["numSms"],
                            values["totalGlobalMem"]), ""


def _gfx_version(arch: str) -> tuple[int, int] | None:
    """(major, minor) of an LLVM gfx target: gfx90a -> (9, 0), gfx942 -> (9, 4), gfx1100 -> (11, 0)."""
    m = _GFX_RE.fullmatch(arch)
    return (int(m.group(1)), int(m.group(2), 16)) if m else None


def _arch_fits(row: DeviceSpec, p: DeviceProperties) -> bool:
    if p.vendor == "nvidia":
        return row.arch == p.arch_label
    if p.gfx:
        return row.arch == p.gfx
    return row.arch is not None and _gfx_version(row.arch) == (p.major, p.minor)


def _mem_fits(row: DeviceSpec, gib: float) -> float | None:
    """The row's nominal memory size (GB) that ``gib`` is, or None."""
    for size in (row.mem_gb, *row.mem_gb_variants):
        if size and MEM_LOW * size <= gib <= MEM_HIGH * size:
            return size
    return None


def candidates(p: DeviceProperties) -> list[tuple[DeviceSpec, float]]:
    """Every row (with its nominal memory size) that ``p`` fits."""
    out = []
    for row in DEVICE_TABLE:
        if row.vendor != p.vendor or row.sm_count != p.sm_count or not _arch_fits(row, p):
            continue
        size = _mem_fits(row, p.mem_gib)
        if size is not None:
            out.append((row, size))
    return out


def _close(values: Sequence[float]) -> bool:
    return max(values) - min(values) <= ROOF_TOLERANCE * max(values)


def _merged(rows: Sequence[DeviceSpec]) -> tuple[DeviceSpec | None, str]:
    """One row standing for ``rows`` when their compute and memory roofs agree (lower figure of
    each kept), links on which they differ left out; else None and which roof differs."""
    names = " and ".join(r.name for r in rows)
    for attr in ("peak_tflops", "vector_tflops"):
        keys = {frozenset(getattr(r, attr)) for r in rows}
        if len(keys) > 1:
            return None, f"fits {names}, whose {attr} name different dtypes"
        for key in next(iter(keys)):
            if not _close([getattr(r, attr)[key] for r in rows]):
                return None, f"fits {names}, whose {attr}[{key}] differ"
    if not _close([r.mem_bandwidth_gbs for r in rows]):
        return None, f"fits {names}, whose mem_bandwidth_gbs differ"
    links: dict[str, float | None] = {}
    dropped = []
    for attr in ("host_link_gbs", "interconnect_gbs"):
        values = [getattr(r, attr) for r in rows]
        same = all(v is not None for v in values) and _close(values)
        links[attr] = min(values) if same else None
        if not same and any(v is not None for v in values):
            dropped.append(f"{attr} ({', '.join(f'{r.name}: {v}' for r, v in zip(rows, values))})")
    first = rows[0]
    note = (f"Recognised from deviceProperties, which fit {names} equally: their compute and memory roofs agree "
            f"within {ROOF_TOLERANCE:.0%} (datasheet rounding), the lower figure of each is used"
            + (f"; left out where they differ: {'; '.join(dropped)}" if dropped else "") + ".")
    spec = DeviceSpec(
        name=" or ".join(r.name for r in rows), vendor=first.vendor, device_type=first.device_type,
        peak_tflops=_peaks(*[(k, min(r.peak_tflops[k] for r in rows)) for k in first.peak_tflops]),
        vector_tflops=_peaks(*[(k, min(r.vector_tflops[k] for r in rows)) for k in first.vector_tflops]),
        mem_bandwidth_gbs=min(r.mem_bandwidth_gbs for r in rows),
        mem_gb=min((r.mem_gb for r in rows if r.mem_gb), default=None),
        source_url=" | ".join(dict.fromkeys(r.source_url for r in rows)), source_note=note,
        sparse_halved=first.sparse_halved, peak_source=first.peak_source, arch=first.arch,
        sm_count=first.sm_count, host_link_gbs=links["host_link_gbs"],
        interconnect_gbs=links["interconnect_gbs"])
    return spec, ""


def _narrow_by_name(name: str, found: list[tuple[DeviceSpec, float]]) -> list[tuple[DeviceSpec, float]]:
    """``found`` narrowed to the form factor the name states ("SXM4") or its board id implies
    (:data:`_BOARD_FORMS`), when that leaves any."""
    forms = {_BOARD_FORMS[t] for t in _tokens(name) if t in _BOARD_FORMS}
    stated = _parse_name(name)[1]
    if stated:
        forms.add(stated)
    if len(forms) != 1:
        return found
    narrowed = [(r, s) for r, s in found if _parse_name(r.name)[1] in forms]
    return narrowed or found


def recognise(entry: Any) -> tuple[DeviceSpec | None, str]:
    """The row a ``deviceProperties`` entry fits and the note saying how ("recognised from
    properties (sm_80, 108 SMs, 40 GB) → NVIDIA A100 SXM4 40GB"), or None and why not.

    >>> spec, note = recognise({"name": "NVIDIA A100-PG509-200", "computeMajor": 8, "computeMinor": 0,
    ...                         "numSms": 108, "totalGlobalMem": 42505273344, "warpSize": 32})
    >>> note
    'recognised from properties (sm_80, 108 SMs, 40 GB) → NVIDIA A100 SXM4 40GB'
    """
    p, why = parse_properties(entry)
    if p is None:
        return None, why
    name = entry.get("name") if isinstance(entry.get("name"), str) else ""
    found = _narrow_by_name(name, candidates(p))
    sizes = {size for _, size in found}
    mem = f"{next(iter(sizes)):g} GB" if len(sizes) == 1 else f"{p.mem_gib:.1f} GiB"
    label = f"{p.arch_label}, {p.sm_count} {p.unit}, {mem}"
    if not found:
        return None, f"properties ({label}) fit no row"
    if len(found) == 1:
        spec = found[0][0]
    else:
        spec, why = _merged([r for r, _ in found])
        if spec is None:
            return None, f"properties ({label}) {why}"
    return spec, f"recognised from properties ({label}) → {spec.name}"


# --- A device row recorded in the trace by our own capture ------------------------------------------
RECORD_KEY = "inductor_perf"
"""The top-level key of a trace under which our capture records what it measured the trace against:
``{"device": <DeviceSpec.to_dict()> or null, "device_note": why there is none}``. Offline readers
use that row, not this machine's peaks: a trace recorded on another machine keeps its own roofs."""


def recorded_block(trace: Any) -> Mapping[str, Any] | None:
    """The :data:`RECORD_KEY` value of a trace (or of a streamed trace's header), None when it has none.

    >>> recorded_block({"inductor_perf": {"device": None}}), recorded_block({"inductor_perf": 3})
    ({'device': None}, None)
    """
    block = trace.get(RECORD_KEY) if isinstance(trace, Mapping) else None
    return block if isinstance(block, Mapping) else None


def device_record(spec: DeviceSpec | None, note: str | None = None) -> dict[str, Any]:
    """The :data:`RECORD_KEY` value of a capture that used ``spec`` (None: no peaks, ``note`` says
    why). Strict JSON: a row's floats are finite.

    >>> device_record(None, "no GPU")
    {'device': None, 'device_note': 'no GPU'}
    """
    return {"device": spec.to_dict() if spec is not None else None, "device_note": note}


_ROW_NUMBERS = ("mem_bandwidth_gbs",)
_ROW_OPTIONAL_NUMBERS = ("mem_gb", "host_link_gbs", "interconnect_gbs")


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ValueError(f"{where}: expected a positive finite number, got {value!r}")
    return float(value)


def spec_from_dict(d: Any) -> DeviceSpec:
    """The :class:`DeviceSpec` that :meth:`DeviceSpec.to_dict` wrote (a recorded row); ValueError
    naming the field when ``d`` is not one."""
    if not isinstance(d, Mapping):
        raise ValueError(f"device row: expected a table, got {type(d).__name__}")
    name, vendor = d.get("name"), d.get("vendor", "unknown")
    if not isinstance(name, str) or not name.strip() or not isinstance(vendor, str):
        raise ValueError("device row: expected a non-empty 'name' and a 'vendor' string")
    peaks = {}
    for field in ("peak_tflops", "vector_tflops"):
        table = d.get(field) or {}
        if not isinstance(table, Mapping) or not all(isinstance(k, str) for k in table):
            raise ValueError(f"device row {field}: expected a table of dtype name -> TFLOP/s")
        peaks[field] = {k: _positive(v, f"device row {field}.{k}") for k, v in table.items()}
    numbers = {k: _positive(d.get(k), f"device row {k}") for k in _ROW_NUMBERS}
    numbers.update({k: _positive(d[k], f"device row {k}") for k in _ROW_OPTIONAL_NUMBERS if d.get(k) is not None})
    caches = []
    for row in d.get("cache_roofs") or ():
        if not (isinstance(row, (list, tuple)) and len(row) == 4 and isinstance(row[0], str) and isinstance(row[3], str)
                and isinstance(row[2], int) and not isinstance(row[2], bool)):
            raise ValueError(f"device row cache_roofs: expected [level, GB/s, bytes, source], got {row!r}")
        caches.append((row[0], _positive(row[1], f"device row cache_roofs {row[0]}"), row[2], row[3]))
    texts = {k: d[k] for k in ("source_url", "source_note", "peak_source", "device_type", "arch")
             if isinstance(d.get(k), str)}
    sm = d.get("sm_count")
    return DeviceSpec(name=name, vendor=vendor, peak_tflops=peaks["peak_tflops"],
                      vector_tflops=peaks["vector_tflops"], **numbers, **texts,
                      sparse_halved=tuple(k for k in d.get("sparse_halved") or () if isinstance(k, str)),
                      sm_count=sm if isinstance(sm, int) and not isinstance(sm, bool) else None,
                      mem_gb_variants=tuple(float(v) for v in d.get("mem_gb_variants") or ()
                                            if isinstance(v, (int, float)) and not isinstance(v, bool)),
                      cache_roofs=tuple(caches))


def recorded_device(trace: Any) -> tuple[DeviceSpec | None, str] | None:
    """The device row our capture recorded in ``trace`` (:data:`RECORD_KEY`) and the note saying so,
    or (None, why) when it recorded none; None when the trace has no readable record (another
    tool's trace: its device is recognised from ``deviceProperties`` instead).

    >>> recorded_device({"traceEvents": []}) is None
    True
    """
    block = recorded_block(trace)
    if block is None or "device" not in block:
        return None
    row = block["device"]
    if row is None:
        why = block.get("device_note")
        return None, f"the capture recorded no device peaks ({why})" if isinstance(why, str) and why else \
            "the capture recorded no device peaks"
    try:
        spec = spec_from_dict(row)
    except (ValueError, TypeError) as e:
        return None, f"the device row recorded in the trace is unreadable ({e}): achieved % left out"
    return spec, "peaks recorded with the trace by its capture"
