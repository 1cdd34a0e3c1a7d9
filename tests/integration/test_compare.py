"""inductor_perf.compare on a real model: a two-block pre-norm transformer (d=32, 2 heads, seq 16),
compiled once for the whole module (each compile costs tens of seconds on a busy 2-core CPU)."""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest
import torch
import torch.nn as nn

from inductor_perf.cli import main
from inductor_perf.comparison.rows import Comparison
from inductor_perf.comparison.runner import diff_files, load_model_file
from inductor_perf.model.events import GRAD_ACCUM, OUTSIDE_MODEL, RUNTIME_OVERHEAD
from inductor_perf.errors import InductorPerfError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "compare_model.py")
STEPS = 2
_SPECIAL = {OUTSIDE_MODEL, RUNTIME_OVERHEAD, GRAD_ACCUM}


def _events(path: str) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import inductor_perf

    model, inputs, _ = load_model_file(EXAMPLE)
    # Grads that compare must leave alone, and a submodule in eval mode whose flag it must keep.
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.5)
    model.blocks[1].mlp.eval()
    before = {
        "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        "grad_ids": {n: id(p.grad) for n, p in model.named_parameters()},
        "grads": {n: p.grad.clone() for n, p in model.named_parameters()},
        "training": {n: m.training for n, m in model.named_modules()},
    }
    out = tmp_path_factory.mktemp("compare")
    threads = torch.get_num_threads()
    # One thread: on a shared 2-core machine OpenMP waits make profiled eager ops erratic and slow.
    torch.set_num_threads(1)
    try:
        c = inductor_perf.compare(model, inputs, steps=STEPS, warmup=2, trace_dir=str(out))
    finally:
        torch.set_num_threads(threads)
    return {"c": c, "model": model, "before": before, "eager": str(out / "eager.trace.json.gz"),
            "compiled": str(out / "compiled.trace.json.gz")}


def test_returns_a_comparison_by_module(run: dict) -> None:
    c: Comparison = run["c"]
    assert isinstance(c, Comparison) and c.by == "module"
    assert c.a.label == "eager" and c.b.label == "compiled"
    assert c.a.has_module_info and c.b.has_module_info
    assert c.a.steps == c.b.steps == STEPS


def test_leaf_module_rows_match_between_eager_and_compiled(run: dict) -> None:
    c: Comparison = run["c"]
    model: nn.Module = run["model"]
    leaves = {n for n, m in model.named_modules() if not list(m.children())}
    # 2 blocks x (ln1, qkv, proj, ln2, fc1, gelu, fc2) + ln_f = 15 leaf modules, all doing work
    assert len(leaves) == 15
    fwd = [r for r in c.rows if r.phase == "forward"]
    eager_leaves = {r.key for r in fwd if r.a_us > 0 and r.key in leaves}
    compiled_leaves = {r.key for r in fwd if r.b_us > 0 and r.key in leaves}
    assert eager_leaves == leaves
    assert compiled_leaves == leaves
    # every module row names a real module (or one of the documented special rows)
    names = set(dict(model.named_modules()))
    assert {r.key for r in c.rows} <= names | _SPECIAL
    # a Linear is one aten::linear eager and one addmm compiled, per call
    for n, m in model.named_modules():
        if isinstance(m, nn.Linear):
            r = c.row(n)
            assert (r.a_count, r.b_count) == (1, 1), n
            assert r.flops == 2 * 2 * 16 * m.in_features * m.out_features  # batch 2 x seq 16 rows


def test_speedup_is_eager_time_over_compiled_time_of_the_row(run: dict) -> None:
    c: Comparison = run["c"]
    d = c.to_dict()
    checked = 0
    for r, rd in zip(c.rows, d["rows"]):
        if r.a_us > 0 and r.b_us > 0:
            assert r.speedup == r.a_us / r.b_us
            assert rd["speedup"] == rd["a_us"] / rd["b_us"]
            checked += 1
        else:
            assert r.speedup is None and rd["speedup"] is None
    assert checked >= 15


def test_totals_agree_with_the_measured_step_times(run: dict) -> None:
    c: Comparison = run["c"]
    for side, path in ((c.a, run["eager"]), (c.b, run["compiled"])):
        steps = [e["dur"] for e in _events(path) if re.match(r"^ProfilerStep#\d+$", e["name"])]
        assert len(steps) == STEPS
        assert side.step_us == pytest.approx(sum(steps) / STEPS)
        assert 0 <= side.unattributed_us < side.step_us
    assert sum(r.a_us for r in c.rows) == pytest.approx(c.a.attributed_us)
    assert sum(r.b_us for r in c.rows) == pytest.approx(c.b.attributed_us)


