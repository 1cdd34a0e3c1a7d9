"""The CPU's roofline per cache level: cache sizes from sysfs / lscpu, estimated and measured level
roofs, the level a kernel is placed at, and why a kernel shows above its roof.

Expected numbers are hand arithmetic written next to each assertion (or the fixture's own text),
never outputs of the code under test.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from inductor_perf.devices import calibrate, cpu_caches, resolve as devices
from inductor_perf.devices.cpu_caches import CacheLevel
from inductor_perf.devices.table import lookup
from inductor_perf.roofline.roofs import ComputeRoof, MemoryRoof, Roofs, place, roofs_for

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KVM = FIXTURES / "cpucache" / "xeon_2vcpu_kvm"
KIB, MIB = 1024, 1024 * 1024


def _write_cpu_dir(root: Path, online: str, indexes: list[dict[str, str]]) -> Path:
    """A directory laid out like /sys/devices/system/cpu with ``indexes`` as cpu0's caches."""
    (root / "online").parent.mkdir(parents=True, exist_ok=True)
    (root / "online").write_text(online + "\n")
    for i, files in enumerate(indexes):
        d = root / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, text in files.items():
            (d / name).write_text(text + "\n")
    return root


# --- sizes and CPU lists ----------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [("48K", 48 * 1024), ("2048K", 2048 * 1024), ("32M", 32 * MIB),
                                            ("491520K", 491520 * 1024), ("1 MiB", MIB), ("49152", 49152)])
def test_parse_size(text, expected):
    assert cpu_caches.parse_size(text) == expected


@pytest.mark.parametrize("text, expected", [("0-1", {0, 1}), ("0,2", {0, 2}), ("0-3,8-11", {0, 1, 2, 3, 8, 9, 10, 11}),
                                            ("5", {5})])
def test_parse_cpu_list(text, expected):
    assert cpu_caches.parse_cpu_list(text) == expected


@pytest.mark.parametrize("bad", ["lots", "48Q", ""])
def test_bad_size_says_what_is_expected(bad):
    with pytest.raises(ValueError, match="expected a number"):
        cpu_caches.parse_size(bad)


def test_bad_cpu_list_says_what_is_expected():
    with pytest.raises(ValueError, match="expected numbers and ranges"):
        cpu_caches.parse_cpu_list("a-b")


# --- sysfs ------------------------------------------------------------------------------------------
def test_sysfs_of_the_dev_vm():
    levels = cpu_caches.read_sysfs(KVM)
    # The fixture's files: L1 Data 48K "0", L1 Instruction 64K (skipped), L2 Unified 2048K "0",
    # L3 Unified 491520K "0-1"; online "0-1".
    assert [(c.name, c.kind, c.size_bytes, c.shared_cpus, c.cpus) for c in levels] == [
        ("L1", "Data", 48 * KIB, 1, 2), ("L2", "Unified", 2048 * KIB, 1, 2), ("L3", "Unified", 491520 * KIB, 2, 2)]
    assert all("index" in c.source and "sysfs" in c.source for c in levels)
    l1, l2, l3 = levels
    # Two threads: two private L1s and L2s, the one shared L3 once.
    assert l1.capacity_for(2) == 2 * 48 * KIB and l2.capacity_for(2) == 2 * 2048 * KIB
    assert l3.capacity_for(2) == 491520 * KIB and l3.capacity_for(1) == 491520 * KIB
    assert l1.capacity_for(1) == 48 * KIB
    # More threads than the machine has instances: still two L1s.
    assert l1.capacity_for(8) == 2 * 48 * KIB


def test_sysfs_with_smt_siblings_sharing_l1_and_l2(tmp_path):
    root = _write_cpu_dir(tmp_path, "0-3", [
        {"level": "1", "type": "Data", "size": "32K", "shared_cpu_list": "0,2"},
        {"level": "2", "type": "Unified", "size": "1024K", "shared_cpu_list": "0,2"},
        {"level": "3", "type": "Unified", "size": "32M", "shared_cpu_list": "0-3"}])
    l1, l2, l3 = cpu_caches.read_sysfs(root)
    assert (l1.shared_cpus, l1.instances) == (2, 2)  # 4 CPUs / 2 sharing = 2 cores
    assert l1.capacity_for(2) == 2 * 32 * KIB  # two threads on two cores
    assert l1.capacity_for(4) == 2 * 32 * KIB  # four threads still have two cores' L1
    assert l2.capacity_for(1) == 1024 * KIB and l3.capacity_for(4) == 32 * MIB


