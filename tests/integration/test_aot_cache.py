"""Warm restarts: Inductor's AOTAutograd cache serves our compiles, with the tags a miss makes.

Fresh processes share one TORCHINDUCTOR_CACHE_DIR. The second one must hit the AOTAutograd cache
(torch's own counters say so) and end with the first one's kernel table, field by field and in the
same order, on a training model with a graph break under dynamic shapes (whose backwards AOTAutograd
compiles at once) and on one with static shapes (whose backwards it compiles at their first call:
the order of the table tells the two apart); its env-var capture must tag every compiled kernel event
of the first model as the first one's does. Where the caches disagree (our tags gone, the
FX graph cache entries gone, the AOTAutograd entries gone) the table is still the first one's; an
entry written under other options of ours never serves us; a torch whose cache-loading methods
changed, or a hit that gets past our hooks, falls back to the cache off with one log line and never
serves a graph untagged without saying so.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil
from collections import Counter

import pytest
from conftest import finish_child, start_child

pytestmark = pytest.mark.slow

SCRIPT = r'''
import json, logging, sys, torch, torch.nn as nn, torch.nn.functional as F
mode = sys.argv[1]
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.levelname, record.getMessage()])
logging.getLogger("inductor_perf").addHandler(Keep())
logging.getLogger("inductor_perf").setLevel(logging.INFO)
if mode == "changed_torch":  # a torch release whose cache-loading method takes another argument
    import torch._functorch._aot_autograd.aot_autograd_result as result
    own = result.FxGraphCacheLoadable.load
    def load(self, example_inputs, *, future=None):
        return own(self, example_inputs)
    result.FxGraphCacheLoadable.load = load
if mode == "bypass":  # a hit that loads its graphs past our hooks
    import inductor_perf.tagging.aot_cache as aot_cache
    aot_cache._wrap_load = lambda original: original
torch.manual_seed(0)
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.fc1, s.ln, s.fc2 = nn.Linear(64, 128), nn.LayerNorm(128), nn.Linear(128, 10)
    def forward(s, x):
        h = F.gelu(s.ln(s.fc1(x)))
        torch._dynamo.graph_break()
        return s.fc2(h)
m = M()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
options = {"inductor_perf.markers": False} if mode == "other_options" else None
f = torch.compile(m, backend="inductor_perf", dynamic=True, options=options)
for step in range(5):
    x = torch.randn(16 + 4 * (step % 3), 64)
    y = torch.randint(0, 10, (x.shape[0],))
    F.cross_entropy(f(x), y).backward()
    opt.step()
    opt.zero_grad()
class S(nn.Module):  # static shapes: AOTAutograd compiles a backward at its first call
    def __init__(s):
        super().__init__()
        s.fc1, s.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)
    def forward(s, x):
        h = torch.relu(s.fc1(x))
        torch._dynamo.graph_break()
        return s.fc2(h)
g = torch.compile(S(), backend="inductor_perf", options=options)
for step in range(2):
    g(torch.randn(8, 64)).sum().backward()
from torch._dynamo.utils import counters
import inductor_perf
print("JSON:" + json.dumps({"aot": dict(counters["aot_autograd"]), "fx": dict(counters["inductor"]),
                            "log": records, "graphs": [g.to_dict() for g in inductor_perf.graph_table()],
                            "kernels": [k.to_dict() for k in inductor_perf.kernel_table()]}))
'''


def _start(script: str, cache, trace_dir, mode: str = "default"):
    """A fresh process over ``cache``. Every one captures, into its own ``trace_dir`` (the capture
    names C++ kernels in the profiler, ``cpp.enable_kernel_profile``, which is in both cache keys: the
    processes compared here must agree on it)."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "INDUCTOR_PERF_TRACE_DIR": str(trace_dir),
           "INDUCTOR_PERF_SKIP": "2", "INDUCTOR_PERF_STEPS": "2"}
    code = f"import sys; sys.argv[1:] = [{mode!r}]; __file__ = {script!r}\n" \
           f"exec(compile(open({script!r}).read(), {script!r}, 'exec'))"
    return start_child(code, env)


