"""Count what torch.compile(DDP(m)) compiles, per backend: graphs, graph breaks, DDPOptimizer splits.

Why: an earlier note said ``torch.compile(DDP(m), backend="inductor_perf")`` graph-breaks out of the
forward. A graph break (dynamo stops tracing and runs Python in between) and a DDPOptimizer split
(dynamo traced one whole graph; ``torch._dynamo.config.optimize_ddp`` cuts it at DDP's gradient-bucket
boundaries and hands each piece to the backend) both show up as "more than one compiled graph", so
this script reports them apart:

- ``unique_graphs``: frames dynamo traced into an FX graph (counters["stats"]["unique_graphs"]).
- ``graph_breaks``: counters["graph_break"], reason -> count (dynamo's own graph-break tally).
- ``ddp_buckets``: per graph DDPOptimizer saw, the buckets it cut it into (each bucket is one call of
  the backend); empty when DDPOptimizer did not run.
- ``aot_graphs``: counters["aot_autograd"]["total"], the graphs AOTAutograd compiled (0 for eager).

Each backend runs in a fresh process (dynamo's counters and caches are per process). Usage::

    PYTHONPATH=$PWD python tools/ddp_graphs.py                      # all backends, 2 gloo ranks
    PYTHONPATH=$PWD python tools/ddp_graphs.py --backends inductor_perf inductor --world 1
    PYTHONPATH=$PWD python tools/ddp_graphs.py --optimize-ddp False  # no bucket splitting
    PYTHONPATH=$PWD python tools/ddp_graphs.py --bucket-cap-mb 25    # one bucket: no split
    PYTHONPATH=$PWD python tools/ddp_graphs.py --model sequential    # nn.Sequential: nothing compiles

Prints one JSON line per backend (rank 0's counts; every rank's are checked to be equal).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys

import torch
import torch.nn as nn

BACKENDS = ("inductor_perf", "inductor", "eager", "aot_eager")


class Net(nn.Module):
    """The Sequential's layers, run by a forward defined in user code (a frame dynamo traces)."""

    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _worker(rank: int, world: int, port: int, args: argparse.Namespace, queue: object) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    import torch.distributed as dist
    from torch._dynamo.utils import counters

    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch._dynamo.config.optimize_ddp = args.optimize_ddp
        torch.manual_seed(0)
        # Each Linear(512, 512) holds 512*512+512 fp32 = 1.0 MiB of parameters. With a 1 MB bucket
        # cap (DDPOptimizer refuses a cap under its 1 MiB first bucket) DDP's buckets, and so
        # DDPOptimizer's pieces, fall between the Linears: there are boundaries to split at.
        layers = [nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512),
                  nn.ReLU(), nn.Linear(512, 4)]
        # An nn.Sequential's forward lives in torch/nn: as the top frame under DDP (which dynamo
        # leaves at _inside_ddp_forward) dynamo's skip rules do not trace it, whatever the backend.
        net = nn.Sequential(*layers) if args.model == "sequential" else Net(layers)
        ddp = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=args.bucket_cap_mb)
        # Count DDPOptimizer's buckets (one backend call per bucket) without touching the backend:
        # the backend is named by string, exactly as a user's torch.compile(DDP(m), backend=...).
        from torch._dynamo.backends.distributed import DDPOptimizer

        buckets: list[int] = []
        orig = DDPOptimizer.compile_fn

        def compile_fn(self, gm, example_inputs, **kw):
            out = orig(self, gm, example_inputs, **kw)
            buckets.append(len(self.buckets))
            return out

        DDPOptimizer.compile_fn = compile_fn
        compiled = torch.compile(ddp, backend=args.backend)
        x = torch.randn(8, 64)
        for _ in range(3):
            compiled(x).sum().backward()
        out = {
            "backend": args.backend,
            "rank": rank,
            "world": world,
            "torch": torch.__version__,
            "optimize_ddp": args.optimize_ddp,
            "bucket_cap_mb": args.bucket_cap_mb,
            "model": args.model,
            "unique_graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": {_short(k): v for k, v in counters["graph_break"].items()},
            "frames_ok": int(counters["frames"]["ok"]),
            "ddp_buckets": buckets,
            "aot_graphs": int(counters["aot_autograd"]["total"]),
        }
        queue.put(out)  # type: ignore[attr-defined]
    finally:
        dist.destroy_process_group()


def _short(reason: str) -> str:
    """A graph-break reason's first line and the first `name` its explanation quotes."""
    import re

    name = re.search(r"`([^`]+)`", reason)
    return reason.splitlines()[0] + (f": {name.group(1)}" if name else "")


def _one(args: argparse.Namespace) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(_worker, args=(args.world, port, args, queue), nprocs=args.world, join=True)
    results = [queue.get() for _ in range(args.world)]
    results.sort(key=lambda r: r["rank"])
    same = all({k: v for k, v in r.items() if k != "rank"}
               == {k: v for k, v in results[0].items() if k != "rank"} for r in results)
    return {**results[0], "ranks_agree": same}


def _bool(s: str) -> bool:
    return s.lower() in ("1", "true", "yes")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", nargs="+", default=list(BACKENDS))
    p.add_argument("--backend", help=argparse.SUPPRESS)  # one backend, in this process
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--optimize-ddp", type=_bool, default=True)
    p.add_argument("--bucket-cap-mb", type=float, default=1.0)
    p.add_argument("--model", choices=("user", "sequential"), default="user",
                   help="a forward in user code, or nn.Sequential (whose forward dynamo skips)")
    args = p.parse_args(argv)
    if args.backend:
        print(json.dumps(_one(args)), flush=True)
        return 0
    for b in args.backends:
        cmd = [sys.executable, __file__, "--backend", b, "--world", str(args.world),
               "--optimize-ddp", str(args.optimize_ddp), "--bucket-cap-mb", str(args.bucket_cap_mb),
               "--model", args.model]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(json.dumps({"backend": b, "error": proc.stderr.strip().splitlines()[-1:]}), flush=True)
            continue
        print(proc.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
