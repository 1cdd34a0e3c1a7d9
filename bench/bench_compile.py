"""Cold and warm compile time: backend="inductor" vs backend="inductor_perf".

Each round starts one fresh process per backend, each with its own empty TORCHINDUCTOR_CACHE_DIR,
so nothing is cached (FX graph cache, AOTAutograd cache, compiled C++). The child times the
torch.compile() call and the first forward+backward call of a small transformer block (that call
compiles both graphs): what a user waits for between the two lines. The torch.compile() call belongs
in it because work moves between it and the first call: for backend="inductor" it imports Inductor's
compile_fx (0.6 - 0.7 s on our CPU machine), which ours imports there too, when torch loads our
backend (inductor_perf/backend.py says why not at its first compile). Importing torch is outside
the timed region; importing our package (torch.compile loads it through its entry point) is inside.
Backends alternate which goes first in a round so that drift in machine load falls on both equally.

--device cuda: the block at models.CUDA_BLOCK_DIMS on the GPU. The empty cache dir also holds the
Triton kernel cache (TRITON_CACHE_DIR is pointed into it, so a value in the environment cannot bring
compiled kernels in). Before the timer the child runs the model once eagerly (CUDA context, cuBLAS
handles, lazily loaded kernels: not compile time) and synchronizes; the timed call ends with
torch.cuda.synchronize().

--warm-only: the warm compile, a restart over a filled cache. Each backend's cache dir is filled once
by a cold process (untimed); then every round times one fresh process per backend over its own filled
dir (the order alternating), paired. Every child reports what torch's counters say of the caches
(AOTAutograd cache hits and misses, FX graph cache hits and misses), so the figure says which cache
served the restart. --model deep (cpu) is the block four times over (bench/models.deep_model), where
AOTAutograd's share of a warm compile is larger. --warm instead follows each timed cold process with
one warm process over the cache it filled.

    .venv/bin/python bench/bench_compile.py --rounds 5
    .venv/bin/python bench/bench_compile.py --warm-only --rounds 9 --model deep
    python3 bench/bench_compile.py --device cuda --rounds 3 --json compile.json
    python3 bench/bench_compile.py --device cuda --warm-only --rounds 5 --json warm.json
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
if device == "cpu" and which == "deep":
    model, x = models.deep_model()
elif device == "cpu" and which != "block":
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
from torch._dynamo.utils import counters
out = {"seconds": dt, "torch_compile_call_s": t1 - t0,
       "caches": {"aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
                  "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
                  "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
                  "fx_miss": counters["inductor"]["fxgraph_cache_miss"]}}
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
    over the cache the first one filled (``warm_seconds``; ``warm_caches``: what torch's counters said
    of the caches there)."""
    with tempfile.TemporaryDirectory(prefix="bench_compile_") as cache:
        out = _child(backend, device, model, cache)
        if warm:
            second = _child(backend, device, model, cache)
            out["warm_seconds"], out["warm_caches"] = second["seconds"], second["caches"]
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
            "warm_round_ratios": [o / i for o, i in zip(warm["inductor_perf"], warm["inductor"])] if warm else [],
            "torch_compile_call_rounds_s": calls or {}}  # the part of each round's seconds in torch.compile()


def warm_record(device: str, model: str, rounds: int, times: dict[str, list[float]],
                caches: dict[str, list[dict]], ours: dict, stopped_early: str | None) -> dict:
    """The JSON record of the warm rounds run so far (--warm-only)."""
    import models

    ratios = [o / i for o, i in zip(times["inductor_perf"], times["inductor"])]
    med = {b: statistics.median(v) for b, v in times.items()}
    return {"bench": "compile-warm", **models.environment(device), "model": model, "rounds": len(ratios),
            "rounds_asked": rounds, "stopped_early": stopped_early, "target_ratio": TARGET_RATIO,
            "tagging": ours.get("tagging"), "tagged": ours.get("tagged"),
            "missing_internals": ours.get("missing_internals"), "median_s": med, "rounds_s": times,
            "round_ratios": ratios, "median_of_round_ratios": statistics.median(ratios),
            "caches": caches}  # per backend and round: what torch's counters said of the caches