def _copy(shared, dst, *drop: str):
    shutil.copytree(shared, dst)
    for name in drop:  # a part of the cache lost: our tags, the FX graph entries, the AOTAutograd entries
        shutil.rmtree(dst / name)
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("aot_cache")
    script = str(root / "train.py")  # a real file, the same in every process: FX records its lines
    with open(script, "w") as f:
        f.write(SCRIPT)
    shared = root / "shared"
    out = {"root": root, "cold": finish_child(_start(script, shared, root / "trace_cold"))}
    # Copies of the filled cache, made before another process reads it.
    _copy(shared, root / "no_tags", "inductor_perf")
    _copy(shared, root / "no_fx", "fxgraph")
    _copy(shared, root / "no_aot", "aotautograd")
    for name in ("other_options", "changed_torch", "bypass"):
        _copy(shared, root / name)
    pairs = [(("warm", shared, "default"), ("other_options", root / "other_options", "other_options")),
             (("no_tags", root / "no_tags", "default"), ("no_aot", root / "no_aot", "default")),
             (("healed", root / "no_tags", "default"), ("no_fx", root / "no_fx", "default")),
             (("changed_torch", root / "changed_torch", "changed_torch"), ("bypass", root / "bypass", "bypass"))]
    for pair in pairs:  # two at a time: each pair's caches are independent
        procs = [(name, _start(script, cache, root / f"trace_{name}", mode)) for name, cache, mode in pair]
        out.update((name, finish_child(p)) for name, p in procs)
    return out


def _hits(result) -> int:
    return result["aot"].get("autograd_cache_hit", 0)


def _graph_facts(result, key: bool = True) -> list:
    """Per graph, in registration order: what its markers and the capture's join read besides its
    kernels, and (``key``) the FX graph cache key it has."""
    return [(g["graph_id"], g["is_backward"], g["symbol_locators"], g["profiler_graph_id"], g["frame_id"],
             g["compile_id"], g["kernel_profile"], g["tagged"]) + ((g["cache_key"],) if key else ())
            for g in result["graphs"]]


def _assert_all_tagged(result) -> None:
    assert len(result["graphs"]) == 8  # two models, two frames each (the graph break), forward and backward each
    for g in result["graphs"]:
        assert g["tagged"] and g["kernels"], g["error"]


def _assert_cold_table(result, runs, key: bool = True) -> None:
    _assert_all_tagged(result)
    assert result["kernels"] == runs["cold"]["kernels"]  # every field of every tag, in order
    assert _graph_facts(result, key) == _graph_facts(runs["cold"], key)


def test_cold_process_misses_and_tags(runs) -> None:
    cold = runs["cold"]
    assert _hits(cold) == 0 and cold["aot"]["autograd_cache_saved"] == 4  # one entry per frame
    _assert_all_tagged(cold)
    # dynamic shapes reached the first model's tags: symbolic costs, and where to read the sizes from
    assert any(isinstance(k["flops"], str) for k in cold["kernels"])
    assert all(g["symbol_locators"] for g in cold["graphs"][:4])
    # the graphs in the order they were compiled: the dynamic model's backwards with their forwards,
    # the static model's at the first backward call, the second frame's first
    order = [(g["frame_id"] - cold["graphs"][0]["frame_id"], g["is_backward"]) for g in cold["graphs"]]
    assert order[:4] == [(0, False), (0, True), (1, False), (1, True)]
    assert order[4:] == [(2, False), (3, False), (3, True), (2, True)]


def test_warm_process_hits_the_aot_autograd_cache(runs) -> None:
    warm = runs["warm"]
    assert _hits(warm) == 4, warm["aot"]  # one per frame: torch's own counter
    assert warm["aot"].get("autograd_cache_miss", 0) == runs["cold"]["aot"]["autograd_cache_miss"] - 4, warm["aot"]
    assert all(g["cache_hit"] for g in warm["graphs"])


def test_warm_kernel_table_equals_cold_field_by_field(runs) -> None:
    _assert_cold_table(runs["warm"], runs)


def _kernel_events(trace: dict) -> list[dict]:
    """The kernel events the compiled graphs launched, found from the raw nesting under our markers
    (as in test_capture.py, independently of costs/from_tags.py)."""
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    out = []
    for m in (e for e in evs if e["name"].startswith("## inductor_perf graph=")):
        inside = sorted((e for e in evs if e is not m and e["tid"] == m["tid"] and e["ts"] >= m["ts"]
                         and e["ts"] + e["dur"] <= m["ts"] + m["dur"]), key=lambda e: (e["ts"], -e["dur"]))
        end = -1.0
        for e in inside:
            if e["ts"] >= end and (e["name"].startswith("graph_") or e["name"].startswith("aten::")):
                out.append(e)
                end = e["ts"] + e["dur"]
    return out


