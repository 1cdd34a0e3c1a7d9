"""One rule for a trace event's ts/dur (``model.events.event_time``) in every command: an event whose times
are not finite non-negative numbers within the bounds (a numeric string included) is skipped and
counted, identically by summary (full and stream), augment (full and stream), diff (full and stream)
and report, and the count shows as the same note. Skipping it changes no other figure."""

from __future__ import annotations

import gzip
import json
import math
import os

import pytest

from inductor_perf import cli
from inductor_perf.model import events as evs

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
DAY_US = 86_400 * 10**6


# --- the rule ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ts, dur, want", [
    (1.5, 2.0, (1.5, 2.0)),
    (5, 2, (5.0, 2.0)),                          # ints (older Kineto) read as floats
    (0, 0, (0.0, 0.0)),                          # a zero duration is a time (the summary skips it apart)
    (1_700_000_000_000_000.0, 1.0, (1.7e15, 1.0)),  # µs since 1970, in 2023
    (7.3e15, 7 * DAY_US, (7.3e15, 7.0 * DAY_US)),   # the bounds themselves
    (7.3e15 + 8, 1.0, None),                     # past the year ~2200
    (1.7e18, 1.0, None),                         # nanoseconds, not µs
    (1.0, 7 * DAY_US + 1, None),                 # longer than 7 days
    (1.0, 1e300, None),
    (10**400, 1.0, None),                        # an int too large for a float
    (-1.0, 1.0, None), (1.0, -1.0, None),
    (math.nan, 1.0, None), (1.0, math.inf, None),
    ("10", 1.0, None), (1.0, "10", None),        # Kineto writes numbers: a string is not one
    (True, 1.0, None), (1.0, None, None), (None, 1.0, None), ([1], 1.0, None),
])
def test_event_time(ts, dur, want):
    assert evs.event_time(ts, dur) == want


def test_inline_form_accepts_only_what_the_reference_returns_unchanged():
    values = [0.0, -0.0, 1.0, 1.5, 7.3e15, 7.3e15 + 8, 7 * DAY_US * 1.0, 7 * DAY_US + 1.0, 1e300, -1.0,
              math.nan, math.inf, -math.inf, 5, 0, "1", None, True]
    taken = 0
    for ts in values:
        for dur in values:
            if evs.plain_time(ts, dur):
                taken += 1
                got = evs.event_time(ts, dur)
                assert got == (ts, dur) and type(got[0]) is float, (ts, dur)
    # floats in [0, bound]: as a ts 0.0, -0.0, 1.0, 1.5, 7.3e15, 7 days and 7 days + 1 (7 values); as a
    # dur the first four and 7 days (5 values)
    assert taken == 7 * 5


# --- every command ------------------------------------------------------------------------------------
ABSURD = [
    {"ph": "X", "cat": "kernel", "name": "k_dur_huge", "pid": 0, "tid": 7, "ts": 198093513700.0, "dur": 1e300},
    {"ph": "X", "cat": "kernel", "name": "k_ts_huge", "pid": 0, "tid": 7, "ts": 1e300, "dur": 2.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 198093513700.0, "dur": -5.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": -1.0, "dur": 3.0},
    {"ph": "X", "cat": "kernel", "name": "k_dur_str", "pid": 0, "tid": 7, "ts": 198093513800.0, "dur": "10"},
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": "5", "dur": 3.0},
    {"ph": "X", "cat": "kernel", "name": "k_dur_null", "pid": 0, "tid": 7, "ts": 198093513900.0, "dur": None},
    {"ph": "X", "cat": "user_annotation", "name": "no_dur", "pid": 1, "tid": 1, "ts": 198093513900.0},
    {"ph": "X", "cat": "kernel", "name": "k_ts_ns", "pid": 0, "tid": 7, "ts": 10**16, "dur": 1.0},
    {"ph": "X", "cat": "Trace", "name": "span", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e20},
]
N_ABSURD = 10  # each event above breaks the rule once
NOTE = f"{N_ABSURD} events skipped: ts/dur not a finite non-negative number within bounds"


@pytest.fixture
def traces(tmp_path):
    """(the clean trace, the same with the absurd events appended) as files."""
    with open(os.path.join(FIXTURES, "upstream_example.json")) as f:
        trace = json.load(f)
    clean, dirty = tmp_path / "clean.json", tmp_path / "dirty.json"
    clean.write_text(json.dumps(trace, indent=1))
    trace["traceEvents"] = trace["traceEvents"] + ABSURD  # after the others: their indices stay
    dirty.write_text(json.dumps(trace, indent=1))
    return clean, dirty


def _two_processes(monkeypatch, engine: str) -> str:
    """``engine``, with "stream2" meaning "stream" shared with a forked worker, whose part (the later
    events) holds the absurd ones: the counts come back from it."""
    if engine != "stream2":
        return engine
    if not hasattr(os, "fork"):
        pytest.skip("two processes need os.fork")
    from inductor_perf.summary.stream import fork as summary_fork, engine as summary_stream
    from inductor_perf.traces import windows as summary_windows
    from inductor_perf.augment.stream import engine as stream

    monkeypatch.setattr(summary_windows, "WINDOW_BYTES", 1024)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (1024,))
    monkeypatch.setattr(summary_fork, "LARGE_TRACE_BYTES", 0)
    monkeypatch.setattr(stream, "LARGE_TRACE_BYTES", 0)
    return "stream"


