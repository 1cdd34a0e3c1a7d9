"""``diff`` built on per-trace passes (:mod:`inductor_perf.comparison.sides`): each trace reduced to
aggregated units, read in windows, the second in a worker process. The Comparison must be the one the
whole-trace path (``engine="full"``, what diff always did) gives, within float rounding, on the GPU
and CPU fixtures and on ../shared/traces (skipped when absent); bad input gives the same one-line
errors; a worker that dies leaves the work to the parent.

The windows are made tiny (4 KB) so that every trace spans many of them, as a large one does.
Expected numbers in the hand-made tests are hand arithmetic on the durations written there.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from pathlib import Path

import pytest
from json_close import differences

from inductor_perf.summary.stream import engine as summary_stream
from inductor_perf.cli import main
from inductor_perf.comparison import sides
from inductor_perf.comparison.rows import compare_units
from inductor_perf.comparison.runner import diff_files, diff_traces
from inductor_perf.comparison.units import trace_units
from inductor_perf.comparison.sides import aggregate_units
from inductor_perf.errors import TraceFormatError

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES", ROOT / ".." / "shared" / "traces"))
GPU = sorted(str(p) for p in (FIXTURES / "gpu").glob("*.trace.json.gz"))
CPU = [str(FIXTURES / "cpu_eager_shapes.pt.trace.json.gz"), str(FIXTURES / "mlp_cpu_compiled.trace.json"),
       str(FIXTURES / "upstream_example.json")]
CAPTURES = [str(FIXTURES / "captures" / f"run{n}.trace.json.gz") for n in (1, 2)]
SHARED_PAIRS = [("a100_ranks8_r3_control.json.gz", "v100_ranks2_r1_test.json.gz"),
                ("two_ranks/sampled_rank-0.json.gz", "two_ranks/sampled_rank-1.json.gz"),
                ("mi250_minitoy_train_rocm6.json.gz", "cpu_only_rank34.json.gz"),
                ("cpu_only_rank34.json.gz", "two_ranks/sampled_rank-0.json.gz")]
BY = ("module", "line", "op", "kernel")


@pytest.fixture(autouse=True)
def small_windows(monkeypatch):
    monkeypatch.setattr(summary_stream, "WINDOW_BYTES", 4096)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (4096,))


def _assert_same(a: str, b: str) -> None:
    """Each file read once per engine (the whole-trace units, and the streamed aggregated ones), then
    joined by every grouping: what diff_files(engine="full" / "stream") does, without reading the files
    eight times."""
    from inductor_perf.traces import files as tf

    whole = [sides.costed_units(tf.load_trace(p)) for p in (a, b)]
    streamed = [sides.side_of_file(p, "stream") for p in (a, b)]
    assert [n for _, n in whole] == [n for _, n in streamed]  # the costs notes
    for by in BY:
        # compare_units gives eager units inferred source lines (by="line"): fresh copies each time
        full = compare_units(*copy.deepcopy([u for u, _ in whole]), by=by).to_dict()
        agg = compare_units(*copy.deepcopy([u for u, _ in streamed]), by=by).to_dict()
        diffs = differences(full, agg)
        assert not diffs, f"{Path(a).name} vs {Path(b).name} by {by}: {diffs[:5]}"
        assert full["rows"], "a comparison without rows checks nothing"


@pytest.mark.parametrize("a,b", list(zip(GPU, GPU[1:] + GPU[:1])))
def test_gpu_fixtures_same_comparison(a, b):
    _assert_same(a, b)


@pytest.mark.parametrize("a,b", [(CPU[0], CPU[1]), (CPU[1], CPU[2]), (CPU[2], CPU[0])])
def test_cpu_fixtures_same_comparison(a, b):
    _assert_same(a, b)


def test_our_captures_same_comparison():
    """Two env-var captures of ours: step marks that cut compiled calls, costed CPU kernels."""
    _assert_same(*CAPTURES)


def test_autograd_thread_and_launches_same_comparison(tmp_path):
    """The hand-made GPU step of test_diff_units: an autograd thread, kernels found by correlation, by
    External id (no launch recorded) and not at all, costs on the device events."""
    from test_diff_units import compiled_call_cut_by_step_marks, gpu_training_step

    a, b = tmp_path / "gpu_step.json", tmp_path / "cut_step.json"
    a.write_text(json.dumps(gpu_training_step()))
    b.write_text(json.dumps(compiled_call_cut_by_step_marks()))
    _assert_same(str(a), str(b))
    _assert_same(str(a), str(a))


@pytest.mark.parametrize("a,b", SHARED_PAIRS)
def test_shared_traces_same_comparison(a, b):
    pa, pb = TRACES / a, TRACES / b
    if not (pa.exists() and pb.exists()):
        pytest.skip(f"{TRACES} lacks {a} or {b} (the shared real traces are not checked in)")
    _assert_same(str(pa), str(pb))


def test_streamed_side_is_read_in_windows(monkeypatch):
    """The stream engine takes the fixtures (else the tests above compare the full path with itself)."""
    calls = []
    real = sides._stream
    monkeypatch.setattr(sides, "_stream", lambda p, *more: calls.append(p) or real(p, *more))
    for p in (GPU[0], CPU[1]):
        side, _ = sides.side_of_file(p, "stream")
        assert side.units
    assert len(calls) == 2


# --- hand-made traces ------------------------------------------------------------------------------
def ev(name: str, ts: float, dur: float, cat: str = "cpu_op", **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": dict(args)}


def _mm(ts: float, dur: float, seq: int) -> dict:
    return ev("aten::mm", ts, dur, **{"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"],
                                     "Sequence number": seq})


def uncosted_compiled() -> dict:
    """Two steps of a compiled forward whose graph marker holds an aten::mm (4x8 @ 8x16: 2*4*8*16 =
    1024 FLOPs) and a fused kernel, without any cost args: the diff costs the mm from its shapes."""
    evs = []
    for s, t0 in enumerate((0.0, 100.0)):
        evs += [ev(f"## inductor_perf step={s} ##", t0, 90),
                ev("## inductor_perf phase=forward ##", t0 + 1, 40),
                ev("Torch-Compiled Region: 0/0", t0 + 2, 30),
                ev("## inductor_perf graph=1 fwd ##", t0 + 3, 25),
                _mm(t0 + 4, 6 + s, 10 + s),
                ev("graph_0_cpp_fused_relu_0", t0 + 12, 2, module_path="act", eager_ops="aten::relu")]
    return {"traceEvents": evs}


def eager_steps() -> dict:
    """The same two steps run eagerly: mm (5 and 7 µs) and relu (3 µs) in module ranges."""
    evs = []
    for s, t0 in enumerate((0.0, 100.0)):
        evs += [ev(f"## inductor_perf step={s} ##", t0, 90),
                ev("## inductor_perf phase=forward ##", t0 + 1, 40),
                ev("## inductor_perf module=fc ##", t0 + 2, 10),
                _mm(t0 + 3, 5 + 2 * s, 20 + s),
                ev("## inductor_perf module=act ##", t0 + 14, 5),
                ev("aten::relu", t0 + 15, 3, **{"Sequence number": 30 + s})]
    return {"traceEvents": evs}


def test_costs_of_an_uncosted_compiled_trace_reach_its_kernel_rows(tmp_path):
    a, b = tmp_path / "eager.json", tmp_path / "compiled.json"
    a.write_text(json.dumps(eager_steps()))
    b.write_text(json.dumps(uncosted_compiled()))
    for engine in ("full", "stream"):
        c = diff_files(a, b, by="op", engine=engine)
        mm = c.row("aten::mm")
        assert mm is not None
        assert mm.flops == 1024  # per step: one 4x8 @ 8x16 mm
        assert mm.a_us == pytest.approx((5 + 7) / 2) and mm.b_us == pytest.approx((6 + 7) / 2)
        assert mm.a_count == 1 and mm.b_count == 1
        assert any("computed from recorded shapes" in n for n in c.notes)
    _assert_same(str(a), str(b))


def test_aggregated_units_by_hand():
    tu = trace_units(eager_steps())
    agg = aggregate_units(tu)
    # two steps of (mm, relu): 4 units, 2 groups
    assert len(tu.units) == 4 and len(agg.units) == 2
    mm, relu = agg.units
    assert (mm.name, mm.count, mm.dur, mm.ts) == ("aten::mm", 2, 12.0, 3.0)
    assert (relu.name, relu.count, relu.dur, relu.ts) == ("aten::relu", 2, 6.0, 15.0)
    assert agg.step_walls_us == [90.0, 90.0]
    c_units = compare_units(tu, tu, by="module").to_dict()
    c_agg = compare_units(agg, agg, by="module").to_dict()
    assert not differences(c_units, c_agg)


def test_aggregated_peak_is_flop_weighted():
    """Two kernels of one group: 1000 FLOPs at 10 % and 3000 FLOPs at 30 %: the row's peak is
    (1000 + 3000) / (1000/10 + 3000/30) = 20 %, whether the units are aggregated or not."""
    t = {"traceEvents": [
        ev("## inductor_perf step=0 ##", 0, 50),
        ev("## inductor_perf graph=1 fwd ##", 1, 40),
        ev("k", 2, 4, module_path="m", kernel_flop=1000, achieved_flops_pct=10.0, eager_ops="aten::mm"),
        ev("k", 10, 4, module_path="m", kernel_flop=3000, achieved_flops_pct=30.0, eager_ops="aten::mm"),
    ]}
    tu = trace_units(t)
    agg = aggregate_units(tu)
    assert len(agg.units) == 1 and agg.units[0].count == 2 and agg.units[0].flops == 4000
    for side in (tu, agg):
        row = compare_units(side, side, by="kernel").row("k")
        assert row.flops == 4000 and row.achieved_pct == pytest.approx(20.0) and row.b_count == 2


# --- two processes ---------------------------------------------------------------------------------
@pytest.fixture
def parallel(monkeypatch):
    monkeypatch.setattr(sides, "PARALLEL_MIN_BYTES", 0)


def test_worker_gives_the_same_comparison(parallel):
    a, b = GPU[0], GPU[1]
    serial = diff_files(a, b, by="op", engine="full").to_dict()
    assert not differences(serial, diff_files(a, b, by="op", engine="stream").to_dict())


def test_bad_second_trace_error_comes_back_from_the_worker(parallel, tmp_path):
    bad = tmp_path / "cut.json"
    text = gzip.decompress(Path(GPU[0]).read_bytes())
    bad.write_bytes(text[: len(text) // 2])
    with pytest.raises(TraceFormatError, match="truncated"):
        diff_files(GPU[0], bad, engine="stream")


def test_bad_first_trace_stops_the_worker(parallel, tmp_path, capsys):
    missing = tmp_path / "nope.json"
    assert main(["diff", str(missing), GPU[0]]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("inductor-perf: error:") and "nope.json" in err and "\n" not in err


def test_a_worker_that_dies_leaves_the_side_to_the_parent(parallel, monkeypatch):
    # print(path, engine, pipe) returns at once without answering: the pipe closes unanswered
    monkeypatch.setattr(sides, "_worker", print)
    a, b = GPU[0], GPU[1]
    got = diff_files(a, b, by="op", engine="stream").to_dict()
    assert not differences(diff_files(a, b, by="op", engine="full").to_dict(), got)


def test_cli_diff_engines_agree(tmp_path, capsys):
    a, b = GPU[0], GPU[1]
    outs = []
    for engine in ("full", "stream", "auto"):
        assert main(["diff", a, b, "--format", "json", "--engine", engine]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert not differences(outs[0], outs[1]) and not differences(outs[0], outs[2])


def test_diff_traces_of_dicts_is_unchanged():
    """The dict entry point still cuts whole traces (no aggregation): one unit per call."""
    c = diff_traces(eager_steps(), eager_steps(), by="op")
    assert c.row("aten::mm").a_count == 1 and c.row("aten::mm").a_us == pytest.approx(6.0)


def test_diff_never_imports_torch(tmp_path):
    """A diff reads JSON: torch (~1.3 s to import, in each of its two processes) stays out once the
    ops' signatures are cached (a signature seen for the first time may need torch's shape rules:
    warmed here first, in the session's cache directory)."""
    import subprocess
    import sys

    a, b = GPU[0], GPU[1]
    diff_files(a, b, by="op", engine="stream")
    code = ("import sys\n"
            "from inductor_perf.cli import main\n"
            f"assert main(['diff', {a!r}, {b!r}, '--engine', 'stream', '--format', 'json']) == 0\n"
            "print('torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"
    assert json.loads("\n".join(r.stdout.strip().splitlines()[:-1]))["rows"]


def test_number_out_of_range_side_falls_back(tmp_path):
    """A number orjson refuses (1e400) in an event's args: the streamed side gives up on the file, as when
    orjson reads the window, and the whole load cuts it: the same comparison as the full engine."""
    import subprocess
    import sys

    p = tmp_path / "gen.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_trace.py"), "3000", str(p)], check=True,
                   capture_output=True)
    text = p.read_text()
    at = text.index('"External id": ')
    p.write_text(text[:at] + '"x": 1e400, ' + text[at:])
    assert sides._streamed_side(str(p)) is None
    full = diff_files(str(p), GPU[0], by="op", engine="full").to_dict()
    assert not differences(full, diff_files(str(p), GPU[0], by="op", engine="stream").to_dict())


