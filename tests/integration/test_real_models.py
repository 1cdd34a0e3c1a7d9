"""Real architectures from transformers (tiny configs built here, nothing downloaded), trained with
the env-var capture as a user would: GPT-2, BERT for sequence classification (its forward recompiles
on the second call: it sets config.problem_type on the first), T5 (encoder-decoder) and Mixtral (MoE;
CPU flash attention and grouped matmuls (MoE experts) are counted by hand where FlopCounterMode has
no formula); and, in the models tier, Llama, ViT and ResNet (the image classifiers recompile like BERT).

Each case runs in a fresh interpreter: FlopCounterMode counts one eager training step, then the model
is compiled with backend="inductor_perf" and trained 6 steps under INDUCTOR_PERF_TRACE_DIR (3 skipped,
2 recorded), then ``inductor_perf.compare()`` runs on it. ``make test`` runs GPT-2 and BERT;
``make test-models`` (which CI also runs) runs the others.
"""

from __future__ import annotations

import glob
import gzip
import json

import pytest
from conftest import run_child

pytestmark = pytest.mark.slow

# Per case: code that defines `m` (the model), `args` (positional inputs), `kwargs` (the training
# call's keyword inputs, labels included) and `loss(out)`; the prefix the summary's module rows use;
# and whether the tier below `make test` runs it.
CASES = {
    "gpt2": ("""
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=1, n_head=4, bos_token_id=0,
                 eos_token_id=0)
m = GPT2LMHeadModel(cfg)
ids = torch.randint(0, 512, (2, 32))
args, kwargs = (ids,), {"input_ids": ids, "labels": ids}
""", "transformer.h.0.attn", True),
    "bert": ("""
from transformers import BertConfig, BertForSequenceClassification
cfg = BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                 intermediate_size=128, num_labels=3)
m = BertForSequenceClassification(cfg)
ids = torch.randint(0, 512, (4, 32))
args, kwargs = (ids,), {"input_ids": ids, "labels": torch.randint(0, 3, (4,))}
""", "bert.encoder.layer.0.attention.self", True),
    "t5": ("""
from transformers import T5Config, T5ForConditionalGeneration
cfg = T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_decoder_layers=1,
               num_heads=4, decoder_start_token_id=0, pad_token_id=0)
m = T5ForConditionalGeneration(cfg)
ids = torch.randint(1, 512, (2, 24)); dec = torch.randint(1, 512, (2, 16))
args, kwargs = (ids, None, dec), {"input_ids": ids, "labels": dec}
""", "encoder.block.0.layer.0.SelfAttention", False),
    "mixtral": ("""
from transformers import MixtralConfig, MixtralForCausalLM
cfg = MixtralConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                    num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                    num_experts_per_tok=2, max_position_embeddings=64)
m = MixtralForCausalLM(cfg)
ids = torch.randint(0, 512, (2, 32))
args, kwargs = (ids,), {"input_ids": ids, "labels": ids}
""", "model.layers.0.self_attn", False),
    "llama": ("""
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
m = LlamaForCausalLM(cfg)
ids = torch.randint(0, 512, (2, 32))
args, kwargs = (ids,), {"input_ids": ids, "labels": ids}
""", "model.layers.0.self_attn", False),
    "vit": ("""
from transformers import ViTConfig, ViTForImageClassification
cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=1,
                num_attention_heads=4, intermediate_size=128, num_labels=3)
m = ViTForImageClassification(cfg)
px = torch.randn(2, 3, 32, 32)
args, kwargs = (px,), {"pixel_values": px, "labels": torch.randint(0, 3, (2,))}
""", "vit.layers.0.attention", False),
    "resnet": ("""
from transformers import ResNetConfig, ResNetForImageClassification
cfg = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                   layer_type="basic", num_labels=3)
m = ResNetForImageClassification(cfg)
px = torch.randn(2, 3, 32, 32)
args, kwargs = (px,), {"pixel_values": px, "labels": torch.randint(0, 3, (2,))}
""", "resnet.encoder.stages.0", False),
}