@pytest.mark.parametrize("engine", ["full", "stream", "stream2"])
def test_summary_skips_and_counts(traces, monkeypatch, engine):
    pytest.importorskip("orjson")
    from inductor_perf.report.text import format_summary
    from inductor_perf.summary.files import summarize_file

    from inductor_perf.summary.stream import fork as summary_fork

    two, engine = engine == "stream2", _two_processes(monkeypatch, engine)
    started, start = [], summary_fork.start_worker

    def spy(*a, **k):
        w = start(*a, **k)
        started.extend([1] if w is not None else [])  # None: one process
        return w

    monkeypatch.setattr(summary_fork, "start_worker", spy)
    clean, dirty = traces
    a = summarize_file(str(clean), engine=engine).summary
    b = summarize_file(str(dirty), engine=engine).summary
    assert len(started) == (2 if two else 0)
    assert b.skipped.get(evs.BAD_TIME) == N_ABSURD and evs.BAD_TIME not in a.skipped
    assert any(n.startswith(NOTE) for n in b.notes)
    da, db = a.to_dict(), b.to_dict()
    for key in ("wall_us", "busy_us", "kernel_count", "kernel_time_us", "idle_us", "events_used"):
        assert db[key] == da[key], key  # the window is the clean trace's, not 300 digits long
    assert db["events_total"] == da["events_total"] + N_ABSURD
    text = format_summary(b, "text")
    assert NOTE in text and len(max(text.split(), key=len)) < 60


@pytest.mark.parametrize("engine", ["full", "stream", "stream2"])
def test_augment_skips_and_counts(traces, tmp_path, monkeypatch, engine):
    pytest.importorskip("orjson")
    from inductor_perf.augment.core import augment_file

    two, engine = engine == "stream2", _two_processes(monkeypatch, engine)
    clean, dirty = traces
    sa = augment_file(clean, tmp_path / "a.json", engine=engine)
    sb = augment_file(dirty, tmp_path / "b.json", engine=engine)
    assert (sb.worker_maxrss_kb is not None) == two  # the worker's count came back to be added
    assert sb.bad_time == N_ABSURD and sa.bad_time == 0
    assert NOTE in sb.summary_line() and "skipped" not in sa.summary_line()
    a = json.loads((tmp_path / "a.json").read_text())["traceEvents"]
    b = json.loads((tmp_path / "b.json").read_text())["traceEvents"]
    assert b[:len(a)] == a and b[len(a):] == ABSURD  # the others augmented as before; these untouched
    assert sb.events_augmented == sa.events_augmented > 0


def test_augment_cli_note(traces, tmp_path, capsys):
    _, dirty = traces
    assert cli.main(["augment", str(dirty), "-o", str(tmp_path / "o.json")]) == 0
    assert NOTE in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_diff_skips_and_counts(traces, capsys, engine):
    pytest.importorskip("orjson")
    clean, dirty = traces
    assert cli.main(["diff", str(dirty), str(clean), "--engine", engine, "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    noted = [n for n in notes if "skipped" in n]  # after the side's note on its costs, if any
    assert len(noted) == 1 and noted[0].startswith("dirty.json: ")
    assert noted[0].endswith(evs.bad_time_note(N_ABSURD))


def test_diff_engines_agree_on_the_rows(traces, capsys):
    pytest.importorskip("orjson")
    clean, dirty = traces
    got = []
    for engine in ("full", "stream"):
        assert cli.main(["diff", str(dirty), str(clean), "--engine", engine, "--format", "json"]) == 0
        got.append(json.loads(capsys.readouterr().out)["rows"])
    assert got[0] == got[1]


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_summary_cli_note_both_engines(traces, capsys, engine):
    pytest.importorskip("orjson")
    _, dirty = traces
    assert cli.main(["summary", str(dirty), "--engine", engine, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["skipped"] == {evs.BAD_TIME: N_ABSURD}
    assert any(n.startswith(NOTE) for n in d["notes"])


def test_report_shows_the_note(traces, tmp_path, capsys):
    _, dirty = traces
    out = tmp_path / "r.html"
    assert cli.main(["report", str(dirty), "-o", str(out)]) == 0
    assert NOTE in out.read_text()


def test_gzip_input_same_counts(traces, tmp_path):
    pytest.importorskip("orjson")
    from inductor_perf.augment.core import augment_file
    from inductor_perf.summary.files import summarize_file

    _, dirty = traces
    gz = tmp_path / "dirty.json.gz"
    gz.write_bytes(gzip.compress(dirty.read_bytes()))
    assert summarize_file(str(gz), engine="stream").summary.skipped[evs.BAD_TIME] == N_ABSURD
    assert augment_file(gz, tmp_path / "o.json.gz", engine="stream").bad_time == N_ABSURD