def test_sysfs_skips_malformed_entries_and_missing_dirs(tmp_path):
    root = _write_cpu_dir(tmp_path / "a", "0", [
        {"level": "1", "type": "Data", "size": "lots", "shared_cpu_list": "0"},
        {"level": "2", "type": "Unified", "size": "512K"},  # no shared_cpu_list: one CPU
        {"level": "x", "type": "Unified", "size": "8M", "shared_cpu_list": "0"}])
    levels = cpu_caches.read_sysfs(root)
    assert [(c.name, c.size_bytes, c.shared_cpus) for c in levels] == [("L2", 512 * KIB, 1)]
    assert cpu_caches.read_sysfs(tmp_path / "nowhere") == ()


LSCPU_C = """NAME ONE-SIZE ALL-SIZE WAYS TYPE        LEVEL   SETS PHY-LINE COHERENCY-SIZE
L1d       48K      96K   12 Data            1     64        1             64
L1i       64K     128K   16 Instruction     1     64        1             64
L2         2M       4M   16 Unified         2   2048        1             64
L3       480M     480M   16 Unified         3 491520        1             64
"""


def test_lscpu_table_gives_the_same_levels_as_sysfs():
    # `lscpu -C` on the machine the sysfs fixture was copied from.
    levels = cpu_caches.parse_lscpu(LSCPU_C, cpus=2)
    assert [(c.name, c.size_bytes, c.shared_cpus) for c in levels] == [
        ("L1", 48 * KIB, 1), ("L2", 2 * MIB, 1), ("L3", 480 * MIB, 2)]
    with_b = LSCPU_C.replace("48K", "49152").replace("96K", "98304")
    assert cpu_caches.parse_lscpu(with_b, cpus=2)[0].size_bytes == 49152
    with pytest.raises(ValueError, match="lscpu -C"):
        cpu_caches.parse_lscpu("L1d cache: 96 KiB (2 instances)", cpus=2)


# --- estimates --------------------------------------------------------------------------------------
def test_estimates_follow_the_formula_by_hand():
    text = (FIXTURES / "cpuinfo" / "intel_xeon_8480_spr_amx.txt").read_text()
    levels = cpu_caches.read_sysfs(KVM)
    roofs = cpu_caches.estimate_roofs(levels, text, threads=2)
    # Sapphire Rapids fixture: AVX-512, cpu MHz 2000, 4 cores; 2 threads use 2 cores.
    # L1 192 B/cycle x 2.0 GHz x 2 = 768 GB/s; L2 64 x 2 x 2 = 256; L3 32 x 2 x 2 = 128.
    assert [(r[0], r[1], r[2]) for r in roofs] == [
        ("L1", pytest.approx(768.0), 2 * 48 * KIB), ("L2", pytest.approx(256.0), 2 * 2048 * KIB),
        ("L3", pytest.approx(128.0), 491520 * KIB)]
    assert all(r[3].startswith("estimate: ") and "GHz" in r[3] for r in roofs)
    # Zen 3 fixture: AVX2, 2450 MHz, 8 cores; 16 threads use 8 cores: L1 96 x 2.45 x 8 = 1881.6 GB/s.
    zen3 = (FIXTURES / "cpuinfo" / "amd_epyc_7763_zen3.txt").read_text()
    assert cpu_caches.estimate_roofs(levels[:1], zen3, threads=16)[0][1] == pytest.approx(1881.6)
    # Neoverse N1 fixture: no clock in cpuinfo, so no estimate.
    n1 = (FIXTURES / "cpuinfo" / "arm_neoverse_n1.txt").read_text()
    assert cpu_caches.estimate_roofs(levels, n1, threads=2) == ()


def test_resolved_cpu_spec_carries_estimated_levels_without_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("INDUCTOR_PERF_DEVICE_FILE", raising=False)
    monkeypatch.setattr(devices, "read_caches", lambda: cpu_caches.read_sysfs(KVM))
    spec = devices.resolve_device("cpu", use_cache=False)
    assert [r[0] for r in spec.cache_roofs] == ["L1", "L2", "L3"]
    r = roofs_for(spec)
    assert [m.level for m in r.memory] == ["L1", "L2", "L3", "DRAM"]
    assert r.memory[-1].capacity_bytes is None and "estimated from cache sizes" in r.note
    assert spec.to_dict()["cache_roofs"][0][0] == "L1"


