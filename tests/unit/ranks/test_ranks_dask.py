"""The cross-rank view's map on a real ``dask.distributed`` cluster on loopback: a ``dask scheduler`` and
two ``dask worker`` processes (``--nthreads 1``, random free ports, stopped in a ``finally``), and traces
read from S3 served by moto's ThreadedMotoServer on 127.0.0.1 (started and stopped here too).

Ranks: copies of the real ``two_ranks`` traces with rewritten rank numbers (tests/unit/rank_copies.py).
The reference is the view the local path builds (test_ranks.py checks its numbers by hand).

Marker ``dask``: these tests need dask, s3fs and moto (the ``test`` extra has them); they are torch-free,
so the torch-version matrix (tools/test_matrix.sh) selects them out by this marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from inductor_perf import cli
from inductor_perf.ranks.executors import dask_executor, run_map, run_on
from inductor_perf.ranks.files import cross_rank_files, ranks_view
from ctrl_c import ctrl_c_after
from rank_copies import rank_copies
from rank_tasks import kill_worker_on_rank_1, sleepy

pytestmark = pytest.mark.dask
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
S3_KEYS = {"key": "testing", "secret": "testing"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited with {proc.returncode}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)  # the dask CLI's own clean shutdown (nanny, then worker)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on a free loopback port; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster(s3):
    """A scheduler and two workers (one thread each) on loopback; yields a connected Client. The
    workers find S3 at moto's endpoint through fsspec's own variables."""
    from distributed import Client

    port = free_port()
    # tests/unit: the misbehaving tasks of rank_tasks.py, imported by name on the workers
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests", "unit")]), FSSPEC_S3_ENDPOINT_URL=s3, FSSPEC_S3_KEY="testing",
               FSSPEC_S3_SECRET="testing", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")
    env.pop("INDUCTOR_PERF_TRACE_DIR", None)
    dask = [sys.executable, "-m", "dask"]
    procs = []
    try:
        procs.append(subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                       "--dashboard-address", "127.0.0.1:0"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_port(port, procs[0])
        for _ in range(2):
            procs.append(subprocess.Popen([*dask, "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1",
                                           "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1"], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(f"tcp://127.0.0.1:{port}", timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
            yield client
    finally:
        stop(procs[1:])
        stop(procs[:1])


def executed(client) -> dict[str, int]:
    return client.run(lambda dask_worker: dask_worker.state.executed_count)


@pytest.fixture(scope="module")
def sixteen(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sixteen")
    return folder, rank_copies(folder, 16)


def test_sixteen_ranks_on_two_workers_equal_the_local_view(cluster, sixteen, capsys):
    folder, files = sixteen
    before = executed(cluster)
    view = ranks_view(files, executor=cluster.get_executor())
    after = executed(cluster)
    ran = {w: after[w] - before.get(w, 0) for w in after}
    assert len(ran) == 2 and all(n > 0 for n in ran.values()), ran  # both workers ran ranks
    assert sum(ran.values()) == 16, ran
    local = cross_rank_files(files, workers=1)
    assert json.dumps(view.to_dict(), sort_keys=True) == json.dumps(local.to_dict(), sort_keys=True)
    assert view.ranks_present == list(range(16))
    # the command: --dask prints what the local command prints, byte for byte
    address = cluster.scheduler.address
    assert cli.main(["summary", str(folder), "--format", "json"]) == 0
    want = capsys.readouterr().out
    assert cli.main(["summary", str(folder), "--format", "json", "--dask", address]) == 0
    assert capsys.readouterr().out == want


def test_ranks_read_from_s3_by_the_workers(cluster, s3, sixteen, monkeypatch, capsys):
    import fsspec

    folder, files = sixteen
    fs = fsspec.filesystem("s3", endpoint_url=s3, **S3_KEYS)
    fs.mkdir("traces")
    for f in files[:4]:
        fs.put_file(f, f"traces/run/{os.path.basename(f)}")
    # this process lists the folder through fsspec too: the same configuration the workers read
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": s3, **S3_KEYS})
    want = cli.main(["summary", str(folder), "--format", "json"]), capsys.readouterr().out
    local4 = json.dumps(cross_rank_files(files[:4], workers=1).to_dict(), sort_keys=True)
    before = executed(cluster)
    got = ranks_view([f"s3://traces/run/{os.path.basename(f)}" for f in files[:4]], executor=cluster.get_executor())
    assert json.dumps(got.to_dict(), sort_keys=True) == local4
    assert sum(executed(cluster).values()) - sum(before.values()) == 4
    # the command on the S3 folder (listed through fsspec), the ranks read by the workers
    assert cli.main(["summary", "s3://traces/run", "--format", "json", "--dask", cluster.scheduler.address]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks_present"] == [0, 1, 2, 3] and json.dumps(out, sort_keys=True) == local4
    assert want[0] == 0


def test_ctrl_c_cancels_the_cluster_tasks(cluster):
    """SIGINT 1 s into 8 tasks of 2 s on two one-thread workers: KeyboardInterrupt comes out, and the
    scheduler forgets the tasks (uncancelled, they would keep the cluster busy ~7 s more)."""
    before = sum(executed(cluster).values())
    with ctrl_c_after(1.0), pytest.raises(KeyboardInterrupt):
        run_map(cluster.get_executor(), [f"r{n}" for n in range(8)], fn=sleepy)
    deadline = time.monotonic() + 3.0
    while cluster.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    time.sleep(2.5)  # what was running when it was cancelled ends; nothing else starts
    assert sum(executed(cluster).values()) - before <= 4


def test_a_rank_that_kills_its_worker_is_named_and_skipped(cluster, sixteen):
    """Run last: it kills worker processes. The scheduler retries the task on a fresh worker
    (allowed-failures 1 here), then gives up with KilledWorker; the ranks the dying workers held run
    again alone: the rank that kills its worker is named, the others kept."""
    _, files = sixteen
    got = run_on(cluster.get_executor(), files[:4], fn=kill_worker_on_rank_1, args=(None, 20, True))
    assert [d.summary is None for d in got] == [False, True, False, False], [(d.reason, d.error) for d in got]
    assert got[1].reason == "worker died" and got[1].error.startswith("KilledWorker"), got[1]


def test_a_scheduler_with_no_workers_is_named_at_once(caplog):
    """A scheduler with no worker would leave the ranks waiting with nothing said: connecting warns,
    naming the address given."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=None) as lc:
        with caplog.at_level("WARNING", logger="inductor_perf.ranks.executors"), dask_executor(lc.scheduler_address):
            pass
    (rec,) = [r for r in caplog.records if r.name == "inductor_perf.ranks.executors"]
    assert lc.scheduler_address in rec.getMessage() and "no workers" in rec.getMessage()

