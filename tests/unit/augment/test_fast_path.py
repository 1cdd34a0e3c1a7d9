"""augment_file's large-file path (split the events array, parse events one by one, copy unchanged
bytes) writes the same JSON as the full load, and falls back to it on layouts it does not expect."""

from __future__ import annotations

import contextlib
import glob
import gzip
import importlib.util
import json
import logging
import os
import signal
import threading
import warnings

import pytest

from inductor_perf.augment import core as A
from inductor_perf.augment import args as cost_args
from inductor_perf.traces import engines, files as tf
from inductor_perf.model import events as evs
from inductor_perf.augment.stream import parse as P
from inductor_perf.augment.stream import render as R
from inductor_perf.augment.stream import engine as S
from inductor_perf.augment.stream import worker as W
from inductor_perf.augment.stream.progress import Progress

pytest.importorskip("orjson")

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = sorted(glob.glob(os.path.join(HERE, "..", "..", "fixtures", "*.json*")))
GEN = os.path.join(HERE, "..", "..", "..", "bench", "gen_trace.py")


def _gen_module():
    spec = importlib.util.spec_from_file_location("gen_trace", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _load(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(autouse=True, params=["one_process", "two_processes"])
def processes(request, monkeypatch):
    """Every test runs with the fast path in one process and with its forked worker forced on
    (the worker normally starts only for files of LARGE_TRACE_BYTES or more)."""
    two = request.param == "two_processes"
    if two and not hasattr(os, "fork"):
        pytest.skip("no os.fork here")
    monkeypatch.setattr(S, "LARGE_TRACE_BYTES", 0 if two else 1 << 62)
    return two


def _stream(src, dst):
    """The stream engine itself (no fallback): its stats, or None when it declines the layout."""
    return S.augment_file_stream(str(src), str(dst), None, Progress(False))


def _both(src, tmp_path, ext=".json"):
    """Augment ``src`` with the full path and the fast path; return both outputs and stats."""
    full, fast = str(tmp_path / ("full" + ext)), str(tmp_path / ("fast" + ext))
    s_full = A.augment_file(src, full, fast=False)
    s_fast = A.augment_file(src, fast, fast=True)
    return _load(full), _load(fast), s_full, s_fast


@pytest.fixture(scope="module", params=["kineto", "compact"])
def generated(tmp_path_factory, request):
    """A bench/gen_trace.py trace in Kineto's indented layout and in the compact one."""
    path = str(tmp_path_factory.mktemp("gen") / "gen.json")
    n = _gen_module().write(20_000, path, seed=3, layout=request.param)
    assert n >= 20_000
    return path


@pytest.mark.parametrize("ext", [".json", ".json.gz"])
def test_generated_trace_same_output(generated, tmp_path, ext):
    assert tf.split_trace_file(generated) is not None  # the fast path really runs on this layout
    full, fast, s_full, s_fast = _both(generated, tmp_path, ext)
    assert fast == full
    assert s_fast == s_full
    assert s_fast.events_augmented > 1000
    # Events not augmented are copied byte for byte: same count, same order.
    assert len(fast["traceEvents"]) == s_full.events


def test_cold_cache_costs_the_same_in_both_engines(generated, tmp_path, monkeypatch):
    """With nothing cached, the fast path's worker leaves the ops that need torch's shape rules to
    the parent (costs.ops.meta.defer_torch); they come out costed exactly as the full engine costs them."""
    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path / "cold"))
    fast, full = str(tmp_path / "fast.json"), str(tmp_path / "full.json")
    s_fast = _stream(generated, fast)  # first: every signature is new
    s_full = A.augment_file(generated, full, fast=False)
    s_fast.worker_maxrss_kb, s_fast.stage_marks = None, ()
    a, b = _load(full), _load(fast)
    assert a == b and s_fast == s_full
    adds = [e for e in b["traceEvents"] if e.get("cat") == "kernel" and e["args"].get(evs.LAUNCH_OP) == "aten::add"]
    # aten::add of two [m, n] float tensors: m*n FLOPs, 3*m*n*4 bytes (two read, one written)
    size = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2}
    ops = {e["args"]["External id"]: (e["args"]["Input Dims"][0], size[e["args"]["Input type"][0]])
           for e in b["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") == "aten::add"}
    assert adds
    for k in adds:
        (m, n), item = ops[k["args"]["External id"]]
        assert k["args"][evs.KERNEL_FLOP] == m * n and k["args"][evs.KERNEL_BYTES_READ] == 2 * m * n * item


