"""Calibration: measures quickly within a tiny budget, writes and reads its per-machine cache."""

from __future__ import annotations

import functools
import json
import math
import time

import pytest
import torch

from inductor_perf.devices import calibrate, resolve as devices
from inductor_perf.devices.cpu_peaks import cpu_spec_from_cpuinfo


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("INDUCTOR_PERF_DEVICE_FILE", raising=False)
    devices.clear_device_cache()
    yield tmp_path
    devices.clear_device_cache()


def test_cache_dir_comes_from_env(cache):
    assert calibrate.cache_dir() == cache


def test_calibrate_quick_and_cache_roundtrip(cache):
    t0 = time.perf_counter()
    m = calibrate.calibrate("cpu", seconds=0.2, gemm_n=128, copy_mib=8)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.2 + 5.0  # budget plus warm-ups and allocation on a busy 2-core machine
    assert set(m.gemm_tflops) == {"float32", "bfloat16"}
    for v in (*m.gemm_tflops.values(), m.mem_bandwidth_gbs):
        assert math.isfinite(v) and v > 0
    # A 2*128^3 GEMM cannot exceed, say, 100 TFLOP/s on any CPU: sanity of the unit conversion.
    assert m.gemm_tflops["float32"] < 100
    assert m.key["threads"] == torch.get_num_threads() and m.key["torch"] == torch.__version__

    path = calibrate.save(m)
    assert path.parent == cache and path.exists()
    assert list(cache.iterdir()) == [path]  # written atomically: no temporary file left beside it
    json.loads(path.read_text())  # strict JSON
    back = calibrate.load_cached(calibrate.machine_key("cpu"))
    assert back is not None and back.gemm_tflops == dict(m.gemm_tflops)
    assert back.mem_bandwidth_gbs == m.mem_bandwidth_gbs

    spec = devices.resolve_device("cpu", use_cache=False)
    assert spec.peak_source == "measured"
    assert spec.peak_tflops["float32"] == pytest.approx(m.gemm_tflops["float32"])
    assert spec.mem_bandwidth_gbs == pytest.approx(m.mem_bandwidth_gbs)


def test_cache_is_keyed_by_threads_and_torch(cache):
    key = calibrate.machine_key("cpu", threads=3)
    calibrate.save(calibrate.Measurement(key=key, gemm_tflops={"float32": 1.0}, mem_bandwidth_gbs=10.0,
                                         seconds=1.0, measured_at="t"))
    assert calibrate.load_cached(key) is not None
    assert calibrate.load_cached(calibrate.machine_key("cpu", threads=5)) is None
    assert calibrate.load_cached({**key, "torch": "0.0.1"}) is None


def test_unreadable_cache_is_ignored(cache, caplog):
    key = calibrate.machine_key("cpu", threads=7)
    path = calibrate.save(calibrate.Measurement(key=key, gemm_tflops={"float32": 1.0},
                                                mem_bandwidth_gbs=10.0, seconds=1.0, measured_at="t"))
    path.write_text("{not json")
    assert calibrate.load_cached(key) is None
    path.write_text(json.dumps({"version": 1, "key": dict(key), "gemm_tflops": 5}))
    assert calibrate.load_cached(key) is None


def test_apply_measurement_keeps_unmeasured_dtypes():
    base = cpu_spec_from_cpuinfo(
        "processor: 0\nvendor_id: GenuineIntel\nflags: avx2 fma avx_vnni\ncpu MHz: 1000\ncore id: 0\n", threads=1)
    # hand arithmetic: 2 x 8 x 2 x 1 GHz = 32 GFLOP/s fp32; avx_vnni int8 2 x 64 x 1 GHz = 128 GOPS
    assert base.peak_tflops["float32"] == pytest.approx(0.032)
    m = calibrate.Measurement(key={"device_type": "cpu", "model": "x"}, gemm_tflops={"float32": 0.02},
                              mem_bandwidth_gbs=12.5, seconds=1.0, measured_at="t")
    spec = devices.apply_measurement(base, m)
    assert spec.peak_source == "measured" and spec.peak_tflops["float32"] == 0.02
    assert spec.peak_tflops["int8"] == pytest.approx(0.128)
    assert spec.mem_bandwidth_gbs == 12.5 and "int8" in spec.source_note


def test_bad_budget_and_device():
    from inductor_perf.errors import InductorPerfError

    with pytest.raises(InductorPerfError, match="positive"):
        calibrate.calibrate("cpu", seconds=0)
    with pytest.raises(Exception, match="expected 'cpu'"):
        calibrate.calibrate("tpu", seconds=1)


def test_cli_calibrate_writes_cache(cache, monkeypatch, capsys):
    from inductor_perf.cli import main

    small = functools.partial(calibrate.calibrate, gemm_n=64, copy_mib=4)
    monkeypatch.setattr(calibrate, "calibrate", small)
    assert main(["calibrate", "--seconds", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "GEMM float32" in out and "GB/s" in out
    assert list(cache.glob("calibration-cpu-*.json"))
    assert devices.resolve_device("cpu", use_cache=False).peak_source == "measured"
