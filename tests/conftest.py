"""Shared test fixtures.

Compiles are slow on small CPUs (2-4 s each), so the integration tests share compiled models
through session-scoped fixtures: each model is compiled once per backend per session.

The whole session uses a fresh Inductor cache directory, so every compile starts cold and a cache
entry from an earlier run (or from another checkout) can never serve a test - the cache tests set up
their own directories explicitly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

# Must happen before torch._inductor reads its cache dir (it reads the variable when first needed).
_SESSION_CACHE = tempfile.mkdtemp(prefix="inductor_perf_test_cache_")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _SESSION_CACHE
# Our own cache (op costs by signature, calibration) too: a warm entry from another run never serves a test.
os.environ["INDUCTOR_PERF_CACHE_DIR"] = os.path.join(_SESSION_CACHE, "inductor_perf")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- markers ------------------------------------------------------------------------------------
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: torch.cuda.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _roomy_recompile_limit(request: pytest.FixtureRequest) -> Any:
    """Several tests compile fresh instances of the same model class; each instance adds a cache
    entry to the same code object, and past Dynamo's limit (8) it silently runs eagerly.
    Only for sessions that compile: importing torch._dynamo would slow the unit tests."""
    if not any("integration" in str(item.fspath) for item in request.session.items):
        yield
        return
    import torch._dynamo.config as dcfg

    old = dcfg.recompile_limit
    dcfg.recompile_limit = 64
    yield
    dcfg.recompile_limit = old


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    import shutil

    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


# --- tiny models --------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # stride and padding on purpose: a padding-blind FLOP formula would be caught.
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        y = F.relu(self.conv2(y))
        return self.fc(y.flatten(1))


class AttentionBlock(nn.Module):
    """qkv projection + scaled_dot_product_attention + output projection."""

    def __init__(self, embed: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(embed, 3 * embed)
        self.out = nn.Linear(embed, embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, s, e))


# name -> (model factory, input factory). Inputs require grad so the backward graph computes an
# input gradient too (more kernels to check).
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "mlp": (MLP, lambda: (torch.randn(8, 32, requires_grad=True),)),
    # the conv input does not require grad: convolution_backward then skips grad_input for conv1,
    # which FlopCounterMode's output_mask handling must agree with.
    "conv": (ConvNet, lambda: (torch.randn(2, 3, 8, 8),)),
    "attn": (AttentionBlock, lambda: (torch.randn(2, 16, 32, requires_grad=True),)),
}
ATTN_SHAPE = {"B": 2, "H": 4, "S": 16, "D": 8}


def make(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A deterministic fresh instance of model ``name`` and its inputs."""
    factory, inputs = MODELS[name]
    torch.manual_seed(0)
    model = factory()
    return model, inputs()


@dataclass
class Run:
    """One forward (+ backward) of a compiled model, and the graphs it compiled."""

    model: Any
    inputs: tuple[torch.Tensor, ...]
    output: torch.Tensor
    grads: dict[str, torch.Tensor]
    graphs: list[Any] = field(default_factory=list)

    @property
    def fwd(self) -> list[Any]:
        return [g for g in self.graphs if not g.is_backward]

    @property
    def bwd(self) -> list[Any]:
        return [g for g in self.graphs if g.is_backward]


def new_graphs(before: set[int]) -> list[Any]:
    from inductor_perf import graph_table

    return [g for g in graph_table() if g.instance_id not in before]


def graph_ids() -> set[int]:
    from inductor_perf import graph_table

    return {g.instance_id for g in graph_table()}


