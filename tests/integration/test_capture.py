"""End-to-end automatic capture: INDUCTOR_PERF_TRACE_DIR on real training loops, in subprocesses.

Expected FLOPs come from FlopCounterMode on the eager model (and hand arithmetic for CPU flash
attention, which flop_registry lacks); expected event counts from the raw trace itself.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

MLP_SCRIPT = textwrap.dedent('''
    import json, sys, torch, torch.nn as nn
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(0)
    class MLP(nn.Module):
        def __init__(s):
            super().__init__(); s.fc1 = nn.Linear(64, 128); s.fc2 = nn.Linear(128, 10)
        def forward(s, x):
            return s.fc2(torch.relu(s.fc1(x)))
    m = MLP(); opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(32, 64); y = torch.randint(0, 10, (32,))
    with FlopCounterMode(display=False) as fc:
        nn.functional.cross_entropy(m(x), y).backward()
    m.zero_grad()
    f = torch.compile(m, backend="inductor_perf")
    for step in range(7):
        loss = nn.functional.cross_entropy(f(x), y)
        loss.backward(); opt.step(); opt.zero_grad()
    import inductor_perf
    print("RESULT " + json.dumps({"flops_per_step": fc.get_total_flops(),
                                  "call_sites": len(inductor_perf.kernel_table())}))
''')

ATTN_SCRIPT = textwrap.dedent('''
    import json, torch, torch.nn as nn, torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(0)
    B, T, H, D = 2, 32, 4, 16
    C = H * D
    class Attn(nn.Module):
        def __init__(s):
            super().__init__(); s.qkv = nn.Linear(C, 3 * C); s.o = nn.Linear(C, C)
        def forward(s, x):
            q, k, v = s.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v)
            return s.o(y.transpose(1, 2).reshape(B, T, C))
    m = Attn()
    x = torch.randn(B, T, C, requires_grad=True)
    # FlopCounterMode counts the linears; on CPU eager SDPA runs the flash kernel for CPU, which
    # flop_registry lacks before torch 2.15, so it reports 0 for it there. Attention by hand:
    # forward QK^T and PV are 2 matmuls of 2*B*H*T*T*D FLOPs; flash backward recomputes QK^T and
    # computes dV, dP, dQ, dK: 5 matmuls of 2*B*H*T*T*D.
    with FlopCounterMode(display=False) as fc:
        m(x).sum().backward()
    attn = (2 + 5) * 2 * B * H * T * T * D
    counted = {str(k): int(v) for k, v in fc.get_flop_counts().get("Global", {}).items()
               if "flash_attention_for_cpu" in str(k)}
    if counted:  # torch counts it itself: it must agree with the hand count, and is not added twice
        assert sum(counted.values()) == attn, counted
        attn = 0
    m.zero_grad(); x.grad = None
    f = torch.compile(m, backend="inductor_perf")
    for step in range(7):
        f(x).sum().backward()
    print("RESULT " + json.dumps({"flops_per_step": fc.get_total_flops() + attn}))
''')


def _run(script: str, env_extra: dict[str, str], cwd: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ)
    env.update(env_extra)
    path = os.path.join(cwd, "script.py")  # a real file, so FX records source lines
    with open(path, "w") as f:
        f.write(script)
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    return proc, json.loads(line[-1][len("RESULT "):]) if line else {}


def _strict_load_gz(path: str) -> dict:
    def reject(name: str) -> None:
        raise ValueError(f"non-finite constant {name} in {path}")

    with gzip.open(path, "rt") as f:
        return json.load(f, parse_constant=reject)


def _kernel_events(trace: dict) -> list[dict]:
    """Kernel events the compiled graphs launched: graph_<id>_ C++ kernels and the outermost
    aten ops inside our markers (found here from the raw nesting, independently of tag_join.py)."""
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    markers = [e for e in evs if e["name"].startswith("## inductor_perf graph=")]
    out = []
    for m in markers:
        inside = sorted((e for e in evs if e is not m and e["tid"] == m["tid"]
                         and e["ts"] >= m["ts"] and e["ts"] + e["dur"] <= m["ts"] + m["dur"]),
                        key=lambda e: (e["ts"], -e["dur"]))
        end = -1.0
        for e in inside:
            if e["ts"] < end:
                continue
            if e["name"].startswith("graph_") or e["name"].startswith("aten::"):
                out.append(e)
                end = e["ts"] + e["dur"]
    return out


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp_out")
    proc, result = _run(MLP_SCRIPT, {"INDUCTOR_PERF_TRACE_DIR": str(out), "INDUCTOR_PERF_SKIP": "2",
                                     "INDUCTOR_PERF_STEPS": "2"}, str(out))
    return out, proc, result


def test_mlp_files_written_and_announced(mlp_run):
    out, proc, _ = mlp_run
    traces = glob.glob(str(out / "*.trace.json.gz"))
    assert len(traces) == 1
    base = traces[0][: -len(".trace.json.gz")]
    assert os.path.exists(base + ".summary.txt") and os.path.exists(base + ".summary.json")
    with open(base + ".report.html") as f:
        assert f.read().count("data-kernel=") > 0  # the page, with its roofline
    assert traces[0] in proc.stderr  # one line on stderr says where
    assert not glob.glob(str(out / ".*"))  # no temporary leftovers


def test_mlp_every_kernel_event_tagged_and_flops_match(mlp_run):
    out, _, result = mlp_run
    trace = _strict_load_gz(glob.glob(str(out / "*.trace.json.gz"))[0])
    kernels = _kernel_events(trace)
    # 2 recorded steps, each calling every compile-time call site once.
    assert len(kernels) == 2 * result["call_sites"]
    untagged = [k["name"] for k in kernels if "kernel_flop" not in k.get("args", {})]
    assert untagged == []
    matmul = sum(e["args"]["kernel_matmul_flop"] for e in trace["traceEvents"]
                 if "kernel_matmul_flop" in e.get("args", {}))
    assert matmul == 2 * result["flops_per_step"]
    for k in kernels:
        a = k["args"]
        assert a["kernel_num_gb"] == pytest.approx((a["kernel_bytes_read"] + a["kernel_bytes_written"]) / 1e9)
        assert a["roofline_bound"] in ("compute", "memory", "latency", "unknown")
        # fc1/relu/fc2 all sit on the forward's single line of MLP_SCRIPT (line 9 of script.py).
        assert a["source"].endswith("script.py:9"), a["source"]
        assert a["module_path"] in ("fc1", "fc2", "")
    # What fused into what: the eager ops each kernel came from.
    ops = {k["name"]: k["args"].get("eager_ops", "") for k in kernels}
    assert any("aten::relu" in v for n, v in ops.items() if n.startswith("graph_"))
    assert all("aten::addmm" in v for n, v in ops.items() if n == "aten::addmm")


def test_mlp_summary_json_matches_text(mlp_run):
    out, _, _ = mlp_run
    base = glob.glob(str(out / "*.trace.json.gz"))[0][: -len(".trace.json.gz")]
    with open(base + ".summary.json") as f:
        summary = json.load(f, parse_constant=lambda c: pytest.fail(f"non-finite {c}"))
    with open(base + ".summary.txt") as f:
        text = f.read()
    assert summary["kernel_count"] > 0
    assert f"{summary['busy_pct']:.1f} %" in text
    modules = {row["key"] for row in summary["modules"]}
    assert {"fc1", "fc2"} <= modules


def test_attention_block_matmul_flops(tmp_path):
    proc, result = _run(ATTN_SCRIPT, {"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "2",
                                      "INDUCTOR_PERF_STEPS": "1"}, str(tmp_path))
    trace = _strict_load_gz(glob.glob(str(tmp_path / "*.trace.json.gz"))[0])
    kernels = _kernel_events(trace)
    assert kernels and all("kernel_flop" in k["args"] for k in kernels)
    matmul = sum(e["args"]["kernel_matmul_flop"] for e in trace["traceEvents"]
                 if "kernel_matmul_flop" in e.get("args", {}))
    assert matmul == result["flops_per_step"]


RAW_SCRIPT = textwrap.dedent('''
    import json, sys, torch, torch.nn as nn
    from torch.profiler import profile
    from inductor_perf.capture import process_trace
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    f = torch.compile(m, backend="inductor_perf", options={"inductor_perf.kernel_profile": True})
    x = torch.randn(8, 16)
    for _ in range(2):
        f(x).sum().backward()
    with profile(record_shapes=True) as p:
        f(x).sum().backward()
    p.export_chrome_trace(sys.argv[1])
    process_trace(sys.argv[1], sys.argv[2])
''')


def test_augmented_trace_has_exactly_the_raw_events(tmp_path):
    raw = tmp_path / "raw.json"
    base = tmp_path / "aug"
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", RAW_SCRIPT, str(raw), str(base)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(raw) as f:
        before = json.load(f)
    after = _strict_load_gz(str(base) + ".trace.json.gz")
    assert len(after["traceEvents"]) == len(before["traceEvents"])
    added = 0
    for a, b in zip(after["traceEvents"], before["traceEvents"]):
        assert {k: v for k, v in a.items() if k != "args"} == {k: v for k, v in b.items() if k != "args"}
        a_args, b_args = a.get("args", {}), b.get("args", {})
        assert {k: a_args[k] for k in b_args} == b_args  # nothing existing changed
        added += "kernel_flop" in a_args
    assert added > 0
    # one top-level key added: the device row the capture measured against (docs/devices.md)
    assert after.pop("inductor_perf")["device"]["device_type"] == "cpu"
    assert {k: v for k, v in after.items() if k != "traceEvents"} == \
        {k: v for k, v in before.items() if k != "traceEvents"}


UNWRITABLE_SCRIPT = textwrap.dedent('''
    import torch, torch.nn as nn
    m = nn.Linear(8, 8)
    f = torch.compile(m, backend="inductor_perf")
    for _ in range(6):
        f(torch.randn(4, 8)).sum().backward()
    print("RESULT {\\"finished\\": true}")
''')


def test_unwritable_directory_warns_and_training_goes_on(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc, result = _run(UNWRITABLE_SCRIPT, {"INDUCTOR_PERF_TRACE_DIR": str(blocker / "sub"),
                                            "INDUCTOR_PERF_SKIP": "1", "INDUCTOR_PERF_STEPS": "1"},
                        str(tmp_path))
    assert result == {"finished": True}
    assert "cannot write traces" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_two_runs_do_not_clobber(tmp_path):
    env = {"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "1", "INDUCTOR_PERF_STEPS": "1"}
    _run(UNWRITABLE_SCRIPT, env, str(tmp_path))
    _run(UNWRITABLE_SCRIPT, env, str(tmp_path))
    assert len(glob.glob(str(tmp_path / "*.trace.json.gz"))) == 2
    assert len(glob.glob(str(tmp_path / "*.summary.json"))) == 2


def test_names_are_reserved_exclusively_and_never_reuse_earlier_outputs(tmp_path, monkeypatch):
    from inductor_perf.capture import _release, _reserve_base

    monkeypatch.delenv("RANK", raising=False)
    first = _reserve_base(str(tmp_path), "run")
    second = _reserve_base(str(tmp_path), "run")  # a concurrent writer while the first holds "run"
    assert (first, second) == (str(tmp_path / "run"), str(tmp_path / "run_2"))
    _release(first)
    _release(second)
    (tmp_path / "run.summary.txt").write_text("earlier run")
    third = _reserve_base(str(tmp_path), "run")
    assert third == str(tmp_path / "run_2")  # "run" has an earlier run's files
    _release(third)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.summary.txt"]  # locks are gone


def test_explicit_names_carry_the_rank(tmp_path, monkeypatch):
    from inductor_perf.capture import _release, _reserve_base

    monkeypatch.setenv("RANK", "3")
    base = _reserve_base(str(tmp_path), "run")
    _release(base)
    assert base == str(tmp_path / "run_rank3")


def _tiny_compiled():
    import torch

    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    return torch.compile(model, backend="inductor_perf"), torch.randn(4, 8)


def test_explicit_profile_writes_on_exception_and_reraises(tmp_path):
    import inductor_perf

    f, x = _tiny_compiled()
    f(x).sum().backward()
    p = inductor_perf.profile(tmp_path, name="boom")
    with pytest.raises(RuntimeError, match="user error"):
        with p:
            f(x).sum().backward()
            p.step()
            raise RuntimeError("user error")
    assert p.result is not None and os.path.exists(p.result.trace_path)
    assert any("raised RuntimeError" in w for w in p.result.warnings)
    trace = _strict_load_gz(p.result.trace_path)
    assert any("kernel_flop" in e.get("args", {}) for e in trace["traceEvents"])


def test_profiler_already_running_warns_and_run_goes_on(tmp_path, caplog):
    import torch

    import inductor_perf

    f, x = _tiny_compiled()
    with torch.profiler.profile():
        with caplog.at_level("WARNING", logger="inductor_perf"):
            with inductor_perf.profile(tmp_path) as p:
                f(x).sum().backward()
    assert p.result is not None and p.result.trace_path is None
    assert any("already running" in w for w in p.result.warnings)
    assert "nothing written" in p.result.summary_text
    assert any("already running" in r.getMessage() for r in caplog.records)
    assert not any(tmp_path.iterdir())


RECOMPILE_SCRIPT = textwrap.dedent('''
    import json, torch, torch.nn as nn
    torch.manual_seed(0)
    class Classifier(nn.Module):
        """Like transformers' *ForSequenceClassification: the first forward sets a config attribute
        that the next call's guards read, so Dynamo recompiles the frame on the second call."""
        def __init__(s):
            super().__init__(); s.fc = nn.Linear(16, 4); s.problem_type = None
        def forward(s, x):
            if s.problem_type is None:
                s.problem_type = "single_label"
            return s.fc(x)
    m = Classifier(); f = torch.compile(m, backend="inductor_perf")
    x = torch.randn(8, 16)
    for step in range(STEPS):
        f(x).sum().backward()
    import inductor_perf
    fwd = [g for g in inductor_perf.graph_table() if not g.is_backward]
    print("RESULT " + json.dumps({"forward_graphs": len(fwd), "frames": sorted({g.frame_id for g in fwd}),
                                  "compile_ids": sorted({g.compile_id for g in fwd})}))
