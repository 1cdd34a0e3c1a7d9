""""Is this trace costed" has one rule (model.events.COST_MARKS / has_cost_mark / is_costed), and
every reader applies it: the full summary (augment.in_memory.with_costs), the streaming summary's
pass, and both engines of a diff's side. A costed trace keeps its own costs, so its costs note is
None; a raw one is costed from its recorded shapes, and its note says so."""

from __future__ import annotations

import json

import pytest

from inductor_perf.model import events as evs

RAW = "costs computed from recorded shapes (0 events costed, as `inductor-perf augment` would)"


def _trace(mark: str | None, ph: str) -> dict:
    """One eager op launching one kernel, no recorded shapes; ``mark`` (an arg key) on an event of
    phase ``ph`` when given."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0,
         "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2.0, "dur": 3.0,
         "args": {"correlation": 5, "External id": 3}},
        {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 20.0, "dur": 4.0,
         "args": {"correlation": 5, "External id": 3}},
    ]
    if mark is not None:
        events.append({"ph": ph, "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 30.0, "dur": 1.0,
                       "args": {mark: 1}})
    return {"traceEvents": events}


def test_the_marks():
    assert set(evs.COST_MARKS) == {"kernel_flop", "cost_source", "launch_op"}
    assert all(m in evs.ADDED_ARG_KEYS for m in evs.COST_MARKS)  # augmentation writes every one
    assert not evs.has_cost_mark({"kernel_num_gb": 1.0, "not_costed": "no_shapes"})
    assert not evs.is_costed({"traceEvents": [1, None, {"args": [("kernel_flop", 1)]}]})
    assert not evs.is_costed({"traceEvents": {"args": {"kernel_flop": 1}}})


@pytest.mark.parametrize("mark", [*evs.COST_MARKS, "kernel_num_gb", None])
@pytest.mark.parametrize("ph", ["X", "i"])
def test_every_reader_decides_alike(tmp_path, mark, ph):
    from inductor_perf.comparison.sides import side_of_file
    from inductor_perf.summary.files import summarize_file

    trace = _trace(mark, ph)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace, indent=1))
    costed = mark in evs.COST_MARKS
    assert evs.is_costed(trace) is costed
    notes = []
    for engine in ("full", "stream"):
        got = summarize_file(str(path), engine=engine)
        assert (got.trace is None) is (engine == "stream")  # the streaming engine took it
        notes += [got.summary.costs_note, side_of_file(path, engine=engine)[1]]
    # costed: its own costs, no note; raw: costed here from its (missing) shapes, and said so
    assert notes == [None] * 4 if costed else notes == [RAW] * 4