@pytest.mark.parametrize("path", FIXTURES, ids=os.path.basename)
def test_fixture_traces_same_output(path, tmp_path):
    assert tf.split_trace_file(path) is not None
    full, fast, s_full, s_fast = _both(path, tmp_path)
    assert fast == full
    assert s_fast == s_full


def test_fast_path_costs_hand_computed_mm(tmp_path):
    # aten::mm [128, 256] x [256, 512] float32 launching one kernel (correlation 7):
    # FLOPs 2*128*256*512 = 33_554_432; bytes (128*256 + 256*512 + 128*512) * 4 = 917_504.
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 20.0,
         "args": {"External id": 5, "Input Dims": [[128, 256], [256, 512]], "Input type": ["float", "float"],
                  "Concrete Inputs": ["", ""]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15.0,
         "dur": 2.0, "args": {"External id": 5, "correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30.0, "dur": 8.0,
         "args": {"correlation": 7, "External id": 5}},
        {"ph": "i", "cat": "other", "name": "marker", "pid": 1, "tid": 1, "ts": 40.0, "s": "t"},
    ]
    src = tmp_path / "t.json"
    # Kineto-like layout: indented, one event per object, whitespace between events.
    src.write_text('{"schemaVersion": 1,\n  "traceEvents": [\n  '
                   + ",\n  ".join(json.dumps(e, indent=2) for e in events)
                   + '\n],\n  "traceName": "t"\n}\n')
    out = tmp_path / "o.json"
    stats = _stream(src, out)
    assert stats is not None and stats.events == 4 and stats.events_augmented == 1
    got = json.loads(out.read_text())
    assert got["traceName"] == "t" and got["schemaVersion"] == 1
    kernel_args = got["traceEvents"][2]["args"]
    assert kernel_args[evs.KERNEL_FLOP] == 33_554_432
    assert kernel_args[evs.KERNEL_BYTES_READ] + kernel_args[evs.KERNEL_BYTES_WRITTEN] == 917_504
    assert got["traceEvents"][3] == events[3]
    assert evs.KERNEL_FLOP not in got["traceEvents"][0]["args"]


def _write(tmp_path, text: str) -> str:
    p = tmp_path / "odd.json"
    p.write_text(text)
    return str(p)


_OP = ('{"ph":"X","cat":"cpu_op","name":%s,"pid":1,"tid":1,"ts":10,"dur":20,"args":{"External id":5,'
       '"Input Dims":[[4,8],[8,2]],"Input type":["float","float"],"Concrete Inputs":["",""]%s}}')
_KERNEL = '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":%s,"args":{"External id":5}}'

ODD_LAYOUTS = {
    # "}, {" inside a string splits an event in two: both halves fail to parse.
    "separator_in_string": '{"traceEvents":[%s,%s]}' % (_OP % ('"aten::mm"', ',"note":"a}, {b"'), _KERNEL % 3),
    # A list of objects inside args: the split cuts the list.
    "objects_in_args": '{"traceEvents":[%s,%s]}' % (_OP % ('"aten::mm"', ',"l":[{"a":1},{"b":2}]'), _KERNEL % 3),
    # NaN is not JSON: orjson refuses it, the full path writes null and counts it.
    "nan": '{"traceEvents":[%s,%s]}' % (_OP % ('"aten::mm"', ""), _KERNEL % "NaN"),
    # "traceEvents" twice (once as a string value): where the array starts is ambiguous.
    "key_twice": '{"traceEvents":[%s,%s]}' % (_OP % ('"aten::mm"', ',"k":"traceEvents"'), _KERNEL % 3),
    # ... the second time in the last event, or in the header after the array (the worker's side
    # of the cut when two processes split the work).
    "key_twice_late": '{"traceEvents":[%s,%s]}' % (
        _OP % ('"aten::mm"', ""), _KERNEL.replace('"args":{', '"args":{"k":"traceEvents",') % 3),
    "key_twice_in_tail": '{"traceEvents":[%s,%s],"x":"traceEvents"}' % (_OP % ('"aten::mm"', ""), _KERNEL % 3),
    # A non-object element between events.
    "number_element": '{"traceEvents":[%s,5,%s]}' % (_OP % ('"aten::mm"', ""), _KERNEL % 3),
    # Infinity in the header after the array (not JSON; the full path writes null).
    "infinity_in_header": '{"traceEvents":[%s,%s],"x":Infinity}' % (_OP % ('"aten::mm"', ""), _KERNEL % 3),
    # traceEvents nested inside another object.
    "nested": '{"meta":{"traceEvents":[]},"traceEvents2":[]}',
}


