"""Real architectures from transformers (tiny configs built here, nothing downloaded), trained with
the env-var capture as a user would. BERT for sequence classification is the case that recompiles
its forward on the second call (it sets config.problem_type on the first)."""

from __future__ import annotations

import glob
import gzip
import json

import pytest
from conftest import run_child

pytestmark = pytest.mark.slow

BERT = """
import json, os, torch, transformers
from transformers import BertConfig, BertForSequenceClassification
from torch.utils.flop_counter import FlopCounterMode
torch.manual_seed(0)
cfg = BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, num_labels=3)
m = BertForSequenceClassification(cfg)
ids = torch.randint(0, 512, (4, 32)); labels = torch.randint(0, 3, (4,))
m.config.problem_type = "single_label_classification"  # as the first forward sets it
with FlopCounterMode(display=False) as fc:
    m(input_ids=ids, labels=labels).loss.backward()
m.config.problem_type = None  # back to a fresh model: the compiled forward sets it and recompiles
m.zero_grad()
f = torch.compile(m, backend="inductor_perf")
for step in range(8):
    f(input_ids=ids, labels=labels).loss.backward()
    m.zero_grad()
import inductor_perf
from inductor_perf.tags import evaluate
graphs = inductor_perf.graph_table()
last = max(g.compile_id for g in graphs if not g.is_backward)
mm = sum(evaluate(k.matmul_flops) for g in graphs if g.compile_id == last for k in g.kernels)
print("JSON:" + json.dumps({"flops": int(fc.get_total_flops()), "tag_flops": mm,
                            "compile_ids": sorted({g.compile_id for g in graphs}),
                            "transformers": os.path.dirname(transformers.__file__)}))
"""


def test_bert_classification_recompiles_and_is_captured(tmp_path):
    pytest.importorskip("transformers")  # in the test extra; a plain install of us may lack it
    got = run_child(BERT, env={"INDUCTOR_PERF_TRACE_DIR": str(tmp_path)})
    assert got["compile_ids"] == ["0/0", "0/1"]  # Dynamo recompiled the forward frame once
    # the variant that ran in the recorded steps: its forward + backward matmul FLOPs
    assert got["tag_flops"] == got["flops"]
    (trace,) = glob.glob(str(tmp_path / "*.trace.json.gz"))
    events = json.load(gzip.open(trace, "rt"))["traceEvents"]
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "cpu_op"
               and e.get("name", "").startswith("graph_")]
    assert kernels and all("kernel_flop" in e["args"] and "kernel_num_gb" in e["args"] for e in kernels)
    sources = {e["args"].get("source", "") for e in kernels}
    assert any(s.startswith(got["transformers"]) for s in sources)
    (summary,) = glob.glob(str(tmp_path / "*.summary.json"))
    modules = {r["key"] for r in json.load(open(summary))["modules"]}
    assert "bert.encoder.layer.0.attention.self" in modules or \
        any(m.startswith("bert.encoder.layer.0.attention.self") for m in modules), modules