_TAG_ARGS = ("kernel_flop", "kernel_matmul_flop", "kernel_bytes_read", "kernel_bytes_written", "module_path",
             "source", "node_names", "graph_id", "is_backward", "eager_ops", "kernel_kind", "cost_source")


def _capture(trace_dir) -> Counter:
    """Each kernel event of the capture: its name and every tag arg it carries."""
    (path,) = glob.glob(os.path.join(str(trace_dir), "*.trace.json.gz"))
    with gzip.open(path, "rt") as f:
        kernels = _kernel_events(json.load(f))
    assert kernels
    assert [k["name"] for k in kernels if "kernel_flop" not in k.get("args", {})] == []  # none untagged
    return Counter(json.dumps([k["name"]] + [k["args"].get(a) for a in _TAG_ARGS]) for k in kernels)


def test_warm_capture_tags_every_kernel_event_as_the_cold_one(runs) -> None:
    root = runs["root"]
    warm, cold = _capture(root / "trace_warm"), _capture(root / "trace_cold")
    assert warm == cold
    first_model = sum(len(g["kernels"]) for g in runs["cold"]["graphs"][:4])
    assert sum(cold.values()) == 2 * first_model  # both recorded steps ran every call site once


def test_other_options_never_served(runs) -> None:
    other = runs["other_options"]
    assert _hits(other) == 0, other["aot"]
    assert not any(g["cache_hit"] for g in other["graphs"])  # nor the FX graph cache: its own namespace
    _assert_cold_table(other, runs, key=False)  # the same tags, under other FX graph cache keys
    assert {g["cache_key"] for g in other["graphs"]}.isdisjoint(g["cache_key"] for g in runs["cold"]["graphs"])


def test_entry_without_tags_is_compiled_again_then_serves(runs) -> None:
    no_tags, healed = runs["no_tags"], runs["healed"]
    assert _hits(no_tags) == 0, no_tags["aot"]  # the hit became a miss ...
    assert any("without stored tags" in msg for _, msg in no_tags["log"])
    _assert_cold_table(no_tags, runs)
    # ... whose compile stored the tags under the entries' keys: the next process hits
    assert _hits(healed) == 4, healed["aot"]
    _assert_cold_table(healed, runs)


def test_fx_graph_entries_gone_aot_autograd_entry_misses(runs) -> None:
    no_fx = runs["no_fx"]
    assert _hits(no_fx) == 0 and no_fx["fx"].get("fxgraph_cache_hit", 0) == 0, no_fx
    _assert_cold_table(no_fx, runs)


def test_aot_autograd_entries_gone_fx_graph_cache_serves_its_tags(runs) -> None:
    no_aot = runs["no_aot"]
    assert _hits(no_aot) == 0 and no_aot["fx"]["fxgraph_cache_hit"] == 8, no_aot
    assert all(g["cache_hit"] for g in no_aot["graphs"])
    _assert_cold_table(no_aot, runs)


def test_changed_torch_compiles_with_the_cache_off_and_says_so_once(runs) -> None:
    result = runs["changed_torch"]
    assert result["aot"].get("autograd_cache_hit", 0) == 0, result["aot"]  # the cache was off for us
    lines = [msg for _, msg in result["log"] if "AOTAutograd cache is off for our compiles" in msg]
    assert len(lines) == 1, result["log"]
    assert "FxGraphCacheLoadable" in lines[0] and "example_inputs" in lines[0]
    assert all(g["cache_hit"] for g in result["graphs"])  # the FX graph cache and its stored tags still serve
    _assert_cold_table(result, runs)


def test_hit_past_our_hooks_is_said_and_listed_untagged(runs) -> None:
    result = runs["bypass"]
    assert _hits(result) == 1, result["aot"]  # the first frame's hit; the second frame ran with the cache off
    warnings = [msg for level, msg in result["log"] if level == "WARNING"]
    assert len(warnings) == 1 and "untagged" in warnings[0], result["log"]
    untagged = [g for g in result["graphs"] if not g["tagged"]]
    assert len(untagged) == 1 and "AOTAutograd cache hit" in untagged[0]["error"]
    tagged = [g for g in result["graphs"] if g["tagged"]]
    cold = {(g["graph_id"], g["is_backward"]): g["kernels"] for g in runs["cold"]["graphs"]}
    assert len(tagged) == 6 and all(g["kernels"] == cold[g["graph_id"], g["is_backward"]] for g in tagged)
