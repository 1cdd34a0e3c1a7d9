"""The device table: dense peak throughput per dtype and memory bandwidth, with sources.

Three ways to a :class:`DeviceSpec`, in the order :func:`resolve_device` prefers them:

1. a user override (``options=`` dict, or a JSON/TOML file named by ``INDUCTOR_PERF_DEVICE_FILE``);
2. a calibration measured on this machine (:mod:`inductor_perf.calibrate`, cached per machine);
3. the datasheet row for the GPU's reported name (:func:`lookup_device`), or, on CPU, peaks computed
   from the ISA, the clock and the threads torch uses (:func:`cpu_spec_from_cpuinfo`).

Peaks are DENSE. Where a vendor published a figure only "with sparsity" (2:4 structured), the row
stores half of it and names the dtype in ``sparse_halved``. TF32 is not a torch dtype; its key is
the string :data:`TF32`. docs/devices.md lists the sources and the rules.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Union

import torch

from . import config
from .errors import DeviceSpecError

log = logging.getLogger(__name__)

# TF32 is a tensor-core mode of float32 matmuls, not a dtype; it gets a string key.
TF32 = "tf32"
PeakKey = Union[torch.dtype, str]

PEAK_SOURCES = ("datasheet", "computed", "measured", "user")

F64, F32, BF16, F16, I8 = torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.int8
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
E4M3FNUZ, E5M2FNUZ = torch.float8_e4m3fnuz, torch.float8_e5m2fnuz


def _peaks(*pairs: tuple[PeakKey, float]) -> Mapping[PeakKey, float]:
    """An immutable dtype -> TFLOP/s mapping that refuses a key given twice.

    A dict literal silently keeps the last of two equal keys (upstream's device_info.py lists
    float8_e8m0fnu three times); building rows through this function makes that an import error.
    """
    out: dict[PeakKey, float] = {}
    for key, value in pairs:
        assert key not in out, f"duplicate peak key {key}"
        assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, (key, value)
        out[key] = float(value)
    return MappingProxyType(out)


@dataclass(frozen=True)
class DeviceSpec:
    """One device's roofs. Units are in the field names; peaks are dense.

    ``peak_tflops``: matmul peak per dtype (tensor/matrix cores where the dtype uses them;
    ``torch.int8`` in TOPS; :data:`TF32` for float32 matmuls in TF32 mode).
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; dtype keys become their names ("bfloat16", "tf32")."""
        return {
            "name": self.name, "vendor": self.vendor, "device_type": self.device_type,
            "peak_tflops": {dtype_name(k): v for k, v in self.peak_tflops.items()},
            "vector_tflops": {dtype_name(k): v for k, v in self.vector_tflops.items()},
            "mem_bandwidth_gbs": self.mem_bandwidth_gbs, "mem_gb": self.mem_gb,
            "source_url": self.source_url, "source_note": self.source_note,
            "sparse_halved": [dtype_name(k) for k in self.sparse_halved],
            "peak_source": self.peak_source,
        }


def dtype_name(key: PeakKey) -> str:
    """"bfloat16" for torch.bfloat16, "tf32" for TF32."""
    return key if isinstance(key, str) else str(key).removeprefix("torch.")


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


def lookup_device(name: str) -> DeviceSpec | None:
    """The datasheet row for a name a device reports, or None (logged once per name).

    Accepts ``torch.cuda.get_device_name()`` strings ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
    "Tesla V100-SXM2-16GB", "AMD Instinct MI300X"), ROCm ``gcnArchName`` ("gfx942:sramecc+:xnack-"),
    and the table's own row names.

    >>> lookup_device("NVIDIA H100 NVL").name
    'NVIDIA H100 NVL'
    >>> lookup_device("NVIDIA GB200") is None
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
