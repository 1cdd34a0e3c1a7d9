"""The streaming summary's pass in two processes (:mod:`inductor_perf.summary.stream.fork`) against the same
pass in one: exactly the same Summary on every GPU fixture, on ../shared/traces and on a generated
trace (and within rounding of the full load); a worker that dies, before or after its first part,
leaves its windows to the parent; a bad file gives the same error as in one process.

The fork threshold is lowered to 0 and the windows made tiny (4 KB) so that small traces take the
two-process path with many windows on each side.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_inputs import FIXTURES, GPU_FIXTURES, SHARED, TRACES, generated_trace
from json_close import differences

from inductor_perf.summary.stream import fork as summary_fork, engine as summary_stream
from inductor_perf.traces import windows as summary_windows
from inductor_perf.errors import TraceFormatError
from inductor_perf.summary.files import summarize_file, trace_label

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="two processes need os.fork")


@pytest.fixture(autouse=True)
def small_windows(monkeypatch):
    monkeypatch.setattr(summary_windows, "WINDOW_BYTES", 4096)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (4096,))


class _Spy:
    """Counts the workers started and the parts received (None: the worker failed), and the idle
    helpers' results (None: the helper failed)."""

    def __init__(self, monkeypatch) -> None:
        self.started = 0
        self.received: list = []
        self.helped: list = []
        start, receive = summary_fork.start_worker, summary_fork.PassWorker.receive
        result = summary_fork.Helper.result

        def spy_result(helper):
            got = result(helper)
            self.helped.append(got)
            return got

        monkeypatch.setattr(summary_fork.Helper, "result", spy_result)

        def start_worker(*a, **k):
            got = start(*a, **k)
            self.started += got is not None
            return got

        def spy_receive(worker):
            got = receive(worker)
            self.received.append(got)
            return got

        monkeypatch.setattr(summary_fork, "start_worker", start_worker)
        monkeypatch.setattr(summary_fork.PassWorker, "receive", spy_receive)


def _streamed(path: Path, monkeypatch, *, fork: bool) -> dict | None:
    monkeypatch.setattr(summary_fork, "LARGE_TRACE_BYTES", 0 if fork else 1 << 62)
    got = summary_stream.summarize_file_stream(str(path), label_of=lambda h: trace_label(h, path.name))
    return None if got is None else got[0].to_dict()


def _assert_same(path: Path, monkeypatch) -> _Spy:
    one = _streamed(path, monkeypatch, fork=False)
    spy = _Spy(monkeypatch)
    two = _streamed(path, monkeypatch, fork=True)
    assert spy.started == 1 and spy.received and spy.received[0] is not None, f"{path.name}: no worker used"
    assert len(spy.helped) == 1 and spy.helped[0] is not None, f"{path.name}: no idle helper used"
    assert two == one, f"{path.name}: two processes differ from one: {differences(one, two)[:5]}"
    full = summarize_file(str(path), engine="full").summary.to_dict()
    assert not differences(full, two)
    return spy


