"""What the streaming summary keeps until its end, and what it lets go (summary/stream/finish.py,
summary/op_shapes.py): the host forest is built once per thread for the idle tables and the advisor's
signals, and freed when the summary is done even with the garbage collector off (its nodes form
cycles); the runtime calls are let go once each kernel's launch is read; the op x shape table keeps
each row's number of calls, not their ids."""

from __future__ import annotations

import gc
from collections import Counter

import pytest
from engine_inputs import generated_trace

from inductor_perf.summary.kernels import ParsedEvent
from inductor_perf.summary.op_shapes import OpShapeSums
from inductor_perf.summary.stream import engine as summary_stream


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A Kineto-layout trace of ~3,000 events from the bench generator (one host thread)."""
    return generated_trace(tmp_path_factory.mktemp("gen"))


def test_host_forest_built_once_and_freed_without_the_collector(generated, monkeypatch):
    built: Counter = Counter()
    real = summary_stream._Threads.forest

    def counted(self, key, *rest):
        built[key] += 1
        return real(self, key, *rest)

    monkeypatch.setattr(summary_stream._Threads, "forest", counted)
    passes = []
    real_finish = summary_stream._Pass.__init__

    def kept(self, *args, **kwargs):
        real_finish(self, *args, **kwargs)
        passes.append(self)

    monkeypatch.setattr(summary_stream._Pass, "__init__", kept)
    was = gc.isenabled()
    gc.disable()
    try:
        got = summary_stream.summarize_file_stream(str(generated))
        assert got is not None and got[0].gaps and got[0].signals is not None
        # the idle tables and the signals both walked the one host thread's forest: built once
        assert list(built.values()) == [1]
        # and nothing of it is left, though no collection ran
        assert not [o for o in gc.get_objects() if type(o) is summary_stream._HostNode]
    finally:
        if was:
            gc.enable()
    seen = passes[0]
    # the runtime calls and the kernels' correlation ids are let go once each kernel's launch is read
    assert seen.by_corr is None and seen.kernel_corr is None
    assert len(seen.kernel_call) == len(seen.kernels) > 0
    assert min(seen.kernel_call) >= 0  # every generated kernel has its cudaLaunchKernel


def _kernel(dur: float) -> ParsedEvent:
    return ParsedEvent("k", "kernel", 0, 7, 0.0, dur, {})


def test_op_shape_sums_done_keeps_the_number_of_calls():
    """Three kernels of one key, two launched by one op (call 1) and one by another (call 2): 2 calls,
    3 kernels, 6 µs, 3 µs a call (by hand); done() lets the kernels' keys go."""
    ks = [_kernel(1.0), _kernel(2.0), _kernel(3.0)]
    key = ("aten::mm", "[[2,2],[2,2]]", "float")
    sums = OpShapeSums({id(ks[0]): (key, 1), id(ks[1]): (key, 1), id(ks[2]): (key, 2)})
    st = (16, 1e-7, None, None, None, "float32", None, None, None)  # FLOPs, GB, ..., dtype (5), memory roof (8)
    sums.add_many(ks, st, "extern_matmul")
    sums.done()
    assert sums.keys == {}
    [row] = sums.rows(None, 20)
    assert (row.op, row.calls, row.kernels, row.total_us, row.mean_us, row.flop) == ("aten::mm", 2, 3, 6.0, 3.0, 48)
    assert sums.rows(None, 20) == [row]  # rows() again, after done(): the same
