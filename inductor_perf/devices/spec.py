"""One device row: :class:`DeviceSpec` (dense peaks keyed by dtype NAME, memory bandwidth, the
properties a trace's ``deviceProperties`` are matched against, the host-link and interconnect
roofs) and the helpers that build its peak maps. A leaf: no torch import, no package import, so
:mod:`inductor_perf.devices.table` (the rows) and :mod:`inductor_perf.devices.props` (recognition
from properties) both build on it. docs/devices.md lists the sources and the rules.
"""

from __future__ import annotations

import math
from collections import abc
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Union

from ..errors import DeviceSpecError

if TYPE_CHECKING:  # pragma: no cover
    import torch

# TF32 is a tensor-core mode of float32 matmuls, not a dtype; it gets a string key.
TF32 = "tf32"
PeakKey = str
"""A dtype name as torch spells it ("bfloat16"), or :data:`TF32`: the one key type of every peak map."""

PEAK_SOURCES = ("datasheet", "computed", "measured", "user")

# Dtype names as torch spells them (str(torch.bfloat16) == "torch.bfloat16").
F64, F32, BF16, F16, I8 = "float64", "float32", "bfloat16", "float16", "int8"
E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
E4M3FNUZ, E5M2FNUZ = "float8_e4m3fnuz", "float8_e5m2fnuz"


def dtype_name(dtype: Union["torch.dtype", str]) -> str:
    """The name torch spells a dtype with: "bfloat16" for torch.bfloat16 (or "bfloat16", or
    "torch.bfloat16"); "tf32" for :data:`TF32`. The one conversion from torch dtypes to peak keys.

    >>> dtype_name("torch.float8_e4m3fn"), dtype_name(TF32)
    ('float8_e4m3fn', 'tf32')
    """
    text = str(dtype)
    if not isinstance(dtype, str) and not text.startswith("torch."):
        raise TypeError(f"expected a torch.dtype or a dtype name such as 'bfloat16', got {dtype!r}")
    return text.removeprefix("torch.")


def _peaks(*pairs: tuple[Union["torch.dtype", str], float]) -> Mapping[PeakKey, float]:
    """An immutable dtype name -> TFLOP/s mapping that refuses a key given twice.

    A dict literal silently keeps the last of two equal keys (upstream's device_info.py lists
    float8_e8m0fnu three times); building rows through this function makes that an import error.
    """
    out: dict[PeakKey, float] = {}
    for key, value in pairs:
        name = dtype_name(key)
        assert name not in out, f"duplicate peak key {name}"
        assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, (key, value)
        out[name] = float(value)
    return MappingProxyType(out)


class Peaks(abc.Mapping):
    """Read-only peaks keyed by dtype name. Looking one up by ``torch.dtype`` converts it at the
    edge (``peaks[torch.bfloat16]`` is ``peaks["bfloat16"]``), so code written against torch
    dtypes keeps working; iteration yields the names."""

    __slots__ = ("_by_name",)

    def __init__(self, by_name: Mapping[PeakKey, float]) -> None:
        self._by_name = dict(by_name)

    def __getitem__(self, key: Any) -> float:
        try:
            return self._by_name[key]
        except KeyError:
            if isinstance(key, str):
                raise
        except TypeError:  # an unhashable key
            raise KeyError(key) from None
        try:
            return self._by_name[dtype_name(key)]
        except TypeError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[PeakKey]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Peaks({self._by_name!r})"


def _named(peaks: Mapping[Any, float], where: str) -> Peaks:
    """``peaks`` keyed by dtype name (a caller's torch.dtype keys converted), values as given."""
    out: dict[PeakKey, float] = {}
    for key, value in peaks.items():
        name = dtype_name(key)
        if name in out:
            raise DeviceSpecError(f"{where}: dtype {name!r} given twice")
        out[name] = value
    return Peaks(out)


