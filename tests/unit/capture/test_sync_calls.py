"""The sync-call marks (capture/sync_calls.py) under a real sys.monitoring: which calls get a range, the
line it names, DISABLE of the other call sites, a raising call, another thread, and the tool id given
back. Python 3.12+ (this suite's Python where it is one, else an interpreter of 3.12+ found on the
machine, run without torch): C methods of ``list`` stand in for the tensor calls, and a one-element
list for a tensor on the GPU; the expected lines are read from the script's own text."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from inductor_perf.model.markers import call_marker_name, parse_call_marker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

LIBRARY = """
def helper(x):
    return x.copy()
"""

SCRIPT = """
import json, sys, threading
sys.path.insert(0, LIBDIR)
from inductor_perf.capture.sync_calls import SyncCalls
import helper

out = {"events": [], "asked": {}}
class Record:
    def __init__(self, name): self.name = name
    def __enter__(self): out["events"].append(["enter", self.name])
    def __exit__(self, *a): out["events"].append(["exit", self.name])

class Asked(dict):
    def get(self, key, default=None):
        out["asked"][str(key)] = out["asked"].get(str(key), 0) + 1
        return super().get(key, default)

names = Asked({id(list.copy): "copy", id(list.index): "index", id(float): "float", id(list.count): "count"})
# a one-element list stands for a tensor on the device, a two-element one for a tensor on the host;
# list.count for a host-to-device copy (marked for a host value only)
marks = SyncCalls(names, lambda x: isinstance(x, list) and len(x) == 1, Record,
                  on_host=lambda x: isinstance(x, list) and len(x) == 2, copies={id(list.count)},
                  host_only={id(list.count)})

other = "x".upper  # a C callable of its own (its id is asked for at this one site only)

def step(x):
    a = x.copy()  # MARK-copy
    b = [1, 2].copy()  # not on the device: no range
    c = [1, 2].count(1)  # MARK-host-count
    d = x.count(0)  # a copy call of a device value (x.cuda() of a GPU tensor): no range
    e = [1, 2, 3].count(1)  # neither: no range
    n = other()  # another function: disabled after the first call
    f = float(3)  # a plain number: disabled too
    try:
        float(x)  # MARK-float-raises
    except TypeError:  # float() of a list raises: its range must close all the same
        pass
    try:
        x.index(5)  # MARK-index-raises
    except ValueError:
        pass
    return helper.helper(x)  # MARK-helper

assert marks.start()
out["tool"] = marks.tool
for _ in range(3):
    step([0])
t = threading.Thread(target=step, args=([0],))
t.start(); t.join()
marks.stop()
out["freed"] = sys.monitoring.get_tool(out["tool"]) is None
step([0])  # after stop: nothing
out["ids"] = {"other": str(id(other)), "copy": str(id(list.copy))}
for tool in (3, 4):  # both ids taken: no marks, and no error
    sys.monitoring.use_tool_id(tool, "other")