def test_units_read_without_kernels_make_the_same_rows(tmp_path):
    """diff reads the kernels only for --by kernel; the units' rows (their FLOPs from the device events
    they launched included) are the same either way, in both engines."""
    from test_diff_units import gpu_training_step

    a = tmp_path / "gpu_step.json"
    a.write_text(json.dumps(gpu_training_step()))
    for p in (str(a), GPU[0], CAPTURES[0]):
        for engine in ("full", "stream"):
            with_k = sides.side_of_file(p, engine, kernels=True)[0]
            without = sides.side_of_file(p, engine, kernels=False)[0]
            assert without.kernels == [] and not without.kernels_read
            for by in ("module", "op", "line"):
                full = compare_units(*copy.deepcopy([with_k, with_k]), by=by).to_dict()
                got = compare_units(*copy.deepcopy([without, without]), by=by).to_dict()
                assert not differences(full, got), (p, engine, by)
            with pytest.raises(ValueError, match="needs the kernels"):
                compare_units(without, without, by="kernel")


# --- the page: diff --html, compare --html -------------------------------------------------------------------
def _text_titles(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("Forward", "Backward", "Optimizer", "Other", "Totals"))]


def test_cli_diff_html_writes_the_page_of_b_with_the_text_tables(tmp_path, capsys):
    import html

    a, b = CAPTURES
    out = tmp_path / "page.html"
    assert main(["diff", a, b, "--by", "op", "--html", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.err
    page = out.read_text()
    titles = _text_titles(captured.out)
    assert titles and all(f"<h3>{html.escape(t, quote=True)}</h3>" in page for t in titles)
    assert "<h2>Comparison: run1.trace.json.gz vs run2.trace.json.gz, by op</h2>" in page
    assert page.index("<h2>run2.trace.json.gz</h2>") < page.index("<h2>Comparison:")  # B's own page


@pytest.mark.parametrize("which", [0, 1])
def test_cli_diff_html_never_over_an_input(tmp_path, capsys, which):
    sides_ = [tmp_path / "a.trace.json.gz", tmp_path / "b.trace.json.gz"]
    for p, src in zip(sides_, CAPTURES):
        p.write_bytes(Path(src).read_bytes())
    before = [p.read_bytes() for p in sides_]
    assert main(["diff", str(sides_[0]), str(sides_[1]), "--html", str(sides_[which])]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert str(sides_[which]) in err and "input" in err and "\n" not in err
    assert captured.out == ""  # refused before any work
    assert [p.read_bytes() for p in sides_] == before


def test_cli_compare_html_writes_the_compiled_run_page(tmp_path, capsys, monkeypatch):
    # the model run replaced by a diff of two captures; what is checked is the CLI's part: the compiled
    # trace kept in a temporary directory (none given) becomes the page, with the comparison on it
    import inductor_perf.comparison.runner as runner

    seen = {}

    def fake_compare_file(path, *, trace_dir, **kw):
        seen["trace_dir"] = trace_dir
        Path(trace_dir, "compiled.trace.json.gz").write_bytes(Path(CAPTURES[1]).read_bytes())
        return diff_files(CAPTURES[0], CAPTURES[1], by=kw.get("by", "module"))

    monkeypatch.setattr(runner, "compare_file", fake_compare_file)
    model = tmp_path / "model.py"
    model.write_text("")
    out = tmp_path / "compare.html"
    assert main(["compare", str(model), "--html", str(out)]) == 0
    captured = capsys.readouterr()
    page = out.read_text()
    assert _text_titles(captured.out) and "<h2>Comparison:" in page and "<h2>compiled.trace.json.gz</h2>" in page
    assert not os.path.exists(seen["trace_dir"])  # the temporary directory is gone
    assert main(["compare", str(model), "--html", str(model)]) == 1  # never over the model file
    assert model.read_text() == "" and "input" in capsys.readouterr().err
