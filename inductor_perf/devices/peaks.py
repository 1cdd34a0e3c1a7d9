"""A device's peak for a dtype: the one lookup every stage makes of it (augmenting an event, the
summary's headline, a comparison's kernels), so that a kernel and its trace are measured against
the same figure everywhere.

Torch-free: dtypes are looked up by name (:func:`devices.spec.dtype_name`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping

from ..model import events as evs


def dtype_peak(device: Any, dtype: Any, matmul: bool) -> float | None:
    """The roof in TFLOP/s for work in ``dtype`` on ``device``, or None when it is unknown (no
    device, no dtype, no figure, or not a finite positive number).

    ``device``: a :class:`~inductor_perf.devices.spec.DeviceSpec`, anything with its fields
    (``peak_tflops``, ``vector_tflops``, ``device_type``; maps keyed by dtype name or torch.dtype),
    or a mapping of them (a summary's device read back from JSON). ``dtype``: a torch.dtype or its
    name; "tf32" for a float32 matmul that ran on TF32 tensor cores. ``matmul``: the matmul roof
    (:func:`~inductor_perf.devices.table.matmul_peak_tflops`) rather than the vector one
    (:func:`~inductor_perf.devices.table.vector_peak_tflops`).

    Never this process's TF32 switches: whether a trace's float32 matmuls ran as TF32 is decided
    where its costs are made (the capture's switch, the kernel's name) and carried in the dtype, so
    float32 is always float32's own figure.

    >>> from inductor_perf.devices.table import lookup
    >>> h100 = lookup("NVIDIA H100 80GB HBM3")
    >>> dtype_peak(h100, "float32", True), dtype_peak(h100, "tf32", True), dtype_peak(h100, "bfloat16", False)
    (67.0, 494.5, 67.0)
    """
    if device is None or dtype is None:
        return None
    # Imported here: the table's rows take ~30 ms to import, and a summary of a trace without a
    # device never needs them.
    from .table import dtype_name, matmul_peak_tflops, vector_peak_tflops

    try:
        if isinstance(device, Mapping):
            device = SimpleNamespace(**device)
        name = dtype_name(dtype)
        value = matmul_peak_tflops(device, name, tf32=False) if matmul else vector_peak_tflops(device, name)
    except (KeyError, LookupError, ValueError, TypeError, AttributeError):
        value = None
    value = evs.number(value)
    return value if value and value > 0 else None
