"""The built-in device table as data: dense peak throughput per dtype NAME and memory bandwidth,
with sources; the lookup of a reported device name; the matmul and vector roof of a row. No torch
import, so augmenting a trace offline never imports torch.

Peaks are keyed by dtype name as torch spells it ("bfloat16", "float32", ...) here, in
:class:`DeviceSpec` and everywhere downstream; a ``torch.dtype`` becomes its name at the edge, in
:func:`dtype_name` (rows built with torch.dtype keys, the peak accessors' ``dtype`` argument). Peaks
are DENSE: a figure published only "with sparsity" (2:4 structured) is stored halved and its dtype
named in ``sparse_halved``. TF32 is not a dtype; its key is the string :data:`TF32`.
docs/devices.md lists the sources and the rules.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from collections import abc
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Union

from . import config
from .errors import DeviceSpecError

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

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
        }


# --------------------------------------------------------------------------------------------
# The table. Each row's source_note names the table/line of the source it was read from.
# --------------------------------------------------------------------------------------------
_V100_URL = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_A100_URL = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100_URL = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"
_GH200_URL = "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip"
_HOPPER_SPARSE = (TF32, BF16, F16, E4M3, E5M2, I8)
_ADA_SPARSE = (TF32, BF16, F16, E4M3, E5M2, I8)


def _a100(form: str, mem: int, bw: float) -> DeviceSpec:
    return DeviceSpec(
        name=f"NVIDIA A100 {form} {mem}GB", vendor="nvidia", mem_bandwidth_gbs=bw, mem_gb=mem,
        peak_tflops=_peaks((F64, 19.5), (F32, 19.5), (TF32, 156), (BF16, 312), (F16, 312), (I8, 624)),
        vector_tflops=_peaks((F64, 9.7), (F32, 19.5)),
        source_url=_A100_URL,
        source_note=("A100 datasheet, 'Specifications' table: FP64 9.7, FP64 Tensor Core 19.5, FP32 19.5, "
                     "TF32 156 | 312*, BF16/FP16 312 | 624*, INT8 624 | 1,248* (* sparse; dense column "
                     f"used). Bandwidth row '{form} {mem}GB'."))


def _hopper(name: str, url: str, mem: float, bw: float, f64: float, f64tc: float, f32: float,
            tf32_sparse: float, b16_sparse: float, f8_sparse: float, note: str) -> DeviceSpec:
    return DeviceSpec(
        name=name, vendor="nvidia", mem_bandwidth_gbs=bw, mem_gb=mem,
        peak_tflops=_peaks((F64, f64tc), (F32, f32), (TF32, tf32_sparse / 2), (BF16, b16_sparse / 2),
                           (F16, b16_sparse / 2), (E4M3, f8_sparse / 2), (E5M2, f8_sparse / 2),
                           (I8, f8_sparse / 2)),
        vector_tflops=_peaks((F64, f64), (F32, f32)),
        sparse_halved=_HOPPER_SPARSE, source_url=url,
        source_note=(f"{note}: FP64 {f64}, FP64 Tensor Core {f64tc}, FP32 {f32}, TF32 {tf32_sparse}*, "
                     f"BF16/FP16 {b16_sparse}*, FP8/INT8 {f8_sparse}* where * = with sparsity, so halved."))


def _mi(name: str, url: str, mem: float, bw: float, f64v: float, f64m: float, f32v: float,
        f32m: float, b16: float, tf32: float | None, fp8: float | None, fp8_keys: tuple, i8: float,
        note: str, peak_source: str = "datasheet") -> DeviceSpec:
    pairs: list[tuple[PeakKey, float]] = [(F64, f64m), (F32, f32m), (BF16, b16), (F16, b16), (I8, i8)]
    if tf32 is not None:
        pairs.append((TF32, tf32))
    if fp8 is not None:
        pairs += [(k, fp8) for k in fp8_keys]
    return DeviceSpec(name=name, vendor="amd", mem_bandwidth_gbs=bw, mem_gb=mem,
                      peak_tflops=_peaks(*pairs), vector_tflops=_peaks((F64, f64v), (F32, f32v)),
                      source_url=url, source_note=note, peak_source=peak_source)


DEVICE_TABLE: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        name="NVIDIA V100 SXM2", vendor="nvidia", mem_bandwidth_gbs=900, mem_gb=32,
        peak_tflops=_peaks((F64, 7.8), (F32, 15.7), (F16, 125)),
        vector_tflops=_peaks((F64, 7.8), (F32, 15.7)), source_url=_V100_URL,
        source_note=("V100 datasheet, 'Specifications' table, column 'V100 SXM2': Double-Precision 7.8, "
                     "Single-Precision 15.7, Tensor Performance 125 (FP16; no sparsity on Volta, no BF16). "
                     "16 or 32 GB; 900 GB/s for both.")),
    DeviceSpec(
        name="NVIDIA V100 PCIe", vendor="nvidia", mem_bandwidth_gbs=900, mem_gb=32,
        peak_tflops=_peaks((F64, 7.0), (F32, 14.0), (F16, 112)),
        vector_tflops=_peaks((F64, 7.0), (F32, 14.0)), source_url=_V100_URL,
        source_note=("V100 datasheet, 'Specifications' table, column 'V100 PCIe': Double-Precision 7, "
                     "Single-Precision 14, Tensor Performance 112. 16 or 32 GB; 900 GB/s.")),
    DeviceSpec(
        name="NVIDIA T4", vendor="nvidia", mem_bandwidth_gbs=320, mem_gb=16,
        peak_tflops=_peaks((F32, 8.1), (F16, 65), (I8, 130)),
        vector_tflops=_peaks((F32, 8.1),),
        source_url="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
        source_note=("T4 datasheet, 'Specifications': Single-Precision 8.1, Mixed-Precision (FP16/FP32) 65, "
                     "INT8 130 TOPS, GDDR6 320+ GB/s. Turing has no sparsity and no BF16; FP64 not given.")),
    DeviceSpec(
        name="NVIDIA A10", vendor="nvidia", mem_bandwidth_gbs=600, mem_gb=24,
        peak_tflops=_peaks((F32, 31.2), (TF32, 62.5), (BF16, 125), (F16, 125), (I8, 250)),
        vector_tflops=_peaks((F32, 31.2),),
        source_url="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf",
        source_note=("A10 datasheet, 'Specifications': FP32 31.2, TF32 62.5 | 125*, BF16/FP16 125 | 250*, "
                     "INT8 250 | 500* (* sparse; dense column used), 24 GB GDDR6, 600 GB/s.")),
    DeviceSpec(
        name="NVIDIA A10G", vendor="nvidia", mem_bandwidth_gbs=600, mem_gb=24,
        peak_tflops=_peaks((F32, 35.0), (TF32, 35.0), (BF16, 70.0), (F16, 70.0), (I8, 140.0)),
        vector_tflops=_peaks((F32, 35.0),),
        source_url="https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
        source_note=("UNVERIFIED: NVIDIA publishes no A10G datasheet (AWS-only part, EC2 G5). Figures as "
                     "tabulated by Baseten's 'A10 vs A10G' spec sheet (FP32 35, TF32 35, BF16/FP16 70, "
                     "INT8 140; 24 GB, 600 GB/s), taken as dense. Override if you know better.")),
    _a100("SXM4", 40, 1555), _a100("SXM4", 80, 2039), _a100("PCIe", 40, 1555), _a100("PCIe", 80, 1935),
    DeviceSpec(
        name="NVIDIA L4", vendor="nvidia", mem_bandwidth_gbs=300, mem_gb=24,
        peak_tflops=_peaks((F32, 30.3), (TF32, 120 / 2), (BF16, 242 / 2), (F16, 242 / 2),
                           (E4M3, 485 / 2), (E5M2, 485 / 2), (I8, 485 / 2)),
        vector_tflops=_peaks((F32, 30.3),), sparse_halved=_ADA_SPARSE,
        source_url="https://www.nvidia.com/en-us/data-center/l4/",
        source_note=("L4 product page 'Specifications': FP32 30.3, TF32 120*, BF16/FP16 242*, FP8/INT8 485* "
                     "(* = with sparsity; halved), 24 GB GDDR6, 300 GB/s.")),
    DeviceSpec(
        name="NVIDIA L40S", vendor="nvidia", mem_bandwidth_gbs=864, mem_gb=48,
        peak_tflops=_peaks((F32, 91.6), (TF32, 183), (BF16, 362.05), (F16, 362.05), (E4M3, 733),
                           (E5M2, 733), (I8, 733)),
        vector_tflops=_peaks((F32, 91.6),),
        source_url="https://www.nvidia.com/en-us/data-center/l40s/",
        source_note=("L40S product page 'Specifications': FP32 91.6, TF32 183 | 366*, BF16/FP16 362.05 | 733*, "
                     "FP8/INT8 733 | 1,466* (* sparse; dense column used), 48 GB GDDR6, 864 GB/s.")),
    _hopper("NVIDIA H100 SXM", _H100_URL, 80, 3350, 34, 67, 67, 989, 1979, 3958,
            "H100 datasheet, 'Technical Specifications' column 'H100 SXM'; 80 GB, 3.35 TB/s"),
    _hopper("NVIDIA H100 PCIe", "https://www.nvidia.com/content/dam/en-zz/Solutions/gtcs22/data-center/h100/PB-11133-001_v01.pdf",
            80, 2000, 26, 51, 51, 756, 1513, 3026,
            "H100 PCIe product brief PB-11133-001 / 2022 H100 datasheet column 'H100 PCIe'; 80 GB, 2 TB/s"),
    _hopper("NVIDIA H100 NVL", _H100_URL, 94, 3900, 30, 60, 60, 835, 1671, 3341,
            "H100 datasheet, 'Technical Specifications' column 'H100 NVL' (per GPU); 94 GB, 3.9 TB/s"),
    _hopper("NVIDIA H200 SXM", _H200_URL, 141, 4800, 34, 67, 67, 989, 1979, 3958,
            "H200 product page 'Specifications' column 'H200 SXM'; 141 GB, 4.8 TB/s"),
    _hopper("NVIDIA H200 NVL", _H200_URL, 141, 4800, 30, 60, 60, 835, 1671, 3341,
            "H200 product page 'Specifications' column 'H200 NVL'; 141 GB, 4.8 TB/s"),
    DeviceSpec(
        name="NVIDIA GH200 96GB HBM3", vendor="nvidia", mem_bandwidth_gbs=4000, mem_gb=96,
        peak_tflops=_peaks((F64, 67), (F32, 67), (TF32, 494), (BF16, 990), (F16, 990), (E4M3, 1979),
                           (E5M2, 1979), (I8, 1979)),
        vector_tflops=_peaks((F64, 34), (F32, 67)), source_url=_GH200_URL,
        source_note=("GH200 datasheet 'Specifications' (GPU part): FP64 34, FP64 TC 67, FP32 67, TF32 494 | 989*, "
                     "BF16/FP16 990 | 1,979*, FP8/INT8 1,979 | 3,958* (dense column used); HBM3 96 GB, 4 TB/s. "
                     "Reports as 'NVIDIA GH200 480GB' (480 GB is the CPU's LPDDR5X).")),
    DeviceSpec(
        name="NVIDIA GH200 144GB HBM3e", vendor="nvidia", mem_bandwidth_gbs=4900, mem_gb=144,
        peak_tflops=_peaks((F64, 67), (F32, 67), (TF32, 494), (BF16, 990), (F16, 990), (E4M3, 1979),
                           (E5M2, 1979), (I8, 1979)),
        vector_tflops=_peaks((F64, 34), (F32, 67)), source_url=_GH200_URL,
        source_note=("GH200 datasheet, HBM3e variant: same GPU compute as the HBM3 row; 144 GB, 4.9 TB/s.")),
    DeviceSpec(
        name="NVIDIA B200", vendor="nvidia", mem_bandwidth_gbs=8000, mem_gb=180,
        peak_tflops=_peaks((F64, 296 / 8), (F32, 75), (TF32, 18000 / 8 / 2), (BF16, 36000 / 8 / 2),
                           (F16, 36000 / 8 / 2), (E4M3, 72000 / 8 / 2), (E5M2, 72000 / 8 / 2),
                           (I8, 72000 / 8 / 2)),
        vector_tflops=_peaks((F64, 296 / 8), (F32, 75)), sparse_halved=_HOPPER_SPARSE,
        source_url="https://www.nvidia.com/en-us/data-center/hgx/",
        source_note=("HGX B200 'Specifications' (8 GPUs): FP64/FP64 TC 296 TF, TF32 18 PF*, FP16/BF16 36 PF*, "
                     "FP8/INT8 72 PF*/POPS* (* sparse) -> /8 GPUs, halved; 1.44 TB, 64 TB/s -> 180 GB, 8 TB/s "
                     "per GPU. FP32 75 is UNVERIFIED (not on NVIDIA's page; third-party clock x cores).")),
    DeviceSpec(
        name="NVIDIA GeForce RTX 3090", vendor="nvidia", mem_bandwidth_gbs=936, mem_gb=24,
        peak_tflops=_peaks((F32, 35.6), (TF32, 35.6), (BF16, 71), (F16, 71), (I8, 284)),
        vector_tflops=_peaks((F32, 35.6),),
        source_url="https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf",
        source_note=("GA102 whitepaper, appendix table 'GeForce RTX 3090': FP32 35.6, TF32 35.6/71*, BF16 71/142*, "
                     "FP16 with FP32 accumulate 71/142* (FP16 accumulate 142 not used: torch accumulates in "
                     "FP32), INT8 284/568* (dense values used); 936 GB/s.")),
    DeviceSpec(
        name="NVIDIA GeForce RTX 4090", vendor="nvidia", mem_bandwidth_gbs=1008, mem_gb=24,
        peak_tflops=_peaks((F32, 82.6), (TF32, 82.6), (BF16, 165.2), (F16, 165.2), (E4M3, 330.3),
                           (E5M2, 330.3), (I8, 660.6)),
        vector_tflops=_peaks((F32, 82.6),),
        source_url="https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
        source_note=("Ada whitepaper, appendix table 'GeForce RTX 4090': FP32 82.6, TF32 82.6/165.2*, BF16 and FP16 "
                     "with FP32 accumulate 165.2/330.4*, FP8 with FP32 accumulate 330.3/660.6*, INT8 660.6/1321.2* "
                     "(dense values used); 1008 GB/s.")),
    _mi("AMD Instinct MI210", "https://www.amd.com/en/products/accelerators/instinct/mi200/mi210.html",
        64, 1638.4, 22.6, 45.3, 22.6, 45.3, 181.0, None, None, (), 181.0,
        "AMD MI210 spec page: FP64 vector 22.6, FP64 matrix 45.3, FP32 vector 22.6, FP32 matrix 45.3, "
        "FP16/BF16 181.0, INT8 181.0 TOPS; 64 GB HBM2e, 1.6 TB/s. No sparsity on CDNA2."),
    _mi("AMD Instinct MI250X (per GCD)", "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html",
        64, 3276.8 / 2, 47.9 / 2, 95.7 / 2, 47.9 / 2, 95.7 / 2, 383.0 / 2, None, None, (), 383.0 / 2,
        "AMD MI250X spec page (package of 2 GCDs): FP64 vector 47.9, FP64/FP32 matrix 95.7, FP32 vector 47.9, "
        "FP16/BF16/INT8 383; 128 GB, 3.2768 TB/s. Halved: each GCD is its own torch device."),
    _mi("AMD Instinct MI300A", "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300a.html",
        128, 5300, 61.3, 122.6, 122.6, 122.6, 980.6, 490.3, 1961.2, (E4M3FNUZ, E5M2FNUZ), 1961.2,
        "AMD MI300A spec page: FP64 vector 61.3, FP64 matrix 122.6, FP32 122.6, TF32 490.3, FP16/BF16 980.6, "
        "FP8/INT8 1961.2 (dense; sparse figures ignored); 128 GB HBM3 (shared with CPU), 5.3 TB/s. "
        "gfx942 FP8 is the FNUZ variant."),
    _mi("AMD Instinct MI300X", "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        192, 5300, 81.7, 163.4, 163.4, 163.4, 1307.4, 653.7, 2614.9, (E4M3FNUZ, E5M2FNUZ), 2614.9,
        "AMD MI300X spec page: FP64 vector 81.7, FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16/BF16 1307.4, "
        "FP8/INT8 2614.9 (dense; sparse figures ignored); 192 GB HBM3, 5.3 TB/s. gfx942 FP8 is FNUZ."),
    _mi("AMD Instinct MI325X", "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html",
        256, 6000, 81.7, 163.4, 163.4, 163.4, 1307.4, 653.7, 2614.9, (E4M3FNUZ, E5M2FNUZ), 2614.9,
        "AMD MI325X spec page: same compute as MI300X (FP16/BF16 1307.4 dense, FP8 2614.9); 256 GB HBM3E, "
        "6 TB/s."),
    _mi("AMD Instinct MI350X", "https://www.amd.com/en/products/accelerators/instinct/mi350/mi350x.html",
        288, 8000, 72.1, 72.1, 144.2, 144.2, 2300, None, 4600, (E4M3, E5M2), 4600,
        "AMD MI350X spec page: FP64 72.1, FP32 vector 144.2, FP16/BF16 2.3 PF, FP8/INT8 4.6 PF (dense); "
        "288 GB HBM3E, 8 TB/s. CDNA4 has no TF32 hardware (emulated), OCP FP8. Figures recalled, UNVERIFIED "
        "against the page in this build."),
    DeviceSpec(
        name="Intel Data Center GPU Max 1550 (per stack)", vendor="intel", device_type="xpu",
        mem_bandwidth_gbs=3276.8 / 2, mem_gb=64,
        peak_tflops=_peaks((F64, 52.4 / 2), (F32, 52.4 / 2), (TF32, 419.4 / 2), (BF16, 838.9 / 2),
                           (F16, 838.9 / 2), (I8, 1677.7 / 2)),
        vector_tflops=_peaks((F64, 52.4 / 2), (F32, 52.4 / 2)), peak_source="computed",
        source_url="https://ark.intel.com/content/www/us/en/ark/products/232873/intel-data-center-gpu-max-1550.html",
        source_note=("Computed from Intel's figures (ark + Max Series technical overview): 128 Xe cores x 1.6 GHz; "
                     "per core 8 vector engines of 512 bit (FP32/FP64 16 FMA lanes) and 8 XMX of 4096 bit "
                     "(BF16/FP16 512 FLOP/clk each, TF32 half, INT8 double); 128 GB HBM2e, 3.2768 TB/s. "
                     "Halved: with ZE_FLAT_DEVICE_HIERARCHY=FLAT (the default) each of the 2 stacks is one "
                     "torch device. UNVERIFIED against a datasheet line.")),
)

_BY_NAME: Mapping[str, DeviceSpec] = MappingProxyType({d.name.casefold(): d for d in DEVICE_TABLE})
assert len(_BY_NAME) == len(DEVICE_TABLE), "duplicate device row names"


# --------------------------------------------------------------------------------------------
# Name lookup: tokens, matched explicitly (never `in` on substrings: "B200" is inside "GB200").
# --------------------------------------------------------------------------------------------
# Words that carry no identity in reported names.
_NOISE = frozenset({"nvidia", "tesla", "geforce", "amd", "instinct", "intel", "r", "tm", "data", "center",
                    "gpu", "vf", "oam", "hbm2", "hbm2e", "hbm3", "hbm3e", "accelerator"})
_FORMS = {"sxm": "sxm", "sxm2": "sxm", "sxm3": "sxm", "sxm4": "sxm", "sxm5": "sxm", "sxm6": "sxm",
          "pcie": "pcie", "nvl": "nvl"}
_MEM_RE = re.compile(r"^(\d+)gb?$")
_ARCH_RE = re.compile(r"^gfx[0-9a-f]+$")


@dataclass(frozen=True)
class _Alias:
    model: tuple[str, ...]
    forms: frozenset  # allowed form factors; None = the name gave none
    mems: frozenset | None  # allowed memory sizes in GB (None inside = not given); None = any
    row: str


def _alias(model: str, row: str, forms: Iterable = (None,), mems: Iterable | None = None) -> _Alias:
    return _Alias(tuple(model.split()), frozenset(forms), None if mems is None else frozenset(mems), row)


_ALIASES: tuple[_Alias, ...] = (
    _alias("v100", "NVIDIA V100 SXM2", forms=("sxm",)),
    _alias("v100", "NVIDIA V100 PCIe", forms=("pcie",)),
    _alias("t4", "NVIDIA T4"),
    _alias("a10", "NVIDIA A10"),
    _alias("a10g", "NVIDIA A10G"),
    _alias("a100", "NVIDIA A100 SXM4 80GB", forms=("sxm",), mems=(80,)),
    _alias("a100", "NVIDIA A100 SXM4 40GB", forms=("sxm",), mems=(40, None)),
    _alias("a100", "NVIDIA A100 PCIe 80GB", forms=("pcie",), mems=(80,)),
    _alias("a100", "NVIDIA A100 PCIe 40GB", forms=("pcie",), mems=(40, None)),
    _alias("l4", "NVIDIA L4"),
    _alias("l40s", "NVIDIA L40S"),
    # "NVIDIA H100 80GB HBM3" is the SXM part; the PCIe and NVL parts say so.
    _alias("h100", "NVIDIA H100 SXM", forms=(None, "sxm")),
    _alias("h100", "NVIDIA H100 PCIe", forms=("pcie",)),
    _alias("h100", "NVIDIA H100 NVL", forms=("nvl",)),
    _alias("h200", "NVIDIA H200 SXM", forms=(None, "sxm")),
    _alias("h200", "NVIDIA H200 NVL", forms=("nvl",)),
    _alias("gh200", "NVIDIA GH200 96GB HBM3", mems=(480, 96)),
    _alias("gh200", "NVIDIA GH200 144GB HBM3e", mems=(144,)),
    _alias("b200", "NVIDIA B200", forms=(None, "sxm")),
    _alias("rtx 3090", "NVIDIA GeForce RTX 3090"),
    _alias("rtx 4090", "NVIDIA GeForce RTX 4090"),
    _alias("mi210", "AMD Instinct MI210"),
    _alias("mi250x", "AMD Instinct MI250X (per GCD)"),
    _alias("mi250x mi250", "AMD Instinct MI250X (per GCD)"),
    _alias("mi300a", "AMD Instinct MI300A"),
    _alias("mi300x", "AMD Instinct MI300X"),
    _alias("mi325x", "AMD Instinct MI325X"),
    _alias("mi350x", "AMD Instinct MI350X"),
    _alias("max 1550", "Intel Data Center GPU Max 1550 (per stack)"),
)

# ROCm's gcnArchName names a chip family, not a product: each maps to the family's usual part
# (gfx942 is also MI300A/MI325X, gfx90a also MI210, gfx950 also MI355X). Prefer the device name.
_GFX_ARCH = {"gfx90a": "AMD Instinct MI250X (per GCD)", "gfx942": "AMD Instinct MI300X",
             "gfx950": "AMD Instinct MI350X"}

_warned: set[str] = set()
_warn_lock = threading.Lock()


def _tokens(name: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", name.casefold())


def _parse_name(name: str) -> tuple[tuple[str, ...], str | None, int | None]:
    """(model tokens, form factor, memory GB) of a reported device name."""
    model: list[str] = []
    form: str | None = None
    mem: int | None = None
    for tok in _tokens(name):
        if tok in _NOISE:
            continue
        if tok in _FORMS:
            form = _FORMS[tok]
            continue
        m = _MEM_RE.match(tok)
        if m and model:  # a size token only after the model ("4090" alone is a model)
            mem = int(m.group(1))
            continue
        model.append(tok)
    return tuple(model), form, mem


def _warn_unknown(name: str, why: str) -> None:
    with _warn_lock:
        if name in _warned:
            return
        _warned.add(name)
    log.warning("device %r is not in inductor_perf's device table (%s); achieved %% of peak is "
                "unavailable. Add its row with a JSON/TOML file named by %s or options="
                "{'inductor_perf.device': {...}} (see docs/devices.md), or measure it with `inductor-perf calibrate`.",
                name, why, config.DEVICE_FILE)


def lookup(name: str) -> DeviceSpec | None:
    """The datasheet row for a name a device reports, or None (logged once per name); the public
    :func:`inductor_perf.lookup_device`.

    Accepts ``torch.cuda.get_device_name()`` strings ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
    "Tesla V100-SXM2-16GB", "AMD Instinct MI300X"), ROCm ``gcnArchName`` ("gfx942:sramecc+:xnack-"),
    and the table's own row names.

    >>> lookup("NVIDIA H100 80GB HBM3").peak_tflops["bfloat16"]  # 1,979 with sparsity, halved
    989.5
    >>> lookup("NVIDIA GB200") is None
    True
    """
    if not isinstance(name, str) or not name.strip():
        return None
    exact = _BY_NAME.get(name.strip().casefold())
    if exact is not None:
        return exact
    toks = _tokens(name)
    if toks and _ARCH_RE.match(toks[0]):
        row = _GFX_ARCH.get(toks[0])
        if row is None:
            _warn_unknown(name, f"no row for AMD arch {toks[0]}")
            return None
        log.debug("device %r: arch-only name, using the %s row (same chip family)", name, row)
        return _BY_NAME[row.casefold()]
    model, form, mem = _parse_name(name)
    for a in _ALIASES:
        if a.model == model and form in a.forms and (a.mems is None or mem in a.mems):
            return _BY_NAME[a.row.casefold()]
    _warn_unknown(name, f"parsed as model={' '.join(model) or '?'} form={form} mem={mem}")
    return None


# --------------------------------------------------------------------------------------------
# The roofs of a row: one accessor per kind, dtype as a name or a torch.dtype
# --------------------------------------------------------------------------------------------
def tf32_enabled() -> bool:
    """True when float32 CUDA matmuls may run in TF32 (either torch switch allows it).

    Does not import torch: where nothing has, its switches are at their defaults (off) unless
    the environment makes cuBLAS use TF32 (``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "").strip() == "1"
    try:
        if torch.backends.cuda.matmul.allow_tf32:
            return True
    except Exception:  # pragma: no cover - API moved; the precision setting below still answers
        pass
    return torch.get_float32_matmul_precision() != "highest"


