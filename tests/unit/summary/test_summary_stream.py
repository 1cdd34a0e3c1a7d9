"""The streaming summary (``summary --engine stream``) against the full load it replaces for large
traces: the same Summary, within float rounding, on every GPU fixture, on ../shared/traces and on
generated Kineto-layout traces (plain, compact and gzipped); bad input gives the full load's one-line
errors; traces it does not take (CPU traces, NaN, no orjson) fall back to the full load; without
msgspec the windows are read by orjson alone, to the same summary.

The windows are made tiny here (a few KB) so that every trace spans many of them, as a large one does.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_inputs import FIXTURES, GPU_FIXTURES, ROOT, SHARED, TRACES
from json_close import differences

from inductor_perf.summary.stream import engine as summary_stream
from inductor_perf.traces import windows as summary_windows
from inductor_perf.traces import files as tf
from inductor_perf.errors import TraceFormatError
from inductor_perf.summary.files import summarize_file, trace_label


@pytest.fixture(autouse=True)
def small_windows(monkeypatch):
    monkeypatch.setattr(summary_windows, "WINDOW_BYTES", 4096)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (4096,))


def _both(path: Path) -> tuple[dict, dict, object]:
    full = summarize_file(str(path), engine="full").summary.to_dict()
    streamed = summary_stream.summarize_file_stream(str(path), label_of=lambda h: trace_label(h, path.name))
    assert streamed is not None, f"{path.name}: the streaming engine did not take this GPU trace"
    return full, streamed[0].to_dict(), streamed


def _assert_same(path: Path) -> None:
    full, streamed, _ = _both(path)
    diffs = differences(full, streamed)
    assert not diffs, f"{path.name}: streaming differs from the full load: {diffs[:5]}"


@pytest.mark.parametrize("name", SHARED)
def test_shared_traces_same_summary(name):
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{p} absent (the shared real traces are not checked in)")
    _assert_same(p)


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_gpu_fixtures_same_summary(name):
    _assert_same(FIXTURES / "gpu" / name)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A Kineto-layout trace of ~3,000 events from the bench generator, also compact and gzipped."""
    d = tmp_path_factory.mktemp("gen")
    out = {}
    for layout in ("kineto", "compact"):
        p = d / f"{layout}.json"
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_trace.py"), "3000", str(p), "--layout", layout],
                       check=True, capture_output=True)
        out[layout] = p
    gz = d / "kineto.json.gz"
    gz.write_bytes(gzip.compress(out["kineto"].read_bytes()))
    out["gz"] = gz
    return out


@pytest.mark.parametrize("which", ["kineto", "compact", "gz"])
def test_generated_same_summary(generated, which):
    full, streamed, _ = _both(generated[which])
    assert not differences(full, streamed)
    # The costs came from recorded shapes, in both: every kernel of this trace has them.
    assert streamed["costed_time_pct"] == 100.0 and streamed["costs_note"]


