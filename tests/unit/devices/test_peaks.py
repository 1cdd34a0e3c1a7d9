"""devices.peaks.dtype_peak, the one lookup of a dtype's peak that augmenting (each event), the
summary (its headline) and a comparison make.

Expected numbers are NVIDIA's H100 SXM datasheet figures (FP32 67 TFLOPS; TF32 Tensor Core 989 and
BF16 Tensor Core 1,979 TFLOPS, both with sparsity, so 494.5 and 989.5 dense) or the figures the test
gives its own made-up devices.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from inductor_perf.devices.peaks import dtype_peak
from inductor_perf.devices.table import lookup

H100 = "NVIDIA H100 80GB HBM3"


def test_a_rows_peak_by_dtype_name_or_torch_dtype():
    h100 = lookup(H100)
    for f32 in ("float32", "torch.float32", torch.float32):
        assert dtype_peak(h100, f32, True) == 67.0
    assert dtype_peak(h100, "tf32", True) == 494.5  # a float32 matmul that ran on TF32 tensor cores
    assert dtype_peak(h100, torch.bfloat16, True) == 989.5
    # vector work in bfloat16 is computed in float32 by Inductor: the FP32 (CUDA core) roof
    assert dtype_peak(h100, "bfloat16", False) == 67.0
    assert dtype_peak(h100, None, True) is None and dtype_peak(None, "float32", True) is None
    assert dtype_peak(h100, "no_such_dtype", True) is None


@pytest.fixture
def tf32_on():
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32 = prev


def test_float32_is_never_this_processs_tf32_switch(tf32_on):
    # Whether a trace's float32 matmuls ran as TF32 is carried in its costs' dtype ("tf32"), never
    # read from the process that analyses it.
    assert dtype_peak(lookup(H100), "float32", True) == 67.0


def test_a_mapping_or_a_duck_typed_device_reads_like_a_row():
    # a summary's device may be a mapping of a row's fields (read back from JSON)
    row = {"name": "x", "peak_tflops": {"float32": 2.5, "tf32": 9.0}, "device_type": "cuda"}
    assert (dtype_peak(row, "float32", True), dtype_peak(row, "tf32", True)) == (2.5, 9.0)
    # without device_type: float32 is still float32's own figure (TF32 is never taken from a switch)
    duck = SimpleNamespace(peak_tflops={torch.float32: 100.0, "tf32": 400.0})
    assert dtype_peak(duck, "float32", True) == 100.0


@pytest.mark.parametrize("value", [math.inf, math.nan, 0.0, -5.0, "100", True, None])
def test_a_figure_that_is_not_a_finite_positive_number_is_unknown(value):
    assert dtype_peak({"peak_tflops": {"float32": value}}, "float32", True) is None


def test_a_single_number_for_every_dtype_is_not_a_peak_table():
    # peak_tflops maps dtype names to figures; a bare number says which dtype it is for no more than 0 would
    assert dtype_peak(SimpleNamespace(peak_tflops=100.0, device_type="cuda"), "float32", True) is None
