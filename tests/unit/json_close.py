"""Test helper: where two JSON values differ beyond float rounding (the engine-equality tests compare
a streamed result with the whole-trace one this way)."""

from __future__ import annotations

import math


def differences(a, b, path="") -> list[str]:
    """Where two JSON values differ beyond float rounding (relative 1e-9, absolute 1e-6)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9,
                                                                                       abs_tol=1e-6):
            return []
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]