def test_gz_leaves_no_temporary_file(generated, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert summary_stream.summarize_file_stream(str(generated["gz"])) is not None
    assert list(tmp_path.iterdir()) == []


def test_truncated_gz_one_line_error(generated, tmp_path):
    cut = tmp_path / "cut.json.gz"
    data = generated["gz"].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip") as e:
        summary_stream.summarize_file_stream(str(cut))
    assert "\n" not in str(e.value)
    with pytest.raises(TraceFormatError):  # the full load says the same
        tf.load_trace(str(cut))


def test_cut_mid_event_one_line_error(generated, tmp_path):
    cut = tmp_path / "cut.json"
    text = generated["kineto"].read_bytes()
    cut.write_bytes(text[: len(text) * 2 // 3])
    with pytest.raises(TraceFormatError, match="truncated JSON") as e:
        summary_stream.summarize_file_stream(str(cut))
    assert "\n" not in str(e.value)


def test_cli_truncated_exit_1(generated, tmp_path):
    cut = tmp_path / "cut.json"
    text = generated["kineto"].read_bytes()
    cut.write_bytes(text[: len(text) // 2])
    r = subprocess.run([sys.executable, "-m", "inductor_perf", "summary", "--engine", "stream", str(cut)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1
    assert "truncated" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert list(tmp_path.iterdir()) == [cut]  # nothing written beside it


def _events_file(tmp_path: Path, events: list, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                             "traceEvents": events}, indent=1))
    return p


def _kernel(ts: float, dur: float, name: str = "k", corr: int = 1) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": 7}}


def test_separator_inside_a_string(tmp_path):
    """A name holding "}, {" must not shift events: a window cut there fails to parse and the file
    is loaded whole; a window that holds it whole parses it as it is. Either way, the same summary."""
    events = [_kernel(10.0 * i, 5.0, name="weird}, {name" if i % 3 else "k", corr=i) for i in range(300)]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0 * i - 2,
                "dur": 1.0, "args": {"correlation": i}} for i in range(300)]
    p = _events_file(tmp_path, events)
    full = summarize_file(str(p), engine="full").summary.to_dict()
    assert not differences(full, summarize_file(str(p), engine="stream").summary.to_dict())
    assert full["kernel_count"] == 300


def test_nan_falls_back_to_full_load(tmp_path):
    events = [_kernel(10.0 * i, 5.0, corr=i) for i in range(200)]
    p = _events_file(tmp_path, events)
    p.write_text(p.read_text().replace('"stream": 7', '"stream": NaN', 1))
    assert "NaN" in p.read_text()
    assert summary_stream.summarize_file_stream(str(p)) is None
    s = summarize_file(str(p), engine="stream").summary  # falls back: the full load reads NaN as null
    assert s.kernel_count == 200


def test_cpu_trace_falls_back_to_full_load():
    p = FIXTURES / "cpu_eager_shapes.pt.trace.json.gz"
    assert summary_stream.summarize_file_stream(str(p)) is None
    a = summarize_file(str(p), engine="stream").summary.to_dict()
    b = summarize_file(str(p), engine="full").summary.to_dict()
    assert a == b and a["kernel_count"] > 0


def test_without_orjson_same_summary(generated, monkeypatch):
    """The pure-Python fallback (no orjson wheel): the full load with the json module, same numbers."""
    with_orjson = summarize_file(str(generated["kineto"]), engine="auto").summary.to_dict()
    monkeypatch.setattr(tf, "orjson_or_none", lambda: None)
    monkeypatch.setitem(sys.modules, "orjson", None)  # `import orjson` raises ImportError
    assert summary_stream.summarize_file_stream(str(generated["kineto"])) is None
    without = summarize_file(str(generated["kineto"]), engine="stream").summary.to_dict()
    assert not differences(with_orjson, without)


@pytest.mark.parametrize("which", ["kineto", "gz"])
def test_without_msgspec_same_summary(generated, monkeypatch, which):
    """Without msgspec (no wheel for the platform) the windows are orjson's dicts: the very same summary."""
    with_msgspec = summary_stream.summarize_file_stream(str(generated[which]))[0].to_dict()
    monkeypatch.setitem(sys.modules, "msgspec", None)  # `import msgspec` raises ImportError
    summary_windows.envelope_decoder.cache_clear()
    try:
        assert summary_windows.decode_envelopes(b"[]") is None
        without = summary_stream.summarize_file_stream(str(generated[which]))[0].to_dict()
    finally:
        summary_windows.envelope_decoder.cache_clear()
    assert without == with_msgspec


def test_windows_give_back_pages(generated):
    """Each window's pages are released once parsed: the map never holds the whole file."""
    with summary_stream.mapped_text(str(generated["kineto"])) as raw:
        w = summary_stream.Windows(raw, "x", 4096)
        n = sum(len(batch) for batch in w)
        assert n == len(json.loads(generated["kineto"].read_bytes())["traceEvents"])
        assert len(w.bounds) > 10 and w.header is not None and w.header["traceEvents"] == []
        # load() finds any event again by its index
        for i in (0, 1, n // 2, n - 1):
            ev = w.load(i)
            assert isinstance(ev, dict) and "ph" in ev


def test_gz_without_temporary_space_falls_back(generated, monkeypatch):
    """No room for the decompressed text: the full load (in memory) summarizes it instead."""
    import tempfile

    def no_space(*a, **k):
        raise OSError(28, "No space left on device")

    want = summarize_file(str(generated["gz"]), engine="full").summary.to_dict()
    monkeypatch.setattr(tempfile, "mkstemp", no_space)
    assert summary_stream.summarize_file_stream(str(generated["gz"])) is None
    assert not differences(want, summarize_file(str(generated["gz"]), engine="stream").summary.to_dict())


@pytest.mark.parametrize("where", ["args", "flow"])
def test_number_out_of_range_falls_back_as_with_orjson(generated, tmp_path, where):
    """A number past a double's range (1e400) is not strict JSON to orjson: a window holding it is not
    streamed, whether msgspec (which skips what it does not read) or orjson reads the window, and the
    full load summarizes the trace."""
    text = generated["kineto"].read_text()
    if where == "args":  # a complete event's args, which the pass decodes
        at = text.index('"External id": ')
        text = text[:at] + '"x": 1e400, ' + text[at:]
    else:  # a flow's id, which no window reader decodes: read back only when a kernel needs flows
        at = text.index('"ph": "f"')
        text = text[:at] + '"big": 1e400, ' + text[at:]
    p = tmp_path / f"big_{where}.json"
    p.write_text(text)
    got = summary_stream.summarize_file_stream(str(p))
    if where == "args":
        assert got is None, "the full load takes it, as when orjson reads the window"
    full = summarize_file(str(p), engine="full").summary.to_dict()
    assert not differences(full, summarize_file(str(p), engine="stream").summary.to_dict())


def test_recorded_device_window_and_placements_same_in_both_engines(tmp_path):
    """The fields the one-truth rules added: a device row recorded by the capture (here an A100 row on
    an H100 trace, which the header carries after the events), the window's basis, each row's
    placement and the FLOPs' unknown reason, the same in both engines."""
    from inductor_perf.devices.props import RECORD_KEY, device_record
    from inductor_perf.devices.table import lookup

    trace = tf.load_trace(str(FIXTURES / "gpu" / "gpt_bf16.trace.json.gz"))
    a100 = lookup("NVIDIA A100-SXM4-40GB")
    trace[RECORD_KEY] = device_record(a100)
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(trace))
    full, streamed, _ = _both(path)
    assert not differences(full, streamed)
    assert full["peak"]["device"] == streamed["peak"]["device"] == a100.name
    assert full["window_basis"] == streamed["window_basis"] == "kernels"
    placed = [r["placement"] for r in streamed["top_kernels"] if r["placement"]]
    assert placed and placed == [r["placement"] for r in full["top_kernels"] if r["placement"]]
    assert {p["memory_gbps"] for p in placed if p["level"] == "HBM"} == {a100.mem_bandwidth_gbs}


def test_both_engines_hand_assemble_one_summary_parts(generated, monkeypatch):
    """summary.core.assemble takes one explicit value, a SummaryParts, which both engines build: the
    same parts of the same trace, field by field (coverage within float rounding: the streaming
    engine sums the kernels in another order)."""
    from inductor_perf.summary import core

    got = []
    real = core.assemble
    monkeypatch.setattr(core, "assemble", lambda parts: got.append(parts) or real(parts))
    _both(generated["kineto"])
    full, streamed = got
    assert type(full) is type(streamed) is core.SummaryParts
    for field in ("counts", "graph_launches", "distributed", "dtype", "device", "top", "label", "device_note",
                  "costs_note"):
        assert getattr(full, field) == getattr(streamed, field), field
    assert full.coverage.uncosted == streamed.coverage.uncosted
    assert full.coverage.costed_pct == pytest.approx(streamed.coverage.costed_pct)
    assert len(full.kernels.kernels) == len(streamed.kernels.kernels) > 0
    assert full.window.busy == pytest.approx(streamed.window.busy)
    # the streaming engine makes its idle tables and idle split by stream before assemble (a small
    # file: no helper), so that each kernel's launching thread and launch time go before the tables
    # that follow; the same rows as assemble makes of the full engine's parts
    assert full.idle is None and full.idle_by_stream is None
    tk = full.kernels
    assert streamed.idle == core.idle_tables(tk, full.window, full.launcher, full.top)
    assert streamed.idle_by_stream == core.stream_idle(tk.kernels, core.launch_times(tk.host_events, tk.kernels),
                                                       tk.definition)[:full.top] != []


def test_mfu_per_step_same_in_both_engines(tmp_path):
    """MFU / HFU of the window and of each step, the same in both engines, on a GPU trace given two
    ``ProfilerStep#N`` ranges that split its kernels (the fixture has none of its own); and known:
    the kernels carry matmul FLOPs and the device row a peak."""
    trace = tf.load_trace(str(FIXTURES / "gpu" / "gpt_bf16.trace.json.gz"))
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    lo, hi = min(e["ts"] for e in ops), max(e["ts"] + e["dur"] for e in ops)
    mid = (lo + hi) / 2
    host = ops[0]
    for i, (a, b) in enumerate(((lo, mid), (mid, hi + 1e6))):
        trace["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": a,
                                     "dur": b - a, "pid": host["pid"], "tid": host["tid"], "args": {}})
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(trace))
    full, streamed, _ = _both(path)
    assert not differences(full, streamed)
    keys = ("mfu_pct", "hfu_pct", "model_flop_per_step", "hardware_flop_per_step", "mfu_note")
    assert [full[k] for k in keys] == [streamed[k] for k in keys]
    assert full["mfu_pct"] is not None and full["model_flop_per_step"] is not None
    assert [s["mfu_pct"] for s in full["steps"]] == [s["mfu_pct"] for s in streamed["steps"]]
    assert len(full["steps"]) == 2 and all(s["mfu_pct"] is not None for s in full["steps"])