def test_fusion_map_names_real_eager_ops_and_real_kernels(run: dict) -> None:
    c: Comparison = run["c"]
    eager_names = {e["name"] for e in _events(run["eager"])}
    compiled_names = {e["name"] for e in _events(run["compiled"])}
    entries = [e for r in c.rows for e in r.fusion]
    fused = [e for e in entries if " → " in e]
    assert fused, entries
    for e in fused:
        ops, rest = e.split(" → ")
        kernel = rest.split(" (")[0]
        assert kernel in compiled_names, e
        for op in ops.split(", "):
            assert op in eager_names, f"{op!r} (from {e!r}) is not an op of the eager trace"
    # at least one kernel really fused several eager ops (layer norm with the residual add)
    assert any(", " in e.split(" → ")[0] for e in fused)


def test_model_parameters_grads_and_modes_are_unchanged(run: dict) -> None:
    model: nn.Module = run["model"]
    before = run["before"]
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), before["params"][n]), n
        assert id(p.grad) == before["grad_ids"][n], n
        assert torch.equal(p.grad, before["grads"][n]), n
    assert {n: m.training for n, m in model.named_modules()} == before["training"]
    assert not hasattr(model, "_orig_mod")


def test_outputs_render_and_json_is_strict(run: dict) -> None:
    c: Comparison = run["c"]
    text = c.to_text()
    assert "Forward" in text and "Backward" in text and "measured step time" in text
    assert "leaf-level" in text
    md = c.to_markdown()
    assert "| Module | eager | compiled | Speedup |" in md
    json.loads(json.dumps(c.to_dict(), allow_nan=False))


def test_diff_of_saved_traces_reproduces_the_comparison(run: dict) -> None:
    c: Comparison = run["c"]
    d = diff_files(run["eager"], run["compiled"], by="module")
    got = {(r.phase, r.key): (r.a_us, r.b_us, r.a_count, r.b_count) for r in d.rows}
    want = {(r.phase, r.key): (r.a_us, r.b_us, r.a_count, r.b_count) for r in c.rows}
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k]), k


def test_diff_of_a_trace_with_itself_is_all_equal(run: dict, capsys: pytest.CaptureFixture) -> None:
    for path, by in ((run["eager"], "module"), (run["compiled"], "kernel"), (run["compiled"], "op")):
        d = diff_files(path, path, by=by)
        for r in d.rows:
            assert r.delta_us == 0 and r.a_count == r.b_count
            assert r.speedup in (1.0, None)
            assert r.speedup == 1.0 or r.a_us == 0
    assert main(["diff", run["compiled"], run["compiled"], "--by", "kernel", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["by"] == "kernel" and all(r["delta_us"] == 0 for r in d["rows"])


def test_compare_cli_rejects_a_file_without_make_inputs(tmp_path, capsys: pytest.CaptureFixture) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch\ndef make_model():\n    return torch.nn.Linear(2, 2)\n")
    assert main(["compare", str(f)]) == 1
    err = capsys.readouterr().err
    assert "make_inputs()" in err and "Traceback" not in err


def test_compare_rejects_bad_arguments() -> None:
    import inductor_perf

    with pytest.raises(InductorPerfError, match="nn.Module"):
        inductor_perf.compare(lambda x: x, (torch.ones(1),))
    with pytest.raises(InductorPerfError, match="steps"):
        inductor_perf.compare(nn.Linear(2, 2), (torch.ones(1, 2),), steps=0)
    with pytest.raises(InductorPerfError, match="by='kernel'"):
        inductor_perf.compare(nn.Linear(2, 2), (torch.ones(1, 2),), by="kernel")


# --- optional: an independent op count from Holistic Trace Analysis --------------------------------
def test_eager_op_counts_agree_with_hta_trace_diff(run: dict, tmp_path) -> None:
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (optional extra; "
                                      "pip install HolisticTraceAnalysis)")
    # Without this HTA rounds sub-µs CPU events to 0 µs (see /work/shared/INTEROP.md).
    os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")
    from hta.trace_diff import DeviceType, TraceDiff

    dirs = []
    for name in ("eager", "compiled"):
        d = tmp_path / name
        d.mkdir()
        with gzip.open(run[name], "rt") as f:
            (d / f"{name}.pt.trace.json").write_text(f.read())
        dirs.append(str(d))
    # HTA counts every event of a name (nested ones too) in the first iteration (ProfilerStep#0);
    # its columns are named after the default labels "Control" and "Test".
    df = TraceDiff.compare_traces(dirs[0], dirs[1], device_type=DeviceType.CPU)
    if "name" in df.columns:
        df = df.set_index("name")
    c: Comparison = run["c"]
    model: nn.Module = run["model"]
    linear_rows = [c.row(n) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    ours_eager = sum(r.a_count for r in linear_rows)
    ours_compiled = sum(r.b_count for r in linear_rows)
    assert ours_eager == 8
    # eager: one aten::linear per Linear call; compiled: the linears became extern addmm calls
    assert df.loc["aten::linear", "Control_counts"] == ours_eager
    assert df.loc["aten::linear", "Test_counts"] == 0
    assert df.loc["aten::addmm", "Test_counts"] == ours_compiled
