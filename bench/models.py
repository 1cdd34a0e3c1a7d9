"""Models and setup shared by the benchmarks (kept out of the timed code so every bench measures the same).

Also what every bench does before timing: pick the device (``--device cpu|cuda``), make
``backend="inductor_perf"`` resolvable, say whether tagging is on, and write ``--json`` results.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

# The benches measure this checkout, installed or not (`python3 bench/x.py` puts only bench/ on sys.path).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

DEVICES = ("cpu", "cuda")

# The Block on a GPU: batch 16, seq 512, embed 768, 12 heads (a GPT-2-small layer). About 0.13 TFLOP
# per forward, 0.4 TFLOP per forward + backward: a few ms on an H100 with TF32, long enough that the
# step is GPU work rather than launch overhead, short enough that many rounds fit in seconds.
CUDA_BLOCK_DIMS = dict(batch=16, seq=512, embed=768, heads=12)


class Block(nn.Module):
    """A transformer block: LayerNorm, qkv Linear, SDPA, out proj, GELU MLP."""

    def __init__(self, e: int = 128, h: int = 4) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(e), nn.LayerNorm(e)
        self.qkv, self.proj = nn.Linear(e, 3 * e), nn.Linear(e, e)
        self.fc1, self.fc2 = nn.Linear(e, 4 * e), nn.Linear(4 * e, e)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.h, e // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, e))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MLP(nn.Sequential):
    """The small MLP of the capture bench: Linear → GELU → LayerNorm → Linear → GELU → Linear (input [32, 64])."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 64), nn.GELU(),
                         nn.Linear(64, 10))


class ConvNet(nn.Module):
    """A small conv net: two 3×3 convs with ReLU, global average pool, a Linear head (input [8, 3, 32, 32])."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.c2(F.relu(self.c1(x))))
        return self.head(x.mean(dim=(2, 3)))


# The CPU models the step and accuracy benches share: name -> (factory, input shape).
CPU_MODELS = {
    "mlp": (MLP, (32, 64)),
    "conv": (ConvNet, (8, 3, 32, 32)),
    "block": (lambda: Block(e=128), (4, 32, 128)),
}


# The deeper model of the warm-compile bench (bench_compile.py --model deep): the Block at embed 64
# (bench_compile's default model) four times over. Inductor's caches make a restart's code generation
# free, so what a warm compile still does grows with the graph: Dynamo's trace, and AOTAutograd's trace
# and partition of the joint graph unless its own cache hits. Its share is larger here than in one block.
DEEP_BLOCKS = 4


def deep_model() -> tuple[nn.Module, torch.Tensor]:
    """:data:`DEEP_BLOCKS` Blocks at embed 64 in a row, and an input [4, 32, 64]."""
    torch.manual_seed(0)
    return nn.Sequential(*[Block(e=64) for _ in range(DEEP_BLOCKS)]), torch.randn(4, 32, 64)


def cpu_model(name: str) -> tuple[nn.Module, torch.Tensor]:
    """A deterministic fresh instance of CPU model ``name`` (see :data:`CPU_MODELS`) and its input."""
    factory, shape = CPU_MODELS[name]
    torch.manual_seed(0)
    model = factory()
    return model, torch.randn(*shape)


def cuda_block(requires_grad: bool = False) -> tuple[Block, torch.Tensor]:
    """The Block and an input at :data:`CUDA_BLOCK_DIMS`, on the GPU (call :func:`setup_device` first)."""
    d = CUDA_BLOCK_DIMS
    model = Block(e=d["embed"], h=d["heads"]).cuda()
    x = torch.randn(d["batch"], d["seq"], d["embed"], device="cuda", requires_grad=requires_grad)
    return model, x


def setup_device(device: str, prog: str) -> None:
    """Check that ``device`` can run here; exit with one line saying why not.

    On cuda, float32 matmuls may use TF32 (what GPU training runs use, and what Inductor asks for in a
    warning otherwise); both backends compile under the same setting."""
    if device not in DEVICES:
        raise SystemExit(f"{prog}: unknown --device {device!r}; valid: {', '.join(DEVICES)}")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"{prog}: --device cuda needs a CUDA GPU, but torch {torch.__version__} sees none "
                             f"(torch.cuda.is_available() is False); run on a GPU machine or use --device cpu")
        torch.set_float32_matmul_precision("high")


def cuda_sync(device: str):
    """The function to call before reading a timer: ``torch.cuda.synchronize`` on cuda, else None
    (CPU kernels have finished when the call returns)."""
    return torch.cuda.synchronize if device == "cuda" else None


def ensure_backend() -> str:
    """Make ``backend="inductor_perf"`` resolvable and say how it is.

    Installed (``pip install -e .``), the package's ``torch_dynamo_backends`` entry point provides it.
    On a machine where this checkout is not installed, register the same function under the same
    name here (bench code only: the library itself registers through the entry point alone).

    The entry point is looked up in the package metadata, not with ``torch._dynamo.list_backends``:
    that imports every Dynamo backend module and loads ours, ~1,260 modules that a user's
    ``torch.compile(backend="inductor_perf")`` imports inside the call. bench_compile.py calls this
    before its timer, so those imports must stay inside the timed region, as they are for a user."""
    from importlib.metadata import entry_points

    if any(ep.name == "inductor_perf" for ep in entry_points(group="torch_dynamo_backends")):
        return "entry point"
    from inductor_perf.backend import inductor_perf_backend

    torch._dynamo.register_backend(inductor_perf_backend, name="inductor_perf")
    return "registered by bench/models.py (package not installed)"


def tagging_status() -> dict[str, Any]:
    """Whether backend="inductor_perf" tags kernels on this torch (False: it compiles as plain inductor,
    and a ratio to inductor measures nothing of ours)."""
    try:
        from inductor_perf.compat import backend_support

        s = backend_support()
        return {"tagging": bool(s.tagging), "missing_internals": [list(m) for m in getattr(s, "missing", ())]}
    except Exception as e:  # a torch older than supported raises here; the compile would too
        return {"tagging": False, "error": f"{type(e).__name__}: {e}"}


def tagged_counts() -> dict[str, int]:
    """Graphs and kernels the backend tagged in this process so far (0 and 0: nothing of ours ran)."""
    from inductor_perf.model.tags import REGISTRY

    graphs = REGISTRY.graphs()
    return {"graphs": len(graphs), "kernels": sum(len(g.kernels) for g in graphs)}


def environment(device: str) -> dict[str, Any]:
    """What a result was measured on."""
    env: dict[str, Any] = {"device": device, "torch": torch.__version__, "python": sys.version.split()[0],
                           "cpu_threads": torch.get_num_threads()}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            env["triton"] = None
    return env


def write_json(path: str | None, payload: dict[str, Any], quiet: bool = False) -> None:
    """Write ``payload`` to ``path`` atomically (nothing when ``path`` is None); say where on stderr
    unless ``quiet``."""
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)
    if not quiet:
        print(f"wrote {path}", file=sys.stderr)
