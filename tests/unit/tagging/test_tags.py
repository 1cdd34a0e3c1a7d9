"""The tag data model: expression evaluation, serialization, module paths, marker names."""

from __future__ import annotations

import json
import os

import pytest

from inductor_perf.model.markers import MARKER_PREFIX, marker_name, parse_marker
from inductor_perf.tagging.module_paths import normalize_module_path
from inductor_perf.tagging.collector import innermost_frame
from inductor_perf.model.tags import GraphTags, KernelTag, NodeInfo, evaluate


# --- evaluate -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value, symbols, expected", [
    (42, None, 42),
    ("2*s0*512", {"s0": 8}, 8192),               # 2·8·512
    ("2048*s33 + 1572864", {"s33": 2}, 1576960),  # 2048·2 + 1572864
    ("s0*s1", {"s0": 3, "s1": 7, "s9": 1}, 21),   # unused symbols are ignored
    ("4*floor(s0/2)", {"s0": 9}, 16),             # sympy functions Inductor emits
    ("(s0 + 1)*(s0 - 1)", {"s0": 5}, 24),
])
def test_evaluate(value, symbols, expected) -> None:
    assert evaluate(value, symbols) == expected


def test_evaluate_missing_symbol_names_it() -> None:
    with pytest.raises(ValueError, match=r"s1"):
        evaluate("s0*s1", {"s0": 2})


# --- serialization ------------------------------------------------------------------------------
def _tag(**kw) -> KernelTag:
    node = NodeInfo(name="addmm", target="aten.addmm.default", original_aten="aten.addmm.default",
                    shapes=(("s0", 64),), dtypes=("float32",), module_path="fc1",
                    source="/x/model.py:12")
    base = dict(graph_id=0, is_backward=False, kernel_name="extern_kernels.addmm", kind="extern",
                call_index=0, nodes=(node,), flops="4096*s0", matmul_flops="4096*s0",
                bytes_read="128*s0 + 8448", bytes_written="256*s0", source="/x/model.py:12",
                stack_trace='File "/x/model.py", line 12, in forward', module_path="fc1",
                profiler_name="aten::addmm", device="cpu", op="aten.addmm.out")
    base.update(kw)
    return KernelTag(**base)


def test_kernel_tag_round_trip_through_json() -> None:
    tag = _tag()
    text = json.dumps(tag.to_dict(), allow_nan=False)
    back = KernelTag.from_dict(json.loads(text))
    assert back == tag
    assert back.nodes[0].shapes == (("s0", 64),)  # lists from JSON become tuples again


def test_kernel_tag_ignores_unknown_keys() -> None:
    d = _tag().to_dict()
    d["added_by_a_newer_version"] = 1
    assert KernelTag.from_dict(d) == _tag()


def test_evaluated_tag() -> None:
    tag = _tag()
    assert tag.is_symbolic
    e = tag.evaluated({"s0": 8})
    assert not e.is_symbolic
    # 4096·8; 128·8 + 8448; 256·8
    assert (e.flops, e.matmul_flops, e.bytes_read, e.bytes_written) == (32768, 32768, 9472, 2048)
    concrete = _tag(flops=1, matmul_flops=1, bytes_read=2, bytes_written=3)
    assert concrete.evaluated({"s0": 8}) is concrete


def test_graph_tags_round_trip_and_symbol_values() -> None:
    import torch

    g = GraphTags(instance_id=3, graph_id=1, is_backward=True, kernels=[_tag(is_backward=True)],
                  cache_key="fabc", cache_hit=True, profiler_graph_id=0,
                  symbol_locators={"s0": ("size", 1, 0), "s1": ("int", 0), "s2": ("stride", 1, 0)})
    back = GraphTags.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g
    x = torch.empty(5, 7)
    assert g.symbol_values([9, x]) == {"s0": 5, "s1": 9, "s2": 7}
    # a locator that does not fit the inputs is left out rather than raising
    assert g.symbol_values([9]) == {"s1": 9}


# --- arithmetic on costs ----------------------------------------------------------------------------
def _static(**kw) -> KernelTag:
    return _tag(flops=100, matmul_flops=64, bytes_read=48, bytes_written=16, **kw)