@pytest.mark.parametrize("name", sorted(ODD_LAYOUTS))
def test_unexpected_layout_falls_back(name, tmp_path):
    src = _write(tmp_path, ODD_LAYOUTS[name])
    # The fast path itself declines (returns None, writes nothing) ...
    declined = tmp_path / "declined.json"
    assert _stream(src, declined) is None
    assert not declined.exists()
    if name == "nested":
        with pytest.raises(tf.TraceFormatError):
            A.augment_file(src, str(tmp_path / "x.json"), fast=True)
        return
    # ... and augment_file(fast=True) then gives exactly the full path's result.
    full, fast, s_full, s_fast = _both(src, tmp_path)
    assert fast == full
    assert s_fast == s_full
    # The mm op is costed in every case: 2*4*8*2 = 128 FLOPs (kernel dur NaN: on the kernel still).
    assert any(e.get("args", {}).get(evs.KERNEL_FLOP) == 128 for e in fast["traceEvents"] if isinstance(e, dict))


def test_empty_events_fast(tmp_path):
    src = _write(tmp_path, '{"a": [1, {"b": 2}],\n "traceEvents": [ ],\n "z": "}, {"}')
    out = tmp_path / "o.json"
    stats = _stream(src, out)
    assert stats is not None and stats.events == 0 and stats.events_augmented == 0
    assert json.loads(out.read_text()) == {"a": [1, {"b": 2}], "traceEvents": [], "z": "}, {"}


