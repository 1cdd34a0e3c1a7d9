"""The supported torch range: a clear error below it, no error above it, and pyproject agrees."""

from __future__ import annotations

import pathlib
import tomllib

import pytest

from inductor_perf.compat import MIN_TORCH, TESTED_TORCH, check_torch_version, is_tested, parse_version
from inductor_perf.errors import UnsupportedTorchError


@pytest.mark.parametrize("version", ["2.11.0", "2.11.0+cu130", "2.12.1", "2.13.0+cpu", "2.14.1",
                                     "2.15.0", "2.16.0a0+git1234", "3.0.0"])
def test_supported_or_newer_is_not_an_error(version):
    check_torch_version(version)


@pytest.mark.parametrize("version", ["2.10.0", "2.9.1+cu128", "1.13.1"])
def test_older_names_the_supported_versions(version):
    with pytest.raises(UnsupportedTorchError,
                       match=r"torch >=2\.11 \(tested: 2\.11, 2\.12, 2\.13, 2\.14, 2\.15\); found torch "
                             + version.replace(".", r"\.").replace("+", r"\+")):
        check_torch_version(version)


@pytest.mark.parametrize("version,tested", [("2.11.0+cu130", True), ("2.15.0", True),
                                            ("2.16.0", False), ("2.10.0", False)])
def test_is_tested(version, tested):
    assert is_tested(version) is tested


def test_unparsable_version():
    with pytest.raises(ValueError, match="cannot parse torch version 'nightly'"):
        parse_version("nightly")


def test_installed_torch_is_supported():
    check_torch_version()


def test_pyproject_lower_bound_and_no_upper_pin():
    root = pathlib.Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_deps = [d for d in deps if d.startswith("torch")]
    assert torch_deps == [f"torch>={MIN_TORCH[0]}.{MIN_TORCH[1]}"]
    assert TESTED_TORCH[0] == MIN_TORCH


def _fails() -> None:
    raise AssertionError("Loadable.load(self, example_inputs)")


def _support_with(monkeypatch, caplog, internals):
    from inductor_perf import compat

    monkeypatch.setattr(compat, "INTERNALS", internals)
    monkeypatch.setattr(compat, "installed_torch_version", lambda: "2.13.0")
    with caplog.at_level("WARNING", logger="inductor_perf.compat"):
        return compat.backend_support.__wrapped__()  # the check itself, not this process's cached answer


def test_internal_with_a_fallback_degrades_without_turning_tagging_off(monkeypatch, caplog):
    from inductor_perf.compat import Internal

    fine = Internal("a.present", "x", lambda: None)
    optional = Internal("b.changed", "y", _fails, fallback="the thing is off for our compiles")
    support = _support_with(monkeypatch, caplog, (fine, optional))
    assert support.tagging and support.missing == ()
    assert support.degraded == (("b.changed", "AssertionError: Loadable.load(self, example_inputs)"),)
    assert support.lacks("b.changed") and not support.lacks("a.present")
    # one line: which internal, why, and what we do without it
    (line,) = [r.getMessage() for r in caplog.records]
    assert "b.changed" in line and "Loadable.load(self, example_inputs)" in line
    assert line.endswith("So the thing is off for our compiles.")


def test_internal_without_a_fallback_turns_tagging_off(monkeypatch, caplog):
    from inductor_perf.compat import Internal

    required = Internal("c.changed", "z", _fails)
    optional = Internal("b.changed", "y", _fails, fallback="the thing is off")
    support = _support_with(monkeypatch, caplog, (required, optional))
    assert not support.tagging and [n for n, _ in support.missing] == ["c.changed"]
    assert support.lacks("c.changed") and support.lacks("b.changed")
    # plain Inductor: the fallback's line would say nothing true, so only the missing one is named
    (line,) = [r.getMessage() for r in caplog.records]
    assert "c.changed" in line and "backend='inductor'" in line