def test_readme_arithmetic_on_symbolic_and_static_tags() -> None:
    tag, static = _tag(), _static()
    # 128·s0 + 8448 read, 256·s0 written
    assert str(tag.bytes_read + tag.bytes_written) == "384*s0 + 8448"
    assert static.bytes_read + static.bytes_written == 64
    assert str(tag.flops + 1) == "4096*s0 + 1" and static.flops + 1 == 101
    assert str(2 * tag.flops) == "8192*s0" and str(tag.flops * 2) == "8192*s0"
    assert tag.flops - tag.matmul_flops == 0 and type(tag.flops - tag.matmul_flops) is int  # symbols cancel
    assert str(sum(t.flops for t in (tag, static, tag))) == "8192*s0 + 100"
    assert sum(t.flops for t in (static, static)) == 200
    assert str(tag.bytes_written / 2) == "128*s0" and str(tag.bytes_written // 3) == "floor(256*s0/3)"
    assert str(-tag.flops) == "-4096*s0"
    # the numbers of an expression a user built: 384·8 + 8448
    assert evaluate(tag.bytes_read + tag.bytes_written, {"s0": 8}) == 11520
    assert evaluate(tag.bytes_written / 3, {"s0": 3}) == 256  # 256·3 / 3
    assert evaluate(tag.bytes_written / 3, {"s0": 1}) == pytest.approx(256 / 3)


def test_symbolic_costs_print_and_serialize_as_their_text() -> None:
    import msgspec
    import orjson

    tag = _tag()
    assert str(tag.flops) == "4096*s0" and type(str(tag.flops)) is str
    assert f"{tag.flops}" == "4096*s0" and "%s" % tag.flops == "4096*s0"
    d = tag.to_dict()
    for name in ("flops", "matmul_flops", "bytes_read", "bytes_written"):
        assert type(d[name]) is str  # what every JSON writer takes (msgspec refuses str subclasses)
    assert type(d["nodes"][0]["shapes"][0][0]) is str
    assert json.loads(json.dumps(d)) == json.loads(orjson.dumps(d)) == json.loads(msgspec.json.encode(d))
    assert json.loads(json.dumps(d))["bytes_read"] == "128*s0 + 8448"
    back = KernelTag.from_dict(json.loads(json.dumps(d)))
    assert back == tag and hash(back) == hash(tag)
    assert str(back.bytes_read + back.bytes_written) == "384*s0 + 8448"
    assert tag.flops == "4096*s0" and tag.flops != 4096  # equality is the text's


def test_symbolic_costs_compare_when_every_size_agrees() -> None:
    tag = _tag()
    assert tag.flops > 0 and 0 < tag.flops and tag.flops >= tag.matmul_flops
    assert tag.bytes_read + 1 > tag.bytes_read  # for every size
    with pytest.raises(TypeError, match=r"s0.*evaluated\(\{'s0'"):
        _ = tag.flops > 10**6  # 4096·s0 > 10^6 from s0 = 245 on: no answer without a size
    static = _static()  # 100 FLOPs < 4096·s0 for every size s0 >= 1
    assert sorted([tag, static], key=lambda t: t.flops) == [static, tag]
    with pytest.raises(TypeError, match="s0"):  # 10^6 against 4096·s0: depends on s0
        sorted([tag, _tag(flops=10**6)], key=lambda t: t.flops)


def test_symbolic_costs_refuse_text_and_int() -> None:
    tag = _tag()
    with pytest.raises(TypeError, match="str"):
        _ = tag.flops + " FLOPs"
    with pytest.raises(TypeError, match="str"):
        _ = "FLOPs: " + tag.flops
    with pytest.raises(ValueError, match="s0"):
        int(tag.flops)
    with pytest.raises(ZeroDivisionError):
        _ = tag.flops / 0
    assert int(tag.evaluated({"s0": 2}).flops) == 8192


def test_symbolic_tags_stay_lean() -> None:
    """Reading, printing and serializing symbolic tags does not import sympy (a quarter of a
    second); arithmetic does, on first use."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from inductor_perf.model.tags import KernelTag\n"
        "d = {'graph_id': 0, 'is_backward': False, 'kernel_name': 'k', 'kind': 'generated', "
        "'call_index': 0, 'nodes': [], 'flops': '2*s0', 'matmul_flops': 0, 'bytes_read': '8*s0', "
        "'bytes_written': '4*s0', 'source': None, 'stack_trace': None, 'module_path': None, "
        "'profiler_name': 'k'}\n"
        "t = KernelTag.from_dict(d)\n"
        "json.dumps(t.to_dict()); str(t.flops); t.is_symbolic\n"
        "before = 'sympy' in sys.modules\n"
        "total = t.bytes_read + t.bytes_written\n"
        "print(before, 'sympy' in sys.modules, total)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True", "12*s0"], out.stderr[-2000:]


# --- module paths and frames --------------------------------------------------------------------
@pytest.mark.parametrize("raw, expected", [
    ("L['self'].encoder.layers[0].attn", "encoder.layers.0.attn"),
    ("L['self']._modules['fc']", "fc"),
    ("L['self']", ""),
    ("getattr(L['self'].layers, '0').mlp", "layers.0.mlp"),
    ("L['self'].blocks['b1'].proj", "blocks.b1.proj"),
    ("L['mod'].fc2", "fc2"),
])
def test_normalize_module_path(raw: str, expected: str) -> None:
    assert normalize_module_path(raw) == expected


def test_innermost_frame_is_the_last_user_frame() -> None:
    st = ('  File "/home/u/train.py", line 40, in main\n    loss = model(x)\n'
          '  File "/home/u/model.py", line 12, in forward\n    return self.fc(x)\n')
    assert innermost_frame(st) == "/home/u/model.py:12"
    assert innermost_frame(None) is None and innermost_frame("no frames") is None


# --- markers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("iid, bwd, syms", [
    (1, False, None), (42, True, {}), (7, False, {"s0": 8}), (3, True, {"s1": 2, "s0": 16}),
])
def test_marker_round_trip(iid: int, bwd: bool, syms) -> None:
    name = marker_name(iid, bwd, syms)
    assert name.startswith(MARKER_PREFIX) and name.endswith(" ##")
    assert parse_marker(name) == (iid, bwd, dict(syms or {}))


@pytest.mark.parametrize("name", [
    "aten::mm", "## Call CompiledFxGraph fabc ##", "## inductor_perf graph=x fwd ##",
    "## inductor_perf graph=1 sideways ##", "## inductor_perf graph=1 fwd sym=s0:eight ##",
])
def test_parse_marker_rejects_other_names(name: str) -> None:
    assert parse_marker(name) is None


def test_evaluate_refuses_anything_but_a_size_expression():
    import pytest

    from inductor_perf.model.tags import evaluate

    for bad in ("__import__('os').getcwd()", "s0[0]", "lambda: 1"):
        with pytest.raises(ValueError):
            evaluate(bad, {"s0": 1})
    assert evaluate("FloorDiv(s0, 2) + Max(s1, 3)", {"s0": 9, "s1": 1}) == 7


def _placeholder_graph(sources: dict[str, object]):
    """A GraphModule whose placeholders carry Dynamo's grapharg sources (name -> source name)."""
    from types import SimpleNamespace

    import torch

    g = torch.fx.Graph()
    for name, source in sources.items():
        g.placeholder(name).meta["grapharg"] = SimpleNamespace(source=SimpleNamespace(name=source))
    g.output(None)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_parameter_names_of_dynamo_graph_inputs() -> None:
    from inductor_perf.tagging.module_paths import parameter_names

    gm = _placeholder_graph({
        "w": "L['self']._modules['layer1']._modules['0']._parameters['weight']",
        "x": "L['x']",
        "rm": lambda: "L['self']._modules['bn']._buffers['running_mean']",  # a method in older torch
        "root": "L['self']._parameters['scale']",
        "glob": "G['model']._parameters['w']",  # not a local module: left out
    })
    gm.meta["dynamo_flat_name_to_original_fqn"] = {"L__self___fc_weight": "fc.weight"}
    assert parameter_names(gm) == {0: "layer1.0.weight", 2: "bn.running_mean", 3: "scale",
                                   "L__self___fc_weight": "fc.weight"}


def test_kernel_reading_only_graph_inputs_belongs_to_its_first_parameter() -> None:
    import torch
    from torch._functorch._aot_autograd.descriptors import ParamAOTInput, PlainAOTInput

    from inductor_perf.tagging.collector import _attribution

    g = torch.fx.Graph()
    x, w, fc = g.placeholder("primals_1"), g.placeholder("primals_2"), g.placeholder("primals_3")
    x.meta["desc"], w.meta["desc"] = PlainAOTInput(0), PlainAOTInput(1)
    fc.meta["desc"] = ParamAOTInput("L__self___fc_weight")
    names = {1: "layer1.conv1.weight", "L__self___fc_weight": "fc.weight"}
    assert _attribution([x, w, fc], names) == ("layer1.conv1", "layer1.conv1.weight", None)
    assert _attribution([fc], names) == ("fc", "fc.weight", None)
    assert _attribution([x], names) == (None, None, None)  # a user input alone: no module
    assert _attribution([x, w], {}) == (None, None, None)  # names unknown: as before


def test_made_up_kernel_whose_output_leaves_the_graph_belongs_to_its_nearest_input() -> None:
    """torch 2.11 folds a tied weight's two gradients, add(acc, mm(a, b)), into an addmm with no
    stack trace and no module whose only user is the graph's output (GPT-2's wte/lm_head): it goes
    to the nearest inputs that have an origin, the one doing the most work among them."""
    import torch

    from inductor_perf.tagging.collector import _attribution

    g = torch.fx.Graph()
    acc_in, a, b = g.placeholder("tangents_1"), g.placeholder("permute_6"), g.placeholder("view_21")
    acc = g.call_function(torch.ops.aten.mul.Tensor, (acc_in, 2.0))
    acc.meta.update(stack_trace='  File "/m/model.py", line 7, in forward\n    e = self.wte(ids)\n',
                    fwd_nn_module_stack={"wte": ("L['self'].wte", torch.nn.Embedding)})
    mm = g.call_function(torch.ops.aten.addmm.default, (acc, a, b))  # made up: no meta
    g.output((mm,))
    module, source, stack = _attribution([mm], {})
    assert (module, source) == ("wte", "/m/model.py:7")
    assert "self.wte(ids)" in stack
    # nothing with an origin within reach: unknown, as before
    lone = torch.fx.Graph()
    p = lone.placeholder("x")
    op = lone.call_function(torch.ops.aten.relu.default, (p,))
    lone.output((op,))
    assert _attribution([op], {}) == (None, None, None)


def test_parameter_names_never_raise(caplog) -> None:
    import logging

    from inductor_perf.tagging.module_paths import _warn_no_parameter_names, parameter_names

    def boom() -> str:
        raise RuntimeError("source moved")

    _warn_no_parameter_names.cache_clear()
    gm = _placeholder_graph({"w": boom})
    with caplog.at_level(logging.WARNING, logger="inductor_perf.tagging.module_paths"):
        assert parameter_names(gm) == {} and parameter_names(gm) == {}
    assert [r.getMessage().count("source moved") for r in caplog.records] == [1]


def test_module_paths_from_the_stack_are_the_models_own():
    """The model is the module torch.compile wrapped (an OptimizedModule keeps it as _orig_mod),
    even inside a DDP-like wrapper; the frame's own module is the innermost one called."""
    import torch
    import torch.nn as nn

    from inductor_perf.tagging import module_paths

    class Probe(nn.Module):
        def forward(self, x):
            return module_paths.from_stack()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Identity(), Probe())

        def forward(self, x):
            return self.block[1](x)

    class Compiled(nn.Module):  # stands in for OptimizedModule: holds the model as _orig_mod
        def __init__(self, m):
            super().__init__()
            self._orig_mod = m

        def forward(self, x):
            return self._orig_mod(x)

    class Wrapper(nn.Module):  # DDP-like: the compiled model is its .module
        def __init__(self, m):
            super().__init__()
            self.module = m

        def forward(self, x):
            return self.module(x)

    model = Model()
    for outer in (model, Compiled(model), Wrapper(Compiled(model))):
        got = outer(torch.zeros(1))
        assert got.frame_module == "block.1"
        assert got.names[str(id(model.block))] == "block" and got.names[str(id(model))] == ""
    assert module_paths.from_stack() is None  # no module called: nothing to name