''')


def test_steps_survive_a_recompile_of_the_root_frame(tmp_path):
    """The second call recompiles the forward (a guard on an attribute the first call set); the
    steps after it run the second variant, and still count: the window opens and closes."""
    proc, result = _run(RECOMPILE_SCRIPT.replace("STEPS", "7"),
                        {"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "3",
                         "INDUCTOR_PERF_STEPS": "2"}, str(tmp_path))
    # two compiled variants of one frame (independent of our counting: Dynamo's own compile ids)
    assert result["forward_graphs"] == 2 and len(result["frames"]) == 1 and len(result["compile_ids"]) == 2
    (trace,) = glob.glob(str(tmp_path / "*.trace.json.gz"))
    events = _strict_load_gz(trace)["traceEvents"]
    fwd_markers = [e for e in events if e.get("ph") == "X" and e["name"].startswith("## inductor_perf graph=")
                   and " fwd" in e["name"]]
    assert len(fwd_markers) == 2  # exactly the two recorded steps' forward calls
    assert all(e["args"].get("kernel_flop") is not None for e in _kernel_events({"traceEvents": events}))


def test_no_window_says_what_was_seen(tmp_path):
    proc, result = _run(RECOMPILE_SCRIPT.replace("STEPS", "2"),
                        {"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "3"}, str(tmp_path))
    assert not glob.glob(str(tmp_path / "*.trace.json.gz"))
    msg = [ln for ln in proc.stderr.splitlines() if "nothing was captured" in ln]
    assert len(msg) == 1, proc.stderr[-2000:]
    assert "saw 2 step(s)" in msg[0] and "2 compiled variant(s) of it: 1 recompile(s)" in msg[0]
    assert "INDUCTOR_PERF_SKIP" in msg[0]


def test_device_option_sets_the_peaks_of_the_capture(tmp_path):
    """options={"inductor_perf.device": ...} travels with the graphs compiled under it: the capture
    of their calls rates them against that row (expected values: the row given here)."""
    import torch

    import inductor_perf

    torch._dynamo.reset()
    row = {"name": "Test CPU row", "peak_tflops": {"float32": 2.5}, "mem_bandwidth_gbs": 123.0}
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    f = torch.compile(model, backend="inductor_perf", options={"inductor_perf.device": row})
    x = torch.randn(4, 8)
    f(x).sum().backward()
    with inductor_perf.profile(tmp_path, name="row") as p:
        f(x).sum().backward()
        p.step()
    peak = json.load(open(p.result.summary_json_path))["peak"]
    assert (peak["device"], peak["peak_tflops"], peak["mem_bandwidth_gbs"]) == ("Test CPU row", 2.5, 123.0)


def test_profile_blocks_install_and_remove_symmetrically(tmp_path):
    from inductor_perf import capture, markers

    outer, inner = capture.profile(tmp_path / "a"), capture.profile(tmp_path / "b")
    capture.install(outer)
    capture.install(inner)
    assert markers.CALL_HOOK.session is inner and capture.capture_requested()
    capture.uninstall(inner)
    assert markers.CALL_HOOK.session is outer
    capture.uninstall(outer)
    assert markers.CALL_HOOK.session is None and not markers.CALL_HOOK.active()


def test_kineto_status_lines_are_kept_off_stderr(capfd):
    """Kineto prints "USDT:... profiler_start/stop" to fd 2 at every start and stop; the capture's
    window hides those lines and keeps anything else written meanwhile."""
    import torch

    from inductor_perf.capture import _without_kineto_status

    with _without_kineto_status():
        p = torch.profiler.profile()
        p.__enter__()
        os.write(2, b"a line of the user's\n")
    torch.ones(4).sum()
    with _without_kineto_status():
        p.__exit__(None, None, None)
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "profiler_stop" not in err and "Completed Stage" not in err
    assert "a line of the user's" in err


VARIANT_SCRIPT = textwrap.dedent('''
    import json, torch, torch.nn as nn
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(0)
    class TwoVariants(nn.Module):
        """The first call takes a branch with an extra 64x64 layer and sets the attribute the guards
        of the next call read: variant 2 (what the recorded steps run) has fewer FLOPs."""
        def __init__(s):
            super().__init__(); s.fc = nn.Linear(64, 64); s.extra = nn.Linear(64, 64); s.seen = False
        def forward(s, x):
            if not s.seen:
                s.seen = True
                x = s.extra(x)
            return s.fc(x)
    m = TwoVariants(); x = torch.randn(32, 64)
    counts = []
    for seen in (False, True):
        m.seen = seen
        with FlopCounterMode(display=False) as fc:
            m(x).sum().backward()
        counts.append(int(fc.get_total_flops()))
    m.seen = False; m.zero_grad()
    f = torch.compile(m, backend="inductor_perf")
    for step in range(6):
        f(x).sum().backward()
    print("RESULT " + json.dumps({"first": counts[0], "later": counts[1]}))
