"""Trace loading / saving: formats, strict output, atomic writes, and one-line errors."""

from __future__ import annotations

import gc
import gzip
import json
import logging
import math
import os

import pytest

from inductor_perf.traces import files as tf
from inductor_perf.model import events as evs
from inductor_perf.errors import TraceFormatError

EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1.5, "dur": 2, "pid": 1, "tid": 1,
           "args": {"External id": 7}},
          {"ph": "i", "name": "marker", "ts": 3}]


def strict_loads(data: bytes) -> dict:
    def bad(name: str) -> None:
        raise AssertionError(f"non-strict JSON constant {name}")
    return json.loads(data, parse_constant=bad)


@pytest.fixture(params=["orjson", "stdlib"])
def backend(request, monkeypatch):
    if request.param == "stdlib":
        monkeypatch.setattr(tf, "orjson_or_none", lambda: None)
    elif tf.orjson_or_none() is None:
        pytest.skip("orjson not installed (optional extra 'fast')")
    return request.param


def test_roundtrip_json_and_gz(tmp_path, backend):
    trace = {"schemaVersion": 1, "traceEvents": EVENTS, "big": 2**70, "text": "µs ✓"}
    for name in ("t.json", "t.json.gz"):
        p = tmp_path / name
        tf.save_trace(trace, p, inputs=())
        raw = p.read_bytes()
        assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")
        assert tf.load_trace(p) == trace
        assert strict_loads(gzip.decompress(raw) if name.endswith(".gz") else raw) == trace


def test_gzip_detected_by_content_not_name(tmp_path):
    p = tmp_path / "misnamed.json"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": EVENTS}).encode()))
    loaded = tf.read_trace(p)
    assert loaded.gzipped and loaded.trace["traceEvents"] == EVENTS


def test_nan_infinity_accepted_counted_and_written_as_null(tmp_path, backend):
    p = tmp_path / "nan.json"
    p.write_text('{"traceEvents": [{"ph": "X", "ts": NaN, "dur": Infinity, "args": {"x": -Infinity}}]}')
    loaded = tf.read_trace(p)
    assert loaded.non_finite == 3
    ev = loaded.trace["traceEvents"][0]
    assert ev["ts"] is None and ev["dur"] is None and ev["args"]["x"] is None
    out = tmp_path / "out.json"
    tf.save_trace(loaded.trace, out, inputs=[p])
    assert strict_loads(out.read_bytes())["traceEvents"][0]["dur"] is None


def test_in_memory_non_finite_written_as_null(tmp_path, backend):
    out = tmp_path / "o.json"
    tf.save_trace({"traceEvents": [{"dur": math.nan, "args": {"v": [math.inf, 1.0]}}]}, out, inputs=())
    data = strict_loads(out.read_bytes())
    assert data["traceEvents"][0] == {"dur": None, "args": {"v": [None, 1.0]}}