# --- the tag cache key ----------------------------------------------------------------------------
def _package_copy(tmp_path):
    import shutil

    import inductor_perf

    src = os.path.dirname(inductor_perf.__file__)
    dst = tmp_path / "inductor_perf"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_tag_cache_key_covers_all_of_tagging_and_what_it_imports(tmp_path) -> None:
    from inductor_perf.tagging.store import tag_sources

    pkg = _package_copy(tmp_path)
    files = set(tag_sources(str(pkg)))
    tagging = {f"tagging/{p.name}" for p in (pkg / "tagging").glob("*.py")}
    assert len(tagging) >= 8 and tagging <= files  # every module of tagging/
    # what they import: the data model, the op cost convention and formulas the node costs apply
    assert {"model/tags.py", "costs/ops/convention.py", "costs/ops/formulas.py"} <= files
    # no run-time stage (the backend passes the capture and the device check in): an edit of a
    # capture, a summary or a report does not make every graph compile again
    stages = {"capture", "summary", "report", "augment", "devices", "ranks", "comparison", "roofline"}
    assert [f for f in files if f.split("/")[0] in stages] == []
    assert "backend.py" not in files and "__init__.py" not in files
    # a module added to tagging/ is hashed before anything imports it
    (pkg / "tagging" / "new_rule.py").write_text("X = 1\n")
    assert "tagging/new_rule.py" in tag_sources(str(pkg))
    # a module tagging starts to import is followed, also when imported inside a function
    (pkg / "model" / "new_model.py").write_text("Y = 1\n")
    with open(pkg / "tagging" / "kernel_io.py", "a") as f:
        f.write("\n\ndef _later():\n    from ..model.new_model import Y\n    return Y\n")
    assert "model/new_model.py" in tag_sources(str(pkg))