''')


def test_a_recorded_step_counts_the_flops_of_the_variant_that_ran(tmp_path):
    proc, result = _run(VARIANT_SCRIPT, {"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "2",
                                         "INDUCTOR_PERF_STEPS": "2"}, str(tmp_path))
    assert result["first"] > result["later"] > 0  # the variants differ (FlopCounterMode, eager)
    (trace,) = glob.glob(str(tmp_path / "*.trace.json.gz"))
    kernels = _kernel_events(_strict_load_gz(trace))
    matmul = sum(e["args"].get("kernel_matmul_flop", 0) for e in kernels)
    assert matmul == 2 * result["later"]  # two recorded steps of the second variant


GRAPH_BREAK_SCRIPT = textwrap.dedent('''
    import json, torch, torch.nn as nn
    torch.manual_seed(0)
    @torch._dynamo.disable
    def eager_part(h):
        return torch.cumsum(h, 0)
    class Gate(nn.Module):
        def __init__(s):
            super().__init__(); s.fc = nn.Linear(32, 32)
        def forward(s, x):
            h = eager_part(s.fc(x))  # a graph break: cumsum runs eagerly between compiled pieces
            return torch.relu(h)
    class Net(nn.Module):
        def __init__(s):
            super().__init__(); s.inp = nn.Linear(16, 32); s.gate = Gate(); s.out = nn.Linear(32, 4)
        def forward(s, x):
            return s.out(s.gate(s.inp(x)))
    m = Net(); f = torch.compile(m, backend="inductor_perf"); x = torch.randn(8, 16)
    for i in range(5):
        f(x).sum().backward()
    import inductor_perf
    print("RESULT " + json.dumps({"modules": [n for n, _ in m.named_modules()],
                                  "frames": len({g.frame_id for g in inductor_perf.graph_table()})}))
