"""Calibration of the advisor's estimates (docs/advisor.md): a small training loop, written as a user
writes one, with a problem planted, is captured as a user captures one, with ``INDUCTOR_PERF_TRACE_DIR``
set (in a child process: the env-var session is one per process); the capture's own summary.json says
what the fix would save (the finding of the planted kind). Then the loop is timed with the problem and
with the fix, in paired rounds that alternate the two (time.perf_counter around each step, no
profiler), and the measured gain is the difference of the medians.

Two ratios: of times (the finding's ``saving_us_per_step``, which the env-var capture states against
the step it timed without the profiler, over the measured gain) and of shares (its
``saving_pct_of_step``, a share of the profiled step, over the gain's share of the step with the
problem). The capture runs in another process than the timed rounds, and on a shared machine the load
changes in between: a share is what stays when the whole step runs slower or faster.

The captures read this machine's roofs as measured by ``inductor-perf calibrate`` (run once, on one
thread, into a cache directory of the script's own: :func:`roofs_dir`), which ``headroom`` and
``precision`` rest on.

A case of several ranks (``exposed_comm``) runs on two gloo ranks on loopback (``mp.spawn`` in a child
process), each capturing its own trace; the estimate is the job's finding of the cross-rank view of
them (``inductor-perf summary DIR``), and the timed rounds start each step on every rank together.

    python bench/advisor_calibration.py            # prints the table docs/advisor.md shows
    python bench/advisor_calibration.py headroom precision   # some cases only

tests/integration/test_advisor_calibration.py runs the same cases and asserts that the planted kind
ranks in the top 3 and that the estimate is within 0.5-2x of the measured gain.
"""

from __future__ import annotations

import copy
import glob
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import inductor_perf


@dataclass
class Result:
    kind: str
    case: str
    estimate_us: float | None
    """The capture's finding of ``kind``: saving per step (None: no such finding)."""
    estimate_pct: float | None
    """The same as a % of the captured step (its ``saving_pct_of_step``)."""
    rank: int | None
    """Its place among the capture's findings (1: the first); None when absent."""
    measured_us: float
    """Median step with the problem less median step with the fix."""
    problem_us: float
    fixed_us: float
    others: dict[str, float] = field(default_factory=dict)
    """Other fixes, timed in the same rounds: name -> median step (the table gives each a row)."""

    @property
    def measured_pct(self) -> float:
        return 100.0 * self.measured_us / self.problem_us

    @property
    def ratio(self) -> float | None:
        """Estimated share of the step / measured share of the step."""
        if not self.estimate_pct or self.measured_us <= 0:
            return None
        return self.estimate_pct / self.measured_pct

    @property
    def ratio_us(self) -> float | None:
        """Estimated / measured time (the load of the machine moves it: see the module's docstring)."""
        return self.estimate_us / self.measured_us if self.estimate_us and self.measured_us > 0 else None


SKIP, STEPS = 3, 3
"""The capture's INDUCTOR_PERF_SKIP and INDUCTOR_PERF_STEPS: step 1 compiles, step 2 runs without the
profiler (the un-profiled step the trace records), step 3 is the profiler's warm-up, 4-6 are recorded."""


@dataclass
class Case:
    """A planted problem: the step with it, the step with the fix, and which finding is its."""

    kind: str
    case: str
    problem: Callable[[], None]
    fixed: Callable[[], None]
    want: Callable[[dict], bool] = lambda f: True
    sync: Callable[[], None] | None = None
    """Waits for the device (GPU cases): the rounds then time blocks of steps, each ended by one wait, as
    a training loop that never waits each step runs (the capture runs the bare steps too)."""
    others: dict[str, Callable[[], None]] = field(default_factory=dict)
    """Other fixes to time beside ``fixed`` (name -> step), reported, not asserted on."""


_ROOFS: tempfile.TemporaryDirectory | None = None