@pytest.mark.parametrize("name", ["tagging/kernel_io.py", "tagging/node_costs.py", "tagging/module_paths.py",
                                  "tagging/collector.py", "tagging/compiler.py", "tagging/instrument.py",
                                  "tagging/aot_cache.py", "model/tags.py", "costs/ops/convention.py"])
def test_tag_cache_key_changes_with_one_byte(tmp_path, name: str) -> None:
    from inductor_perf.tagging.store import code_hash

    pkg = _package_copy(tmp_path)
    before = code_hash(str(pkg))
    path = pkg / name
    data = bytearray(path.read_bytes())
    data[-1:] = b" " if data[-1:] != b" " else b"\n"  # one byte at the end of the file
    path.write_bytes(bytes(data))
    assert code_hash(str(pkg)) != before


def test_tag_cache_key_changes_with_the_version(tmp_path) -> None:
    from inductor_perf.tagging.store import code_hash

    pkg = _package_copy(tmp_path)
    before = code_hash(str(pkg))
    init = pkg / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9'))
    assert code_hash(str(pkg)) != before


def test_tag_cache_key_of_this_checkout_is_its_code_hash() -> None:
    import inductor_perf
    from inductor_perf.tagging.store import code_hash, tag_code_hash

    assert tag_code_hash() == code_hash(os.path.dirname(inductor_perf.__file__))