@pytest.mark.parametrize("content, fragment", [
    (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated JSON"),
    (b"this is not json", "not valid JSON"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    (b"[1, 2, 3]", "got a JSON array"),
    (b'"a string"', "got a JSON string"),
    (b'{"events": []}', "no 'traceEvents' key"),
    (b'{"traceEvents": {"a": 1}}', "'traceEvents' must be a list"),
    (b"", "truncated JSON"),
])
def test_bad_files_raise_one_line(tmp_path, backend, content, fragment):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError) as ei:
        tf.load_trace(p)
    msg = str(ei.value)
    assert fragment in msg and "\n" not in msg and str(p) in msg


def test_truncated_gzip(tmp_path):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": EVENTS * 50}).encode())[:-30])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
        tf.load_trace(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceFormatError, match="no such file"):
        tf.load_trace(tmp_path / "nope.json")
    with pytest.raises(TraceFormatError, match="is a directory"):
        tf.load_trace(tmp_path)


def test_empty_trace_is_valid_but_warns(tmp_path, caplog):
    p = tmp_path / "e.json"
    p.write_text('{"traceEvents": []}')
    with caplog.at_level(logging.WARNING, logger="inductor_perf.traces.files"):
        assert tf.load_trace(p) == {"traceEvents": []}
    assert "no events" in caplog.text


@pytest.mark.parametrize("was_enabled", [True, False])
def test_gc_state_restored(tmp_path, was_enabled):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": EVENTS}))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    (gc.enable if was_enabled else gc.disable)()
    try:
        tf.load_trace(p)
        assert gc.isenabled() is was_enabled
        with pytest.raises(TraceFormatError):
            tf.load_trace(bad)
        assert gc.isenabled() is was_enabled
    finally:
        gc.enable()


def test_save_is_atomic_on_failure(tmp_path, monkeypatch):
    out = tmp_path / "o.json"
    out.write_text("previous content")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(tf, "_write_streaming", boom)
    with pytest.raises(OSError, match="disk full"):
        tf.save_trace({"traceEvents": EVENTS}, out, inputs=())
    assert out.read_text() == "previous content"
    assert os.listdir(tmp_path) == ["o.json"]  # no temp file left behind


def test_save_unserializable_value_is_trace_format_error(tmp_path):
    out = tmp_path / "o.json"
    with pytest.raises(TraceFormatError, match="not JSON"):
        tf.save_trace({"traceEvents": [{"args": {"x": object()}}]}, out, inputs=())
    assert not out.exists() and os.listdir(tmp_path) == []


def test_save_many_events_in_chunks(tmp_path, monkeypatch, backend):
    monkeypatch.setattr(tf, "_WRITE_CHUNK", 7)
    events = [{"ph": "X", "ts": i, "dur": 1, "name": f"e{i}"} for i in range(50)]
    seen = []
    tf.save_trace({"a": 1, "traceEvents": events, "z": [1]}, tmp_path / "o.json", inputs=(), progress=seen.append)
    data = strict_loads((tmp_path / "o.json").read_bytes())
    assert data["traceEvents"] == events and list(data) == ["a", "traceEvents", "z"]
    assert seen[-1] == 1.0 and len(seen) == 8


def test_event_views():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 2},
        {"ph": "X", "cat": "Kernel", "ts": 3, "dur": "x"},
        {"ph": "X", "cat": "Operator", "ts": "bad", "dur": 1},
        {"ph": "B", "cat": "cpu_op", "ts": 1},
        "not an event",
        {"ph": "X", "cat": "operator", "ts": 5.5, "dur": -1},
    ]}
    # events 1, 2 and 5 have times that are not finite non-negative numbers: skipped, and counted
    assert [(i, ts, d) for i, _, ts, d in evs.cpu_ops(trace)] == [(0, 1.0, 2.0)]
    assert list(evs.device_kernels(trace)) == []
    skipped: dict = {}
    assert [i for i, *_ in evs.complete_events(trace, skipped=skipped)] == [0]
    assert skipped == {evs.BAD_TIME: 3}
    assert evs.number(True) is None and evs.number(math.nan) is None and evs.number(10**400) is None


def test_read_trace_bytes_maps_plain_files_only(tmp_path):
    pytest.importorskip("orjson")
    text = b'{"traceEvents": [{"ph": "X", "name": "a"}]}'
    plain = tmp_path / "t.json"
    plain.write_bytes(text)
    mapped, gz = tf.read_trace_bytes(plain, map_file=True)
    try:
        assert not isinstance(mapped, bytes) and not gz  # a map, not a copy
        assert mapped[:] == text and mapped.find(b'"name"') == text.find(b'"name"')
        assert tf.events_array_start(mapped) == text.index(b"{", 1)
    finally:
        mapped.close()
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(text))
    assert tf.read_trace_bytes(packed, map_file=True) == (text, True)
    empty = tmp_path / "e.json"
    empty.write_bytes(b"")
    assert tf.read_trace_bytes(empty, map_file=True) == (b"", False)  # no map of nothing: read
