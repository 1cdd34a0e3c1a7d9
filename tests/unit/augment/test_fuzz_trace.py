"""Property test: any JSON-shaped trace goes through attribution, augmentation and saving without
raising anything but TraceFormatError, and comes back as strict JSON with the same events."""

from __future__ import annotations

import gzip
import json
import math
from types import MappingProxyType, SimpleNamespace

import pytest
import torch

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inductor_perf.augment.core import augment_trace, costs_from_shapes
from inductor_perf.errors import TraceFormatError
from inductor_perf.model.events import ADDED_ARG_KEYS
from inductor_perf.costs.ops.formulas import OP_FORMULAS
from inductor_perf.traces.files import save_trace

OP_NAMES = ["aten::" + n for n in OP_FORMULAS] + ["aten::linear", "triton_poi_fused_0", "cudaLaunchKernel"]
CATS = ["cpu_op", "kernel", "cuda_runtime", "ac2g", "user_annotation", "Operator", "python_function", None, 3]
TYPES = ["float", "c10::Half", "c10::BFloat16", "double", "Scalar", "ScalarList", "", "c10::Nope", None]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                           max_leaves=12)
small_ints = st.integers(min_value=-2, max_value=70)
dims = st.lists(st.one_of(st.lists(small_ints, max_size=5), scalars), max_size=10)
concrete = st.lists(st.one_of(st.sampled_from(["", "[1, 1]", "[2, 2]", "[0]", "1", "3", "True", "False", "[a]",
                                               "[3, 3]", "[1, 1, 1]"]), scalars), max_size=13)
args = st.one_of(
    st.fixed_dictionaries({}, optional={
        "Input Dims": dims, "Input type": st.lists(st.sampled_from(TYPES), max_size=10),
        "Concrete Inputs": concrete, "External id": st.one_of(st.integers(0, 5), scalars),
        "correlation": st.one_of(st.integers(0, 5), scalars), "kernel_flop": scalars, "kernel_num_gb": scalars,
        "device": st.integers(0, 2)}),
    json_values)
event = st.one_of(
    st.fixed_dictionaries({"ph": st.sampled_from(["X", "X", "X", "s", "f", "i", "B", None])}, optional={
        "name": st.one_of(st.sampled_from(OP_NAMES), scalars), "cat": st.sampled_from(CATS),
        "ts": st.one_of(st.floats(-1e3, 1e3), scalars), "dur": st.one_of(st.floats(-5, 50), scalars),
        "pid": st.one_of(st.integers(0, 2), scalars), "tid": st.one_of(st.integers(0, 2), scalars),
        "id": st.integers(0, 5), "args": args}),
    json_values)


# Mostly-valid op events, so that many examples reach the formulas and the kernel join.
@st.composite
def plausible(draw):
    m, k, n, b = (draw(st.integers(0, 9)) for _ in range(4))
    name, dims = draw(st.sampled_from([
        ("aten::mm", [[m, k], [k, n]]), ("aten::addmm", [[n], [m, k], [k, n], [], []]),
        ("aten::bmm", [[b, m, k], [b, k, n]]), ("aten::convolution", [[b, k, m + 2, n + 2], [m, k, 3, 3]] + [[]] * 7),
        ("aten::_scaled_dot_product_efficient_attention", [[b, 2, m, k], [b, 1, n, k], [b, 1, n, k]])]))
    return {"ph": "X", "cat": draw(st.sampled_from(["cpu_op", "kernel", "cuda_runtime"])), "name": name,
            "ts": draw(st.floats(0, 100)), "dur": draw(st.floats(-1, 30)), "pid": 1, "tid": 1,
            "args": {"Input Dims": dims, "Input type": [draw(st.sampled_from(TYPES[:4]))] * len(dims),
                     "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"],
                     "External id": draw(st.integers(0, 5)), "correlation": draw(st.integers(0, 5))}}


traces = st.fixed_dictionaries({"traceEvents": st.lists(st.one_of(event, plausible(), plausible()), max_size=25)},
                               optional={"deviceProperties": json_values, "displayTimeUnit": json_values})


DEVICE = SimpleNamespace(name="Fake", peak_tflops=MappingProxyType({torch.float32: 50.0, torch.float16: 400.0}),
                         vector_tflops=MappingProxyType({}), mem_bandwidth_gbs=900.0, peak_source="test",
                         device_type="cpu")


def _strict(c: str) -> None:
    raise AssertionError(f"non-strict constant {c}")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces)
# an arg of the input's own that is not finite stays in the event (the saved file writes it as null)
@example({"traceEvents": [{"ph": "X", "ts": 0.0, "cat": "cpu_op", "args": {
    "Input Dims": [], "device": 0, "kernel_num_gb": None, "kernel_flop": 0, "correlation": math.inf}}]})
def test_fuzz_pipeline(tmp_path_factory, trace):
    out = tmp_path_factory.mktemp("fuzz") / "o.json"
    try:
        costs, _ = costs_from_shapes(trace)
        new, _ = augment_trace(trace, costs, DEVICE if len(trace["traceEvents"]) % 2 else None)
        for i in costs:  # the args we add are finite
            for k, v in new["traceEvents"][i]["args"].items():
                assert not (k in ADDED_ARG_KEYS and isinstance(v, float) and not math.isfinite(v)), (k, v)
        save_trace(new, out, inputs=())
    except TraceFormatError:
        return
    data = json.loads(out.read_bytes(), parse_constant=_strict)
    assert len(data["traceEvents"]) == len(trace["traceEvents"])


def _as_orjson_reads(v):
    """``v`` with integers outside [-2**63, 2**64) as the floats orjson reads them as. The full load
    reads every value through orjson; the large-file path copies the events it does not augment
    byte for byte, so such an integer keeps its digits there. Kineto writes none."""
    if type(v) is int and not -(2**63) <= v < 2**64:
        return float(v)
    if isinstance(v, dict):
        return {k: _as_orjson_reads(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_as_orjson_reads(x) for x in v]
    return v


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces, st.sampled_from([None, 1]), st.booleans(), st.sampled_from([".json", ".json.gz"]))
def test_fuzz_large_file_path_writes_what_the_full_load_writes(tmp_path_factory, trace, indent, two, ext):
    # The same trace through augment_file's large-file path (in one process or with its forked
    # worker) and through the full load: the same JSON and stats, or the same one-line error.
    pytest.importorskip("orjson")
    from inductor_perf.augment import core as A
    from inductor_perf.augment.stream import engine as S

    d = tmp_path_factory.mktemp("fuzzfast")
    src = d / "in.json"
    src.write_text(json.dumps(trace, indent=indent))  # NaN / Infinity written as such: not JSON
    before = src.read_bytes()
    saved = S.LARGE_TRACE_BYTES
    S.LARGE_TRACE_BYTES = 0 if two else 1 << 62
    try:
        got = []
        for fast in (False, True):
            out = d / f"out_{fast}{ext}"
            try:
                stats = A.augment_file(str(src), str(out), fast=fast)
            except TraceFormatError as e:
                got.append(("error", str(e).replace(str(out), "OUT")))
            else:
                text = gzip.decompress(out.read_bytes()) if ext.endswith(".gz") else out.read_bytes()
                got.append((_as_orjson_reads(json.loads(text, parse_constant=_strict)), stats))
    finally:
        S.LARGE_TRACE_BYTES = saved
    assert got[0] == got[1]
    assert src.read_bytes() == before  # the input is never modified
