"""Cold compile time: backend="inductor" vs backend="inductor_perf".

Each round starts one fresh process per backend, each with its own empty TORCHINDUCTOR_CACHE_DIR,
so nothing is cached (FX graph cache, AOTAutograd cache, compiled C++). The child times the
torch.compile() call and the first forward+backward call of a small transformer block (that call
compiles both graphs): what a user waits for between the two lines. The torch.compile() call belongs
in it because it is not the same work for both: for backend="inductor" it imports Inductor's
compile_fx (0.6 - 0.7 s on our CPU machine), which a backend looked up by name, ours, imports at its
first compile. Importing torch is outside the timed region; importing our package (torch.compile
loads it through its entry point) is inside. Backends alternate which goes first in a round so that
drift in machine load falls on both equally.

--device cuda: the block at models.CUDA_BLOCK_DIMS on the GPU. The empty cache dir also holds the
Triton kernel cache (TRITON_CACHE_DIR is pointed into it, so a value in the environment cannot bring
compiled kernels in). Before the timer the child runs the model once eagerly (CUDA context, cuBLAS
handles, lazily loaded kernels: not compile time) and synchronizes; the timed call ends with
torch.cuda.synchronize().

    .venv/bin/python bench/bench_compile.py --rounds 5
    python3 bench/bench_compile.py --device cuda --rounds 3 --json compile.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
import torch

sys.path.insert(0, sys.argv[2])
import models  # bench/models.py
from models import Block

backend, device, which = sys.argv[1], sys.argv[3], sys.argv[4]
variant = sys.argv[5] if len(sys.argv) > 5 else ""
models.setup_device(device, "bench_compile child")
if variant == "no_autograd_cache":
    import torch._functorch.config
    torch._functorch.config.enable_autograd_cache = False
if backend == "inductor_perf":
    models.ensure_backend()
torch.manual_seed(0)
if device == "cpu" and which != "block":
    model, x = models.cpu_model(which)
elif device == "cpu":
    model, x = Block(e=64), torch.randn(4, 32, 64)
else:
    model, x = models.cuda_block()
    model(x).sum().backward()  # eager: CUDA context, cuBLAS, lazy kernel loading, outside the timer
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
options = {"inductor_perf.markers": False} if variant == "no_markers" else None
if variant == "import_first":  # Inductor's compile_fx imported before the timer (tools/gpu_compile_profile.py)
    import torch._inductor.compile_fx
prof = os.environ.get("BENCH_COMPILE_PROFILE")  # tools/gpu_compile_profile.py: where the compile goes
if prof:
    import importlib.abc, importlib.util, subprocess
    pool_answers, commands = [], []
    def patch_pool(mod):  # each answer of "is the compile pool ready?", timed
        ask = mod.AsyncCompile.use_process_pool.__func__
        def use_process_pool(cls):
            ok = ask(cls)
            pool_answers.append((time.perf_counter(), ok))
            return ok
        mod.AsyncCompile.use_process_pool = classmethod(use_process_pool)
    class PatchOnImport(importlib.abc.MetaPathFinder):  # not imported here: that would move its import
        def find_spec(self, name, path, target=None):
            if name != "torch._inductor.async_compile":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module
            def exec_module(module):
                run(module)
                patch_pool(module)
            spec.loader.exec_module = exec_module
            return spec
    if "torch._inductor.async_compile" in sys.modules:
        patch_pool(sys.modules["torch._inductor.async_compile"])
    else:
        sys.meta_path.insert(0, PatchOnImport())
    depth = [0]
    def timed(run):  # the commands this process runs (a C compiler, ptxas...), timed (outermost call only)
        def call(cmd, *a, **k):
            s = time.perf_counter()
            depth[0] += 1
            try:
                return run(cmd, *a, **k)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    words = [cmd] if isinstance(cmd, str) else [os.path.basename(str(w)) for w in cmd]
                    text = " ".join(words).replace("\n", " ")[:160]
                    commands.append((s, time.perf_counter() - s, text))
        return call
    for fn in ("run", "check_call", "check_output"):
        setattr(subprocess, fn, timed(getattr(subprocess, fn)))
    profiler = None
    if os.environ.get("BENCH_COMPILE_CPROFILE") == "1":
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    print("BENCH_TIMER_START", file=sys.stderr, flush=True)  # splits -X importtime's lines
# torch.compile(backend="inductor") imports Inductor's compile_fx (~0.7 s here, more with CUDA) where
# a backend looked up by name imports it at its first compile: the timer starts before the call
t0 = time.perf_counter()
compiled = torch.compile(model, backend=backend, options=options)
t1 = time.perf_counter()
if prof:
    print("BENCH_COMPILE_CALLED", file=sys.stderr, flush=True)
compiled(x).sum().backward()
if device != "cpu":
    torch.cuda.synchronize()
dt = time.perf_counter() - t0
out = {"seconds": dt, "torch_compile_call_s": t1 - t0}
if prof:
    print("BENCH_TIMER_END", file=sys.stderr, flush=True)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(prof + ".pstats")
    with open(prof + ".times.txt", "w") as f:
        f.write(torch._dynamo.utils.compile_times(repr="str", aggregate=True))
    out["pool_answers"] = [(round(t - t0, 4), ok) for t, ok in pool_answers]
    out["commands"] = [(round(t - t0, 4), round(d, 4), c) for t, d, c in commands]
if backend == "inductor_perf":
    out.update(tagged=models.tagged_counts(), **models.tagging_status())
print("JSON:" + json.dumps(out))
"""