def roofs_dir() -> str:
    """A calibration cache of this machine's measured roofs on one thread (``inductor-perf calibrate``,
    run once per process into a directory of its own, removed at exit): the captures read their roofs
    from it (``INDUCTOR_PERF_CACHE_DIR``), as a user's captures do once they calibrated, so the
    estimates that rest on a roof (``headroom``, ``precision``) rest on a measured one, not on the
    computed CPU peaks (an estimated bandwidth, a base clock)."""
    global _ROOFS
    if _ROOFS is None:
        made = tempfile.TemporaryDirectory(prefix="inductor_perf_roofs_")
        env = dict(os.environ, INDUCTOR_PERF_CACHE_DIR=made.name, OMP_NUM_THREADS="1")
        proc = subprocess.run([sys.executable, "-m", "inductor_perf", "calibrate", "--seconds", "5"], env=env,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            made.cleanup()
            raise RuntimeError(f"inductor-perf calibrate failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        _ROOFS = made
    return _ROOFS.name


def measured_roofs() -> str:
    """What :func:`roofs_dir`'s calibration measured (its cache files, as text), for a message."""
    if _ROOFS is None:
        return "(not measured yet)"
    out = []
    for path in sorted(glob.glob(os.path.join(_ROOFS.name, "**", "*.json"), recursive=True)):
        with open(path) as f:
            out.append(f.read().strip())
    return " ".join(out) or "(no cache file)"


def remeasure_roofs() -> None:
    """Drop :func:`roofs_dir`'s calibration: the next capture measures the roofs again."""
    global _ROOFS
    if _ROOFS is not None:
        _ROOFS.cleanup()
        _ROOFS = None


def _ref(builder: Callable[[], Case]) -> str:
    """``MODULE:NAME`` of a case's builder, for a child process to import it by."""
    module = sys.modules[builder.__module__].__file__ or ""
    return f"{os.path.splitext(os.path.basename(module))[0]}:{builder.__name__}"


def _capture(builder: Callable[[], Case], cpu_roofs: bool = True) -> list[dict]:
    """The findings an env-var capture of ``builder()``'s problem step wrote (summary.json), from a child
    process that runs this file with ``--capture``; on the CPU's measured roofs (:func:`roofs_dir`) when
    ``cpu_roofs``."""
    ref = _ref(builder)
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=out, INDUCTOR_PERF_SKIP=str(SKIP), INDUCTOR_PERF_STEPS=str(STEPS))
        if cpu_roofs:
            env["INDUCTOR_PERF_CACHE_DIR"] = roofs_dir()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--capture", ref], env=env,
                              capture_output=True, text=True, timeout=900)
        paths = glob.glob(os.path.join(out, "*.summary.json"))
        if proc.returncode != 0 or len(paths) != 1:
            raise RuntimeError(f"the capture of {ref} failed (exit {proc.returncode}, {len(paths)} summaries): "
                               f"{proc.stderr[-2000:]}")
        with open(paths[0]) as f:
            return json.load(f)["findings"]


def _capture_child(ref: str) -> None:
    """In the child: build the case and run its problem step until the window has ended."""
    module, name = ref.split(":")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    torch.set_num_threads(1)
    case = getattr(importlib.import_module(module), name)()
    for _ in range(SKIP + STEPS + 2):
        case.problem()


def run_case(builder: Callable[[], Case], rounds: int, per_round: int, warm: int = 3,
             cpu_roofs: bool = True) -> "Result":
    """Capture ``builder``'s problem (:func:`_capture`; ``cpu_roofs`` False for a GPU case, whose roofs are
    the GPU's), then time it against the fix in paired rounds."""
    c = builder()
    for _ in range(warm):
        c.problem()
        c.fixed()
    findings = _capture(builder, cpu_roofs)
    return _result(c.kind, c.case, findings, *_rounds([c.problem, c.fixed], rounds, per_round, c.sync), want=c.want)


def _rounds(steps: list[Callable[[], None]], rounds: int, per_round: int, sync: Callable[[], None] | None = None,
            before: Callable[[], None] | None = None) -> list[float]:
    """Median step time (µs) of each of ``steps``, over ``rounds`` rounds that alternate them (in order,
    then in reverse), ``per_round`` steps each: each step timed alone (``before`` run, untimed, ahead of
    it: the ranks' barrier), or with ``sync`` (a device's wait) each round's steps as one block ended by
    it, the block's time over its steps one sample."""
    times: list[list[float]] = [[] for _ in steps]
    for r in range(rounds):
        for which in (range(len(steps)) if r % 2 == 0 else reversed(range(len(steps)))):
            fn = steps[which]
            if sync is not None:
                sync()
                t = time.perf_counter()
                for _ in range(per_round):
                    fn()
                sync()
                times[which].append((time.perf_counter() - t) * 1e6 / per_round)
                continue
            for _ in range(per_round):
                if before is not None:
                    before()
                t = time.perf_counter()
                fn()
                times[which].append((time.perf_counter() - t) * 1e6)
    return [statistics.median(t) for t in times]


