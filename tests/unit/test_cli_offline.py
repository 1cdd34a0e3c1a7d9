"""`inductor-perf augment` on files: default output name, one-line messages, input never modified."""

from __future__ import annotations

import gzip
import io
import hashlib
import json
import os
import shutil

import pytest

from inductor_perf import cli
from inductor_perf.model import events as evs

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def sha(p) -> str:
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def run(argv, capsys):
    rc = cli.main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("inductor-perf:")]
    assert "Traceback" not in err
    return rc, lines


def copy_fixture(tmp_path, name):
    dst = tmp_path / name
    shutil.copy(os.path.join(FIXTURES, name), dst)
    return dst


def test_cpu_trace_gz_default_output(tmp_path, capsys):
    src = copy_fixture(tmp_path, "cpu_eager_shapes.pt.trace.json.gz")
    h = sha(src)
    rc, lines = run(["augment", str(src)], capsys)
    out = tmp_path / "cpu_eager_shapes.pt.trace.augmented.json.gz"
    assert rc == 0 and sha(src) == h
    assert len(lines) == 1 and str(out) in lines[0]
    assert "peaks of the machine that recorded a CPU trace are unknown" in lines[0]
    data = json.loads(gzip.decompress(out.read_bytes()), parse_constant=lambda c: 1 / 0)
    # The count the CLI prints is the number of events the output file carries a cost on.
    costed = sum(1 for e in data["traceEvents"] if evs.KERNEL_FLOP in (e.get("args") or {}))
    assert f"{costed} of {len(data['traceEvents'])} events augmented" in lines[0] and costed >= 8
    mm = [e for e in data["traceEvents"] if e["name"] == "aten::mm"][0]["args"]
    assert mm[evs.KERNEL_FLOP] == 201_326_592 and evs.ACHIEVED_FLOPS_PCT not in mm


def test_explicit_output(tmp_path, capsys):
    src = copy_fixture(tmp_path, "upstream_example.json")
    rc, lines = run(["augment", str(src), "-o", str(tmp_path / "x.json")], capsys)
    assert rc == 0 and (tmp_path / "x.json").exists()
    assert not (tmp_path / "upstream_example.augmented.json").exists()


@pytest.mark.parametrize("content, fragment", [
    ('{"traceEvents": [{"ph": "X"', "truncated JSON"),
    ("not json at all", "not valid JSON"),
    ("[]", "expected a JSON object"),
    ('{"foo": 1}', "no 'traceEvents'"),
])
def test_bad_input_exit_1_one_line_no_output(tmp_path, capsys, content, fragment):
    src = tmp_path / "bad.json"
    src.write_text(content)
    h = sha(src)
    rc, lines = run(["augment", str(src)], capsys)
    assert rc == 1 and len(lines) == 1 and fragment in lines[0] and "error" in lines[0]
    assert sha(src) == h and os.listdir(tmp_path) == ["bad.json"]


def test_refuses_to_overwrite_input(tmp_path, capsys):
    src = copy_fixture(tmp_path, "upstream_example.json")
    h = sha(src)
    rc, lines = run(["augment", str(src), "-o", str(src)], capsys)
    assert rc == 1 and "is the input file" in lines[0] and sha(src) == h


def test_missing_file(tmp_path, capsys):
    rc, lines = run(["augment", str(tmp_path / "nope.json")], capsys)
    assert rc == 1 and "no such file" in lines[0]


def test_empty_trace_warns(tmp_path, capsys):
    src = tmp_path / "e.json"
    src.write_text('{"traceEvents": []}')
    rc, lines = run(["augment", str(src)], capsys)
    assert rc == 0 and any("no events" in ln for ln in lines)
    assert json.loads((tmp_path / "e.augmented.json").read_text()) == {"traceEvents": []}