def test_size_threshold_picks_path(generated, tmp_path, monkeypatch):
    calls = []
    real = S.augment_file_stream

    def spy(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(S, "augment_file_stream", spy)
    A.augment_file(generated, str(tmp_path / "a.json"))  # ~5 MB: below the threshold
    assert calls == []
    monkeypatch.setattr(engines, "LARGE_TRACE_BYTES", 1)
    A.augment_file(generated, str(tmp_path / "b.json"))
    assert calls == [generated]
    # A .gz trace counts by its JSON's size, not by its compressed size.
    packed = str(tmp_path / "gen.json.gz")
    with open(generated, "rb") as f, gzip.open(packed, "wb") as g:
        g.write(f.read())
    text, disk = os.path.getsize(generated), os.path.getsize(packed)
    assert tf.text_size(packed) == text and tf.text_size(generated) == text and disk < text // 4
    monkeypatch.setattr(engines, "LARGE_TRACE_BYTES", text)
    A.augment_file(packed, str(tmp_path / "c.json"))
    assert calls == [generated, packed]


def _runtime(corr, ts=15):
    return ('{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%s,"dur":2,'
            '"args":{"correlation":%s}}' % (ts, corr))


def _flow(ph, pid, tid, ts, fid):
    return '{"ph":"%s","id":%s,"pid":%s,"tid":%s,"ts":%s,"cat":"ac2g","name":"ac2g"}' % (ph, fid, pid, tid, ts)


def test_flows_parsed_when_a_kernel_needs_them(tmp_path):
    # The kernel carries neither correlation nor External id: only the ac2g flow pair (runtime call at
    # ts 15 on 1/1 -> kernel at ts 30 on 0/7) leads to aten::mm, whose 2*4*8*2 = 128 FLOPs land on it.
    kernel = '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,"args":{"grid":[1,1,1]}}'
    op = _OP % ('"aten::mm"', "")
    text = '{"traceEvents":[\n%s]}' % ",\n".join([op, _runtime(9), kernel, _flow("s", 1, 1, 15, 3),
                                                  _flow("f", 0, 7, 30, 3)])
    src = _write(tmp_path, text)
    assert _stream(src, tmp_path / "direct.json") is not None
    full, fast, s_full, s_fast = _both(src, tmp_path)
    assert fast == full and s_fast == s_full
    assert fast["traceEvents"][2]["args"][evs.KERNEL_FLOP] == 128
    assert evs.KERNEL_FLOP not in fast["traceEvents"][0]["args"]
    assert s_fast.kernels_without_launch == 0


def test_runtime_call_outside_its_op_joins_by_its_external_id(tmp_path):
    # The runtime call (correlation 9, External id 5) runs on another thread than aten::mm, so no
    # nesting names its op, and the kernel carries only the correlation: the runtime call's own
    # External id (read back from the file) leads to aten::mm, 2*4*8*2 = 128 FLOPs.
    runtime = ('{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":15,"dur":2,'
               '"args":{"correlation":9,"External id":5}}')
    kernel = '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,"args":{"correlation":9}}'
    text = '{"traceEvents":[\n%s]}' % ",\n".join([_OP % ('"aten::mm"', ""), runtime, kernel])
    src = _write(tmp_path, text)
    full, fast, s_full, s_fast = _both(src, tmp_path)
    assert fast == full and s_fast == s_full
    assert fast["traceEvents"][2]["args"][evs.KERNEL_FLOP] == 128
    assert s_fast.kernels_without_launch == 0


@pytest.mark.parametrize("kernel", [
    # args first: our args cannot be spliced before the event's last brace; the event is re-encoded.
    '{"args":{"correlation":9},"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4}',
    # args last, with whitespace before the closing braces: spliced.
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,"args":{"correlation":9} \n }',
    # args already carrying one of our keys (a Triton launch with kernel_flop): re-encoded, ours win.
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"args":{"correlation":9,"roofline_bound":"old","x":1}}',
    # dur 0: no achieved rate, counted.
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":0,"args":{"correlation":9}}',
])
def test_spliced_and_reencoded_events_match_full_path(kernel, tmp_path):
    text = '{"traceEvents":[\n%s]}' % ",\n".join([_OP % ('"aten::mm"', ""), _runtime(9), kernel])
    src = _write(tmp_path, text)
    assert _stream(src, tmp_path / "direct.json") is not None
    full, fast, s_full, s_fast = _both(src, tmp_path)
    assert fast == full and s_fast == s_full
    args = fast["traceEvents"][2]["args"]
    assert args[evs.KERNEL_FLOP] == 128  # 2*4*8*2
    assert args[evs.KERNEL_BYTES_READ] == (4 * 8 + 8 * 2) * 4 and args[evs.KERNEL_BYTES_WRITTEN] == 4 * 2 * 4
    assert args[evs.ROOFLINE_BOUND] != "old"


@pytest.mark.parametrize("kernel", [
    # A key repeated after args: the object before the event's last brace is not the args.
    '{"ph":"X","x":{"a":1},"cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"args":{"correlation":9},"x":{"b":2}}',
    # args repeated: JSON keeps the last one, and ours go into it.
    '{"ph":"X","cat":"kernel","args":{"correlation":5},"name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"args":{"correlation":9}}',
    # args holding an "args" member of its own.
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"args":{"correlation":9,"args":{"n":1}}}',
    # a brace inside a string of the args, and an "args" key quoted inside a string.
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"args":{"correlation":9,"s":"a}b"}}',
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"args":{"correlation":9,"s":"\\"args\\":{"}}',
    # the args key written with an escape, an "args" member inside it.
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":30,"dur":4,'
    '"\\u0061rgs":{"correlation":9,"args":{"n":1}}}',
])
def test_splice_checks_which_object_it_extends(kernel, tmp_path):
    text = '{"traceEvents":[\n%s]}' % ",\n".join([_OP % ('"aten::mm"', ""), _runtime(9), kernel])
    src = _write(tmp_path, text)
    assert _stream(src, tmp_path / "direct.json") is not None
    full, fast, s_full, s_fast = _both(src, tmp_path)
    assert fast == full and s_fast == s_full
    assert fast["traceEvents"][2]["args"][evs.KERNEL_FLOP] == 128  # 2*4*8*2
    assert evs.KERNEL_FLOP not in json.dumps(fast["traceEvents"][2].get("x", {}))


_PAD = b'{"x":[1,2],'  # text before the event, so that positions are absolute ones