@dataclass(frozen=True)
class DeviceSpec:
    """One device's roofs. Units are in the field names; peaks are dense.

    ``peak_tflops``: matmul peak per dtype name (tensor/matrix cores where the dtype uses them; int8
    in TOPS; :data:`TF32` for float32 matmuls in TF32 mode). A row built with ``torch.dtype`` keys
    stores their names (``DeviceSpec(..., peak_tflops={torch.bfloat16: 989.5})`` reads back as
    ``peak_tflops["bfloat16"]``).
    ``vector_tflops``: non-matrix roofs where the vendor gives them (fp64/fp32 on CUDA cores or
    vector ALUs); elementwise and reduction kernels are measured against these.
    ``sparse_halved``: dtypes whose datasheet figure was published only with 2:4 sparsity and halved.
    ``peak_source``: "datasheet" | "computed" | "measured" | "user".
    ``device_type``: the torch device type it describes ("cuda" covers ROCm, "xpu", "cpu").

    What a trace's ``deviceProperties`` entry is matched against (:mod:`devices.props`); None where
    the vendor publishes no figure, and such a row is found by name only:
    ``arch``: "sm_80" (CUDA compute capability) or the LLVM target "gfx90a" (ROCm);
    ``sm_count``: streaming multiprocessors (NVIDIA) or compute units (AMD) of one torch device;
    ``mem_gb_variants``: memory sizes the row also covers besides ``mem_gb`` (V100: 16 and 32 GB).

    Link roofs, GB/s in ONE direction (None: not published, or no such link):
    ``host_link_gbs``: the link to the host (PCIe x16: Gen3 15.75, Gen4 31.5, Gen5 63; NVLink-C2C);
    ``interconnect_gbs``: GPU-to-GPU, all links of one GPU together (NVLink, Infinity Fabric);
    vendors print both directions summed, so the row stores half and its note says so.

    ``cache_roofs``: CPU only, the bandwidth roof of each cache level as (level "L1"/"L2"/"L3", GB/s,
    capacity in bytes as a kernel on the threads in use sees it, source: "measured at ..." or
    "estimate: ..."), smallest first; main memory stays ``mem_bandwidth_gbs``. () for GPUs and where
    the cache sizes are unknown (:mod:`inductor_perf.devices.cpu_caches`, docs/roofline.md).
    """

    name: str
    vendor: str
    peak_tflops: Mapping[PeakKey, float] = field(hash=False)
    mem_bandwidth_gbs: float
    mem_gb: float | None = None
    source_url: str = ""
    source_note: str = ""
    sparse_halved: tuple[PeakKey, ...] = ()
    peak_source: str = "datasheet"
    device_type: str = "cuda"
    vector_tflops: Mapping[PeakKey, float] = field(default_factory=lambda: MappingProxyType({}),
                                                   hash=False)
    arch: str | None = None
    sm_count: int | None = None
    mem_gb_variants: tuple[float, ...] = ()
    host_link_gbs: float | None = None
    interconnect_gbs: float | None = None
    cache_roofs: tuple[tuple[str, float, int, str], ...] = ()

    def __post_init__(self) -> None:
        # The edge: rows may be built with torch.dtype keys (the public constructor always took
        # them); stored keys are names, so every reader looks peaks up one way.
        object.__setattr__(self, "peak_tflops", _named(self.peak_tflops, f"{self.name}: peak_tflops"))
        object.__setattr__(self, "vector_tflops", _named(self.vector_tflops, f"{self.name}: vector_tflops"))
        object.__setattr__(self, "sparse_halved", tuple(dtype_name(k) for k in self.sparse_halved))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (peak keys are dtype names: "bfloat16", "tf32")."""
        return {
            "name": self.name, "vendor": self.vendor, "device_type": self.device_type,
            "peak_tflops": dict(self.peak_tflops), "vector_tflops": dict(self.vector_tflops),
            "mem_bandwidth_gbs": self.mem_bandwidth_gbs, "mem_gb": self.mem_gb,
            "source_url": self.source_url, "source_note": self.source_note,
            "sparse_halved": list(self.sparse_halved),
            "peak_source": self.peak_source,
            "arch": self.arch, "sm_count": self.sm_count, "mem_gb_variants": list(self.mem_gb_variants),
            "host_link_gbs": self.host_link_gbs, "interconnect_gbs": self.interconnect_gbs,
            "cache_roofs": [list(r) for r in self.cache_roofs],
        }


def pcie_x16_gbs(gt_per_s: float) -> float:
    """GB/s in one direction of a PCIe x16 link at ``gt_per_s`` GT/s per lane with 128b/130b
    encoding (Gen3 8, Gen4 16, Gen5 32 GT/s), rounded to 0.01.

    >>> pcie_x16_gbs(8), pcie_x16_gbs(16), pcie_x16_gbs(32)
    (15.75, 31.51, 63.02)
    """
    return round(gt_per_s * 16 * 128 / 130 / 8, 2)


PCIE3_X16, PCIE4_X16, PCIE5_X16 = pcie_x16_gbs(8), pcie_x16_gbs(16), pcie_x16_gbs(32)