def test_cache_namespace_names_our_code_and_our_options() -> None:
    # The namespace pass's uuid enters the FX graph cache key and the AOTAutograd cache key (both hash
    # Inductor's config): other tagging code or other options of ours never read our entries.
    from inductor_perf.tagging.compiler import _namespace_pass
    from inductor_perf.tagging.store import tag_code_hash

    default = _namespace_pass(None, {}).uuid()
    assert default == _namespace_pass(None, {}).uuid() and tag_code_hash() in default
    uuids = {default, _namespace_pass(None, {"inductor_perf.markers": False}).uuid(),
             _namespace_pass(None, {"inductor_perf.kernel_profile": True}).uuid(),
             _namespace_pass(None, {"inductor_perf.device": {"name": "x", "peak_tflops": {"float32": 1}}}).uuid(),
             _namespace_pass(None, {"inductor_perf.device": "/path/to/row.toml"}).uuid()}
    assert len(uuids) == 5
    # the options' order does not matter
    both = {"inductor_perf.markers": False, "inductor_perf.kernel_profile": True}
    assert _namespace_pass(None, both).uuid() == _namespace_pass(None, dict(reversed(both.items()))).uuid()


def test_cache_namespace_wraps_a_users_pass() -> None:
    from inductor_perf.tagging.compiler import _namespace_pass

    class Cacheable:
        calls = 0

        def __call__(self, graph):
            Cacheable.calls += 1

        def uuid(self):
            return "users-pass-v1"

    ours = _namespace_pass(Cacheable(), {})
    ours(None)
    assert Cacheable.calls == 1 and ours.uuid().endswith("-users-pass-v1")
    # a pass without a uuid is not cacheable (Inductor then bypasses its caches): neither are we
    assert _namespace_pass(lambda graph: None, {}).uuid() is None