@pytest.mark.parametrize("event, expected", [
    # Kineto's layout: the args' closing brace, found by hand (the event's last brace is after it).
    (b'{"ph":"X","cat":"kernel","dur":4,"args":{"correlation":9}}', 56),
    (b'{"ph":"X","cat":"kernel","dur":4,\n  "args": {\n "correlation": 9\n  } \n }', 66),
    # a brace inside a string of the args: still the args' own closing brace
    (b'{"ph":"X","args":{"s":"a}b"}}', 27),
    # an escaped quote and an "args" key quoted inside a string of the args
    (b'{"ph":"X","args":{"s":"\\"args\\":{"}}', 34),
    # a nested object inside the args
    (b'{"ph":"X","args":{"a":{"b":1}}}', 29),
    # "args" as a string value inside the args, after the key: not spliced (re-encoded)
    (b'{"ph":"X","args":{"s":"args"}}', -1),
    # the args key written with an escape, holding an "args" member: not spliced
    (b'{"ph":"X","\\u0061rgs":{"a":1,"args":{"n":1}}}', -1),
    # args not the last member, args already holding one of our keys, args not an object
    (b'{"args":{"a":1},"ph":"X"}', -1),
    (b'{"ph":"X","args":{"roofline_bound":"old"}}', -1),
    (b'{"ph":"X","args":[1]}', -1),
])
def test_args_close_finds_the_args_closing_brace(event, expected):
    # What the spliced args are inserted before: the position of the args' closing brace in the
    # whole text, counted by hand in each event above (-1: the event is re-encoded instead).
    raw = _PAD + event + b"]}"
    s0, e0 = len(_PAD), len(_PAD) + len(event)
    ev = json.loads(event)
    got = R.args_close(raw, ev, s0, e0)
    assert got == (expected + s0 if expected >= 0 else -1)
    if expected >= 0:
        assert raw[got:got + 1] == b"}"
    hint = R.hint_of(raw, ev, s0, e0)
    assert hint == ((got, ev.get("cat"), ev.get("dur"), True) if expected >= 0 else None)


def test_hint_of_empty_args():
    # Empty args: our args go in without a comma before them.
    event = b'{"ph":"X","cat":"kernel","dur":2.5,"args":{}}'
    raw = _PAD + event
    assert R.hint_of(raw, json.loads(event), len(_PAD), len(raw)) == (len(_PAD) + 43, "kernel", 2.5, False)


