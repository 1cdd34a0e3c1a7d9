"""capture.compile_log: Dynamo's records copied as they come (compat's readers stubbed with
hand-made records), kept past Dynamo's own 64, each compile placed in or out of the window."""

from __future__ import annotations

import pytest

from inductor_perf import compat
from inductor_perf.capture import compile_log
from inductor_perf.capture.compile_log import CompileLog, frame_of


def _frame(cid, start_us, reason=None):
    return {"compile_id": cid, "frame": "f", "file": "/u/model.py", "line": 3, "compile_s": 0.5,
            "recompile_reason": reason, "restart_reasons": [], "start_us": start_us, "fail_type": None,
            "fail_reason": None}


class _Dynamo:
    """What compat would read: a window of the last ``keep`` frame compiles and the break list."""

    def __init__(self, keep=2):
        self.frames, self.breaks, self.keep = [], [], keep

    def frame_compiles(self):
        return list(self.frames[-self.keep:])

    def graph_breaks(self, start=0):
        n = len(self.breaks)
        return n, list(self.breaks[start:] if start <= n else self.breaks)


@pytest.fixture
def dynamo(monkeypatch):
    d = _Dynamo()
    monkeypatch.setattr(compat, "dynamo_frame_compiles", d.frame_compiles)
    monkeypatch.setattr(compat, "dynamo_graph_breaks", d.graph_breaks)
    monkeypatch.setattr(compat, "dynamo_recompile_limit", lambda: 8)
    return d


def test_keeps_more_than_dynamo_holds_and_counts_breaks(dynamo) -> None:
    log = CompileLog()
    brk = {"reason": "Tensor.item()", "file": "/u/model.py", "line": 7, "frame": "forward"}
    for i in range(5):  # Dynamo holds 2; a note after each compile keeps all 5
        dynamo.frames.append(_frame(f"0/{i}", 1_000_000 * (i + 1), None if i == 0 else f"0/{i - 1}: size"))
        dynamo.breaks.append(dict(brk))
        log.note()
    record = log.record((2.2, 4.2, False))  # steps from 2.2 s to 4.2 s after the epoch; compiles start at 1..5 s
    assert [f["compile_id"] for f in record["frames"]] == ["0/0", "0/1", "0/2", "0/3", "0/4"]
    assert [f["in_window"] for f in record["frames"]] == [False, False, True, True, False]
    # by their ends (start + 0.5 s: 1.5 .. 5.5 s) in (2.2, 4.2]: the compiles starting at 2 and 3 s
    assert [f["in_window"] for f in log.record((2.2, 4.2, True))["frames"]] == [False, True, True, False, False]
    (b,) = record["graph_breaks"]
    assert b["count"] == 5 and b["source"] == "/u/model.py:7"
    assert record["recompile_limit"] == 8 and record["window_wall_s"] == [2.2, 4.2]


def test_reset_list_is_read_again(dynamo) -> None:
    log = CompileLog()
    dynamo.breaks = [{"reason": "a", "file": "x.py", "line": 1, "frame": "f"}] * 3
    log.note()
    dynamo.breaks = [{"reason": "b", "file": "x.py", "line": 2, "frame": "f"}]  # torch._dynamo.reset(), one new
    log.note()
    counts = {b["reason"]: b["count"] for b in log.record()["graph_breaks"]}
    assert counts == {"a": 3, "b": 1}


def test_without_the_internal_no_record(monkeypatch) -> None:
    monkeypatch.setattr(compat, "dynamo_frame_compiles", lambda: None)
    monkeypatch.setattr(compat, "dynamo_graph_breaks", lambda start=0: None)
    log = CompileLog()
    log.note()
    assert log.record() is None


def test_no_compile_of_ours_no_record(dynamo) -> None:
    dynamo.frames.append(_frame("0/0", 1))  # another backend's compile; ours never noted
    assert CompileLog().record() is None


def test_a_failing_reader_never_raises(monkeypatch) -> None:
    def boom():
        raise RuntimeError("moved")

    monkeypatch.setattr(compat, "dynamo_frame_compiles", boom)
    CompileLog().note()  # no exception


def test_frame_of() -> None:
    assert frame_of("[0/3]") == (0, 3)
    assert frame_of(None) is None
    assert compile_log.source_of(None, 3) is None