def _result(kind: str, case: str, findings: list[dict], problem_us: float, fixed_us: float,
            want: Callable[[dict], bool] = lambda f: True) -> Result:
    """The first finding of ``kind`` that ``want`` takes, its rank among all, and the measured gain."""
    if os.environ.get("ADVISOR_CALIBRATION_VERBOSE"):
        for f in findings:
            print(f"  {f['kind']}: {f['saving_us_per_step']} µs: {f['title']}", file=sys.stderr)
    rank = next((i for i, f in enumerate(findings, 1) if f["kind"] == kind and want(f)), None)
    got = findings[rank - 1] if rank else {}
    return Result(kind, case, got.get("saving_us_per_step"), got.get("saving_pct_of_step"), rank,
                  problem_us - fixed_us, problem_us, fixed_us)


# --- cases of several ranks (gloo on loopback) ---------------------------------------------------------------
RANKS = 2


def _rank_main(rank: int, port: int, mode: str, ref: str, out: str, rounds: int, per_round: int) -> None:
    """One rank of a case of several (``mp.spawn``'s target): join the gloo group, build the case, and
    either run its problem step as the capture does (``mode`` "capture") or time it against its fixes
    (:func:`_time_ranks`)."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(RANKS))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    try:
        module, name = ref.split(":")
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        case = getattr(importlib.import_module(module), name)()
        if mode == "capture":
            for _ in range(SKIP + STEPS + 2):
                case.problem()
        else:
            _time_ranks(case, rank, out, rounds, per_round)
        dist.barrier()  # gloo's threads done with every collective before exit (docs/ranks.md, gloo at exit)
    finally:
        dist.destroy_process_group()


def _time_ranks(case: Case, rank: int, out: str, rounds: int, per_round: int) -> None:
    """Time the problem step against the fixes in paired rounds, each step started together on every rank
    (a barrier before it); rank 0 writes the medians to ``out`` (JSON: the case's kind and name, problem,
    fixed, others)."""
    import torch.distributed as dist

    steps = [case.problem, case.fixed, *case.others.values()]
    for _ in range(3):
        for fn in steps:
            fn()
    medians = _rounds(steps, rounds, per_round, before=dist.barrier)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"kind": case.kind, "case": case.case, "problem": medians[0], "fixed": medians[1],
                       "others": dict(zip(case.others, medians[2:]))}, f)


def _spawn_ranks(mode: str, ref: str, out: str, rounds: int, per_round: int) -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank_main, args=(port, mode, ref, out, rounds, per_round), nprocs=RANKS, join=True)


def run_ranks_case(builder: Callable[[], Case], rounds: int, per_round: int) -> Result:
    """A case of :data:`RANKS` gloo ranks: captured with ``INDUCTOR_PERF_TRACE_DIR`` set (one trace per
    rank), the estimate the job's finding in the cross-rank view (``inductor-perf summary DIR``, as a
    user runs it), then timed on every rank in paired rounds (rank 0's medians), each in a child process."""
    ref = _ref(builder)
    me = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "capture")
        env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=out, INDUCTOR_PERF_SKIP=str(SKIP), INDUCTOR_PERF_STEPS=str(STEPS),
                   INDUCTOR_PERF_CACHE_DIR=roofs_dir())
        for mode, extra_env in (("capture", env), ("time", dict(os.environ))):
            proc = subprocess.run([sys.executable, me, "--ranks", mode, ref, os.path.join(tmp, "times.json"),
                                   str(rounds), str(per_round)], env=extra_env, capture_output=True, text=True,
                                  timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"{ref}: the {mode} run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        view = subprocess.run([sys.executable, "-m", "inductor_perf", "summary", out, "--format", "json"],
                              capture_output=True, text=True, timeout=600)
        if view.returncode != 0:
            raise RuntimeError(f"inductor-perf summary {out} failed: {view.stderr[-2000:]}")
        with open(os.path.join(tmp, "times.json")) as f:
            times = json.load(f)
    # the view's findings merge the ranks': the job's own (scope "job") states its saving, a rank's the median
    findings = [dict(f, saving_us_per_step=f["job_saving_us"] if f.get("job_saving_us") is not None
                     else f.get("median_saving_us")) for f in json.loads(view.stdout)["findings"]]
    r = _result(times["kind"], times["case"], findings, times["problem"], times["fixed"],
                want=lambda f: f.get("scope") == "job")
    r.others = times["others"]
    return r