def test_fast_path_never_imports_torch(generated, tmp_path):
    # Offline augment resolves the GPU row and its peaks by dtype name: torch (0.9 s to import)
    # must stay out of the process once the ops' signatures are cached (a signature seen for the
    # first time may need torch's shape rules). A fresh interpreter, since this one has torch loaded;
    # the cache warmed here first, in the session's cache directory, as any earlier test may have.
    import subprocess
    import sys

    A.augment_file(generated, str(tmp_path / "warm.json"), fast=False)
    out = str(tmp_path / "out.json")
    code = ("import sys\n"
            "from inductor_perf.augment import core as A\n"
            f"s = A.augment_file({generated!r}, {out!r}, fast=True)\n"
            "assert s.events_augmented > 1000 and s.peaks_known, s\n"
            "print('torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    assert _load(out)["traceEvents"]  # it wrote a trace


def test_inline_roofline_equals_classify_on_a_sweep():
    # The fast path's inline roofline must give classify's numbers and bound exactly, including at
    # the ridge, the 25 % / 10 µs / 1 MiB latency edges, zero FLOPs and zero bytes.
    from inductor_perf.roofline import point as roofline

    head, tail = {"kernel_flop": 1}, {"cost_source": "shapes"}
    flops_values = [0, 1, 1000, 2 * 4096 ** 3, 3_350_000, 989_500_000, (1 << 53) - 1]
    bytes_values = [0, 1, 1 << 20, (1 << 20) - 1, 3_350_000, 2 * 4096 ** 2, 10 ** 12]
    durs = [1e-6, 0.5, 9.999, 10.0, 10.001, 200.0, 1e6]
    roofs_seen, bounds_seen = set(), set()
    for peak in (989.5, 67.0, 1e-6, 1e12):
        for bw in (3350.0, 1.0):
            for flops in flops_values:
                for nbytes in bytes_values:
                    roof = roofline.binding_roof(flops, nbytes, peak, bw)
                    roofs_seen.add(roof)
                    for dur in durs:
                        got = R.args_inline(head, tail, flops, nbytes, dur, peak, bw, roof)
                        p = roofline.classify(flops, nbytes, dur, peak, bw)
                        assert got == cost_args.args_for(head, tail, flops, nbytes, dur, peak, bw)
                        assert list(got) == list(cost_args.args_for(head, tail, flops, nbytes, dur, peak, bw))
                        assert got["roofline_bound"] == p.bound
                        assert got["achieved_flops_pct"] == p.flops_pct
                        assert got["achieved_bandwidth_pct"] == p.bandwidth_pct
                        bounds_seen.add(p.bound)
    assert roofs_seen == {None, "compute", "memory"}
    assert bounds_seen == {"compute", "memory", "latency"}
    # a hand case: 2*4096^3 FLOPs in 200 µs on an H100 SXM (989.5 TFLOP/s bf16) = 687.2 TFLOP/s, 69.4 %
    got = R.args_inline(head, tail, 2 * 4096 ** 3, 6 * 4096 ** 2, 200.0, 989.5, 3350.0,
                         roofline.binding_roof(2 * 4096 ** 3, 6 * 4096 ** 2, 989.5, 3350.0))
    assert got["roofline_bound"] == "compute" and round(got["achieved_flops_pct"], 1) == 69.4


def test_worker_really_shares_the_work(generated, tmp_path, processes):
    # Two processes: one worker forked, and reaped (its peak RSS recorded); one process: none.
    full, fast, s_full, s_fast = _both(generated, tmp_path)
    assert fast == full and s_fast == s_full
    assert (s_fast.worker_maxrss_kb is not None) == processes
    assert s_fast.worker_maxrss_kb is None or s_fast.worker_maxrss_kb > 0


@pytest.mark.parametrize("ext", [".json", ".json.gz"])
def test_stream_stats_carry_the_worker_rss_and_stage_marks(generated, tmp_path, processes, ext):
    # Returned with each run, not kept in the module: the forked worker's peak RSS (from wait4) and
    # every stage each process reached, the worker's included, without debug logging on.
    s = A.augment_file(generated, str(tmp_path / ("stream" + ext)), engine="stream")
    if processes:
        assert s.worker_maxrss_kb > 1024  # a Python process: over 1 MB
    else:
        assert s.worker_maxrss_kb is None
    main = [what for who, _t, what in s.stage_marks if who == "main"]
    worker = [what for who, _t, what in s.stage_marks if who == "worker"]
    assert main[:4] == ["read", "split", "indexed", "received the worker's index" if processes else "joined"]
    assert main[-1] == "renamed"
    assert worker == ([
        "worker started", "worker split", "worker indexed", "worker sent index",
        "worker got costs", "worker rendered its part",
        "worker compressed its part" if ext.endswith(".gz") else "worker wrote its part"] if processes else [])
    for who in ("main", "worker"):
        times = [t for w, t, _what in s.stage_marks if w == who]
        assert times == sorted(times) and all(t >= 0 for t in times)
    # The full engine has neither; they are not compared (they say how the run went, not what it did).
    full = A.augment_file(generated, str(tmp_path / ("full" + ext)), engine="full")
    assert full.worker_maxrss_kb is None and full.stage_marks == () and full == s


def _dup_ext_trace(tmp_path, n_ops: int) -> str:
    # n_ops aten::mm ops one after the other on one thread, each launching one kernel, and every
    # op carrying External id 5: all but the first are duplicates, wherever the worker's part starts.
    evs = []
    for j in range(n_ops):
        ts = 100 * j
        evs.append('{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":20,'
                   '"args":{"External id":5,"Input Dims":[[4,8],[8,2]],"Input type":["float","float"],'
                   '"Concrete Inputs":["",""]}}' % ts)
        evs.append(_runtime(1000 + j, ts + 5))
        evs.append('{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":4,'
                   '"args":{"correlation":%d,"External id":5}}' % (ts + 30, 1000 + j))
    return _write(tmp_path, '{"traceEvents":[\n%s]}' % ",\n".join(evs))


def test_duplicate_external_ids_across_the_split(tmp_path):
    # 7 ops with the same External id: 6 duplicates (hand count), however the events are split.
    src = _dup_ext_trace(tmp_path, 7)
    full, fast, s_full, s_fast = _both(src, tmp_path)
    assert fast == full and s_fast == s_full
    assert s_fast.duplicate_external_ids == 6
    # each kernel still gets its own op's cost through its correlation: 2*4*8*2 FLOPs
    assert sum(1 for e in fast["traceEvents"] if e["args"].get(evs.KERNEL_FLOP) == 128) == 7


@pytest.mark.parametrize("ext", [".json", ".json.gz"])
def test_worker_dying_falls_back_to_one_process(generated, tmp_path, monkeypatch, processes, caplog, ext):
    # A worker that dies before answering, after sending its index, or while writing (or, for .gz
    # output, compressing) its part of the output: the parent does that work itself and writes the
    # same JSON. (Forced on in both parametrizations.)
    monkeypatch.setattr(S, "LARGE_TRACE_BYTES", 0)
    full = str(tmp_path / "full.json")
    A.augment_file(generated, full, fast=False)
    real = S.worker_main

    def dies_at_once(*a):
        raise RuntimeError("worker gone")

    def dies_before_writing(clock, raw, gz, start, cut, join_type, rx, tx):
        # does its part of the split and the join as the real one does, then dies
        starts, ends, end = tf.split_last_events(raw, cut - 1)
        base = W.get(rx)
        part = join_type(load=lambda i: None)
        assert P.join_range(raw, starts, ends, 0, len(starts), part, base)
        W.put(tx, (end, starts.tobytes(), ends.tobytes(), part.state()))
        W.get(rx)
        raise RuntimeError("worker gone")

    def dies_while_writing(clock, raw, gz, start, cut, join_type, rx, tx):
        # the real worker, up to where it is told where its part goes: it scribbles there and dies
        get = W.get

        seen = []

        def get_then_scribble(f):
            got = get(f)
            seen.append(got)
            if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], str):
                path, offset = got
                with open(path, "r+b") as out:
                    out.seek(offset)
                    out.write(b"#" * 4096)
                raise RuntimeError("worker gone")
            if type(got) is int and len(seen) == 3:  # after its index and its job: the CRC of the
                raise RuntimeError("worker gone")      # parent's part of a .gz output; it is compressing
            return got

        W.get = get_then_scribble  # in this forked process only
        real(clock, raw, gz, start, cut, join_type, rx, tx)

    for fake, said in ((dies_at_once, "parsing its part here"), (dies_before_writing, "writing its part here"),
                       (dies_while_writing, "writing its part here")):
        caplog.clear()
        monkeypatch.setattr(S, "worker_main", fake)
        out = str(tmp_path / (fake.__name__ + ext))
        stats = A.augment_file(generated, out, fast=True)
        assert _load(out) == _load(full)
        assert said in caplog.text
        assert stats.worker_maxrss_kb > 0  # it was forked and reaped
    monkeypatch.setattr(S, "worker_main", real)
    assert not [f for f in os.listdir(tmp_path) if f.endswith((".part", ".tmp"))]  # no leftovers


