"""The streaming summary's fused per-event loop (:func:`inductor_perf.summary.stream.loop.read_batch`) against
the methods it fuses (``LaunchIndex.index``, ``CostJoin.cost``, ``_Pass.add`` / ``add_other``, called
event by event): after reading a trace, the cost join's and the pass's state are exactly the same
(values and dict orders) on every GPU fixture, on ../shared/traces, on a generated trace, on an
augmented trace (its own costs: the pass stops feeding the join) and on a trace of odd events that
take the fused loop's slow path (non-number or missing ts/dur, int ts/dur, zero and negative durations, non-dict
args, non-str names and categories, pid / tid of other types, non-object events, cost marks).

Both ways the fused loop reads a window are compared with the methods: orjson's dicts and msgspec's
envelopes (:func:`~inductor_perf.traces.windows.decode_envelopes`, the streaming summary's default).

The windows are tiny (4 KB) so that a trace spans many of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from array import array
from pathlib import Path

import pytest
from engine_inputs import FIXTURES, GPU_FIXTURES, ROOT, SHARED, TRACES

from inductor_perf.model import events as evs
from inductor_perf.summary.stream import engine as summary_stream
from inductor_perf.costs.from_shapes import CostJoin
from inductor_perf.traces.windows import Windows, mapped_text


def _plain(v):
    """``v`` with each dict as its items in order, each array as a list (so == checks order) and each
    number with its type (so 2 and 2.0 differ)."""
    if type(v) is int or type(v) is float:
        return (type(v).__name__, v)
    if isinstance(v, dict):
        return [(_plain(k), _plain(x)) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, array):
        return (v.typecode, v.tolist())
    if isinstance(v, (set, frozenset)):
        return sorted(map(repr, v))
    if hasattr(v, "__slots__") and not isinstance(v, type):  # ParsedEvent
        return (type(v).__name__, [(s, _plain(getattr(v, s, None))) for s in v.__slots__ if s != "parent"])
    return v


class _Counted(Windows):
    """Windows that count those yielded as envelopes."""

    enveloped_windows = windows = 0

    def __iter__(self):
        for batch in super().__iter__():
            self.windows += 1
            self.enveloped_windows += self.enveloped
            yield batch


def _state(path: Path, fused: bool, typed: bool = False) -> dict:
    with mapped_text(str(path)) as raw:
        events = _Counted(raw, str(path), 4096, typed=typed)
        join = CostJoin(events.load)
        seen = summary_stream._Pass()
        slow = [0]
        index = join.index

        def counted(i, ev):
            slow[0] += 1
            return index(i, ev)

        join.index = counted  # the events the fused loop leaves to the methods
        n = summary_stream._read(events, join, seen, 0, None, fused=fused)
        del join.index
        j = {k: _plain(v) for k, v in vars(join).items() if k not in ("_load", "_key")}
        j["stats"] = _plain(vars(join.stats))
        s = {k: _plain(v) for k, v in vars(seen).items() if k not in ("threads", "_cat_class")}
        s["threads"] = _plain((seen.threads.names, seen.threads.cats, seen.threads.cols))
        return {"n": n, "join": j, "pass": s, "slow": slow[0], "windows": events.windows,
                "enveloped": events.enveloped_windows}


def _assert_same(path: Path) -> dict:
    """The fused loop's state, from dicts and from envelopes, equals the methods'; the envelopes' one."""
    slow = _state(path, fused=False)
    assert slow["enveloped"] == 0, "the methods read dicts"
    for typed in (False, True):
        fast = _state(path, fused=True, typed=typed)
        assert fast["n"] == slow["n"]
        for part in ("join", "pass"):
            for k in slow[part]:
                assert fast[part][k] == slow[part][k], f"{path.name} (typed={typed}): {part}.{k} differs"
    return fast


@pytest.mark.parametrize("name", SHARED)
def test_shared_traces_same_state(name):
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{p} absent (the shared real traces are not checked in)")
    got = _assert_same(p)
    assert got["pass"]["kernels"], "a GPU trace: kernels kept"
    assert got["slow"] < 0.01 * got["n"], "Kineto's events (int or float ts/dur) take the fused loop's fast path"
    assert got["enveloped"] == got["windows"] > 1, "every window of a Kineto trace read as envelopes"


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_gpu_fixtures_same_state(name):
    _assert_same(FIXTURES / "gpu" / name)


