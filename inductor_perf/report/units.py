"""Units of every table we show: durations, FLOP and byte counts, rates and percentages, as text
(:mod:`inductor_perf.report.text` and the page use them alike)."""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

_NA = "-"


# --- Units ----------------------------------------------------------------------------------------
def _sig(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, never in exponent notation."""
    if x == 0:
        return "0"
    mag = int(math.floor(math.log10(abs(x))))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_time_us(us: float | None) -> str:
    """A duration given in µs: ``'812 ns'``-free on purpose: ``0.31 µs``, ``12.3 µs``, ``1.44 ms``, ``2.05 s``."""
    if not _finite(us):
        return _NA
    a = abs(us)
    if a >= 1e6:
        return f"{_sig(us / 1e6)} s"
    if a >= 1e3:
        return f"{_sig(us / 1e3)} ms"
    return f"{_sig(us)} µs"


def _scaled(x: float | None, unit: str, steps: Sequence[tuple[float, str]]) -> str:
    if not _finite(x):
        return _NA
    for scale, prefix in steps:
        if abs(x) >= scale:
            return f"{_sig(x / scale)} {prefix}{unit}"
    return f"{_sig(x)} {unit}"


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_flop(flop: float | None) -> str:
    """A FLOP count: ``4.87 MFLOP``, ``1.61 GFLOP``, ``2.00 TFLOP``."""
    return _scaled(flop, "FLOP", _SI)


def fmt_bytes(nbytes: float | None) -> str:
    """A byte count, decimal units: ``512 kB``, ``3.20 MB``, ``1.50 GB``."""
    return _scaled(nbytes, "B", _SI)


def fmt_gb(gb: float | None) -> str:
    """A size given in GB (1e9 bytes), shown with a fitting unit."""
    return fmt_bytes(gb * 1e9) if _finite(gb) else _NA


def fmt_tflops(tflops: float | None) -> str:
    """A rate given in TFLOP/s: ``1.23 TFLOP/s``, ``456 GFLOP/s``."""
    return _scaled(tflops * 1e12, "FLOP/s", _SI) if _finite(tflops) else _NA


def fmt_gbps(gbps: float | None) -> str:
    """A bandwidth given in GB/s: ``12.3 GB/s``, ``1.20 TB/s``, ``456 MB/s``."""
    return _scaled(gbps * 1e9, "B/s", _SI) if _finite(gbps) else _NA


def fmt_pct(pct: float | None) -> str:
    """A percentage with one decimal: ``36.2 %``."""
    return f"{pct:.1f} %" if _finite(pct) else _NA


def fmt_si(x: float | None) -> str:
    """A bare number with an SI prefix, for narrow columns: ``1.61G``, ``512k``, ``12``."""
    if not _finite(x):
        return _NA
    for scale, prefix in _SI:
        if abs(x) >= scale:
            return f"{_sig(x / scale)}{prefix}"
    return _sig(x)


# --- The op x shape table's keys -----------------------------------------------------------------
def compact_shapes(shapes: str | None) -> str:
    """An ``ops_by_shape`` row's shapes as the text shows them: ``2048x512 512x2048``, ``list[n]``
    for a tensor list, scalars (``[]``) left out; "compiled" and unknown as they are.

    >>> compact_shapes("[[2048,512],[],[[1],[2]]]"), compact_shapes(None)
    ('2048x512 list[2]', 'unknown')
    """
    if shapes is None:
        return "unknown"
    try:
        dims = json.loads(shapes)
    except ValueError:
        return shapes
    if not isinstance(dims, list):
        return shapes
    out = []
    for d in dims:
        if isinstance(d, list) and all(isinstance(x, int) for x in d):
            if d:
                out.append("x".join(map(str, d)))
        else:
            out.append(f"list[{len(d)}]" if isinstance(d, list) else str(d))
    return " ".join(out)


_DTYPE_ABBR = {"c10::BFloat16": "bf16", "c10::Half": "f16", "float": "f32", "double": "f64", "long int": "i64",
               "int": "i32", "bool": "bool", "unsigned char": "u8", "signed char": "i8", "short int": "i16",
               "c10::Float8_e4m3fn": "f8e4m3", "c10::Float8_e5m2": "f8e5m2"}


def compact_dtypes(dtypes: str | None) -> str:
    """The distinct tensor dtypes of a row's ``dtypes``, abbreviated (``bf16``); scalars and lists left out."""
    if dtypes is None:
        return _NA
    seen = dict.fromkeys(_DTYPE_ABBR.get(t, t) for t in dtypes.split(", ")
                         if t and t not in ("Scalar", "ScalarList", "TensorList", "GenericList"))
    return ",".join(seen) or _NA
