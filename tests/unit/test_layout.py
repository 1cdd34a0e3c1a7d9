"""The package layout rules of CONTRIBUTING.md, measured by tools/layout_check.py (which reads the
source only). The checker itself is tested on a small made-up package, so that a pass means
something."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _checker():
    spec = importlib.util.spec_from_file_location("layout_check", ROOT / "tools" / "layout_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_package_keeps_the_layout_rules():
    got = _checker().check(ROOT / "inductor_perf")
    assert got["cycles"] == []
    assert got["long_modules"] == []
    assert got["long_functions"] == []
    assert got["renaming_modules"] == ["inductor_perf.traces.files"]


def test_checker_finds_a_lazy_cycle_a_long_function_and_renames(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\nimport os\n\ndef f():\n    os.replace('x', 'y')\n")
    (pkg / "b.py").write_text("def g():\n    from .a import f\n    return f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import X\n"
                              "def long():\n" + "    x = 1\n" * 120 + "\n'a'.replace('a', 'b')\n")
    (pkg / "d.py").write_text("from .c import long\nfrom pathlib import Path\nPath('p').rename(Path('q'))\n")
    got = _checker().check(pkg)
    assert got["cycles"] == [["pkg.a", "pkg.b"]]  # c -> d is under TYPE_CHECKING: no cycle
    assert got["long_functions"] == [("pkg.c.long", 121)]
    assert got["renaming_modules"] == ["pkg.a", "pkg.d"]  # str.replace (two args) is not a rename
