"""Device table, name lookup, TF32 / vector roofs, CPU peaks, user overrides, resolve_device.

Expected numbers come from the vendors' datasheets (quoted next to each) or from hand arithmetic
written out in the test, never from the code under test.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from inductor_perf.devices import resolve as devices
from inductor_perf.devices.cpu_peaks import cpu_spec_from_cpuinfo
from inductor_perf.devices.resolve import TF32, DeviceSpec, lookup_device
from inductor_perf.errors import DeviceSpecError

CPUINFO = Path(__file__).parent.parent.parent / "fixtures" / "cpuinfo"


def _cpuinfo(name: str) -> str:
    return (CPUINFO / name).read_text()


def _row(name: str) -> DeviceSpec:
    matches = [r for r in devices.DEVICE_TABLE if r.name == name]
    assert len(matches) == 1, name
    return matches[0]


# ---------------------------------------------------------------------------------------- table
def test_row_names_unique_case_insensitively():
    names = [r.name.casefold() for r in devices.DEVICE_TABLE]
    assert len(names) == len(set(names))


def test_peaks_helper_refuses_duplicate_keys():
    # A dict literal would silently keep the last of two equal keys (upstream lists
    # float8_e8m0fnu three times); rows are built through _peaks, which refuses that.
    with pytest.raises(AssertionError, match="duplicate"):
        devices._peaks((torch.float8_e4m3fn, 1.0), (torch.float8_e4m3fn, 2.0))


def test_every_row_is_immutable_and_built_through_peaks():
    for r in devices.DEVICE_TABLE:
        assert type(r.peak_tflops).__name__ == "Peaks", r.name  # read-only: no __setitem__
        with pytest.raises(TypeError):
            r.peak_tflops["float32"] = 1.0  # type: ignore[index]


REQUIRED = {
    # the dtypes each datasheet gives (V100/T4: no BF16 hardware; T4 datasheet gives no FP64)
    "NVIDIA V100 SXM2": {torch.float64, torch.float32, torch.float16},
    "NVIDIA V100 PCIe": {torch.float64, torch.float32, torch.float16},
    "NVIDIA T4": {torch.float32, torch.float16, torch.int8},
    "NVIDIA A10": {torch.float32, TF32, torch.bfloat16, torch.float16, torch.int8},
    "NVIDIA A10G": {torch.float32, TF32, torch.bfloat16, torch.float16},
    "NVIDIA A100 SXM4 40GB": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.int8},
    "NVIDIA A100 SXM4 80GB": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.int8},
    "NVIDIA A100 PCIe 40GB": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.int8},
    "NVIDIA A100 PCIe 80GB": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.int8},
    "NVIDIA L4": {torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2},
    "NVIDIA L40S": {torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2},
    "NVIDIA H100 SXM": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16,
                        torch.float8_e4m3fn, torch.float8_e5m2, torch.int8},
    "NVIDIA H100 PCIe": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn},
    "NVIDIA H100 NVL": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn},
    "NVIDIA H200 SXM": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn},
    "NVIDIA GH200 96GB HBM3": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float8_e4m3fn},
    "NVIDIA B200": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn},
    "NVIDIA GeForce RTX 3090": {torch.float32, TF32, torch.bfloat16, torch.float16},
    "NVIDIA GeForce RTX 4090": {torch.float32, TF32, torch.bfloat16, torch.float16, torch.float8_e4m3fn},
    "AMD Instinct MI210": {torch.float64, torch.float32, torch.bfloat16, torch.float16},
    "AMD Instinct MI250X (per GCD)": {torch.float64, torch.float32, torch.bfloat16, torch.float16},
    "AMD Instinct MI300A": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16,
                            torch.float8_e4m3fnuz},
    "AMD Instinct MI300X": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16,
                            torch.float8_e4m3fnuz, torch.float8_e5m2fnuz},
    "AMD Instinct MI325X": {torch.float64, torch.float32, TF32, torch.bfloat16, torch.float16},
    "AMD Instinct MI350X": {torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn},
    "Intel Data Center GPU Max 1550 (per stack)": {torch.float64, torch.float32, TF32, torch.bfloat16,
                                                   torch.float16},
}


def test_table_has_every_required_row_and_its_dtypes():
    names = {r.name for r in devices.DEVICE_TABLE}
    assert set(REQUIRED) <= names
    for name, dtypes in REQUIRED.items():
        missing = {devices.dtype_name(d) for d in dtypes} - set(_row(name).peak_tflops)
        assert not missing, f"{name} lacks {missing}"


def test_every_row_is_sane():
    for r in devices.DEVICE_TABLE:
        assert r.source_url.startswith("https://"), r.name
        assert r.source_note, r.name
        assert r.peak_source in ("datasheet", "computed"), r.name
        assert r.mem_bandwidth_gbs > 0 and (r.mem_gb is None or r.mem_gb > 0)
        assert set(r.sparse_halved) <= set(r.peak_tflops), r.name
        # Dense tensor-core bf16/fp16 is never below the fp32 vector rate on these parts.
        if "bfloat16" in r.peak_tflops:
            assert r.peak_tflops["bfloat16"] >= r.peak_tflops["float32"], r.name


def test_upstream_wrong_values_do_not_reappear():
    h100 = _row("NVIDIA H100 SXM")
    # H100 datasheet: BF16 1,979 TFLOPS "with sparsity" -> dense 989.5 (upstream lists 1979)
    assert h100.peak_tflops["bfloat16"] == pytest.approx(989.5)
    assert h100.peak_tflops["float16"] == pytest.approx(989.5)
    assert h100.peak_tflops[TF32] == pytest.approx(494.5)
    assert h100.peak_tflops["float8_e4m3fn"] == pytest.approx(1979)  # upstream omits e4m3fn
    assert h100.peak_tflops["float32"] == pytest.approx(67)
    assert "bfloat16" in h100.sparse_halved
    assert h100.mem_bandwidth_gbs == pytest.approx(3350)
    # L4 product page: 300 GB/s (upstream: 3350)
    assert _row("NVIDIA L4").mem_bandwidth_gbs == pytest.approx(300)
    # L4: BF16 242 TFLOPS with sparsity -> 121 dense
    assert _row("NVIDIA L4").peak_tflops["bfloat16"] == pytest.approx(121)


def test_datasheet_spot_checks():
    a100 = _row("NVIDIA A100 SXM4 80GB")
    assert a100.peak_tflops["bfloat16"] == 312 and a100.peak_tflops[TF32] == 156
    assert a100.mem_bandwidth_gbs == 2039 and _row("NVIDIA A100 PCIe 80GB").mem_bandwidth_gbs == 1935
    assert _row("NVIDIA H100 NVL").peak_tflops["bfloat16"] == pytest.approx(1671 / 2)
    assert _row("AMD Instinct MI300X").peak_tflops["bfloat16"] == pytest.approx(1307.4)
    assert _row("NVIDIA GeForce RTX 4090").peak_tflops["bfloat16"] == pytest.approx(165.2)
    assert _row("NVIDIA B200").peak_tflops["bfloat16"] == pytest.approx(2250)
    assert _row("NVIDIA H200 SXM").mem_bandwidth_gbs == 4800


# ---------------------------------------------------------------------------------------- lookup
@pytest.mark.parametrize("reported, row", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("NVIDIA H200", "NVIDIA H200 SXM"),
    ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
    ("NVIDIA GH200 480GB", "NVIDIA GH200 96GB HBM3"),
    ("NVIDIA GH200 144G HBM3e", "NVIDIA GH200 144GB HBM3e"),
    ("NVIDIA B200", "NVIDIA B200"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB"),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB"),
    ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2"),
    ("Tesla V100-SXM2-32GB", "NVIDIA V100 SXM2"),
    ("Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe"),
    ("Tesla T4", "NVIDIA T4"),
    ("NVIDIA A10", "NVIDIA A10"),
    ("NVIDIA A10G", "NVIDIA A10G"),
    ("NVIDIA L4", "NVIDIA L4"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"),
    ("AMD Instinct MI300X", "AMD Instinct MI300X"),
    ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),
    ("AMD Instinct MI300A", "AMD Instinct MI300A"),
    ("AMD Instinct MI325X", "AMD Instinct MI325X"),
    ("AMD Instinct MI250X/MI250", "AMD Instinct MI250X (per GCD)"),
    ("AMD Instinct MI210", "AMD Instinct MI210"),
    ("AMD Instinct MI350X", "AMD Instinct MI350X"),
    ("gfx942:sramecc+:xnack-", "AMD Instinct MI300X"),
    ("gfx90a:sramecc+:xnack-", "AMD Instinct MI250X (per GCD)"),
    ("Intel(R) Data Center GPU Max 1550", "Intel Data Center GPU Max 1550 (per stack)"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("nvidia h100 sxm", "NVIDIA H100 SXM"),  # the table's own row names resolve too
])
def test_reported_names_resolve(reported, row):
    spec = lookup_device(reported)
    assert spec is not None and spec.name == row


@pytest.mark.parametrize("reported", [
    "NVIDIA GB200",            # contains "B200"
    "NVIDIA H800",             # contains "H100"'s digits, different part
    "NVIDIA L40",              # prefix of "L40S"
    "NVIDIA A40",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 3090 Ti",
    "Tesla V100S-PCIE-32GB",
    "NVIDIA A100",             # neither form factor nor memory: ambiguous bandwidth
    "gfx1100",
    "",
    "AMD Radeon Graphics",
])
def test_no_substring_traps(reported):
    assert lookup_device(reported) is None


def test_unknown_device_logs_once_with_how_to(caplog):
    name = "NVIDIA Imaginary X9000"
    with caplog.at_level(logging.WARNING, logger="inductor_perf.devices.resolve"):
        assert lookup_device(name) is None
        assert lookup_device(name) is None
    msgs = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(msgs) == 1
    assert "INDUCTOR_PERF_DEVICE_FILE" in msgs[0] and "calibrate" in msgs[0]


# ---------------------------------------------------------------------------------------- TF32
@pytest.fixture
def restore_precision():
    prev_prec = torch.get_float32_matmul_precision()
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    yield
    torch.set_float32_matmul_precision(prev_prec)
    torch.backends.cuda.matmul.allow_tf32 = prev_tf32


def test_matmul_peak_follows_tf32_switches(restore_precision):
    h100 = _row("NVIDIA H100 SXM")
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    assert devices.matmul_peak_tflops(h100, torch.float32) == pytest.approx(67)
    torch.set_float32_matmul_precision("high")
    assert devices.matmul_peak_tflops(h100, torch.float32) == pytest.approx(494.5)
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = True
    assert devices.matmul_peak_tflops(h100, torch.float32) == pytest.approx(494.5)
    # an explicit capture-time setting wins over this process's switches
    assert devices.matmul_peak_tflops(h100, torch.float32, tf32=False) == pytest.approx(67)
    # Vector work keeps the fp32 CUDA-core roof whatever TF32 says.
    assert devices.vector_peak_tflops(h100, torch.float32) == pytest.approx(67)
    # bf16 matmuls use tensor cores; bf16 elementwise is computed in fp32 by Inductor.
    assert devices.matmul_peak_tflops(h100, torch.bfloat16) == pytest.approx(989.5)
    assert devices.vector_peak_tflops(h100, torch.bfloat16) == pytest.approx(67)
    assert devices.vector_peak_tflops(h100, torch.float64) == pytest.approx(34)
    assert devices.matmul_peak_tflops(h100, torch.float64) == pytest.approx(67)


def test_tf32_never_applies_to_cpu_or_rows_without_tf32(restore_precision):
    torch.set_float32_matmul_precision("high")
    cpu = cpu_spec_from_cpuinfo(_cpuinfo("amd_epyc_7763_zen3.txt"), threads=8)
    assert devices.matmul_peak_tflops(cpu, torch.float32) == cpu.peak_tflops["float32"]
    mi350 = _row("AMD Instinct MI350X")  # CDNA4: no TF32 hardware
    assert devices.matmul_peak_tflops(mi350, torch.float32) == pytest.approx(144.2)
    v100 = _row("NVIDIA V100 SXM2")
    assert devices.matmul_peak_tflops(v100, torch.bfloat16) is None


# ---------------------------------------------------------------------------------------- CPU
def test_cpu_skylake_avx512_two_fma_units():
    # Gold 6148: AVX-512, 2 FMA units: 2 units x 16 fp32 lanes x 2 FLOP x 2.4 GHz x 2 cores
    spec = cpu_spec_from_cpuinfo(_cpuinfo("intel_xeon_gold6148_skx.txt"), threads=2)
    assert spec.peak_tflops["float32"] == pytest.approx(2 * 16 * 2 * 2.4e9 * 2 / 1e12)  # 0.3072
    assert spec.peak_tflops["float64"] == pytest.approx(2 * 8 * 2 * 2.4e9 * 2 / 1e12)
    # no AVX512_BF16 on Skylake: bf16 runs at the fp32 rate after conversion; no VNNI: no int8 row
    assert spec.peak_tflops["bfloat16"] == pytest.approx(0.3072)
    assert "int8" not in spec.peak_tflops
    assert spec.peak_source == "computed" and spec.device_type == "cpu" and spec.vendor == "intel"
    # bandwidth estimate: 8 GB/s per core used
    assert spec.mem_bandwidth_gbs == pytest.approx(16.0)
    assert "ESTIMATED" in spec.source_note


def test_cpu_threads_beyond_physical_cores_do_not_add_fma_units():
    # The file has 4 logical CPUs on 2 cores (hyperthreads share the FMA units).
    text = _cpuinfo("intel_xeon_gold6148_skx.txt")
    assert cpu_spec_from_cpuinfo(text, threads=4).peak_tflops["float32"] == pytest.approx(0.3072)
    assert cpu_spec_from_cpuinfo(text, threads=1).peak_tflops["float32"] == pytest.approx(0.1536)


def test_cpu_max_freq_and_fma_unit_overrides():
    text = _cpuinfo("intel_xeon_gold6148_skx.txt")
    # cpuinfo_max_freq 3,700,000 kHz: 64 FLOP/cycle x 3.7 GHz x 2 cores
    spec = cpu_spec_from_cpuinfo(text, threads=2, max_freq_khz=3_700_000)
    assert spec.peak_tflops["float32"] == pytest.approx(64 * 3.7e9 * 2 / 1e12)
    spec = cpu_spec_from_cpuinfo(text, threads=2, fma_units=1, mem_bandwidth_gbs=100.0)
    assert spec.peak_tflops["float32"] == pytest.approx(1 * 16 * 2 * 2.4e9 * 2 / 1e12)
    assert spec.mem_bandwidth_gbs == 100.0


def test_cpu_sapphire_rapids_amx():
    spec = cpu_spec_from_cpuinfo(_cpuinfo("intel_xeon_8480_spr_amx.txt"), threads=4)
    ghz_cores = 2.0e9 * 4
    assert spec.peak_tflops["float32"] == pytest.approx(64 * ghz_cores / 1e12)      # 0.512
    assert spec.peak_tflops["bfloat16"] == pytest.approx(1024 * ghz_cores / 1e12)   # AMX: 8.192
    assert spec.peak_tflops["int8"] == pytest.approx(2048 * ghz_cores / 1e12)       # AMX: 16.384
    assert spec.peak_tflops["float16"] == pytest.approx(128 * ghz_cores / 1e12)     # AVX512_FP16
    # vector roof for bf16 elementwise stays the fp32 vector rate, not AMX
    assert devices.vector_peak_tflops(spec, torch.bfloat16) == pytest.approx(0.512)


def test_cpu_zen3_avx2():
    spec = cpu_spec_from_cpuinfo(_cpuinfo("amd_epyc_7763_zen3.txt"), threads=8)
    # AVX2 + FMA, 2 units: 2 x 8 lanes x 2 x 2.45 GHz x 8 cores
    assert spec.peak_tflops["float32"] == pytest.approx(2 * 8 * 2 * 2.45e9 * 8 / 1e12)
    assert spec.vendor == "amd"


def test_cpu_zen4_vm_real_cpuinfo():
    spec = cpu_spec_from_cpuinfo(_cpuinfo("amd_epyc_zen4_vm_2vcpu.txt"), threads=2)
    # Zen 4: 512-bit ops on two 256-bit pipes = 1 x 16 lanes x 2 FLOP per cycle; 2.59614 GHz, 2 cores
    assert spec.peak_tflops["float32"] == pytest.approx(32 * 2.59614e9 * 2 / 1e12)
    assert spec.peak_tflops["bfloat16"] == pytest.approx(64 * 2.59614e9 * 2 / 1e12)   # AVX512_BF16
    assert spec.peak_tflops["int8"] == pytest.approx(128 * 2.59614e9 * 2 / 1e12)      # AVX512_VNNI


def test_cpu_arm_without_clock_and_with_max_freq():
    text = _cpuinfo("arm_neoverse_n1.txt")
    spec = cpu_spec_from_cpuinfo(text, threads=4)
    assert spec.vendor == "arm" and not spec.peak_tflops and "clock unknown" in spec.source_note
    spec = cpu_spec_from_cpuinfo(text, threads=4, max_freq_khz=3_000_000)
    # NEON 128-bit: 4 fp32 lanes x 2 FMA pipes x 2 FLOP x 3 GHz x 4 cores
    assert spec.peak_tflops["float32"] == pytest.approx(4 * 2 * 2 * 3e9 * 4 / 1e12)


@pytest.mark.parametrize("text, threads, match", [
    ("", 1, "no 'key : value'"),
    ("processor: 0\nflags: avx2\ncpu MHz: 1000\n", 0, "threads"),
])
def test_cpu_bad_input(text, threads, match):
    with pytest.raises(DeviceSpecError, match=match):
        cpu_spec_from_cpuinfo(text, threads=threads)


# ---------------------------------------------------------------------------------------- override
GOOD = {"name": "My Accelerator", "peak_tflops": {"bfloat16": 400, "float32": 50, "tf32": 200,
                                                   "float8_e4m3fn": 800},
        "mem_bandwidth_gbs": 2000}


def test_override_from_dict():
    spec = devices.parse_device_override(GOOD)
    assert spec.peak_source == "user" and spec.name == "My Accelerator"
    assert spec.peak_tflops["bfloat16"] == 400 and spec.peak_tflops[TF32] == 200
    assert spec.peak_tflops["float8_e4m3fn"] == 800
    assert spec.mem_bandwidth_gbs == 2000


def test_override_from_json_and_toml_files(tmp_path):
    j = tmp_path / "dev.json"
    j.write_text(json.dumps(GOOD))
    assert devices.parse_device_override(str(j)).peak_tflops["float32"] == 50
    t = tmp_path / "dev.toml"
    t.write_text('[[devices]]\nname = "A"\nmatch = ["NVIDIA Foo 1"]\nmem_bandwidth_gbs = 100\n'
                 '[devices.peak_tflops]\nbfloat16 = 10\n\n'
                 '[[devices]]\nname = "B"\nmem_bandwidth_gbs = 200\n[devices.peak_tflops]\nbfloat16 = 20\n')
    assert [s.name for s in devices.parse_device_overrides(t)] == ["A", "B"]
    assert devices.parse_device_override(t, "NVIDIA Foo 1").peak_tflops["bfloat16"] == 10
    assert devices.parse_device_override(t, "b").mem_bandwidth_gbs == 200
    with pytest.raises(DeviceSpecError, match="2 device rows"):
        devices.parse_device_override(t)


def test_override_on_top_of_a_builtin_row():
    spec = devices.parse_device_override({"base": "NVIDIA H100 80GB HBM3", "mem_bandwidth_gbs": 3000,
                                          "peak_tflops": {"bfloat16": 700}})
    assert spec.name == "NVIDIA H100 SXM" and spec.peak_source == "user"
    assert spec.mem_bandwidth_gbs == 3000 and spec.peak_tflops["bfloat16"] == 700
    assert spec.peak_tflops[TF32] == pytest.approx(494.5)  # kept from the base row


@pytest.mark.parametrize("row, match", [
    ({**GOOD, "peak_tflops": {"bfloat17": 1}}, "unknown dtype name 'bfloat17'"),
    ({**GOOD, "peak_tflops": {"bfloat16": -1}}, r"peak_tflops\.bfloat16: expected a positive number, got -1"),
    ({**GOOD, "peak_tflops": {"bfloat16": "fast"}}, "expected a positive number"),
    ({**GOOD, "peak_tflops": {"float32": float("nan")}}, "expected a positive number"),
    ({**GOOD, "peak_tflops": {}}, "at least one dtype"),
    ({k: v for k, v in GOOD.items() if k != "mem_bandwidth_gbs"}, "missing 'mem_bandwidth_gbs'"),
    ({k: v for k, v in GOOD.items() if k != "peak_tflops"}, "missing 'peak_tflops'"),
    ({k: v for k, v in GOOD.items() if k != "name"}, "missing 'name'"),
    ({**GOOD, "mem_bandwidth_gbs": 0}, "mem_bandwidth_gbs: expected a positive number"),
    ({**GOOD, "bandwidth": 5}, "unknown key.*'bandwidth'"),
    ({**GOOD, "device_type": "tpu"}, "device_type"),
    ({"base": "NVIDIA Nonexistent"}, "base: 'NVIDIA Nonexistent' is not a known device"),
    ({"devices": []}, "non-empty list"),
    (42, "expected a dict"),
])
def test_override_validation_messages(row, match):
    with pytest.raises(DeviceSpecError, match=match):
        devices.parse_device_override(row)


def test_override_file_errors(tmp_path):
    with pytest.raises(DeviceSpecError, match="cannot read"):
        devices.parse_device_override(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(DeviceSpecError, match="not valid TOML"):
        devices.parse_device_override(bad)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(DeviceSpecError, match="not valid JSON"):
        devices.parse_device_override(bad)


# ---------------------------------------------------------------------------------------- resolve
@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("INDUCTOR_PERF_DEVICE_FILE", raising=False)
    devices.clear_device_cache()
    yield tmp_path
    devices.clear_device_cache()


def _no_cuda(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("CUDA touched while resolving the CPU")
    for fn in ("is_available", "get_device_name", "get_device_properties", "init", "device_count"):
        monkeypatch.setattr(torch.cuda, fn, boom)


def test_resolve_cpu_is_computed_and_never_touches_cuda(isolated, monkeypatch):
    _no_cuda(monkeypatch)
    spec = devices.resolve_device("cpu", use_cache=False)
    assert spec is not None and spec.peak_source == "computed" and spec.device_type == "cpu"


def test_resolve_precedence_user_over_measured_over_computed(isolated, monkeypatch):
    from inductor_perf.devices import calibrate

    key = calibrate.machine_key("cpu")
    calibrate.save(calibrate.Measurement(key=key, gemm_tflops={"float32": 0.123}, mem_bandwidth_gbs=45.6,
                                         seconds=1.0, measured_at="2026-01-01T00:00:00+00:00"))
    spec = devices.resolve_device("cpu", use_cache=False)
    assert spec.peak_source == "measured"
    assert spec.peak_tflops["float32"] == 0.123 and spec.mem_bandwidth_gbs == 45.6
    f = isolated / "dev.json"
    f.write_text(json.dumps({**GOOD, "device_type": "cpu"}))
    monkeypatch.setenv("INDUCTOR_PERF_DEVICE_FILE", str(f))
    assert devices.resolve_device("cpu", use_cache=False).peak_source == "user"
    # an explicit override beats the file
    assert devices.resolve_device("cpu", override={**GOOD, "name": "explicit"}).name == "explicit"


def test_resolve_cuda_uses_reported_name_and_caches(isolated, monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: calls.append(i) or "NVIDIA H100 80GB HBM3")
    spec = devices.resolve_device("cuda", 0)
    assert spec.name == "NVIDIA H100 SXM" and spec.peak_source == "datasheet"
    n = len(calls)
    assert devices.resolve_device("cuda", 0) is spec and len(calls) == n  # cached per process
    devices.resolve_device("cuda", 0, use_cache=False)
    assert len(calls) > n


def test_resolve_unknown_gpu_is_none(isolated, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA GB200")
    assert devices.resolve_device("cuda", 0, use_cache=False) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve_device("cuda", 0, use_cache=False) is None


def test_to_dict_is_strict_json():
    text = json.dumps([r.to_dict() for r in devices.DEVICE_TABLE], allow_nan=False)
    rows = json.loads(text)
    h100 = next(r for r in rows if r["name"] == "NVIDIA H100 SXM")
    assert h100["peak_tflops"]["float8_e4m3fn"] == 1979 and "tf32" in h100["sparse_halved"]


def test_cli_devices_lists_table_and_current(isolated, capsys, monkeypatch):
    from inductor_perf.cli import main

    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 SXM" in out and "989.5" in out
    assert main(["devices", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(devices.DEVICE_TABLE)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["devices", "--current"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu:0:") and "computed" in out


def test_env_file_gpu_row_does_not_replace_cpu_peaks(isolated, monkeypatch):
    f = isolated / "gpu.json"
    f.write_text(json.dumps(GOOD))  # device_type defaults to "cuda"
    monkeypatch.setenv("INDUCTOR_PERF_DEVICE_FILE", str(f))
    assert devices.resolve_device("cpu", use_cache=False).peak_source == "computed"


def test_docs_override_examples_parse():
    import re
    import tomllib

    text = (Path(__file__).parent.parent.parent.parent / "docs" / "devices.md").read_text()
    js = re.search(r"```json\n(.*?)```", text, re.S).group(1)
    spec = devices.parse_device_override(json.loads(js))
    assert spec.peak_tflops["bfloat16"] == 800 and spec.peak_tflops[TF32] == pytest.approx(494.5)
    toml = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    rows = devices.parse_device_overrides(tomllib.loads(toml))
    assert [r.device_type for r in rows] == ["cuda", "cpu"]
    assert devices.parse_device_override(tomllib.loads(toml), "NVIDIA GB200").peak_tflops[TF32] == 1250


def test_peaks_are_keyed_by_dtype_name_only():
    from inductor_perf.devices import table as device_table

    for r in devices.DEVICE_TABLE:
        keys = {*r.peak_tflops, *r.vector_tflops, *r.sparse_halved}
        assert all(isinstance(k, str) and not k.startswith("torch.") for k in keys), r.name
        assert lookup_device(r.name) is r and device_table.lookup(r.name) is r
    # H100 SXM datasheet: BF16 1,979 TFLOPS with sparsity -> 989.5 dense
    assert device_table.lookup("NVIDIA H100 80GB HBM3").peak_tflops["bfloat16"] == 989.5


def test_peak_accessors_take_a_torch_dtype_or_its_name():
    for r in devices.DEVICE_TABLE:
        for dt in (torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.float8_e4m3fn):
            name = str(dt).removeprefix("torch.")  # torch's own spelling, not our converter
            for tf32 in (False, True):
                assert devices.matmul_peak_tflops(r, dt, tf32=tf32) == devices.matmul_peak_tflops(
                    r, name, tf32=tf32), (r.name, name, tf32)
            assert devices.vector_peak_tflops(r, dt) == devices.vector_peak_tflops(r, name)
    with pytest.raises(TypeError, match="torch.dtype or a dtype name"):
        devices.matmul_peak_tflops(_row("NVIDIA H100 SXM"), 16)


def test_devicespec_built_with_torch_dtypes_stores_names():
    # The public constructor took torch.dtype keys before peaks were keyed by name; it still does.
    spec = DeviceSpec(name="mine", vendor="me", peak_tflops={torch.bfloat16: 10.0, TF32: 5.0},
                      vector_tflops={torch.float32: 1.0}, sparse_halved=(torch.bfloat16,),
                      mem_bandwidth_gbs=100.0)
    assert dict(spec.peak_tflops) == {"bfloat16": 10.0, "tf32": 5.0}
    assert dict(spec.vector_tflops) == {"float32": 1.0} and spec.sparse_halved == ("bfloat16",)
    assert devices.matmul_peak_tflops(spec, torch.bfloat16) == 10.0
    with pytest.raises(DeviceSpecError, match="'bfloat16' given twice"):
        DeviceSpec(name="twice", vendor="me", peak_tflops={torch.bfloat16: 1.0, "bfloat16": 2.0},
                   mem_bandwidth_gbs=1.0)


def test_override_accepts_torch_dtype_keys():
    spec = devices.parse_device_override({**GOOD, "peak_tflops": {torch.bfloat16: 400, "tf32": 200}})
    assert dict(spec.peak_tflops) == {"bfloat16": 400.0, "tf32": 200.0}


def test_peaks_read_by_torch_dtype_as_by_name():
    """Rows are keyed by dtype name; a torch.dtype lookup converts at the edge (H100 SXM datasheet:
    989.5 dense BF16 TFLOP/s)."""
    spec = lookup_device("NVIDIA H100 80GB HBM3")
    assert spec.peak_tflops[torch.bfloat16] == spec.peak_tflops["bfloat16"] == 989.5
    assert torch.bfloat16 in spec.peak_tflops and "bfloat16" in set(spec.peak_tflops)
    assert spec.peak_tflops.get(torch.complex32) is None
    with pytest.raises(KeyError):
        spec.peak_tflops["no_such_dtype"]
