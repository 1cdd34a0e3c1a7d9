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

import dataclasses
from dataclasses import dataclass
import logging
import os
import re
import sys
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union

from .. import config
from .spec import (BF16, E4M3, E4M3FNUZ, E5M2, E5M2FNUZ, F16, F32, F64, I8, PCIE3_X16, PCIE4_X16, PCIE5_X16,
                   PEAK_SOURCES, TF32, DeviceSpec, PeakKey, _peaks, dtype_name)

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# The table. Each row's source_note names the table/line of the source it was read from.
# --------------------------------------------------------------------------------------------
_V100_URL = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_A100_URL = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100_URL = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"
_GH200_URL = "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip"
_MI250_URL = "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html"
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


_DATASHEET_ROWS: tuple[DeviceSpec, ...] = (
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
    _mi("AMD Instinct MI250 (per GCD)", _MI250_URL,
        64, 3276.8 / 2, 45.3 / 2, 90.5 / 2, 45.3 / 2, 90.5 / 2, 362.1 / 2, None, None, (), 362.1 / 2,
        "ROCm docs 'AMD Instinct MI250 microarchitecture', table 'Peak-performance capabilities of the MI250 "
        "OAM': Matrix FP64 90.5, Vector FP64 45.3, Matrix FP32 90.5, Vector FP32 45.3, Matrix FP16/BF16 362.1, "
        "Matrix INT8 362.1; 'The theoretical aggregated peak memory bandwidth of the GPU is 3.2 TB/sec (1.6 "
        "TB/sec per GCD)' (3.2 Gbps HBM2e x 8192 bit = 3276.8 GB/s). Halved: 'two GCDs, each of which "
        "constitutes one GPU device in the system'; 64 GB of the 128 GB each."),
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


# --------------------------------------------------------------------------------------------
# What deviceProperties are matched against, and the link roofs, per row (see DeviceSpec).
# Links are stored per direction: a datasheet's "NVLink 600 GB/s" is both directions summed -> 300.
# --------------------------------------------------------------------------------------------
_VOLTA_WP = "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf"
_AMPERE_WP = "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf"
_HOPPER_WP = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
_ROCM_SPECS = "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"
_ROCM_SPECS_LINE = (f"Properties: ROCm 'AMD GPU specifications' ({_ROCM_SPECS}), Instinct table, columns LLVM target, "
                    "VRAM (GiB), Compute Units, GFXIP major/minor: ")
_PCIE = "PCIe x16 at {} GT/s with 128b/130b encoding = {} GB/s per direction"


@dataclass(frozen=True)
class _Facts:
    arch: str | None
    sms: int | None
    host: float | None
    link: float | None
    note: str
    variants: tuple[float, ...] = ()


_FACTS: Mapping[str, _Facts] = MappingProxyType({
    "NVIDIA V100 SXM2": _Facts("sm_70", 80, PCIE3_X16, 150, variants=(16,), note=(
        f"Properties: Volta whitepaper ({_VOLTA_WP}) Table 1 'Tesla V100: SMs 80'; sm_70. Links: datasheet "
        "'Interconnect Bandwidth Bi-Directional: NVLink 300 GB/s, PCIe 32 GB/s' -> NVLink 300 / 2 = 150; "
        + _PCIE.format(8, PCIE3_X16) + ".")),
    "NVIDIA V100 PCIe": _Facts("sm_70", 80, PCIE3_X16, None, variants=(16,), note=(
        "Properties: as V100 SXM2 (80 SMs, sm_70). Links: datasheet 'PCIe 32 GB/s' (no NVLink on the PCIe "
        "card) -> " + _PCIE.format(8, PCIE3_X16) + ".")),
    "NVIDIA T4": _Facts("sm_75", 40, PCIE3_X16, None, note=(
        "Properties: Turing whitepaper appendix 'Tesla T4: SMs 40' (recalled, not re-read in this build); "
        "sm_75. Links: datasheet 'Interconnect Bandwidth 32 GB/s' (PCIe Gen3 x16, no NVLink) -> "
        + _PCIE.format(8, PCIE3_X16) + ".")),
    "NVIDIA A10": _Facts("sm_86", None, PCIE4_X16, None, note=(
        "Links: datasheet 'PCIe Gen4 64GB/s' (no NVLink) -> " + _PCIE.format(16, PCIE4_X16)
        + ". SM count not on the datasheet: found by name only.")),
    **{f"NVIDIA A100 {form} {mem}GB": _Facts("sm_80", 108, PCIE4_X16, 300, note=(
        f"Properties: Ampere whitepaper ({_AMPERE_WP}) 'The A100 ... GPU implementation of the GA100 GPU "
        f"includes ... 108 SMs'; sm_80. Links: datasheet {form} column '{link}, PCIe Gen4: 64GB/s' -> 600 / 2 = "
        "300; " + _PCIE.format(16, PCIE4_X16) + ". NVIDIA's NVLink page: 'twelve third-generation NVLink "
        "links, 600 GB/s total ... NVLink is also available in A100 PCIe two-GPU configurations'."))
       for form, link in (("SXM4", "NVLink: 600GB/s"), ("PCIe", "NVIDIA NVLink Bridge for 2 GPUs: 600GB/s"))
       for mem in (40, 80)},
    "NVIDIA L4": _Facts("sm_89", 58, PCIE4_X16, None, note=(
        "Properties: 7,424 CUDA cores / 128 per Ada SM = 58 SMs (recalled, UNVERIFIED); sm_89. Links: product page "
        "'PCIe Gen4 x16 64GB/s bidirectional' (no NVLink) -> " + _PCIE.format(16, PCIE4_X16) + ".")),
    "NVIDIA L40S": _Facts("sm_89", 142, PCIE4_X16, None, note=(
        "Properties: 18,176 CUDA cores / 128 per Ada SM = 142 SMs (recalled, UNVERIFIED); sm_89. Links: product "
        "page 'PCIe Gen4 x16: 64GB/s bidirectional' (no NVLink) -> " + _PCIE.format(16, PCIE4_X16) + ".")),
    **{name: _Facts("sm_90", sms, PCIE5_X16, link / 2, note=(
        f"Properties: {sm_note}; sm_90. Links: {line}, PCIe Gen5: 128GB/s' -> {link} / 2 = {link / 2:g}; "
        + _PCIE.format(32, PCIE5_X16) + "."))
       for name, sms, link, sm_note, line in (
           ("NVIDIA H100 SXM", 132, 900, f"Hopper whitepaper ({_HOPPER_WP}) 'H100 SXM5: 132 SMs'",
            "datasheet column 'H100 SXM' 'NVIDIA NVLink: 900GB/s"),
           ("NVIDIA H100 PCIe", 114, 600, "Hopper whitepaper 'H100 PCIe: 114 SMs'",
            "datasheet column 'H100 PCIe' 'NVLink: 600GB/s (bridge)"),
           ("NVIDIA H100 NVL", 132, 600, "132 SMs, the SXM5 configuration (recalled, UNVERIFIED)",
            "datasheet column 'H100 NVL' 'NVIDIA NVLink: 600GB/s"),
           ("NVIDIA H200 SXM", 132, 900, "GH100 with 132 SMs as H100 SXM5 (recalled, UNVERIFIED)",
            "product page column 'H200 SXM' 'NVIDIA NVLink: 900GB/s"),
           ("NVIDIA H200 NVL", 132, 900, "GH100 with 132 SMs as H100 SXM5 (recalled, UNVERIFIED)",
            "product page column 'H200 NVL' '2- or 4-way NVIDIA NVLink bridge: 900GB/s per GPU"))},
    **{name: _Facts("sm_90", 132, 450, None, note=(
        "Properties: GH100 with 132 SMs as H100 SXM5 (recalled, UNVERIFIED); sm_90. Links: the host is the Grace "
        "CPU over 'NVLink-C2C: 900GB/s bidirectional' -> 450 per direction; GPU-to-GPU NVLink not given for the "
        "single superchip."))
       for name in ("NVIDIA GH200 96GB HBM3", "NVIDIA GH200 144GB HBM3e")},
    "NVIDIA B200": _Facts("sm_100", None, None, 900, note=(
        "Links: HGX B200 'NVSwitch GPU-to-GPU Bandwidth 1.8TB/s' (both directions) -> 900; host link not given "
        "per GPU. SM count not published: found by name only.")),
    "NVIDIA GeForce RTX 3090": _Facts("sm_86", 82, PCIE4_X16, 56.25, note=(
        "Properties: GA102 whitepaper appendix 'GeForce RTX 3090: SMs 82'; sm_86. Links: GA102 whitepaper "
        "'Four links provide 56.25 GB/sec bandwidth in each direction, and 112.5 GB/sec total bandwidth "
        "between two GPUs' -> 56.25; PCIe Gen4: " + _PCIE.format(16, PCIE4_X16) + ".")),
    "NVIDIA GeForce RTX 4090": _Facts("sm_89", 128, PCIE4_X16, None, note=(
        "Properties: Ada whitepaper appendix 'GeForce RTX 4090: SMs 128'; sm_89. Links: PCIe Gen4 x16, no "
        "NVLink -> " + _PCIE.format(16, PCIE4_X16) + ".")),
    "AMD Instinct MI210": _Facts("gfx90a", 104, PCIE4_X16, 150, note=(
        _ROCM_SPECS_LINE + "'MI210 | CDNA2 | gfx90a | 64 | 104 | ... | 9 | 0'. Links: spec page 'Bus Type PCIe "
        "Gen4 x16', 'Infinity Fabric Links 3', 'Peak Infinity Fabric Link Bandwidth 100 GB/s' (both "
        "directions) -> 3 x 50 = 150; " + _PCIE.format(16, PCIE4_X16) + ".")),
    **{name: _Facts("gfx90a", cus, PCIE4_X16, None, note=(
        _ROCM_SPECS_LINE + f"'{line}' (per GCD: {cus} CUs, 64 GiB). Links: {_MI250_URL} 'Each GCD maintains its "
        "own PCIe x16 link' (Gen4) -> " + _PCIE.format(16, PCIE4_X16) + ". GPU-to-GPU depends on the GCD pair: "
        "'four AMD Infinity Fabric links ... 200 GB/sec' one way to the sibling GCD, 'peak transfer rate of 50 "
        "GB/sec per link' to GCDs on other OAMs, so no single per-GCD figure is stored."))
       for name, cus, line in (("AMD Instinct MI250 (per GCD)", 104, "MI250 | CDNA2 | gfx90a | 128 | 208 (104 per GCD) | ... | 9 | 0"),
                               ("AMD Instinct MI250X (per GCD)", 110, "MI250X | CDNA2 | gfx90a | 128 | 220 (110 per GCD) | ... | 9 | 0"))},
    "AMD Instinct MI300A": _Facts("gfx942", 228, None, None, note=(
        _ROCM_SPECS_LINE + "'MI300A | CDNA3 | gfx942 | 128 | 228 (38 per XCD) | ... | 9 | 4'. Links: an APU whose "
        "CPU shares the HBM, so no host link; Infinity Fabric figures not read.")),
    **{name: _Facts("gfx942", 304, PCIE5_X16, 448, note=(
        _ROCM_SPECS_LINE + f"'{name[13:]} | CDNA3 | gfx942 | {mem} | 304 (38 per XCD) | ... | 9 | 4' (in SPX mode; "
        "other partition modes report fewer CUs and are not recognised). Links: spec page 'Bus Type PCIe Gen 5 "
        "x16', 'Infinity Fabric Links 7', 'Peak Infinity Fabric Link Bandwidth 128 GB/s' (both directions; "
        "recalled, UNVERIFIED) -> 7 x 64 = 448; " + _PCIE.format(32, PCIE5_X16) + "."))
       for name, mem in (("AMD Instinct MI300X", 192), ("AMD Instinct MI325X", 256))},
    "AMD Instinct MI350X": _Facts("gfx950", 256, PCIE5_X16, None, note=(
        _ROCM_SPECS_LINE + "'MI350X | CDNA4 | gfx950 | 288 | 256 (32 per XCD) | ... | 9 | 5'. Links: PCIe Gen5 x16 "
        "(recalled, UNVERIFIED) -> " + _PCIE.format(32, PCIE5_X16) + "; Infinity Fabric figure not read.")),
})
assert set(_FACTS) <= {r.name for r in _DATASHEET_ROWS}, set(_FACTS) - {r.name for r in _DATASHEET_ROWS}


def _with_facts(row: DeviceSpec) -> DeviceSpec:
    """``row`` with its :data:`_FACTS` (properties and link roofs), their note appended to its source_note."""
    f = _FACTS.get(row.name)
    if f is None:
        return row
    return dataclasses.replace(row, arch=f.arch, sm_count=f.sms, mem_gb_variants=f.variants,
                               host_link_gbs=f.host, interconnect_gbs=f.link,
                               source_note=f"{row.source_note} {f.note}")


DEVICE_TABLE: tuple[DeviceSpec, ...] = tuple(_with_facts(r) for r in _DATASHEET_ROWS)

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
    _alias("mi250", "AMD Instinct MI250 (per GCD)"),
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


def warn_unknown(name: str, why: str) -> None:
    """Log once per ``name`` that the device has no row (``why`` says what was tried) and how to add one."""
    with _warn_lock:
        if name in _warned:
            return
        _warned.add(name)
    log.warning("device %r is not in inductor_perf's device table (%s); achieved %% of peak is "
                "unavailable. Add its row with a JSON/TOML file named by %s or options="
                "{'inductor_perf.device': {...}} (see docs/devices.md), or measure it with `inductor-perf calibrate`.",
                name, why, config.DEVICE_FILE)


def find_row(name: str) -> tuple[DeviceSpec | None, str]:
    """The row for a reported device name and "", or None and why (nothing logged): :func:`lookup`
    without its warning, for callers that try the trace's deviceProperties next."""
    if not isinstance(name, str) or not name.strip():
        return None, "no name"
    exact = _BY_NAME.get(name.strip().casefold())
    if exact is not None:
        return exact, ""
    toks = _tokens(name)
    if toks and _ARCH_RE.match(toks[0]):
        row = _GFX_ARCH.get(toks[0])
        if row is None:
            return None, f"no row for AMD arch {toks[0]}"
        log.debug("device %r: arch-only name, using the %s row (same chip family)", name, row)
        return _BY_NAME[row.casefold()], ""
    model, form, mem = _parse_name(name)
    for a in _ALIASES:
        if a.model == model and form in a.forms and (a.mems is None or mem in a.mems):
            return _BY_NAME[a.row.casefold()], ""
    return None, f"parsed as model={' '.join(model) or '?'} form={form} mem={mem}"


def lookup(name: str) -> DeviceSpec | None:
    """The datasheet row for a name a device reports, or None (logged once per name); the public
    :func:`inductor_perf.lookup_device`.

    Accepts ``torch.cuda.get_device_name()`` strings ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
    "Tesla V100-SXM2-16GB", "AMD Instinct MI300X"), ROCm ``gcnArchName`` ("gfx942:sramecc+:xnack-"),
    and the table's own row names. A trace's ``deviceProperties`` can say more than its name:
    :func:`inductor_perf.devices.props.recognise`.

    >>> lookup("NVIDIA H100 80GB HBM3").peak_tflops["bfloat16"]  # 1,979 with sparsity, halved
    989.5
    >>> lookup("NVIDIA GB200") is None
    True
    """
    if not isinstance(name, str) or not name.strip():
        return None
    spec, why = find_row(name)
    if spec is None:
        warn_unknown(name, why)
    return spec


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
    # the switch first: with TF32 off, float32 is float32's own figure whatever the row's type
    if name == F32 and (tf32_enabled() if tf32 is None else tf32) and spec.device_type == "cuda" and TF32 in peaks:
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
