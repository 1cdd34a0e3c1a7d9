"""Cost of our markers inside a profiling window: step time under torch.profiler for
backend="inductor" vs backend="inductor_perf" (same C++ kernel profiling on both), interleaved.

    python bench/bench_capture.py [--rounds 7] [--steps 20]
    python3 bench/bench_capture.py --device cuda --json capture.json

Prints medians and the ratio; docs/benchmarks.md records a run. Also times the after-the-window
processing (join + augment + summary + write) of one captured trace.

Variants (each times forward + backward steps inside its window, the window's start and stop
outside the timed region):
  inductor                       backend="inductor" inside torch.profiler.profile(record_shapes=True)
  inductor_perf                  backend="inductor_perf" inside the same plain torch.profiler window
  inductor_perf+profile()        (--our-window; default on cuda) backend="inductor_perf" inside
                                 inductor_perf.profile(): our capture as users run it. The env-var
                                 capture opens the same window (capture.session._Window), so this covers it too.
                                 Its after-the-window processing runs each round, outside the timing.

--device cuda: the Block at models.CUDA_BLOCK_DIMS on the GPU instead of the small CPU MLP, CPU + CUDA
activities in every window, no C++ kernel profiling options (a GPU model has no C++ kernels; Triton
kernels are named in traces anyway), one untimed window per variant first (CUPTI starts up on the first
one), torch.cuda.synchronize() at both ends of each timed region, and the order of the variants rotates
every round (on cpu it stays fixed, as in the runs docs/benchmarks.md records).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (bench/models.py: the block and the setup the benches share)

TARGET_RATIO = 1.05
OURS = "inductor_perf+profile()"


class OurWindowError(RuntimeError):
    """inductor_perf.profile() recorded nothing, so its steps ran unprofiled and their time says nothing."""


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 64),
                         nn.GELU(), nn.Linear(64, 10))


def make_cuda_model() -> nn.Module:
    torch.manual_seed(0)
    return models.cuda_block()[0]


def activities(device: str) -> list | None:
    from torch.profiler import ProfilerActivity

    # cpu: profile()'s default, as in the runs docs/benchmarks.md records; cuda: what inductor_perf's
    # window uses on a GPU (CPU + CUDA), stated rather than left to what this build supports.
    return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if device == "cuda" else None


def profiled_step_time(fn, x, steps: int, device: str = "cpu") -> float:
    from torch.profiler import profile

    with profile(activities=activities(device), record_shapes=True):
        return timed_steps(fn, x, steps, device)


def timed_steps(fn, x, steps: int, device: str) -> float:
    """Seconds per training step of ``fn`` over ``steps`` steps (the GPU synchronized at both ends)."""
    sync = models.cuda_sync(device)
    if sync is not None:
        sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn(x).sum().backward()
    if sync is not None:
        sync()
    return (time.perf_counter() - t0) / steps


def our_window_step_time(fn, x, steps: int, device: str, out_dir: str, tagged: list[int]) -> float:
    """The same steps inside inductor_perf.profile(); fails loudly when the window did not record.
    Appends the kernel events it tagged to ``tagged``."""
    import inductor_perf

    with inductor_perf.profile(out_dir) as p:
        t = timed_steps(fn, x, steps, device)
    if p.result is None or p.result.trace_path is None:
        raise OurWindowError(f"inductor_perf.profile() wrote nothing: {p.result and p.result.warnings}")
    tagged.append(p.result.events_tagged)
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Step time inside a profiling window: inductor vs inductor_perf")
    ap.add_argument("--device", choices=models.DEVICES, default="cpu")
    ap.add_argument("--rounds", type=int, default=None, help="default 7 on cpu, 10 on cuda")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--our-window", action=argparse.BooleanOptionalAction, default=None,
                    help="also time inductor_perf.profile() (default: on for cuda, off for cpu)")
    ap.add_argument("--json", metavar="PATH", help="also write the medians and ratios here")
    args = ap.parse_args(argv)
    cuda = args.device == "cuda"
    rounds = args.rounds if args.rounds is not None else (10 if cuda else 7)
    our_window = args.our_window if args.our_window is not None else cuda
    models.setup_device(args.device, "bench_capture")
    registration = models.ensure_backend()
    status = models.tagging_status()
    if cuda or not status["tagging"]:
        print(f"torch {torch.__version__}, {args.device}"
              f"{', ' + torch.cuda.get_device_name(0) if cuda else ''}; inductor_perf: {registration}; "
              f"tagging {'on' if status['tagging'] else 'OFF'} {status}")
    if cuda:
        plain = torch.compile(make_cuda_model(), backend="inductor")
        ours = torch.compile(make_cuda_model(), backend="inductor_perf")
        d = models.CUDA_BLOCK_DIMS
        x = torch.randn(d["batch"], d["seq"], d["embed"], device="cuda")
    else:
        x = torch.randn(32, 64)
        plain = torch.compile(make_model(), backend="inductor", options={"cpp.enable_kernel_profile": True})
        ours = torch.compile(make_model(), backend="inductor_perf",
                             options={"inductor_perf.kernel_profile": True})
    for fn in (plain, ours):
        for _ in range(3):
            fn(x).sum().backward()
    out_root = tempfile.TemporaryDirectory(prefix="bench_capture_") if our_window else None
    window_tagged: list[int] = []
    variants = {
        "inductor": lambda: profiled_step_time(plain, x, args.steps, args.device),
        "inductor_perf": lambda: profiled_step_time(ours, x, args.steps, args.device),
    }
    if our_window:
        variants[OURS] = lambda: our_window_step_time(
            ours, x, args.steps, args.device, out_root.name, window_tagged)
    dropped: dict[str, str] = {}

    def run(name: str) -> float | None:
        """One timed window; our window failing to record drops its variant (the plain ones still count)."""
        if name in dropped:
            return None
        try:
            return variants[name]()
        except OurWindowError as e:
            dropped[name] = str(e)
            print(f"{name}: {e}; variant dropped", file=sys.stderr)
            return None

    if cuda:  # CUPTI and the profiler's GPU buffers start up in the first window: keep it untimed
        for name in variants:
            run(name)
        window_tagged.clear()
    times: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)] if cuda else names
        for name in order:
            t = run(name)
            if t is not None:
                times[name].append(t)
    med = {k: statistics.median(v) for k, v in times.items() if k not in dropped}
    print(f"step time inside a torch.profiler window, median of {rounds} rounds x {args.steps} steps")
    for k, v in med.items():
        print(f"  {k:{max(14, *map(len, med))}s} {v * 1e6:9.1f} us")
    print(f"  ratio inductor_perf / inductor: {med['inductor_perf'] / med['inductor']:.3f}")
    if OURS in med:
        print(f"  ratio {OURS} / inductor: {med[OURS] / med['inductor']:.3f}"
              f"  (kernel events tagged per window: {min(window_tagged)}-{max(window_tagged)})")
    elif OURS in dropped:
        print(f"  {OURS}: dropped ({dropped[OURS]})")
    if out_root is not None:
        out_root.cleanup()

    from torch.profiler import profile

    from inductor_perf.capture.session import process_trace

    with tempfile.TemporaryDirectory() as d:
        with profile(activities=activities(args.device), record_shapes=True) as p:
            for _ in range(args.steps):
                ours(x).sum().backward()
        raw = os.path.join(d, "raw.json")
        p.export_chrome_trace(raw)
        t0 = time.perf_counter()
        res = process_trace(raw, os.path.join(d, "out"))
        dt = time.perf_counter() - t0
    print(f"after the window: join + augment + summary + write of {args.steps} steps "
          f"({res.events_tagged} kernel events): {dt * 1e3:.0f} ms")
    tagged = models.tagged_counts()
    if cuda or not tagged["graphs"]:
        print(f"inductor_perf tagged {tagged['graphs']} graph(s), {tagged['kernels']} kernel(s)")
    models.write_json(args.json, {
        "bench": "capture", **models.environment(args.device), "rounds": rounds, "steps": args.steps,
        "backend_registration": registration, **status, "tagged": tagged, "target_ratio": TARGET_RATIO,
        "median_us": {k: v * 1e6 for k, v in med.items()},
        "ratio": {k: v / med["inductor"] for k, v in med.items()},
        "rounds_us": {k: [t * 1e6 for t in v] for k, v in times.items()},
        "our_window_kernel_events": window_tagged, "dropped": dropped,
        "after_window_ms": dt * 1e3, "after_window_kernel_events": res.events_tagged})
    return 0


if __name__ == "__main__":
    sys.exit(main())