# --- the worker forked while other threads run ---------------------------------------------------
@contextlib.contextmanager
def _other_thread(holding: threading.Lock | None = None):
    """Another Python thread alive meanwhile (torch 2.15 starts some when imported), holding
    ``holding`` throughout when given."""
    ready, stop = threading.Event(), threading.Event()

    def run() -> None:
        with holding if holding is not None else contextlib.nullcontext():
            ready.set()
            stop.wait()

    t = threading.Thread(target=run, name="test-bystander", daemon=True)
    t.start()
    try:
        assert ready.wait(10)
        yield t
    finally:
        stop.set()
        t.join()


@contextlib.contextmanager
def _deadline(seconds: int):
    """Fail rather than hang: a deadlocked worker would leave the parent waiting on its pipe for good."""

    def expired(signum, frame):
        raise AssertionError(f"the fast path took over {seconds} s: a deadlocked worker?")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("ext", [".json", ".json.gz"])
def test_worker_forked_while_another_thread_runs(generated, tmp_path, processes, caplog, ext):
    # The worker is forked though another thread is alive, and the output is the full path's; no
    # warning about forking a multi-threaded process (Python 3.12+ gives one unless told not to).
    caplog.set_level(logging.INFO, logger="inductor_perf")
    with _other_thread() as t, _deadline(120), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        full, fast, s_full, s_fast = _both(generated, tmp_path, ext)
        assert t.is_alive() and threading.active_count() >= 2
    assert fast == full and s_fast == s_full
    assert (s_fast.worker_maxrss_kb is not None) == processes
    assert not [w for w in warned if "fork" in str(w.message)]
    assert "worker" not in caplog.text  # neither "the fast-path worker failed" nor "exited with status"