# --- roofs_for --------------------------------------------------------------------------------------
def test_gpu_keeps_a_single_hbm_roof():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    r = roofs_for(h100)
    assert [(m.level, m.gbps, m.capacity_bytes) for m in r.memory] == [("HBM", 3350.0, None)]
    # Even a GPU row given cache roofs by mistake keeps its single HBM roof.
    r2 = roofs_for(dataclasses.replace(h100, cache_roofs=(("L2", 1e4, 50 * MIB, "x"),)))
    assert [m.level for m in r2.memory] == ["HBM"]


def _cpu_spec(cache_roofs):
    return devices.DeviceSpec(name="cpu x", vendor="intel", device_type="cpu", peak_tflops={"float32": 1.0},
                              mem_bandwidth_gbs=20.0, peak_source="measured", cache_roofs=cache_roofs)


def test_cpu_levels_come_smallest_first_with_main_memory_last():
    spec = _cpu_spec((("L3", 60.0, 480 * MIB, "measured at 2026-01-02T03:04:05+00:00: read"),
                      ("L1", 380.0, 96 * KIB, "measured at 2026-01-02T03:04:05+00:00: read"),
                      ("L2", 270.0, 4 * MIB, "measured at 2026-01-02T03:04:05+00:00: read"),
                      ("L4", 50.0, 2 * MIB, "measured at 2026-01-02T03:04:05+00:00: read"),  # smaller than L2's
                      ("L9", -1.0, 8 * MIB, "bad")))
    r = roofs_for(spec)
    # The "L4" of 2 MiB sorts before L2 (4 MiB); nothing is left out but the negative figure.
    assert [(m.level, m.capacity_bytes) for m in r.memory] == [
        ("L1", 96 * KIB), ("L4", 2 * MIB), ("L2", 4 * MIB), ("L3", 480 * MIB), ("DRAM", None)]
    assert "calibrated at 2026-01-02T03:04:05+00:00" in r.note
    # A level no larger than the one before it can never be chosen: left out.
    r2 = roofs_for(_cpu_spec((("L1", 380.0, 96 * KIB, "m"), ("L2", 270.0, 96 * KIB, "m"))))
    assert [m.level for m in r2.memory] == ["L1", "DRAM"]
    assert Roofs.from_dict(json.loads(json.dumps(r.to_dict()))) == r


# --- place ------------------------------------------------------------------------------------------
ROOFS = Roofs("cpu", (ComputeRoof("float32", 1.0, "vector", "measured"),),
              (MemoryRoof("L1", 100.0, 96 * KIB, "measured at t: read"),
               MemoryRoof("L2", 50.0, 4 * MIB, "measured at t: read"),
               MemoryRoof("DRAM", 10.0, None, "measured")))


def test_level_is_the_smallest_that_holds_the_working_set():
    # 2 launches x 64 KiB = 131072 B: 64 KiB per launch fits L1 (96 KiB).
    assert place(0, 131072, 10.0, 2, "float32", ROOFS).level == "L1"
    # 2 MB in one launch: over L1, within L2 (4 MiB).
    assert place(0, 2e6, 100.0, 1, "float32", ROOFS).level == "L2"
    # 8 MB in one launch fits no cache; an unknown count is main memory too.
    assert place(0, 8e6, 1000.0, 1, "float32", ROOFS).level == "DRAM"
    assert place(0, 131072, 10.0, None, "float32", ROOFS).level == "DRAM"


def test_pct_against_the_level_roof_by_hand():
    # 2e6 B in 100 µs = 20 GB/s against L2's 50 GB/s: 40 %, memory bound (no FLOPs).
    p = place(0, 2e6, 100.0, 1, "float32", ROOFS)
    assert (p.bound, p.memory_gbps, p.pct_of_roof, p.above_roof_reason) == ("memory", 50.0, pytest.approx(40.0), None)
    # 1e9 FLOP over 1e6 B (1 MB fits L2): intensity 1000 x 50 GB/s = 50 TFLOP/s > 1 TFLOP/s: compute
    # bound; 1e9 FLOP in 2000 µs = 0.5 TFLOP/s = 50 %.
    p = place(1e9, 1e6, 2000.0, 1, "float32", ROOFS)
    assert (p.bound, p.pct_of_roof) == ("compute", pytest.approx(50.0))
    # The same bytes against DRAM's roof were it in main memory: 8 MB in 1000 µs = 8 GB/s of 10 = 80 %.
    assert place(0, 8e6, 1000.0, 1, "float32", ROOFS).pct_of_roof == pytest.approx(80.0)


def test_above_a_level_but_within_a_faster_one_says_so():
    # 200 KiB per launch (L2), 2 launches, 409600 B in 5 µs = 81.92 GB/s: 164 % of L2 (50), 82 % of L1 (100).
    p = place(0, 409600, 5.0, 2, "float32", ROOFS)
    assert p.level == "L2" and p.pct_of_roof == pytest.approx(163.84)
    assert "within the L1 roof (82 %)" in p.above_roof_reason and "served from L1" in p.above_roof_reason


