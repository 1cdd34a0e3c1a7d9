"""The package layout rules of CONTRIBUTING.md, measured by tools/layout_check.py (which reads the
source only). Each rule of the checker is tested on a small made-up package, so that a pass on the
real package means something."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _checker():
    spec = importlib.util.spec_from_file_location("layout_check", ROOT / "tools" / "layout_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _package(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """A package ``pkg`` under ``tmp_path`` with ``files`` (path -> source), every folder a package."""
    pkg = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents]:
            if folder == pkg.parent:
                break
            if not (folder / "__init__.py").exists():
                (folder / "__init__.py").write_text("")
        path.write_text(text)
    return pkg


LAYERS = {"low": 0, "mid": 1, "mid2": 1, "high": 2, "__init__": 3, "cli": 3}


def test_package_keeps_the_layout_rules():
    lc = _checker()
    got = lc.check(ROOT / "inductor_perf")
    assert got["cycles"] == []
    assert got["long_modules"] == []
    assert got["long_functions"] == []
    assert got["renaming_modules"] == ["inductor_perf.traces.files"]
    assert got["unplaced"] == []
    assert got["layer_violations"] == []
    assert got["subpackage_cycles"] == []
    assert got["private_imports"] == []
    assert len(got["top_modules"]) <= lc.MAX_TOP_MODULES
    assert lc.passes(got)
    # the figure the report gives: the chain is a real path
    assert got["depth"] == len(got["longest_chain"]) >= 2


def test_checker_finds_a_lazy_cycle_a_long_function_and_renames(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\nimport os\n\ndef f():\n    os.replace('x', 'y')\n")
    (pkg / "b.py").write_text("def g():\n    from .a import f\n    return f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import X\n"
                              "def long():\n" + "    x = 1\n" * 120 + "\n'a'.replace('a', 'b')\n")
    (pkg / "d.py").write_text("from .c import long\nfrom pathlib import Path\nPath('p').rename(Path('q'))\n")
    got = _checker().check(pkg, layers={"a": 0, "b": 0, "c": 0, "d": 0, "__init__": 1})
    assert got["cycles"] == [["pkg.a", "pkg.b"]]  # c -> d is under TYPE_CHECKING: no cycle
    assert got["long_functions"] == [("pkg.c.long", 121)]
    assert got["renaming_modules"] == ["pkg.a", "pkg.d"]  # str.replace (two args) is not a rename


def test_a_lower_layer_importing_a_higher_one_is_found_lazy_and_typing_imports_too(tmp_path):
    pkg = _package(tmp_path, {
        "low/a.py": "def f():\n    from ..high.h import H\n    return H\n",  # lazy: still a dependency
        "low/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..mid.m import M\n",
        "mid/m.py": "from ..low.a import f\nM = 1\n",  # down: allowed
        "mid2/n.py": "from ..mid.m import M\n",  # same layer: allowed
        "high/h.py": "H = 1\n",
    })
    got = _checker().check(pkg, layers=LAYERS, core=set())
    assert [(a, b) for a, b, _ in got["layer_violations"]] == [
        ("pkg.low.a", "pkg.high.h"), ("pkg.low.b", "pkg.mid.m")]
    assert "low (layer 0) imports high (layer 2)" in got["layer_violations"][0][2]
    assert got["subpackage_cycles"] == []  # low -> mid is only a type: not a cycle of imports


def test_core_modules_are_open_to_all_and_import_only_core(tmp_path):
    pkg = _package(tmp_path, {
        "errors.py": "class E(Exception):\n    pass\n",
        "config.py": "from .errors import E\n\ndef g():\n    from .low.a import f\n    return f\n",
        "low/a.py": "from .. import config\nfrom ..errors import E\n\ndef f():\n    return E\n",
    })
    got = _checker().check(pkg, layers=LAYERS, core={"config", "errors"})
    assert [(a, b) for a, b, _ in got["layer_violations"]] == [("pkg.config", "pkg.low.a")]


def test_a_subpackage_or_top_module_without_a_layer_is_named(tmp_path):
    pkg = _package(tmp_path, {"low/a.py": "", "newstage/x.py": "", "tool.py": ""})
    got = _checker().check(pkg, layers=LAYERS, core=set())
    assert got["unplaced"] == ["newstage", "tool"]
    assert not _checker().passes(got)


def test_a_cycle_between_subpackages_is_found_through_lazy_imports(tmp_path):
    pkg = _package(tmp_path, {
        "mid/m1.py": "def f():\n    from ..mid2.n1 import g\n    return g\n",
        "mid/m2.py": "X = 1\n",
        "mid2/n1.py": "def g():\n    return 1\n",
        "mid2/n2.py": "from ..mid.m2 import X\n",
        "high/h.py": "from ..mid.m1 import f\n",
    })
    got = _checker().check(pkg, layers=LAYERS, core=set())
    assert got["cycles"] == []  # no module imports itself back: only the subpackages form a cycle,
    assert got["subpackage_cycles"] == [["mid", "mid2"]]  # which is found
    assert got["layer_violations"] == []


def test_another_subpackages_private_name_is_found_however_it_is_taken(tmp_path):
    pkg = _package(tmp_path, {
        "low/a.py": "_SECRET = 1\nPUBLIC = 2\n\ndef _helper():\n    return 3\n",
        "low/b.py": "from .a import _SECRET\n",  # its own subpackage: allowed
        "mid/m.py": "from ..low.a import PUBLIC, _SECRET\n",
        "mid/n.py": "from ..low import a\n\ndef f():\n    return a._helper() + a.PUBLIC + a.__name__.count('.')\n",
        "cli.py": "def main():\n    from .low.a import _helper\n    return _helper()\n",  # a top module counts too
    })
    got = _checker().check(pkg, layers=LAYERS, core=set())
    assert got["private_imports"] == [("pkg.cli", "pkg.low.a._helper"), ("pkg.mid.m", "pkg.low.a._SECRET"),
                                      ("pkg.mid.n", "pkg.low.a._helper")]
    assert got["private_within_subpackage"] == [("pkg.low.b", "pkg.low.a._SECRET")]  # reported, allowed


def test_more_than_eight_modules_at_the_top_fails(tmp_path):
    lc = _checker()
    names = [f"t{i}" for i in range(lc.MAX_TOP_MODULES)]  # with __init__: one too many
    pkg = _package(tmp_path, {f"{n}.py": "" for n in names})
    got = lc.check(pkg, layers={**{n: 1 for n in names}, "__init__": 2}, core=set())
    assert len(got["top_modules"]) == lc.MAX_TOP_MODULES + 1 and got["unplaced"] == []
    assert not lc.passes(got)
    (pkg / names[0]).with_suffix(".py").unlink()
    got = lc.check(pkg, layers={**{n: 1 for n in names}, "__init__": 2}, core=set())
    assert len(got["top_modules"]) == lc.MAX_TOP_MODULES


def test_a_function_over_80_lines_fails_and_one_of_80_passes(tmp_path):
    lc = _checker()
    assert lc.MAX_FUNCTION_LINES == 80
    decorated = "import functools\n\n@functools.lru_cache\n@functools.wraps(print)\ndef g():\n" + "    x = 1\n" * 78
    nested = "def outer():\n    def inner():\n" + "        x = 1\n" * 79 + "    return inner\n"
    pkg = _package(tmp_path, {"low/a.py": "def f():\n" + "    x = 1\n" * 80,  # 81 lines
                              "low/b.py": "def f():\n" + "    x = 1\n" * 79,  # 80 lines
                              "low/c.py": decorated,  # 79 lines of def and body, 2 of decorators: 81
                              "low/d.py": nested})  # outer 82 lines, inner 80
    got = lc.check(pkg, layers=LAYERS, core=set())
    assert got["long_functions"] == [("pkg.low.a.f", 81), ("pkg.low.c.g", 81), ("pkg.low.d.outer", 82)]
    assert not lc.passes(got)


def test_the_longest_import_chain_is_measured(tmp_path):
    pkg = _package(tmp_path, {
        "low/a.py": "X = 1\n",
        "mid/m.py": "from ..low.a import X\n",
        "high/h.py": "def f():\n    from ..mid.m import X\n    return X\n",
        "cli.py": "from .high import h\nfrom .low import a\n",
    })
    got = _checker().check(pkg, layers=LAYERS, core=set())
    assert got["longest_chain"] == ["pkg.cli", "pkg.high.h", "pkg.mid.m", "pkg.low.a"]
    assert got["depth"] == 4
    # between subpackages: cli -> high -> mid -> low (cli's direct import of low is the shorter way)
    assert got["longest_subpackage_chain"] == ["cli", "high", "mid", "low"]
    assert got["subpackage_depth"] == 4
