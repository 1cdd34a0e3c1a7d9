"""Test helpers: where two JSON values differ beyond float rounding (the engine-equality tests compare
a streamed result with the whole-trace one this way), or at all (the one-truth tests compare a
capture's in-process summary with the offline summary of the file it wrote)."""

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


IN_PROCESS_ONLY = {
    "label": "the capture names its summary after the capture; `summary` after the file it reads",
    "capture": "the capture's own join statistics (markers, warnings): only the process that ran the model has them",
}
"""The only top-level fields of a capture's summary JSON that its offline summary may lack or give
otherwise, and why."""


def field_diffs(a, b, path="") -> list[str]:
    """Every path at which two JSON values differ at all (a value, a missing key, a list's length)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'the first' if k in a else 'the second'}")
            else:
                out += field_diffs(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [f"{path}: {len(a)} items != {len(b)}"] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b)):
            out += field_diffs(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
