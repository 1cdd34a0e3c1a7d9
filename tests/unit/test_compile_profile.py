"""tools/gpu_compile_profile.py, the GPU session's cold-compile profile, checked on CPU: its reading of
``-X importtime`` (lines written here by hand in that format), its report, and one real child of
bench/bench_compile.py in profile mode (the hooks that only a GPU session otherwise runs)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("gpu_compile_profile", ROOT / "tools" / "gpu_compile_profile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# -X importtime's format: "import time: <self us> | <cumulative us> | <two spaces per depth><module>"
STDERR = """import time: self [us] | cumulative | imported package
import time:       120 |        120 |   sympy.core
import time:       500 |       2000 | sympy
BENCH_TIMER_START
import time:       300 |        300 |     torch._inductor.codecache
import time:       700 |       1000 |   torch._inductor.async_compile
import time:      5000 |     650000 | torch._inductor.compile_fx
import time:        10 |       2000 | torch._inductor.compiler_bisector
BENCH_COMPILE_CALLED
some warning a library printed
import time:       100 |      79000 | sympy.physics.units
BENCH_TIMER_END
import time:        50 |       9000 | json.decoder
"""


def test_imports_split_at_the_marks_top_level_only():
    got = _tool().imports_by_phase(STDERR)
    # before the first mark: not in the timed region; the nested lines (2 and 4 spaces) are inside
    # their top-level import's cumulative figure; after the end mark: outside again
    assert got == {"compile_call": [(0.65, "torch._inductor.compile_fx"), (0.002, "torch._inductor.compiler_bisector")],
                   "first_call": [(0.079, "sympy.physics.units")]}


def test_report_reads_the_runs(tmp_path):
    tool = _tool()
    rec = {"name": "inductor", "round": 0, "seconds": 9.0, "torch_compile_call_s": 4.0,
           "pool_answers": [[0.5, False], [3.0, False], [6.0, True]],
           "imports": tool.imports_by_phase(STDERR),
           "commands": [[1.0, 2.5, "gcc cuda_utils.c"], [5.0, 0.25, "ptxas --version"]]}
    (tmp_path / "inductor_r0.json").write_text(json.dumps(rec))
    text = tool.report(str(tmp_path))
    row = next(ln for ln in text.splitlines() if ln.startswith("inductor "))
    # seconds, the call, imports inside it (0.65 + 0.002), in the first call (0.079), two "no" answers
    # before the first "yes" at 6.0 s
    assert row.split() == ["inductor", "9.00", "4.00", "0.65", "0.08", "2", "6.0"]
    # 2.75 s of commands, 2.5 s of them started inside torch.compile() (before 4.0 s)
    assert "2 commands run by the compiling process, 2.75 s in all (2.50 s inside torch.compile())" in text
    assert text.index("gcc cuda_utils.c") < text.index("ptxas --version")  # longest first


def test_a_profiled_child_on_cpu(tmp_path):
    """One cold compile of the MLP by plain Inductor in profile mode: the torch.compile() call is a part
    of the timed seconds, Inductor's C++ compiler runs are among the commands timed, and compile_fx is
    imported inside the call (``backend="inductor"`` imports it there: docs/gpu.md)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_compile
    finally:
        sys.path.remove(str(ROOT / "bench"))
    tool = _tool()
    prefix = str(tmp_path / "run")
    env = {"BENCH_COMPILE_PROFILE": prefix, "PYTHONPROFILEIMPORTTIME": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with tempfile.TemporaryDirectory(prefix="compile_profile_test_") as cache:
            got = bench_compile._child("inductor", "cpu", "mlp", cache, stderr_path=prefix + ".stderr")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert 0 < got["torch_compile_call_s"] < got["seconds"]
    assert got["pool_answers"] == []  # no Triton kernel on CPU: nobody asks about the pool
    compilers = [c for c in got["commands"] if c[2].split()[0] in ("g++", "c++", "gcc", "cc", "clang++")
                 and ".cpp" in c[2]]
    assert compilers, got["commands"][:5]
    assert all(0 <= t <= got["seconds"] and d > 0 for t, d, _ in got["commands"])
    imports = tool.imports_by_phase(Path(prefix + ".stderr").read_text())
    assert "torch._inductor.compile_fx" in [m for _, m in imports["compile_call"]]
    assert Path(prefix + ".times.txt").read_text().startswith("TorchDynamo compilation metrics")