CHILD = """
import json, math, os, torch, transformers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry
aten = torch.ops.aten

class Uncounted(TorchDispatchMode):
    # Matmul FLOPs of the ops FlopCounterMode has no formula for, by hand from the shapes they ran
    # with: CPU flash attention (Q.K^T and P.V: 4*B*H*Sq*Sk*D; its backward recomputes the scores
    # and makes four more products: 10*B*H*Sq*Sk*D) and grouped matmuls (MoE experts: 2 FLOPs per
    # multiply-add, K = a's last dim; for two 2-D operands the groups split K).
    def __init__(self):
        super().__init__()
        self.flops = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        p = func.overloadpacket
        if p in flop_registry:
            return out
        if p is aten._scaled_dot_product_flash_attention_for_cpu:
            (b, h, sq, d), sk = args[0].shape, args[1].shape[2]
            self.flops += 4 * b * h * sq * sk * d
        elif p is aten._scaled_dot_product_flash_attention_for_cpu_backward:
            (b, h, sq, d), sk = args[1].shape, args[2].shape[2]
            self.flops += 10 * b * h * sq * sk * d
        elif p is aten._grouped_mm:
            a, w = args[0], args[1]
            if a.dim() == 2 and w.dim() == 2:
                self.flops += 2 * a.shape[0] * a.shape[1] * w.shape[1]
            else:
                self.flops += 2 * math.prod(out.shape) * a.shape[-1]
        return out

torch.manual_seed(0)
BUILD
def state():  # the attributes a first forward sets (BERT's config.problem_type)
    return getattr(m.config, "problem_type", None)
fresh = state()
with FlopCounterMode(display=False) as fc, Uncounted() as uncounted:
    m(**kwargs).loss.backward()
extra = uncounted.flops
m.config.problem_type = fresh  # back to a fresh model: the compiled forward sets it and recompiles
m.zero_grad()
f = torch.compile(m, backend="inductor_perf")
for step in range(6):
    f(**kwargs).loss.backward()
    m.zero_grad()
import inductor_perf
graphs = inductor_perf.graph_table()
cmp = inductor_perf.compare(m, args, loss_fn=lambda out: out.logits.sum(), steps=1, warmup=1, timing=False)
print("JSON:" + json.dumps({"flops": int(fc.get_total_flops()) + extra,
                            "compile_ids": sorted({g.compile_id for g in graphs if g.compile_id}),
                            "frames": len({g.frame_id for g in graphs}),
                            "compare_rows": len(cmp.rows),
                            "parameters": [n for n, _ in m.named_parameters()],
                            "transformers": os.path.dirname(transformers.__file__)}))
"""


def _kernel_events(events: list) -> list[dict]:
    """Compiled kernel events of a CPU capture: the generated C++ kernels (graph_<id>_...) and the
    extern ops the compiled graphs called (the outermost ops inside our graph markers)."""
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    marks = [e for e in xs if e.get("name", "").startswith("## inductor_perf graph=")]
    out = []
    for mk in marks:
        inside = sorted((e for e in xs if e is not mk and e.get("cat") == "cpu_op" and e["tid"] == mk["tid"]
                         and mk["ts"] <= e["ts"] and e["ts"] + e["dur"] <= mk["ts"] + mk["dur"]),
                        key=lambda e: (e["ts"], -e["dur"]))
        end = -1.0
        for e in inside:
            if e["ts"] >= end:  # outermost only
                out.append(e)
                end = e["ts"] + e["dur"]
    return out


def _run(case: str, tmp_path) -> tuple[dict, list, dict]:
    pytest.importorskip("transformers")  # in the test extra; a plain install of us may lack it
    build, _, _ = CASES[case]
    got = run_child(CHILD.replace("BUILD", build), env={"INDUCTOR_PERF_TRACE_DIR": str(tmp_path)}, timeout=900)
    (trace,) = glob.glob(str(tmp_path / "*.trace.json.gz"))
    events = json.load(gzip.open(trace, "rt"))["traceEvents"]
    (summary,) = glob.glob(str(tmp_path / "*.summary.json"))
    return got, events, json.load(open(summary))


def _check(case: str, tmp_path) -> dict:
    got, events, summary = _run(case, tmp_path)
    kernels = _kernel_events(events)
    assert kernels
    for e in kernels:
        a = e["args"]
        assert "kernel_flop" in a and a.get("kernel_num_gb", 0) > 0, e["name"]
        assert a.get("module_path") is not None, e["name"]  # "" is the model itself (its loss)
        # a line in transformers, or the parameter a kernel that only reads parameters belongs to
        src = a.get("source", "")
        assert src.startswith(got["transformers"]) or src in got["parameters"], (e["name"], src)
    if got["frames"] == 1:  # the whole step is one compiled frame: the trace's matmul FLOPs are exact
        recorded = sum(e["args"].get("kernel_matmul_flop", 0) for e in kernels)
        assert recorded == 2 * got["flops"], (recorded, got["flops"])  # 2 recorded steps
    prefix = CASES[case][1]
    modules = {r["key"] for r in summary["modules"]}
    assert any(k == prefix or k.startswith(prefix + ".") for k in modules), sorted(modules)[:20]
    assert got["compare_rows"] > 0
    return got


@pytest.mark.parametrize("case", [c for c, v in CASES.items() if v[2]])
def test_model(case, tmp_path):
    got = _check(case, tmp_path)
    if case == "bert":
        assert got["compile_ids"] == ["0/0", "0/1"]  # Dynamo recompiled the forward frame once


@pytest.mark.models
@pytest.mark.parametrize("case", [c for c, v in CASES.items() if not v[2]])
def test_model_more(case, tmp_path):
    _check(case, tmp_path)
