"""tools/same_outputs.py: it finds the pipeline's functions in either package layout (so one copy of the
script measures a checkout from before the stage subpackages too), and --compare names each file that
differs."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "same_outputs.py"

ASK = ("import sys; sys.path.insert(0, {tools!r}); import same_outputs as s\n"
       "for n in sorted(s._HOMES): print(n, s._api(n).__module__)\n")


def _homes(pythonpath: pathlib.Path, *flags: str) -> dict[str, str]:
    """Where ``_api`` finds each name, in a fresh interpreter whose inductor_perf is ``pythonpath``'s."""
    out = subprocess.run([sys.executable, *flags, "-c", ASK.format(tools=str(TOOL.parent))], cwd=pythonpath,
                         env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_the_stage_layout_is_found_first():
    got = _homes(ROOT)
    assert got["costs_from_tags"] == "inductor_perf.costs.from_tags"
    assert got["summarize"] == "inductor_perf.summary.core"
    assert got["load_trace"] == got["save_trace"] == "inductor_perf.traces.files"


def test_a_flat_layout_is_found_where_the_subpackages_are_missing(tmp_path):
    # a made-up package of the flat layout: one module per old home, each defining its names
    pkg = tmp_path / "inductor_perf"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    flat = {"report": ["format_summary"], "summary": ["summarize"], "trace_format": ["load_trace", "save_trace"],
            "augment": ["augment_trace", "augment_file"], "devices": ["lookup_device"], "tags": ["GraphTags"],
            "tag_join": ["costs_from_tags"]}
    for module, names in flat.items():
        (pkg / f"{module}.py").write_text("".join(f"def {n}():\n    pass\n" for n in names))
    # -S: no site-packages, whose editable install of a checkout would supply the modules missing here
    got = _homes(tmp_path, "-S")
    assert got == {n: f"inductor_perf.{m}" for m, names in flat.items() for n in names}


def test_a_missing_dependency_is_not_taken_for_the_old_layout(tmp_path):
    # the new home exists but imports something absent: that error is raised, not hidden by a fallback
    pkg = tmp_path / "inductor_perf"
    (pkg / "costs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "costs" / "__init__.py").write_text("")
    (pkg / "costs" / "from_tags.py").write_text("import not_installed_anywhere\n")
    ask = ("import sys; sys.path.insert(0, {tools!r}); import same_outputs as s\n"
           "s._api('costs_from_tags')\n").format(tools=str(TOOL.parent))
    r = subprocess.run([sys.executable, "-S", "-c", ask], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)},
                       capture_output=True, text=True)
    # the error that ends it (a fallback would end in "No module named 'inductor_perf.tag_join'")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1] == "ModuleNotFoundError: No module named 'not_installed_anywhere'"


def test_compare_names_each_differing_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for d in (a, b):
        (d / "same.json").write_text("{}")
    (a / "differs.json").write_text("[1]")
    (b / "differs.json").write_text("[2]")
    (a / "only_a.json").write_text("")
    r = subprocess.run([sys.executable, str(TOOL), "--compare", str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["differs: differs.json", "only in A: only_a.json", "1 of 3 files identical"]