BACKENDS = ("inductor", "inductor_perf")
TARGET_RATIO = 1.05


def _child(backend: str, device: str, model: str, cache: str, variant: str = "",
           stderr_path: str | None = None) -> dict:
    """The child's JSON. ``variant`` (for tools/gpu_compile_bisect.py and gpu_compile_profile.py)
    turns one switch off: "no_autograd_cache", "no_markers" (our option) or "no_tagging"
    (INDUCTOR_PERF_DISABLE_TAGGING), or imports Inductor's compile_fx before the timer
    ("import_first"). ``stderr_path``: the child's stderr is written there."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    env.pop("INDUCTOR_PERF_TRACE_DIR", None)
    if variant == "no_tagging":
        env["INDUCTOR_PERF_DISABLE_TAGGING"] = "1"
    proc = subprocess.run([sys.executable, "-c", CHILD, backend, os.path.dirname(os.path.abspath(__file__)),
                           device, model, variant], env=env, capture_output=True, text=True, timeout=600)
    if stderr_path:
        with open(stderr_path, "w") as f:
            f.write(proc.stderr)
    for line in proc.stdout.splitlines():
        if line.startswith("JSON:"):
            return json.loads(line[5:])
    raise RuntimeError(f"{backend} child failed:\n{proc.stderr[-3000:]}")


def one(backend: str, device: str = "cpu", model: str = "block", warm: bool = False) -> dict:
    """Seconds of one cold compile (forward + backward) in a fresh process and cache (``seconds``),
    and for inductor_perf what it tagged. ``warm``: then the same compile in a second fresh process
    over the cache the first one filled (``warm_seconds``: FX graph and AOTAutograd cache hits)."""
    with tempfile.TemporaryDirectory(prefix="bench_compile_") as cache:
        out = _child(backend, device, model, cache)
        if warm:
            out["warm_seconds"] = _child(backend, device, model, cache)["seconds"]
    return out


def results(device: str, rounds: int, times: dict[str, list[float]], ratios: list[float], ours: dict,
            stopped_early: str | None, warm: dict[str, list[float]] | None = None,
            calls: dict[str, list[float]] | None = None) -> dict:
    """The JSON record of the rounds run so far."""
    import models  # bench/models.py (imports torch: after the rounds, or on cuda where it is loaded anyway)

    med = {b: statistics.median(v) for b, v in times.items()}
    return {"bench": "compile", **models.environment(device), "rounds": len(ratios), "rounds_asked": rounds,
            "stopped_early": stopped_early,
            "target_ratio": TARGET_RATIO, "tagging": ours.get("tagging"), "tagged": ours.get("tagged"),
            "missing_internals": ours.get("missing_internals"),
            "median_s": med, "min_s": {b: min(v) for b, v in times.items()},
            "max_s": {b: max(v) for b, v in times.items()}, "rounds_s": times,
            "ratio_of_medians": med["inductor_perf"] / med["inductor"],
            "median_of_round_ratios": statistics.median(ratios), "round_ratios": ratios,
            "warm_rounds_s": warm or {},
            "torch_compile_call_rounds_s": calls or {}}  # the part of each round's seconds in torch.compile()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--rounds", type=int, default=None, help="default 5 on cpu, 3 on cuda")
    ap.add_argument("--model", default="block", choices=("block", "mlp", "conv"),
                    help="cpu: the Block at embed 64 (default) or a model of bench/models.CPU_MODELS")
    ap.add_argument("--warm", action="store_true",
                    help="also time a warm compile: a second fresh process over the cache the cold one filled")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no round that would end past this many seconds from the start, judged by "
                         "the longest round so far (at least one round runs); the table says how many ran")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the medians and ratios here (rewritten after every round, so a run "
                         "cut short still leaves the rounds it finished)")
    args = ap.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (5 if args.device == "cpu" else 3)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    gpu = None
    if args.device == "cuda":  # fail here, in one line, rather than in every child
        import models
        import torch

        models.setup_device(args.device, "bench_compile")
        gpu = torch.cuda.get_device_name(0)
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    calls: dict[str, list[float]] = {b: [] for b in BACKENDS}
    ratios: list[float] = []
    warm_times: dict[str, list[float]] = {}
    ours: dict = {}
    start = time.perf_counter()
    longest = 0.0
    stopped_early = None
    for r in range(rounds):
        elapsed = time.perf_counter() - start
        if args.budget_s is not None and r > 0 and elapsed + longest > args.budget_s:
            stopped_early = (f"{r} of {rounds} rounds: another (~{longest:.0f} s) would end past "
                             f"--budget-s {args.budget_s:g} ({elapsed:.0f} s used)")
            print(f"stopping after {stopped_early}", file=sys.stderr)
            break
        t_round = time.perf_counter()
        order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        got = {b: one(b, args.device, args.model, args.warm) for b in order}
        longest = max(longest, time.perf_counter() - t_round)
        for b in BACKENDS:
            times[b].append(got[b]["seconds"])
            calls[b].append(got[b]["torch_compile_call_s"])
            if args.warm:
                warm_times.setdefault(b, []).append(got[b]["warm_seconds"])
        ours = got["inductor_perf"]
        ratios.append(got["inductor_perf"]["seconds"] / got["inductor"]["seconds"])
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{b} {got[b]['seconds']:.2f} s" for b in order),
              file=sys.stderr)
        if args.json:
            import models

            record = results(args.device, rounds, times, ratios, ours, stopped_early, warm_times, calls)
            models.write_json(args.json, record, quiet=True)
    med = {b: statistics.median(v) for b, v in times.items()}
    if args.device == "cuda" or not ours.get("tagging", True):
        print(f"{args.device}{', ' + gpu if gpu else ''}; inductor_perf tagging "
              f"{'on' if ours.get('tagging') else 'OFF'}, last compile tagged {ours.get('tagged')}")
    if stopped_early:
        print(f"ran {stopped_early}")
    print(f"{'backend':<16}{'median s':>10}{'min s':>8}{'max s':>8}")
    for b in BACKENDS:
        print(f"{b:<16}{med[b]:>10.2f}{min(times[b]):>8.2f}{max(times[b]):>8.2f}")
    print(f"ratio of medians inductor_perf/inductor: {med['inductor_perf'] / med['inductor']:.3f}")
    print(f"median of per-round ratios:             {statistics.median(ratios):.3f}  "
          f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    if args.json:
        import models

        record = results(args.device, rounds, times, ratios, ours, stopped_early, warm_times, calls)
        models.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