# --- input_wait: a slow Dataset ---------------------------------------------------------------------------
class _Samples(Dataset):
    """A dataset whose items take ``delay_s`` each to make (decoding, augmentation, a slow disk)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.randn(64), torch.randn(1)


def input_wait_loops() -> Case:
    """A DataLoader over a dataset that takes 15 ms an item (batches of 2: ~30 ms a step), fixed by a
    dataset that takes none."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
    compiled = torch.compile(model, backend="inductor_perf")
    opt = torch.optim.AdamW(model.parameters())

    def loop(delay_s: float) -> Callable[[], None]:
        batches = iter(DataLoader(_Samples(delay_s), batch_size=2))

        def step() -> None:
            x, y = next(batches)
            loss = ((compiled(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        return step

    return Case("input_wait", "Dataset item 15 ms, batch 2 -> no delay", loop(0.015), loop(0.0))


def input_wait_case(rounds: int = 6, per_round: int = 4) -> Result:
    return run_case(input_wait_loops, rounds, per_round)


# --- optimizer: AdamW one parameter at a time ---------------------------------------------------------------
class _Wide(nn.Module):
    """40 parameters of 256k floats (42 MB), each scaled and summed."""

    def __init__(self, n: int = 40, size: int = 1 << 18) -> None:
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(size) * 0.01) for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum((w * x).sum() for w in self.weights)


def optimizer_loops() -> Case:
    """AdamW(foreach=False) over 40 parameters of 256k floats, fixed by AdamW(fused=True)."""
    torch.manual_seed(0)
    model = _Wide()
    compiled = torch.compile(model, backend="inductor_perf")
    x = torch.tensor(0.5)

    def loop(**kw: bool) -> Callable[[], None]:
        opt = torch.optim.AdamW(model.parameters(), **kw)

        def step() -> None:
            compiled(x).backward()
            opt.step()
            opt.zero_grad()
        return step

    return Case("optimizer", "AdamW foreach=False, 40 x 256k params -> fused=True", loop(foreach=False),
                loop(fused=True))


def optimizer_case(rounds: int = 6, per_round: int = 3) -> Result:
    return run_case(optimizer_loops, rounds, per_round)


# --- exposed_comm: gradients all-reduced after the backward, one collective a parameter ---------------------
def exposed_comm_loops() -> Case:
    """Data parallel by hand on :data:`RANKS` gloo ranks: 4 x Linear(1024) (4.2M parameters, 16.8 MB of
    gradients), batch 16, each gradient all-reduced after the backward, one call a parameter, so no
    compute runs beside them. The saving's model is collectives that cost the step nothing (fully
    overlapped), so the fix timed is the same step without the collectives: the gain overlap can reach
    at most. DDP, the fix a user applies, is timed beside it (its buckets overlap the backward, but
    gloo's reductions run on the CPU cores the compute needs)."""

    import torch.distributed as dist

    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.ReLU())])
    x = torch.randn(16, 1024)
    params = list(model.parameters())

    def loop(net: nn.Module, reduce: bool, ddp: bool = False) -> Callable[[], None]:
        compiled: nn.Module = torch.compile(net, backend="inductor_perf")
        if ddp:  # DDP(torch.compile(m)), the pattern DDP's docs recommend
            compiled = nn.parallel.DistributedDataParallel(compiled, bucket_cap_mb=4)
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)

        def step() -> None:
            compiled(x).sum().backward()
            if reduce:
                for p in params:
                    dist.all_reduce(p.grad)
            opt.step()
            opt.zero_grad()
        return step

    return Case("exposed_comm", "2 gloo ranks, 4 x Linear(1024), all_reduce per gradient after backward "
                "-> no collective (the bound)", loop(model, True), loop(model, False),
                others={"DDP(bucket_cap_mb=4)": loop(copy.deepcopy(model), False, ddp=True)})


def exposed_comm_case(rounds: int = 6, per_round: int = 4) -> Result:
    return run_ranks_case(exposed_comm_loops, rounds, per_round)