def warm_only(args: argparse.Namespace, rounds: int, gpu: str | None) -> int:
    """--warm-only: one cold fill per backend, then ``rounds`` paired warm processes."""
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    caches: dict[str, list[dict]] = {b: [] for b in BACKENDS}
    ours: dict = {}
    stopped_early = None
    with tempfile.TemporaryDirectory(prefix="bench_compile_warm_") as tmp:
        dirs = {b: os.path.join(tmp, b) for b in BACKENDS}
        for b in BACKENDS:
            fill = _child(b, args.device, args.model, dirs[b])
            print(f"filled {b}'s cache: cold compile {fill['seconds']:.2f} s, caches {fill['caches']}",
                  file=sys.stderr)
        start, longest = time.perf_counter(), 0.0
        for r in range(rounds):
            elapsed = time.perf_counter() - start
            if args.budget_s is not None and r > 0 and elapsed + longest > args.budget_s:
                stopped_early = (f"{r} of {rounds} rounds: another (~{longest:.0f} s) would end past "
                                 f"--budget-s {args.budget_s:g} ({elapsed:.0f} s used)")
                print(f"stopping after {stopped_early}", file=sys.stderr)
                break
            t_round = time.perf_counter()
            order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
            got = {b: _child(b, args.device, args.model, dirs[b]) for b in order}
            longest = max(longest, time.perf_counter() - t_round)
            for b in BACKENDS:
                times[b].append(got[b]["seconds"])
                caches[b].append(got[b]["caches"])
            ours = got["inductor_perf"]
            print(f"round {r + 1}/{rounds}: " + ", ".join(f"{b} {got[b]['seconds']:.2f} s" for b in order)
                  + f"; ratio {got['inductor_perf']['seconds'] / got['inductor']['seconds']:.3f}", file=sys.stderr)
            if args.json:
                import models

                models.write_json(args.json, warm_record(args.device, args.model, rounds, times, caches, ours,
                                                         stopped_early), quiet=True)
    record = warm_record(args.device, args.model, rounds, times, caches, ours, stopped_early)
    print(f"warm compile, {args.device}{', ' + gpu if gpu else ''}, model {args.model}; inductor_perf tagging "
          f"{'on' if ours.get('tagging') else 'OFF'}, last process tagged {ours.get('tagged')}")
    if stopped_early:
        print(f"ran {stopped_early}")
    print(f"{'backend':<16}{'median s':>10}{'min s':>8}{'max s':>8}  caches (every round: AOTAutograd hit/miss, "
          "FX graph hit/miss)")
    for b in BACKENDS:
        seen = sorted({(c["aot_hit"], c["aot_miss"], c["fx_hit"], c["fx_miss"]) for c in caches[b]})
        print(f"{b:<16}{record['median_s'][b]:>10.2f}{min(times[b]):>8.2f}{max(times[b]):>8.2f}  "
              + " | ".join(f"{a}/{m}, {h}/{x}" for a, m, h, x in seen))
    print(f"median of per-round ratios inductor_perf/inductor: {record['median_of_round_ratios']:.3f} "
          f"(target <= {TARGET_RATIO}; rounds: {', '.join(f'{x:.3f}' for x in record['round_ratios'])})")
    if args.json:
        import models

        models.write_json(args.json, record)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--rounds", type=int, default=None, help="default 5 on cpu, 3 on cuda")
    ap.add_argument("--model", default="block", choices=("block", "deep", "mlp", "conv"),
                    help="cpu: the Block at embed 64 (default), four of them in a row (deep), or a model of "
                         "bench/models.CPU_MODELS")
    ap.add_argument("--warm", action="store_true",
                    help="also time a warm compile: a second fresh process over the cache the cold one filled")
    ap.add_argument("--warm-only", action="store_true",
                    help="time warm compiles only: fill one cache dir per backend once, then each round runs one "
                         "fresh process per backend over its filled dir (paired, the order alternating)")
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
    if args.warm_only:
        return warm_only(args, rounds, gpu)
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
    if args.warm:  # each round's second process, over the cache its cold one filled
        wratios = [o / i for o, i in zip(warm_times["inductor_perf"], warm_times["inductor"])]
        print(f"warm: medians inductor {statistics.median(warm_times['inductor']):.2f} s, inductor_perf "
              f"{statistics.median(warm_times['inductor_perf']):.2f} s; median of per-round ratios "
              f"{statistics.median(wratios):.3f} (target <= {TARGET_RATIO}; rounds: "
              f"{', '.join(f'{x:.3f}' for x in wratios)})")
    if args.json:
        import models

        record = results(args.device, rounds, times, ratios, ours, stopped_early, warm_times, calls)
        models.write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