''')


def test_graph_breaks_keep_model_paths_and_count_the_eager_work_between_pieces(tmp_path):
    proc, result = _run(GRAPH_BREAK_SCRIPT, {"INDUCTOR_PERF_TRACE_DIR": str(tmp_path), "INDUCTOR_PERF_SKIP": "2",
                                             "INDUCTOR_PERF_STEPS": "1"}, str(tmp_path))
    assert result["frames"] >= 3  # the root frame, Gate.forward and the resume functions: really broken
    (trace,) = glob.glob(str(tmp_path / "*.trace.json.gz"))
    kernels = _kernel_events(_strict_load_gz(trace))
    paths = {e["args"].get("module_path") for e in kernels}
    # every compiled piece's kernels carry the model's own paths (from named_modules(), not ours)
    assert paths <= set(result["modules"]) and {"inp", "gate.fc", "out"} <= paths, paths
    (summary,) = glob.glob(str(tmp_path / "*.summary.json"))
    s = json.load(open(summary))
    cumsum = [r for r in s["top_kernels"] if r["name"] == "aten::cumsum"]
    # the eager op between the pieces (forward and its backward) counts, in the module it runs in
    assert cumsum and cumsum[0]["count"] == 2 and cumsum[0]["module_path"] == "gate", cumsum