def run_compiled(model: Any, inputs: tuple[torch.Tensor, ...], backend: str, *,
                 backward: bool = True, **compile_kwargs: Any) -> Run:
    """Compile ``model`` with ``backend``, run forward (+ backward of sum), collect new graphs."""
    before = graph_ids()
    compiled = torch.compile(model, backend=backend, **compile_kwargs)
    if backward:
        out = compiled(*inputs)
        out.sum().backward()
    else:
        with torch.no_grad():
            out = compiled(*inputs)
    params = model.named_parameters() if isinstance(model, nn.Module) else []
    grads = {n: p.grad.detach().clone() for n, p in params if p.grad is not None}
    for i, x in enumerate(inputs):
        if x.grad is not None:
            grads[f"input{i}"] = x.grad.detach().clone()
    out = out.detach() if isinstance(out, torch.Tensor) else tuple(o.detach() for o in out)
    return Run(model, inputs, out, grads, new_graphs(before))


def _session_run(name: str, backend: str) -> Run:
    model, inputs = make(name)
    return run_compiled(model, inputs, backend)


@pytest.fixture(scope="session")
def mlp_perf() -> Run:
    return _session_run("mlp", "inductor_perf")


@pytest.fixture(scope="session")
def mlp_inductor() -> Run:
    return _session_run("mlp", "inductor")


@pytest.fixture(scope="session")
def conv_perf() -> Run:
    return _session_run("conv", "inductor_perf")


@pytest.fixture(scope="session")
def conv_inductor() -> Run:
    return _session_run("conv", "inductor")


@pytest.fixture(scope="session")
def attn_perf() -> Run:
    return _session_run("attn", "inductor_perf")


@pytest.fixture(scope="session")
def attn_inductor() -> Run:
    return _session_run("attn", "inductor")


# --- FlopCounterMode oracle ---------------------------------------------------------------------
@dataclass
class EagerFlops:
    fwd_total: int
    bwd_total: int
    fwd_by_op: dict[str, int]
    """``aten.addmm`` -> FLOPs (FlopCounterMode's "Global" breakdown)."""
    bwd_by_op: dict[str, int]


def _by_op(counter: Any) -> dict[str, int]:
    glob = counter.get_flop_counts().get("Global", {})
    return {str(packet): int(v) for packet, v in glob.items()}


def eager_flops(name: str, inputs: tuple[torch.Tensor, ...] | None = None) -> EagerFlops:
    """FlopCounterMode over the eager forward and, separately, over ``loss.backward()``."""
    from torch.utils.flop_counter import FlopCounterMode

    model, default_inputs = make(name)
    inputs = default_inputs if inputs is None else inputs
    with FlopCounterMode(display=False) as fwd:
        out = model(*inputs)
    with FlopCounterMode(display=False) as bwd:
        out.sum().backward()
    return EagerFlops(int(fwd.get_total_flops()), int(bwd.get_total_flops()), _by_op(fwd), _by_op(bwd))


def op_packet(op: str | None) -> str | None:
    """``aten.addmm.out`` -> ``aten.addmm`` (the key FlopCounterMode uses)."""
    return op.rsplit(".", 1)[0] if op else None


# --- child processes ----------------------------------------------------------------------------
def run_child(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it must print one line ``JSON:<payload>``."""
    import json

    full_env = dict(os.environ)
    full_env.pop("INDUCTOR_PERF_INJECT_TAGGING_FAILURE", None)
    if env:
        full_env.update(env)
    proc = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    for line in proc.stdout.splitlines():
        if line.startswith("JSON:"):
            return json.loads(line[5:])
    raise AssertionError(f"child exited {proc.returncode} without a JSON line\n"
                         f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}")


def start_child(code: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Like run_child, but returns at once; finish with :func:`finish_child`."""
    full_env = dict(os.environ)
    full_env.pop("INDUCTOR_PERF_INJECT_TAGGING_FAILURE", None)
    if env:
        full_env.update(env)
    return subprocess.Popen([sys.executable, "-c", code], env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)


def finish_child(proc: subprocess.Popen, timeout: float = 300) -> dict[str, Any]:
    import json

    out, err = proc.communicate(timeout=timeout)
    for line in out.splitlines():
        if line.startswith("JSON:"):
            return json.loads(line[5:])
    raise AssertionError(f"child exited {proc.returncode} without a JSON line\n"
                         f"stdout:\n{out[-3000:]}\nstderr:\n{err[-5000:]}")