def test_generated_same_state(tmp_path):
    p = tmp_path / "gen.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_trace.py"), "3000", str(p)], check=True,
                   capture_output=True)
    got = _assert_same(p)
    assert got["join"]["own"] and got["join"]["flows_later"][1], "ops costed, flows put aside"
    assert got["enveloped"] == got["windows"] > 1


def test_augmented_trace_same_state(tmp_path):
    from inductor_perf.augment.core import augment_file

    out = tmp_path / "aug.json"
    augment_file(str(FIXTURES / "gpu" / "resnet_block.trace.json.gz"), str(out), engine="full")
    got = _assert_same(out)
    assert got["pass"]["costed"] is True


def _odd_events() -> list:
    """Events each of which the fused loop must leave to the methods (or handle as they do)."""
    k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.0,
         "args": {"correlation": 5, "stream": 7, "grid": [1, 1, 1]}}
    r = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 9.0, "dur": 0.5,
         "args": {"correlation": 5, "External id": 3}}
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 8.0, "dur": 3.0,
          "args": {"External id": 3, "Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}}
    out: list = [op, r, k]
    for change in ({"ts": 11}, {"dur": 3}, {"ts": 2 ** 62}, {"ts": True}, {"dur": False}, {"ts": "12.5"}, {"dur": "x"}, {"dur": 0.0}, {"dur": -1.0},
                   {"args": None}, {"args": [1]}, {"name": 7}, {"cat": 3}, {"cat": None}, {"pid": "host"},
                   {"tid": [1, 2]}, {"pid": 1.5}, {"tid": True}, {"cat": "Kernel"}, {"cat": "gpu_memcpy"},
                   {"cat": "gpu_user_annotation"}, {"cat": "Trace"}, {"args": {"correlation": "5"}},
                   {"args": {"correlation": [5]}}, {"name": "nccl:all_reduce_ccl_kernel"},
                   # ints past 64 bits: orjson reads them as floats, msgspec as ints
                   {"pid": 2 ** 70}, {"tid": -(2 ** 64)}, {"ts": 2 ** 70}, {"dur": 2 ** 64}, {"name": 2 ** 65},
                   # times at and past model.events.event_time's bounds, negative zero, numeric strings
                   {"dur": 1e300}, {"ts": 1e300}, {"ts": -1.0}, {"ts": -0.0}, {"dur": -0.0}, {"dur": "10"},
                   {"ts": evs.TS_MAX_US}, {"ts": evs.TS_MAX_US * (1 + 1e-15)}, {"ts": 10 ** 16},
                   {"dur": evs.DUR_MAX_US}, {"dur": evs.DUR_MAX_US + 1.0}, {"dur": 7 * 86_400 * 10 ** 6 + 1}):
        for base in (k, r, op):
            out.append({**base, **change})
    for drop in ("ts", "dur", "args", "name", "cat", "pid"):
        out.append({x: v for x, v in op.items() if x != drop})
    out += [7, "text", None, [1], {"ph": "s", "id": 1, "cat": "ac2g", "pid": 1, "tid": 1, "ts": 9.0},
            {"ph": "f", "id": 1, "cat": "ac2g", "pid": 0, "tid": 7, "ts": 10.0, "bp": "e"},
            {"ph": "i", "name": "mark", "ts": 1.0}, {"ph": "X"}, {"ph": None, "args": {"x": 1}},
            {**op, "name": "ProfilerStep#4"}, {**op, "cat": "user_annotation", "name": "gloo:all_reduce"},
            {**r, "name": "cudaGraphLaunch"}, {**r, "cat": "hip_runtime", "name": "hipGraphLaunch"},
            {**op, "args": {"External id": 3}}, {**r, "cat": "cuda_driver"}, {**k, "cat": "gpu_memset",
                                                                               "name": "Memset (Device)"}]
    return out


def _marked_events() -> list:
    """Cost marks (an augmented trace's): the pass notes them; the join is fed no more windows after."""
    k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.0,
         "args": {"correlation": 6, "kernel_flop": 10}}
    return [k, {"ph": "M", "args": {"kernel_flop": 1}}, {**k, "args": {"launch_op": "aten::mm"}}]


