"""Devices recognised from a trace's deviceProperties; link roofs on the rows.

The two entries below are copied from ../shared/traces (the first entry of
a100_ranks8_r3_control.json.gz and of mi250_minitoy_train_rocm6.json.gz); a test checks the copies
against the files when the folder is there. Expected roofs come from the datasheets quoted next to
them and hand arithmetic, never from the code under test.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from inductor_perf.devices import props as device_props, resolve as devices
from inductor_perf.augment.args import device_from_trace
from inductor_perf.devices.table import DEVICE_TABLE
from inductor_perf.errors import DeviceSpecError

TRACES = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"

A100_PG509 = {"id": 0, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42505273344, "computeMajor": 8,
              "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
              "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
              "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}
MI250_GCD = {"id": 0, "name": "AMD Radeon Graphics", "totalGlobalMem": 68702699520, "computeMajor": 9,
             "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
             "regsPerBlock": 65536, "warpSize": 64, "sharedMemPerBlock": 65536, "numSms": 104,
             "maxSharedMemoryPerMultiProcessor": 65536}
V100_16GB = {"name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16945512448, "computeMajor": 7,
             "computeMinor": 0, "warpSize": 32, "numSms": 80}


def _row(name: str):
    return next(r for r in DEVICE_TABLE if r.name == name)


def _trace(*entries: dict) -> dict:
    return {"traceEvents": [], "deviceProperties": list(entries)}


# ------------------------------------------------------------------------------ the shared traces
def test_a100_board_name_is_recognised_as_sxm4_40gb(caplog):
    with caplog.at_level(logging.WARNING, logger="inductor_perf"):
        spec, note = device_from_trace(_trace(A100_PG509, dict(A100_PG509, id=1)))
    assert note == "recognised from properties (sm_80, 108 SMs, 40 GB) → NVIDIA A100 SXM4 40GB"
    assert spec is _row("NVIDIA A100 SXM4 40GB")
    # A100 datasheet: BF16 312 (dense), SXM4 40GB 1,555 GB/s; NVLink 600 GB/s both ways; PCIe Gen4 x16.
    assert spec.peak_tflops["bfloat16"] == 312 and spec.mem_bandwidth_gbs == 1555
    assert spec.interconnect_gbs == 600 / 2
    assert spec.host_link_gbs == pytest.approx(16 * 16 * 128 / 130 / 8, abs=0.01)
    assert not [r for r in caplog.records if "device table" in r.getMessage()]


def test_mi250_gcd_is_recognised_with_the_roofs_mi210_shares(caplog):
    with caplog.at_level(logging.WARNING, logger="inductor_perf"):
        spec, note = device_from_trace(_trace(MI250_GCD))
    # ROCm's gpu-specs table: MI210 and MI250 are both gfx90a (GFXIP 9.0) with 104 CUs per device and
    # 64 GiB per device, so the properties cannot tell them apart.
    both = "AMD Instinct MI210 or AMD Instinct MI250 (per GCD)"
    assert note == f"recognised from properties (gfx9, 104 CUs, 64 GB) → {both}"
    assert spec.name == both
    # MI210 page FP16 181.0; MI250 OAM 362.1 / 2 = 181.05: the lower is kept.
    assert spec.peak_tflops["bfloat16"] == 181.0
    # FP64 vector: MI210 22.6, MI250 45.3 / 2 = 22.65.
    assert spec.vector_tflops["float64"] == 22.6
    assert spec.mem_bandwidth_gbs == pytest.approx(3.2 * 4096 / 8)  # 3.2 Gbps HBM2e x 4096 bit per GCD
    assert spec.host_link_gbs == pytest.approx(31.51)  # both PCIe Gen4 x16
    # MI210: 3 Infinity Fabric links (150 per direction); an MI250 GCD's depends on the pair: left out.
    assert spec.interconnect_gbs is None and "interconnect_gbs" in spec.source_note
    assert not [r for r in caplog.records if "device table" in r.getMessage()]


def test_named_device_keeps_name_lookup_and_no_note():
    spec, note = device_from_trace(_trace(V100_16GB))
    assert spec is _row("NVIDIA V100 SXM2") and note is None


def test_v100_properties_alone_fit_sxm2_only_with_its_16gb_variant():
    spec, note = device_props.recognise(dict(V100_16GB, name="NVIDIA Graphics Device SXM2"))
    assert spec is _row("NVIDIA V100 SXM2")
    assert note == "recognised from properties (sm_70, 80 SMs, 16 GB) → NVIDIA V100 SXM2"


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces (the HTA test traces) is absent")
@pytest.mark.parametrize("file, entry, row", [
    ("a100_ranks8_r3_control.json.gz", A100_PG509, "NVIDIA A100 SXM4 40GB"),
    ("mi250_minitoy_train_rocm6.json.gz", MI250_GCD, "AMD Instinct MI210 or AMD Instinct MI250 (per GCD)"),
    ("a100_triton_example.json.gz", None, "NVIDIA A100 SXM4 40GB"),
])
def test_shared_traces(file, entry, row):
    with gzip.open(TRACES / file, "rt") as f:
        trace = json.load(f)
    if entry is not None:
        assert trace["deviceProperties"][0] == entry  # the literal above is the file's entry
    spec, note = device_from_trace(trace)
    assert spec.name == row and note.startswith("recognised from properties (") and note.endswith(f"→ {row}")


# ------------------------------------------------------------------------------ never a wrong guess
def test_two_rows_with_different_roofs_give_none_with_the_reason():
    # 80 SMs, sm_70, 16 GB fits both V100 rows; their FP64 peaks differ (7.8 SXM2 vs 7.0 PCIe).
    entry = dict(V100_16GB, name="NVIDIA Graphics Device")
    spec, why = device_props.recognise(entry)
    assert spec is None
    assert why.startswith("properties (sm_70, 80 SMs, 16 GB) fits NVIDIA V100 SXM2 and NVIDIA V100 PCIe")
    assert "differ" in why
    spec, note = device_from_trace(_trace(entry))
    assert spec is None and note.startswith("unknown device 'NVIDIA Graphics Device' (properties")


def test_two_rows_with_equal_roofs_give_a_row_naming_both():
    # A100 SXM4 40GB and PCIe 40GB: same datasheet peaks, 1,555 GB/s, PCIe Gen4, NVLink 600 GB/s.
    spec, note = device_props.recognise(dict(A100_PG509, name="NVIDIA Graphics Device"))
    both = "NVIDIA A100 SXM4 40GB or NVIDIA A100 PCIe 40GB"
    assert note == f"recognised from properties (sm_80, 108 SMs, 40 GB) → {both}"
    assert spec.peak_tflops["tf32"] == 156 and spec.interconnect_gbs == 300 and spec.host_link_gbs > 0


def test_the_name_form_factor_narrows_the_rows():
    spec, _ = device_props.recognise(dict(A100_PG509, name="NVIDIA A100 PCIe something"))
    assert spec is _row("NVIDIA A100 PCIe 40GB")


@pytest.mark.parametrize("entry, reason", [
    (dict(A100_PG509, warpSize=64), "says NVIDIA but"),
    (dict(A100_PG509, name="Intel(R) Data Center GPU Max 1550"), "no intel rows"),
    (dict(A100_PG509, name="Mystery Accelerator"), "vendor unknown"),
    ({k: v for k, v in A100_PG509.items() if k != "numSms"}, "lack a usable numSms"),
    (dict(A100_PG509, numSms="108"), "numSms"),
    (dict(A100_PG509, totalGlobalMem=True), "totalGlobalMem"),
    (dict(A100_PG509, computeMajor=8.5), "computeMajor"),
    (dict(MI250_GCD, numSms=120, totalGlobalMem=34342961152), "fit no row"),  # an MI100: no row
    (dict(A100_PG509, totalGlobalMem=20 * 2**30), "fit no row"),  # 20 GiB: no A100 size
    (["not", "a", "table"], "not a table"),
])
def test_odd_entries_give_none_and_why(entry, reason):
    spec, why = device_props.recognise(entry)
    assert spec is None and reason in why


def test_odd_entry_in_a_trace_is_unknown_and_warned_once(caplog):
    entry = dict(A100_PG509, name="Odd GPU 7", numSms=None)
    with caplog.at_level(logging.WARNING, logger="inductor_perf"):
        for _ in range(2):
            spec, note = device_from_trace(_trace(entry))
            assert spec is None and note.startswith("unknown device 'Odd GPU 7' (")
    assert len([r for r in caplog.records if "Odd GPU 7" in r.getMessage()]) == 1


@pytest.mark.parametrize("trace", [{}, {"deviceProperties": None}, {"deviceProperties": [1, "x"]},
                                   {"deviceProperties": [{"name": ""}]}])
def test_no_usable_entry(trace):
    spec, note = device_from_trace(trace)
    assert spec is None and "no GPU" in note


def test_rocm_gfx_target_and_capability_pick_the_chip():
    spec, note = device_props.recognise(dict(MI250_GCD, numSms=110, gcnArchName="gfx90a:sramecc+:xnack-"))
    assert spec is _row("AMD Instinct MI250X (per GCD)")
    assert note == "recognised from properties (gfx90a, 110 CUs, 64 GB) → AMD Instinct MI250X (per GCD)"
    # MI300X: GFXIP 9.4, 304 CUs, 192 GiB (ROCm gpu-specs); MI325X has 256 GiB.
    spec, note = device_props.recognise(dict(MI250_GCD, computeMinor=4, numSms=304,
                                             totalGlobalMem=191 * 2**30))
    assert spec is _row("AMD Instinct MI300X") and "(gfx94, 304 CUs, 192 GB)" in note


# ------------------------------------------------------------------------------ link roofs
PCIE4 = 16 * 16 * 128 / 130 / 8  # 16 GT/s x 16 lanes, 128b/130b, bits -> bytes
PCIE5 = 2 * PCIE4
PCIE3 = PCIE4 / 2


@pytest.mark.parametrize("row, host, link", [
    ("NVIDIA V100 SXM2", PCIE3, 300 / 2),  # V100 datasheet: NVLink 300 GB/s bidirectional
    ("NVIDIA A100 SXM4 80GB", PCIE4, 600 / 2),
    ("NVIDIA H100 SXM", PCIE5, 900 / 2),  # H100 datasheet: NVLink 900 GB/s, PCIe Gen5 128 GB/s
    ("NVIDIA H100 PCIe", PCIE5, 600 / 2),
    ("NVIDIA GeForce RTX 3090", PCIE4, 56.25),  # GA102 whitepaper: 56.25 GB/s in each direction
    ("AMD Instinct MI210", PCIE4, 3 * 100 / 2),  # 3 Infinity Fabric links of 100 GB/s
    ("AMD Instinct MI300X", PCIE5, 7 * 128 / 2),
])
def test_link_roofs(row, host, link):
    spec = _row(row)
    assert spec.host_link_gbs == pytest.approx(host, abs=0.01)
    assert spec.interconnect_gbs == pytest.approx(link)


def test_every_filled_link_is_positive_and_explained():
    filled = [r for r in DEVICE_TABLE if r.host_link_gbs is not None or r.interconnect_gbs is not None]
    assert len(filled) >= 25
    for r in filled:
        for v in (r.host_link_gbs, r.interconnect_gbs):
            assert v is None or v > 0, r.name
        assert "Links:" in r.source_note, r.name
        d = r.to_dict()
        assert d["host_link_gbs"] == r.host_link_gbs and d["interconnect_gbs"] == r.interconnect_gbs


def test_rows_matched_by_properties_say_where_the_count_comes_from():
    for r in DEVICE_TABLE:
        if r.sm_count is not None:
            assert r.arch and "Properties:" in r.source_note, r.name


def test_mi250_row_is_half_the_oam():
    # ROCm MI250 microarchitecture table (OAM): Vector FP64 45.3, Matrix FP64 90.5, Matrix FP16 362.1.
    r = _row("AMD Instinct MI250 (per GCD)")
    assert r.vector_tflops["float64"] == pytest.approx(45.3 / 2)
    assert r.peak_tflops["float64"] == pytest.approx(90.5 / 2)
    assert r.peak_tflops["float16"] == pytest.approx(362.1 / 2)
    assert r.mem_gb == 64 and r.sm_count == 104 and r.arch == "gfx90a"
    assert devices.lookup_device("AMD Instinct MI250") is r


def test_user_row_file_carries_link_roofs(tmp_path):
    path = tmp_path / "dev.toml"
    path.write_text('name = "my gpu"\nmem_bandwidth_gbs = 1000\nhost_link_gbs = 25\ninterconnect_gbs = 200\n'
                    '[peak_tflops]\nbfloat16 = 100\n')
    spec = devices.parse_device_override(str(path))
    assert (spec.host_link_gbs, spec.interconnect_gbs) == (25, 200)
    on_base = devices.parse_device_override({"base": "NVIDIA H100 SXM", "interconnect_gbs": 400})
    assert on_base.interconnect_gbs == 400 and on_base.host_link_gbs == pytest.approx(PCIE5, abs=0.01)
    with pytest.raises(DeviceSpecError, match="host_link_gbs: expected a positive number"):
        devices.parse_device_override({"base": "NVIDIA H100 SXM", "host_link_gbs": -1})
