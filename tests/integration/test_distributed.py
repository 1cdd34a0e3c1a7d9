"""Capture inside torch.distributed: two gloo ranks (DDP + torch.compile), one trace per rank."""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

SCRIPT = textwrap.dedent('''
    import os, sys, torch, torch.nn as nn, torch.distributed as dist
    import torch.multiprocessing as mp

    def worker(rank, world, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        # torch 2.13 graph-breaks out of a compiled DDP wrapper's forward; compiling the module
        # inside DDP is the pattern that compiles.
        f = nn.parallel.DistributedDataParallel(torch.compile(net, backend="inductor_perf"))
        x = torch.randn(8, 16)
        for _ in range(5):
            f(x).sum().backward()
        dist.destroy_process_group()

    if __name__ == "__main__":
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        mp.spawn(worker, args=(2, port), nprocs=2, join=True)
        print("RESULT ok")
''')


def test_one_trace_per_rank(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=str(tmp_path / "out"), INDUCTOR_PERF_SKIP="2",
               INDUCTOR_PERF_STEPS="1")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = sorted(glob.glob(str(tmp_path / "out" / "*.trace.json.gz")))
    assert len(traces) == 2
    assert any("_rank0_" in t for t in traces) and any("_rank1_" in t for t in traces)
    for path in traces:
        with gzip.open(path, "rt") as f:
            trace = json.load(f)
        rank = 0 if "_rank0_" in path else 1
        assert trace.get("distributedInfo", {}).get("rank") == rank
        tagged = [e for e in trace["traceEvents"] if "kernel_flop" in e.get("args", {})]
        assert tagged, path
        # DDP's gradient all-reduce runs in the window too.
        assert any("all_reduce" in e.get("name", "") or "allreduce" in e.get("name", "")
                   for e in trace["traceEvents"])


STRAGGLER_SCRIPT = textwrap.dedent('''
    import os, time, torch, torch.nn as nn, torch.distributed as dist
    import torch.multiprocessing as mp

    def worker(rank, world, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        f = nn.parallel.DistributedDataParallel(torch.compile(net, backend="inductor_perf"))
        x = torch.randn(8, 16)
        for _ in range(4):
            loss = f(x).sum()
            if rank == 1:
                time.sleep(0.2)  # rank 1 is late to every gradient all-reduce
            loss.backward()
        dist.destroy_process_group()

    if __name__ == "__main__":
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        mp.spawn(worker, args=(2, port), nprocs=2, join=True)
''')


def test_slow_rank_is_named_the_straggler(tmp_path, capsys):
    """Rank 1 sleeps 200 ms before each backward, so rank 0 waits ~200 ms per step in the gradient
    all-reduce: the cross-rank view must name rank 1, and rank 0 writes it at the end of the window."""
    from inductor_perf import cli

    script = tmp_path / "ddp_slow.py"
    script.write_text(STRAGGLER_SCRIPT)
    out = tmp_path / "out"
    env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=str(out), INDUCTOR_PERF_SKIP="2", INDUCTOR_PERF_STEPS="1",
               INDUCTOR_PERF_RANKS_WAIT_S="60")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert cli.main(["summary", str(out), "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["ranks_present"] == [0, 1] and view["backend"] == "gloo"
    assert view["per"] == "step"  # the env-var capture marks ProfilerStep ranges
    assert view["straggler"]["rank"] == 1
    # rank 0 waited for most of the 200 ms sleep in its all-reduce; allow scheduling noise on 2 cores
    assert view["straggler"]["lead_us"] > 100e3
    assert cli.main(["summary", str(out)]) == 0
    assert "Straggler: rank 1" in capsys.readouterr().out
    written = glob.glob(str(out / "*_rank0_*.ranks.summary.json"))
    assert len(written) == 1, proc.stdout + proc.stderr[-2000:]
    with open(written[0]) as f:
        assert json.load(f)["straggler"]["rank"] == 1
    assert glob.glob(str(out / "*_rank0_*.ranks.summary.txt"))