def test_short_launches_and_estimates_are_named():
    # 8 MB (DRAM) 100 times in 100 µs total: 1 µs a launch, 8000 GB/s: above every roof.
    p = place(0, 8e8, 100.0, 100, "float32", ROOFS)
    assert p.pct_of_roof > 100 and "1.00 µs" in p.above_roof_reason and "profiler" in p.above_roof_reason
    est = Roofs("cpu", ROOFS.compute, (MemoryRoof("L2", 50.0, 4 * MIB, "estimate: 64 B/cycle/core"),
                                       MemoryRoof("DRAM", 10.0, None, "computed")))
    p = place(0, 4e6, 40.0, 2, "float32", est)  # 2 MB a launch, 100 GB/s against an estimated 50
    assert p.level == "L2" and "the L2 roof is an estimate" in p.above_roof_reason


def test_compute_above_a_measured_roof_and_the_unexplained_case():
    # 1e9 FLOP on 1e6 B in 500 µs: 2 TFLOP/s against the measured 1 TFLOP/s.
    p = place(1e9, 1e6, 500.0, 1, "float32", ROOFS)
    assert p.bound == "compute" and p.pct_of_roof == pytest.approx(200.0)
    assert "lower bound" in p.above_roof_reason
    # 8 MB in 400 µs (20 GB/s): 200 % of DRAM's 10 GB/s, but within the nearest faster level's roof
    # (L2: 20 / 50 = 40 %) ...
    p = place(0, 8e6, 400.0, 1, "float32", ROOFS)
    assert "within the L2 roof (40 %)" in p.above_roof_reason
    # ... while 8 MB in 40 µs (200 GB/s) is above every level's roof, and nothing explains it.
    p = place(0, 8e6, 40.0, 1, "float32", ROOFS)
    assert p.above_roof_reason.startswith("unexplained: ")


def test_a_working_set_no_cache_holds_proves_an_estimated_dram_roof_too_low():
    # 64 MiB a launch against a 32 MiB L3: at least 32 MiB of each launch came from DRAM. 3 launches of
    # 64 MiB in 8.05 ms: 25.0 GB/s, so >= 12.5 GB/s of DRAM traffic against the computed 8 GB/s.
    est = Roofs("cpu", ROOFS.compute, (MemoryRoof("L3", 108.0, 32 * MIB, "estimate: 32 B/cycle/core"),
                                       MemoryRoof("DRAM", 8.0, None, "computed")))
    nbytes = 3 * 64 * MIB
    p = place(0, nbytes, nbytes / 25e3, 3, "float32", est)
    assert p.level == "DRAM" and p.pct_of_roof == pytest.approx(312.5)
    assert "32 MiB of its 64 MiB a launch cannot fit in L3" in p.above_roof_reason
    assert "at 12 GB/s or more" in p.above_roof_reason and "too low" in p.above_roof_reason
    assert "served from" not in p.above_roof_reason  # no cache could have served it
    # Had the L3 held half of it more (48 MiB), 16 MiB at 25 GB/s x 1/4 = 6.25 GB/s fits the 8: caches it is
    est = Roofs("cpu", ROOFS.compute, (MemoryRoof("L3", 108.0, 48 * MIB, "estimate: 32 B/cycle/core"),
                                       MemoryRoof("DRAM", 8.0, None, "computed")))
    assert "served from L3" in place(0, nbytes, nbytes / 25e3, 3, "float32", est).above_roof_reason


def test_a_measured_dram_roof_is_exceeded_by_up_to_what_a_copy_leaves_uncounted():
    # 8 MB a launch, 4 MiB of L2: >= 3.81 MB from DRAM. In 300 µs: 26.7 GB/s, >= 12.7 GB/s of DRAM
    # traffic: above the measured 10, within 1.5 x 10.
    p = place(0, 8e6, 300.0, 1, "float32", ROOFS)
    assert p.level == "DRAM" and "copy/add rate" in p.above_roof_reason and "served from" not in p.above_roof_reason
    # in 200 µs: >= 19.0 GB/s, beyond 15: nothing explains it
    assert place(0, 8e6, 200.0, 1, "float32", ROOFS).above_roof_reason.startswith("unexplained: ")