def _roofs(spec: Any, attr: str) -> Mapping[PeakKey, float]:
    """``spec``'s peak map ``attr``; a duck-typed device's torch.dtype keys become names."""
    peaks = getattr(spec, attr)
    return peaks if isinstance(spec, DeviceSpec) else {dtype_name(k): v for k, v in peaks.items()}


def matmul_peak_tflops(spec: DeviceSpec, dtype: Union["torch.dtype", str], *,
                       tf32: bool | None = None) -> float | None:
    """The matmul roof for ``dtype`` (a name or a torch.dtype); None when the row has no figure.

    float32 on a CUDA row with a TF32 figure uses it when ``tf32`` is true; ``tf32=None`` asks this
    process's switches (:func:`tf32_enabled`). Offline analysis of a trace recorded elsewhere should
    pass ``tf32`` as it was at capture time, since this process's switches say nothing about that run.

    >>> matmul_peak_tflops(lookup("NVIDIA H100 80GB HBM3"), "float32", tf32=True)
    494.5
    """
    name = dtype_name(dtype)
    peaks = _roofs(spec, "peak_tflops")
    if name == F32 and spec.device_type == "cuda" and TF32 in peaks and (
            tf32_enabled() if tf32 is None else tf32):
        return peaks[TF32]
    return peaks.get(name)


def vector_peak_tflops(spec: DeviceSpec, dtype: Union["torch.dtype", str]) -> float | None:
    """The roof for non-matmul work in ``dtype`` (a name or a torch.dtype): its vector
    (non-tensor-core) peak when the row has one, the float64 matmul peak for float64, else the
    float32 vector roof (Inductor computes elementwise low-precision math in float32), else the
    float32 peak."""
    name = dtype_name(dtype)
    vector = _roofs(spec, "vector_tflops")
    v = vector.get(name)
    if v is not None:
        return v
    peaks = _roofs(spec, "peak_tflops")
    if name == F64:
        return peaks.get(F64)
    return vector.get(F32, peaks.get(F32))