def test_hostile_events_give_counts(tmp_path, capsys):
    trace = json.load(open(os.path.join(FIXTURES, "upstream_example.json")))
    trace["deviceProperties"][0]["name"] = "Imaginary GPU 9000"
    ev = trace["traceEvents"]
    ev[4]["dur"] = 0  # the conv kernel
    ev.append({"ph": "X", "cat": "kernel", "name": "orphan", "ts": 1, "dur": 1, "args": {"External id": 999}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 5, "dur": 1, "pid": 9, "tid": 9,
               "args": {"Input Dims": [[2, 2], [2, 2]], "Input type": ["c10::Mystery", "float"]}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::relu", "ts": 7, "dur": 1, "pid": 9, "tid": 9,
               "args": {"External id": 1619}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 9, "dur": float("nan"), "pid": 9, "tid": 9})
    ev.append(["not", "an", "event"])
    src = tmp_path / "h.json"
    src.write_text(json.dumps(trace))  # writes NaN: non-strict input on purpose
    h = sha(src)
    rc, lines = run(["augment", str(src)], capsys)
    assert rc == 0 and sha(src) == h
    line = [ln for ln in lines if "wrote" in ln][0]
    for fragment in ("1 NaN/Infinity values written as null", "1 ops with unknown dtypes (c10::Mystery)",
                     "2 device kernels without a launching op", "1 duplicate External ids",
                     "1 costed events with dur <= 0", "unknown device 'Imaginary GPU 9000'",
                     "1 ops without recorded shapes",  # the arg-less aten::relu
                     # the aten::mm whose dur is NaN (null once written): skipped, not an op to cost
                     "1 events skipped: ts/dur not a finite non-negative number"):
        assert fragment in line, fragment
    # 2 kernels: the orphan, and the addmm kernel whose External id 1619 is now ambiguous (aten::relu
    # has it too) and which has no correlation to disambiguate: its cost falls back to the CPU op.
    out = json.loads((tmp_path / "h.augmented.json").read_text(), parse_constant=lambda c: 1 / 0)
    assert len(out["traceEvents"]) == len(ev)
    assert out["traceEvents"][2]["args"][evs.KERNEL_FLOP] == 4_096_000  # aten::addmm
    assert evs.KERNEL_FLOP not in out["traceEvents"][3]["args"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_augment_progress_only_on_a_terminal_after_two_seconds(monkeypatch):
    from inductor_perf.augment.stream.progress import Progress

    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    p = Progress(True)
    p("loading")  # under 2 s: nothing yet
    assert tty.getvalue() == ""
    p.t0 -= 10  # as if 10 s had passed
    p("writing", 0.5)
    assert tty.getvalue() == "\rinductor-perf: writing  50% (10 s)\x1b[K"
    p.done()
    assert tty.getvalue().endswith("\r\x1b[K")  # the line is cleared at the end
    pipe = io.StringIO()  # not a terminal: never a byte
    monkeypatch.setattr("sys.stderr", pipe)
    q = Progress(True)
    q.t0 -= 10
    q("writing", 0.5)
    q.done()
    assert pipe.getvalue() == ""


def test_ticker_refreshes_the_stage_on_a_terminal(monkeypatch):
    import threading
    import time

    monkeypatch.setattr(cli._Ticker, "EVERY", 0.01)
    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    with cli._Ticker() as tick:
        tick.show.t0 -= 10  # as if 10 s had passed
        tick.stage = "summarizing big.json"
        thread = tick._thread
        assert thread is not None and thread in threading.enumerate()
        time.sleep(0.2)
    out = tty.getvalue()
    assert out.startswith("\rinductor-perf: summarizing big.json (10 s)\x1b[K")
    assert out.endswith("\r\x1b[K")
    assert not thread.is_alive() and thread not in threading.enumerate()  # its thread is gone
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    with cli._Ticker() as tick:
        tick.stage = "summarizing big.json"
        time.sleep(0.05)
    assert pipe.getvalue() == "" and tick._thread is None