@pytest.mark.parametrize("mark", ["kernel_flop", "cost_source", "launch_op"])
@pytest.mark.parametrize("ph", ["X", "M"])
def test_each_cost_mark_same_state(tmp_path, mark, ph):
    p = tmp_path / "marked.json"
    ev = {"ph": ph, "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.0, "args": {mark: 1}}
    p.write_text(json.dumps({"traceEvents": _odd_events() * 3 + [ev] + _odd_events() * 3}, indent=1))
    got = _assert_same(p)
    assert got["pass"]["costed"] is True


def test_odd_events_same_state(tmp_path):
    p = tmp_path / "odd.json"
    events = _odd_events() * 20 + _marked_events()  # several windows, the marks in the last
    p.write_text(json.dumps({"traceEvents": events}, indent=1))
    got = _assert_same(p)
    assert got["pass"]["costed"] is True
    assert dict(got["pass"]["skipped"]), "odd events skipped, as the methods skip them"
    # every event with bad times counted by both, whatever its category: 16 of the changes (8 before the
    # bounds' own, 8 of those) on each of 3 events, the 2 with ts or dur dropped and {"ph": "X"}, 20 times
    bad = dict(got["pass"]["skipped"])[evs.BAD_TIME]
    assert bad == dict(got["join"]["stats"])["bad_time"] == ("int", 20 * (3 * 16 + 2 + 1))
    assert 0 < got["enveloped"] < got["windows"], "a window with an element that is not an object is read by orjson"


def test_odd_objects_as_envelopes_same_state(tmp_path):
    p = tmp_path / "odd_objects.json"
    events = [e for e in _odd_events() if type(e) is dict] * 20 + _marked_events()
    p.write_text(json.dumps({"traceEvents": events}, indent=1))
    got = _assert_same(p)
    assert got["pass"]["costed"] is True
    assert got["enveloped"] == got["windows"] > 1, "odd objects read as envelopes, then whole where odd"


def test_cpu_ops_replayed_by_signature_same_state(tmp_path, monkeypatch):
    """A CPU op whose name and recorded inputs were seen before is not decoded whole: the join's
    outcome for it (a cost, a reason, nothing to cost) is replayed. The state stays the methods',
    and ops whose args say more than their inputs (cost marks, a step, a big External id) are read
    whole every time."""
    from inductor_perf.costs.from_shapes import CostJoin

    replayed: list = []
    replay = CostJoin.replay
    monkeypatch.setattr(CostJoin, "replay", lambda self, i, got: (replayed.append(got[1]), replay(self, i, got)))
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 8.0, "dur": 3.0,
          "args": {"External id": 3, "Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"],
                   "Input Strides": [[8, 1], [16, 1]], "Sequence number": 7}}
    ops = [op,
           {**op, "args": {**op["args"], "Input Dims": [[4, 8], [9, 3]]}},  # a reason: bad shapes
           {**op, "name": "aten::view", "args": {**op["args"], "External id": "x"}},  # nothing to cost
           {**op, "args": {k: v for k, v in op["args"].items() if k != "External id"}},
           {**op, "args": {**op["args"], "kernel_num_gb": 0.5}},  # a cost of its own
           {**op, "args": {**op["args"], "External id": 2 ** 70}},  # an int orjson reads as a float
           {**op, "name": "ProfilerStep#3"}]
    events = []
    for step in range(30):
        events += [{**e, "ts": e["ts"] + 100.0 * step, "args": {**e["args"], "Sequence number": step}} for e in ops]
    p = tmp_path / "ops.json"
    p.write_text(json.dumps({"traceEvents": events + [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0,
                                                       "tid": 7, "ts": 9.0, "dur": 1.0, "args": {}}]}, indent=1))
    got = _assert_same(p)
    assert set(replayed) == {True, False, None}, "a cost, a reason and nothing to cost, each replayed"
    # the first four kinds of op replayed, but for the first step's first three (the op without its
    # External id has the first one's signature); the last three never
    assert len(replayed) == 4 * 30 - 3
    # costed: mm with its id, without it, with a cost of its own, with a big id; every step
    assert len(got["join"]["own"]) == 4 * 30