out["taken"] = SyncCalls(names, lambda x: True, Record).start()
out["ids"]["count"] = str(id(list.count))
print(json.dumps(out))
"""


def _python312() -> str | None:
    if sys.version_info >= (3, 12):
        return sys.executable
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")))
    found += [p for p in map(shutil.which, ("python3.12", "python3.13", "python3.14")) if p]
    for python in found:  # (a pyenv shim is on PATH whether or not it runs)
        ok = subprocess.run([python, "-c", "import sys; sys.monitoring"], capture_output=True, timeout=60)
        if ok.returncode == 0:
            return python
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    python = _python312()
    if python is None:
        pytest.skip("no Python 3.12 or newer on this machine: sys.monitoring cannot be exercised")
    d = tmp_path_factory.mktemp("sync_calls")
    lib = d / "site-packages"
    lib.mkdir()
    (lib / "helper.py").write_text(textwrap.dedent(LIBRARY))
    script = d / "train.py"
    script.write_text(SCRIPT.replace("LIBDIR", repr(str(lib))))
    env = {**os.environ, "PYTHONPATH": ROOT}
    got = subprocess.run([python, str(script)], capture_output=True, text=True, env=env, cwd=str(d), timeout=120)
    assert got.returncode == 0, got.stderr
    lines = script.read_text().splitlines()
    line = {tag: f"{script}:{i + 1}" for i, text in enumerate(lines) for tag in ("copy", "host-count",
            "float-raises", "index-raises", "helper") if f"# MARK-{tag}" in text}
    return json.loads(got.stdout), line


def test_each_listed_call_on_the_device_gets_a_range_naming_its_line(run):
    out, line = run
    # the helper's copy is a library's: the user's line is the call of it
    one = [("copy", line["copy"]), ("count", line["host-count"]), ("float", line["float-raises"]),
           ("index", line["index-raises"]), ("copy", line["helper"])]
    expected = []
    for what, where in one:
        name = call_marker_name(what, where)
        expected += [["enter", name], ["exit", name]]  # raising calls close their range too
    assert out["events"] == expected * 4  # 3 steps, then one on another thread; none after stop()
    assert parse_call_marker(expected[0][1]) == ("copy", line["copy"])


def test_other_call_sites_are_asked_once(run):
    out, _ = run
    assert out["asked"][out["ids"]["other"]] == 1
    assert out["asked"][out["ids"]["copy"]] == 4 * 3  # three sites that stay watched, four steps
    assert out["asked"][out["ids"]["count"]] == 4 * 3  # the host value's, the device value's, neither's


def test_the_tool_id_is_given_back_and_taken_ids_mean_no_marks(run):
    out, _ = run
    assert out["tool"] in (3, 4) and out["freed"]
    assert out["taken"] is False


def test_torchs_callables_are_the_ones_a_call_reports():
    # what a CALL event reports for loss.item() is the descriptor found on the tensor's type: torch's
    # TensorBase one (torch.Tensor and nn.Parameter inherit it), the object the marks look up by id
    import torch

    from inductor_perf.capture.sync_calls import SyncCalls

    marks = SyncCalls()
    marks._torch_defaults()
    p = torch.nn.Parameter(torch.ones(2))
    for call, name in ((type(p).item, "item"), (torch.Tensor.cpu, "cpu"), (type(p).tolist, "tolist"),
                       (torch.nonzero, "nonzero"), (float, "float"), (type(p).to, "to"), (torch.Tensor.cuda, "cuda"),
                       (type(p).copy_, "copy_")):
        assert marks.names[id(call)] == name
    assert not marks.on_device(torch.ones(1)) and not marks.on_device(3.0)
    # host-to-device copies: .to() of a host or a GPU tensor (a copy either way), .cuda() of a host one
    # only, copy_ into (or out of) a tensor wherever it is
    assert marks.copies == {id(torch.Tensor.to), id(torch.Tensor.cuda), id(torch.Tensor.copy_)}
    assert marks.host_only == {id(torch.Tensor.cuda)}
    assert marks.on_host(p) and not marks.on_host(3.0)
    assert marks.record is torch._C._profiler._RecordFunctionFast
    if sys.version_info < (3, 12):
        assert marks.start() is False and marks.tool is None  # no sys.monitoring: nothing marked


def test_fake_tensors_of_a_compile_are_not_on_the_device():
    # a compile in the window calls .to() / .item() on the fake tensors it traces with: fake CUDA tensors
    # (FakeTensorMode makes them without a GPU) are not tensors on the device, real ones of the type are
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from inductor_perf.capture.sync_calls import tensor_on

    with FakeTensorMode():
        fake_gpu, fake_cpu = torch.ones(2, device="cuda"), torch.ones(2)
    assert fake_gpu.is_cuda and not tensor_on("cuda")(fake_gpu)
    assert not tensor_on("cpu")(fake_cpu) and tensor_on("cpu")(torch.ones(2))
    assert not tensor_on("cuda")(torch.ones(2)) and not tensor_on("cpu")(2.0)


class _Frame:
    def __init__(self, path: str, line: int, back: "_Frame | None" = None) -> None:
        self.f_code = type("Code", (), {"co_filename": path})()
        self.f_lineno, self.f_back = line, back


def test_user_line_skips_libraries_and_gives_none_below_the_compiler():
    from inductor_perf.capture.sync_calls import COMPILER_DIRS, user_line

    user = _Frame("/w/train.py", 42)
    nn = _Frame("/env/lib/python3.12/site-packages/torch/nn/modules/module.py", 1750, user)
    assert user_line(_Frame("/env/lib/python3.12/site-packages/torch/_tensor.py", 9, nn)) == "/w/train.py:42"
    # a compile (torch/_inductor on the way out) and generated code (in Inductor's cache) are the compiler's
    inductor = _Frame("/env/lib/python3.12/site-packages/torch/_inductor/fx_passes/joint_graph.py", 300, nn)
    assert user_line(_Frame("/w/model.py", 7, inductor)) == "/w/model.py:7"  # the user's frame comes first
    assert user_line(_Frame("/env/lib/python3.12/site-packages/torch/_tensor.py", 9, inductor)) is None
    generated = _Frame("/tmp/torchinductor_me/ab/cabc.py", 125, _Frame("/w/train.py", 10))
    assert user_line(generated, COMPILER_DIRS + ("/tmp/torchinductor_me/",)) is None
    assert user_line(generated) == "/tmp/torchinductor_me/ab/cabc.py:125"  # not told where the cache is
