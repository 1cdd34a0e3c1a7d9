"""The torch versions we support, and a loud check when another one is installed.

Almost everything inductor_perf hooks into is private Inductor API, so each torch release line
must be tested before it is admitted here.
"""

from __future__ import annotations

import re

# Inclusive lower bound, exclusive upper bound, as (major, minor).
SUPPORTED_TORCH = ((2, 13), (2, 14))


def parse_version(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"cannot parse torch version {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_torch_version(version: str | None = None) -> None:
    """Raise UnsupportedTorchError unless ``version`` (default: installed torch) is supported."""
    from .errors import UnsupportedTorchError

    if version is None:
        import torch

        version = torch.__version__
    low, high = SUPPORTED_TORCH
    if not (low <= parse_version(version) < high):
        raise UnsupportedTorchError(
            f"inductor_perf supports torch >={low[0]}.{low[1]},<{high[0]}.{high[1]}; "
            f"found torch {version}. Install a supported torch or use backend='inductor'."
        )