@pytest.mark.parametrize("name", SHARED)
def test_shared_traces_same_summary(name, monkeypatch):
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{p} absent (the shared real traces are not checked in)")
    _assert_same(p, monkeypatch)


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_gpu_fixtures_same_summary(name, monkeypatch):
    _assert_same(FIXTURES / "gpu" / name, monkeypatch)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A Kineto-layout trace of ~3,000 events from the bench generator."""
    return generated_trace(tmp_path_factory.mktemp("gen"))


def test_generated_same_summary(generated, monkeypatch):
    _assert_same(generated, monkeypatch)


def test_windows_split_at_a_boundary_are_the_same_windows(generated):
    """The parent's windows up to the cut and the worker's from it are those one iteration gives, and
    load() reads any event back after adopt()."""
    with summary_windows.mapped_text(str(generated)) as raw:
        whole = summary_windows.Windows(raw, "x", 4096)
        events = [ev for batch in whole for ev in batch]
        first = summary_windows.Windows(raw, "x", 4096)
        cut = first.cut_near(0.5)
        assert cut is not None
        first.stop = cut
        mine = [ev for batch in first for ev in batch]
        rest = summary_windows.Windows(raw, "x", 4096, begin=cut - 1)
        theirs = [ev for batch in rest for ev in batch]
        assert mine + theirs == events and mine and theirs
        first.adopt(rest.part(), len(mine))
        assert first.bounds == whole.bounds and first.firsts == whole.firsts and first.header == whole.header
        for i in (0, len(mine) - 1, len(mine), len(events) - 1):
            assert first.load(i) == events[i]


def _dies(after_parts: int):
    """A read_part for the worker that exits after sending ``after_parts`` parts."""
    real = summary_stream._worker_part

    def read_part(events):
        for n, part in enumerate(real(events)):
            if n == after_parts:
                os._exit(3)
            yield part

    return read_part


@pytest.mark.parametrize("after_parts", [0, 1, 3])
def test_worker_that_dies_leaves_its_part_to_the_parent(generated, monkeypatch, after_parts):
    one = _streamed(generated, monkeypatch, fork=False)
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(summary_stream, "_worker_part", _dies(after_parts))
    assert _streamed(generated, monkeypatch, fork=True) == one
    assert spy.started == 1 and spy.received == [None]


def test_helper_that_dies_leaves_the_idle_tables_to_the_parent(generated, monkeypatch):
    from inductor_perf.summary.stream import finish as summary_stream_finish

    def dies(*args):
        os._exit(3)

    one = _streamed(generated, monkeypatch, fork=False)
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(summary_stream_finish, "_idle_part", dies)
    assert _streamed(generated, monkeypatch, fork=True) == one
    assert spy.started == 1 and spy.helped == [None]


def test_no_helper_past_its_size(generated, monkeypatch):
    """Past HELPER_MAX_BYTES the pass still forks, the idle tables stay in this process."""
    one = _streamed(generated, monkeypatch, fork=False)
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(summary_fork, "HELPER_MAX_BYTES", 10)
    assert _streamed(generated, monkeypatch, fork=True) == one
    assert spy.started == 1 and spy.helped == []


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_idle_tables_with_next_sources_later(name):
    """The helper's idle tables (without the kernels' source lines, given after) are those of one call."""
    from inductor_perf.summary.kernels import _parse, select_kernels
    from inductor_perf.traces.files import load_trace
    from inductor_perf.summary.idle import busy_window, idle_tables, launching_threads, with_next_sources
    from inductor_perf.augment.in_memory import with_costs

    trace = with_costs(load_trace(str(FIXTURES / "gpu" / name)))[0]
    tk = select_kernels(_parse(trace["traceEvents"], {}))
    launcher, _ = launching_threads(tk)
    window = busy_window(tk.events, tk.kernels)
    want = idle_tables(tk, window, launcher, 20)
    after: list = []
    rows, count, idle_rows = idle_tables(tk, window, launcher, 20, after=after)
    assert len(after) == len(rows) and (count, idle_rows) == want[1:]
    later = sum(r.source is None and w.source is not None for r, w in zip(rows, want[0]))
    assert with_next_sources(rows, after) == want[0]
    assert later > 0 or name == "gpt_cudagraphs.trace.json.gz", "some rows take the next kernel's source line"


def test_truncated_file_same_error(generated, tmp_path, monkeypatch):
    """Cut mid-event in the worker's part: the one-line error of one process, byte offset included."""
    cut = tmp_path / "cut.json"
    text = generated.read_bytes()
    cut.write_bytes(text[: len(text) * 2 // 3])
    monkeypatch.setattr(summary_fork, "LARGE_TRACE_BYTES", 1 << 62)
    with pytest.raises(TraceFormatError, match="truncated JSON") as one:
        summary_stream.summarize_file_stream(str(cut))
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(summary_fork, "LARGE_TRACE_BYTES", 0)
    with pytest.raises(TraceFormatError, match="truncated JSON") as two:
        summary_stream.summarize_file_stream(str(cut))
    assert spy.started == 1 and str(two.value) == str(one.value) and "\n" not in str(two.value)


def test_nan_in_the_worker_part_falls_back(generated, tmp_path, monkeypatch):
    """A layout the engine does not take, in the worker's windows: None (the caller loads it whole)."""
    p = tmp_path / "nan.json"
    text = generated.read_text()
    at = text.rindex('"dur": ')
    p.write_text(text[:at] + '"dur": NaN, "was": ' + text[at + len('"dur": '):])
    spy = _Spy(monkeypatch)
    assert _streamed(p, monkeypatch, fork=True) is None
    assert spy.started == 1


def test_light_and_pool_workers_stay_in_one_process(generated, monkeypatch):
    """The light summary (a folder of ranks, already in parallel) and a process that multiprocessing
    started (a pool's worker) never fork."""
    import multiprocessing

    spy = _Spy(monkeypatch)
    monkeypatch.setattr(summary_fork, "LARGE_TRACE_BYTES", 0)
    assert summary_stream.summarize_file_stream(str(generated), light=True) is not None
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    assert summary_stream.summarize_file_stream(str(generated)) is not None
    assert spy.started == 0


def test_worker_and_helper_load_no_module(generated, tmp_path):
    """All the worker and the helper run is imported before they are forked (augment.stream.worker.Worker's
    rules): neither loads a module. A fresh interpreter, since this one has loaded nearly everything."""
    import json

    d = str(tmp_path)
    code = ("import json, os, sys\n"
            "from inductor_perf.summary.stream import engine as S, finish as SF, fork as F\n"
            "F.LARGE_TRACE_BYTES = 0\n"
            "S.Windows.__init__.__defaults__ = (4096,)  # windows enough for a worker\n"
            "def watch(real, tag):\n"
            "    def watched(*args):\n"
            "        before = set(sys.modules)\n"
            "        try:\n"
            "            return real(*args)\n"
            "        finally:\n"
            f"            with open(os.path.join({d!r}, tag + str(os.getpid())), 'w') as f:\n"
            "                json.dump(sorted(set(sys.modules) - before), f)\n"
            "    return watched\n"
            "def watch_parts(real):\n"
            "    def watched(events):\n"
            "        before = set(sys.modules)\n"
            "        yield from real(events)\n"
            f"        with open(os.path.join({d!r}, 'worker' + str(os.getpid())), 'w') as f:\n"
            "            json.dump(sorted(set(sys.modules) - before), f)\n"
            "    return watched\n"
            "S._worker_part = watch_parts(S._worker_part)\n"
            "SF._idle_part = watch(SF._idle_part, 'helper')\n"
            f"got = S.summarize_file_stream({str(generated)!r})\n"
            "assert got is not None and got[0].gaps\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    reports = {f.rstrip("0123456789"): json.load(open(os.path.join(d, f))) for f in os.listdir(d)}
    assert reports == {"worker": [], "helper": []}