def test_worker_never_logs(generated, tmp_path, processes):
    # Debug logging on, through a handler that needs a lock another thread holds through the fork,
    # but only in a process other than this one: a worker that logged would hang there. The parent
    # logs the worker's stage marks for it.
    me = os.getpid()
    held = threading.Lock()
    messages: list[str] = []

    class NeedsTheLock(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if os.getpid() != me:
                with held:
                    pass
            messages.append(record.getMessage())

    logger = logging.getLogger("inductor_perf")
    handler, level = NeedsTheLock(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with _other_thread(holding=held), _deadline(120):
            full, fast, s_full, s_fast = _both(generated, tmp_path)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert fast == full and s_fast == s_full
    assert (s_fast.worker_maxrss_kb is not None) == processes
    worker_marks = [m for m in messages if m.startswith("fast path [worker]")]
    assert [m.rsplit(": ", 1)[1] for m in worker_marks] == ([
        "worker started", "worker split", "worker indexed", "worker sent index",
        "worker got costs", "worker rendered its part", "worker wrote its part"] if processes else [])
    assert any(m.startswith("fast path [main]") for m in messages)


@pytest.mark.parametrize("torch_first", [True, False])
def test_worker_loads_no_module(generated, tmp_path, processes, torch_first):
    # All the forked worker uses is imported before the fork (augment.stream.worker.Worker): it loads no module,
    # with torch imported or not (the CLI's case: then nothing else has loaded importlib.metadata, which
    # the op-cost cache's file name needs), when the parent imports inductor_perf.devices.table for the
    # device row after the fork. A fresh interpreter, since this one has loaded nearly everything already.
    import subprocess
    import sys

    if not processes:
        pytest.skip("about the forked worker")
    d = str(tmp_path)
    code = ("import json, os, sys\n"
            + ("import torch\n" if torch_first else "") +
            "from inductor_perf.augment import core as A\n"
            "from inductor_perf.augment.stream import engine as S\n"
            "S.LARGE_TRACE_BYTES = 0\n"
            "real = S.worker_main\n"
            "def watched(*args):\n"
            "    before, finished = set(sys.modules), False\n"
            "    try:\n"
            "        real(*args)\n"
            "        finished = True\n"
            "    finally:\n"
            f"        with open(os.path.join({d!r}, 'worker%d' % os.getpid()), 'w') as f:\n"
            "            json.dump([sorted(set(sys.modules) - before), finished], f)\n"
            "S.worker_main = watched\n"
            "for ext in ('.json', '.json.gz'):\n"
            f"    s = A.augment_file({generated!r}, os.path.join({d!r}, 'out' + ext), fast=True)\n"
            "    assert s.peaks_known and s.worker_maxrss_kb > 0, s\n"
            "print('inductor_perf.devices.table' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"  # the device row was looked up
    reports = [json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d)) if f.startswith("worker")]
    assert reports == [[[], True], [[], True]]


def test_tf32_kernel_names_are_noted_on_both_sides_of_the_split(tmp_path):
    # 8 float32 aten::mm ops, one kernel each, alternately a plain SGEMM and a TF32 one (by name):
    # wherever the worker's part starts, each kernel is costed on its own op's dtype, TF32 by its name.
    evs_ = []
    names = ["ampere_sgemm_128x64_nn", "cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4"]
    for j in range(8):
        ts = 100 * j
        evs_.append('{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":20,'
                    '"args":{"External id":%d,"Input Dims":[[64,64],[64,64]],"Input type":["float","float"],'
                    '"Concrete Inputs":["",""]}}' % (ts, 10 + j))
        evs_.append(_runtime(1000 + j, ts + 5))
        evs_.append('{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":%d,"dur":4,'
                    '"args":{"correlation":%d,"External id":%d}}' % (names[j % 2], ts + 30, 1000 + j, 10 + j))
    src = _write(tmp_path, '{"traceEvents":[\n%s]}' % ",\n".join(evs_))
    full, fast, _, _ = _both(src, tmp_path)
    assert fast == full
    got = [e["args"].get(evs.KERNEL_DTYPE) for e in fast["traceEvents"] if e["cat"] == "kernel"]
    assert got == ["float32", "tf32"] * 4