# --- headroom: a batch read across its rows -----------------------------------------------------------------
class _Scores(nn.Module):
    """A linear score per feature, summed over the features of each sample."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(features))
        self.b = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.w + self.b).relu().sum(dim=1)


def headroom_loops() -> Case:
    """Scoring a batch of 4096 samples x 4096 features (64 MB of float32) that arrives column-major
    (the transpose of a features x samples array: a Fortran-order array from numpy, a ``.t()`` upstream),
    so the compiled kernel sums each row across a stride of 16 KB; fixed by storing the batch row-major
    (``.contiguous()`` once, where it is loaded). The same bytes either way: one kernel, far under the
    memory roof, then near it."""
    torch.manual_seed(0)
    model = _Scores(4096)
    strided = torch.randn(4096, 4096).t()  # samples x features, column-major
    rows = strided.contiguous()

    def loop(batch: torch.Tensor) -> Callable[[], None]:
        compiled = torch.compile(model, backend="inductor_perf")

        def step() -> None:
            with torch.no_grad():
                compiled(batch)
        return step

    return Case("headroom", "row sums of a 4096 x 4096 float32 batch stored column-major -> row-major",
                loop(strided), loop(rows))


def headroom_case(rounds: int = 6, per_round: int = 3) -> Result:
    return run_case(headroom_loops, rounds, per_round)


# --- precision: float32 matmuls on a CPU with a bfloat16 path ---------------------------------------------------
def precision_loops() -> Case:
    """A training step of 4 x Linear(1024) + ReLU, batch 512, in float32, fixed by bfloat16 autocast around
    the forward and the loss (the CPU's AVX512_BF16 / AMX matmuls)."""
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.ReLU())])
    twin = copy.deepcopy(model)
    x = torch.randn(512, 1024)

    def loop(net: nn.Module, bf16: bool) -> Callable[[], None]:
        compiled = torch.compile(net, backend="inductor_perf")
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)

        def step() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = compiled(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        return step

    return Case("precision", "4 x Linear(1024) float32, batch 512 -> autocast bfloat16", loop(model, False),
                loop(twin, True))


def precision_case(rounds: int = 6, per_round: int = 3) -> Result:
    return run_case(precision_loops, rounds, per_round)


CASES = (input_wait_case, optimizer_case, exposed_comm_case, headroom_case, precision_case)


def table(results: list[Result]) -> str:
    rows = ["| kind | case | estimate (share of the captured step) | measured gain (step with problem -> fixed) "
            "| ratio of shares | ratio of times | rank |", "|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(_row(r))
        for name, fixed_us in r.others.items():
            rows.append(_row(Result(r.kind, f"(the same, fixed by {name})", r.estimate_us, r.estimate_pct, r.rank,
                                    r.problem_us - fixed_us, r.problem_us, fixed_us)))
    return "\n".join(rows)


def _row(r: Result) -> str:
    est = f"{r.estimate_us / 1e3:.2f} ms ({r.estimate_pct:.0f} %)" if r.estimate_us else "-"
    ratio = f"{r.ratio:.2f}" if r.ratio else "-"
    ratio_us = f"{r.ratio_us:.2f}" if r.ratio_us else "-"
    return (f"| {r.kind} | {r.case} | {est} | {r.measured_us / 1e3:.2f} ms ({r.measured_pct:.0f} %; "
            f"{r.problem_us / 1e3:.1f} -> {r.fixed_us / 1e3:.1f} ms) | {ratio} | {ratio_us} | {r.rank or '-'} |")


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Run the advisor's calibration cases (docs/advisor.md) and print "
                                             "the table: kind, case, estimate, measured gain, ratio, rank.")
    ap.add_argument("--capture", metavar="MODULE:CASE", help=argparse.SUPPRESS)  # the child of _capture
    ap.add_argument("--ranks", nargs=5, metavar=("MODE", "MODULE:CASE", "OUT", "ROUNDS", "PER_ROUND"),
                    help=argparse.SUPPRESS)  # the child of run_ranks_case
    ap.add_argument("cases", nargs="*", metavar="CASE", help="cases to run (default: all): " +
                    ", ".join(c.__name__.removesuffix("_case") for c in CASES))
    args = ap.parse_args(argv)
    if args.capture:
        _capture_child(args.capture)
        return 0
    if args.ranks:
        mode, ref, out, rounds, per_round = args.ranks
        _spawn_ranks(mode, ref, out, int(rounds), int(per_round))
        return 0
    by_name = {c.__name__.removesuffix("_case"): c for c in CASES}
    unknown = [c for c in args.cases if c not in by_name]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}: expected some of {', '.join(by_name)}")
    torch.set_num_threads(1)
    print(table([by_name[c]() for c in args.cases] if args.cases else [case() for case in CASES]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