# --- calibration ------------------------------------------------------------------------------------
def test_cache_buffer_sizes_by_hand():
    levels = cpu_caches.read_sysfs(KVM)
    sizes = calibrate.cache_buffer_bytes(levels, threads=2)
    # Per-thread shares: L1 48 KiB, L2 2 MiB, L3 480 MiB / 2 = 240 MiB.
    # L1: half = 24 KiB; L2: min(1 MiB, 4 x 48 KiB = 192 KiB); L3: min(120 MiB, 4 x 2 MiB = 8 MiB).
    assert sizes == {"L1": 24 * KIB, "L2": 192 * KIB, "L3": 8 * MIB}
    # 64 threads on a server whose 32 MiB L3 is shared by all: 512 KiB per thread cannot exceed twice
    # the private 1 MiB L2, so the L3 is not measured.
    server = (CacheLevel(1, "Data", 48 * KIB, 1, 64, "x"), CacheLevel(2, "Unified", MIB, 1, 64, "x"),
              CacheLevel(3, "Unified", 32 * MIB, 64, 64, "x"))
    assert set(calibrate.cache_buffer_bytes(server, threads=64)) == {"L1", "L2"}


OLD_CACHE = {"version": 1, "key": None, "gemm_tflops": {"float32": 0.35, "bfloat16": 1.37},
             "mem_bandwidth_gbs": 29.1, "seconds": 5.0, "measured_at": "2026-11-23T09:41:07+00:00",
             "details": {"gemm_sizes": [512, 1024], "copy_mib": 256, "copy_gbs": 26.1, "add_gbs": 29.1,
                         "threads": 2}}


def test_old_calibration_files_still_load_and_keep_estimates(tmp_path, monkeypatch):
    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path))
    key = calibrate.machine_key("cpu", threads=2)
    # A file exactly as the calibration before cache levels wrote it (no details["cache_levels"]).
    calibrate.cache_path(key).write_text(json.dumps({**OLD_CACHE, "key": key}))
    m = calibrate.load_cached(key)
    assert m is not None and m.mem_bandwidth_gbs == 29.1 and m.cache_roofs() == ()
    base = devices.replace(_cpu_spec((("L1", 768.0, 96 * KIB, "estimate: 192 B/cycle/core"),)), peak_source="computed")
    spec = devices.apply_measurement(base, m)
    assert spec.cache_roofs == base.cache_roofs and spec.mem_bandwidth_gbs == 29.1


def test_new_calibration_levels_round_trip_and_bad_rows_are_dropped(tmp_path):
    levels = [{"level": "L1", "gbps": 380.0, "gbps_all_threads": 9.0, "gbps_one_thread": 190.0,
               "buffer_bytes_per_thread": 24 * KIB, "threads": 2, "capacity_bytes": 96 * KIB},
              {"level": "L2", "gbps": "fast", "capacity_bytes": 4 * MIB}, "nonsense"]
    key = {"device_type": "cpu", "model": "x", "threads": 2, "torch": "t"}
    m = calibrate.Measurement(key=key, gemm_tflops={"float32": 1.0}, mem_bandwidth_gbs=20.0, seconds=1.0,
                              measured_at="2026-01-02T03:04:05+00:00", details={"cache_levels": levels})
    calibrate.save(m, tmp_path)
    back = calibrate.load_cached(key, tmp_path)
    (roof,) = back.cache_roofs()
    assert roof[:3] == ("L1", 380.0, 96 * KIB)
    assert roof[3].startswith("measured at 2026-01-02T03:04:05+00:00: read of 24 KiB per thread")
    assert "9 GB/s on 2 threads together, 190 on one" in roof[3]


def test_small_calibrate_measures_every_level(tmp_path, monkeypatch, capsys):
    levels = cpu_caches.read_sysfs(KVM)
    m = calibrate.calibrate("cpu", seconds=0.2, gemm_n=64, copy_mib=4, cache_levels=levels)
    rows = m.details["cache_levels"]
    assert [r["level"] for r in rows] == ["L1", "L2", "L3"]
    for r in rows:
        for k in ("gbps", "gbps_all_threads", "gbps_one_thread"):
            assert math.isfinite(r[k]) and r[k] > 0
        # The roof is the better of all threads together and threads x one thread.
        assert r["gbps"] == pytest.approx(max(r["gbps_all_threads"], r["threads"] * r["gbps_one_thread"]))
    assert [r[0] for r in m.cache_roofs()] == ["L1", "L2", "L3"]

    from inductor_perf.cli import main

    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "calibrate", lambda *a, **k: m)
    assert main(["calibrate", "--seconds", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "L1 read" in out and "L3 read" in out
    devices.clear_device_cache()
