"""The supported torch range: a clear error outside it, and pyproject says the same."""

from __future__ import annotations

import pathlib
import tomllib

import pytest

from inductor_perf.compat import SUPPORTED_TORCH, check_torch_version
from inductor_perf.errors import UnsupportedTorchError


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.13.1+cu128", "2.13.0a0+git1234"])
def test_supported(version):
    check_torch_version(version)


@pytest.mark.parametrize("version", ["2.12.1", "2.14.0", "3.0.0", "1.13.1"])
def test_unsupported_names_the_range(version):
    with pytest.raises(UnsupportedTorchError, match=r"torch >=2\.13,<2\.14.*found torch " + version.replace(".", r"\.")):
        check_torch_version(version)


def test_installed_torch_is_supported():
    check_torch_version()


def test_pyproject_pin_matches_supported_range():
    root = pathlib.Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    (low, high) = SUPPORTED_TORCH
    assert f"torch>={low[0]}.{low[1]},<{high[0]}.{high[1]}" in deps
