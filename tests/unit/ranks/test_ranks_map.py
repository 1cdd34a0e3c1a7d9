"""The cross-rank view as a map (ranks.digest.digest, run by ranks.executors) and a reduce
(ranks.digest.view_of): any executor gives the view the sequential path gives, a rank whose worker
dies or whose file is unreadable is named and skipped, Ctrl-C cancels what has not run, URL folders
are listed and read through fsspec, and --dask without dask says how to install it. The ranks are
copies of the real ``two_ranks`` traces (tests/unit/rank_copies.py); the reference view is the one
the existing local path builds (tests/unit/ranks/test_ranks.py checks its numbers by hand)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import pickle
import subprocess
import sys
import time

import pytest

from inductor_perf import cli
from inductor_perf.ranks.digest import Digest, digest, view_of
from inductor_perf.ranks import executors
from inductor_perf.ranks.executors import map_digests, progress_text, run_local, run_map
from inductor_perf.ranks.files import cross_rank_files, ranks_view
from inductor_perf.summary.files import trace_files
from ctrl_c import ctrl_c_after
from rank_copies import rank_copies

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return rank_copies(tmp_path_factory.mktemp("four"), 4)


def test_any_executor_gives_the_sequential_view(four):
    """A thread pool, and digests that went through pickle (as they cross the network), give the view
    that the sequential path (workers=1) gives, byte for byte in JSON."""
    want = json.dumps(cross_rank_files(four, workers=1).to_dict(), sort_keys=True)
    with cf.ThreadPoolExecutor(3) as pool:
        assert json.dumps(ranks_view(four, executor=pool).to_dict(), sort_keys=True) == want
    shipped = [pickle.loads(pickle.dumps(digest(p))) for p in four]
    assert json.dumps(view_of(shipped).to_dict(), sort_keys=True) == want
    v = json.loads(want)
    assert v["ranks_present"] == [0, 1, 2, 3] and v["world_size"] == 128  # the copies' rewritten ranks


def die_on_rank_2(path, *args):
    """A map task whose process dies on rank 2's file (as a worker killed by the OOM killer does)."""
    if path.endswith("sampled_rank-2.json.gz"):
        os._exit(3)
    return digest(path, *args)


def test_a_rank_whose_worker_dies_is_named_and_the_others_kept(four):
    got = run_local(four, 2, fn=die_on_rank_2, args=(None, 20, True))
    assert [d.summary is None for d in got] == [False, False, True, False]
    assert got[2].reason == "worker died" and "BrokenProcessPool" in got[2].error
    v = view_of(got).to_dict()
    assert v["ranks_present"] == [0, 1, 3]
    assert [s["file"] for s in v["skipped"]] == [four[2]]
    assert any(n.startswith("left out, worker died: sampled_rank-2.json.gz") for n in v["notes"]), v["notes"]


def test_an_unreadable_rank_is_named_and_skipped(four, tmp_path):
    bad = tmp_path / "sampled_rank-9.json.gz"
    bad.write_bytes(b"not gzip, not json")
    with cf.ThreadPoolExecutor(2) as pool:
        v = ranks_view([*four[:2], str(bad)], executor=pool).to_dict()
    assert v["ranks_present"] == [0, 1]
    assert v["skipped"][0]["file"] == str(bad) and v["skipped"][0]["reason"].startswith("unreadable (")


class Recording(cf.ThreadPoolExecutor):
    """A thread pool that keeps the futures it gave out."""

    def __init__(self, n):
        super().__init__(n)
        self.futures = []

    def submit(self, fn, *args, **kwargs):
        self.futures.append(super().submit(fn, *args, **kwargs))
        return self.futures[-1]


def slow(path, *args):
    time.sleep(0.3)
    return Digest(path, None, "slow")


def slower(path, *args):
    time.sleep(1.5)
    return Digest(path, None, "slower")


def test_ctrl_c_while_waiting_cancels_the_futures():
    """A real SIGINT 0.5 s into a map of 10 tasks of 0.3 s on one thread: KeyboardInterrupt comes out
    of the wait, and every task that had not started is cancelled (at most 3 could have started)."""
    pool = Recording(1)
    try:
        with ctrl_c_after(0.5), pytest.raises(KeyboardInterrupt):
            run_map(pool, [f"r{n}" for n in range(10)], fn=slow)
    finally:
        pool.shutdown(wait=True)
    assert len(pool.futures) == 10
    assert sum(f.cancelled() for f in pool.futures) >= 7


def test_progress_line_counts_ranks_and_estimates_the_rest():
    assert progress_text(0, 16, 1.0) == "summarized 0 of 16 ranks"
    assert progress_text(4, 16, 10.0) == "summarized 4 of 16 ranks, ETA 30 s"  # 10 s / 4 ranks x 12 left
    assert progress_text(16, 16, 40.0) == "summarized 16 of 16 ranks"
    seen = []
    with cf.ThreadPoolExecutor(2) as pool:
        run_map(pool, ["a", "b", "c"], fn=slow, stage=seen.append)
    assert seen[-1] == "summarized 3 of 3 ranks"


def test_progress_line_says_when_no_rank_has_finished_for_a_while(monkeypatch):
    assert progress_text(3, 16, 100.0, 45.0) == ("summarized 3 of 16 ranks, ETA 433 s; none finished in "
                                                 "the last 45 s (Ctrl-C cancels)")
    assert progress_text(3, 16, 100.0, 29.0) == "summarized 3 of 16 ranks, ETA 433 s"
    assert progress_text(16, 16, 100.0, 45.0) == "summarized 16 of 16 ranks"
    # a run whose one task takes 1.5 s, with the threshold at 0.6 s: the line says so before it ends
    monkeypatch.setattr(executors, "STALLED_S", 0.6)
    seen = []
    with cf.ThreadPoolExecutor(1) as pool:
        run_map(pool, ["a"], fn=slower, stage=seen.append)
    assert any(line.startswith("summarized 0 of 1 ranks; none finished in the last") for line in seen), seen
    assert seen[-1] == "summarized 1 of 1 ranks"


def test_a_url_folder_is_listed_and_read_through_fsspec(four):
    folder = os.path.dirname(four[0])
    open(os.path.join(folder, "x.summary.json"), "w").close()  # our own output: not an input
    urls = trace_files("file://" + folder)
    assert urls == ["file://" + p for p in sorted(four)]
    by_url = map_digests(urls, workers=1)
    assert [d.file for d in by_url] == urls and all(d.summary is not None for d in by_url)
    assert view_of(by_url).to_dict() == cross_rank_files(sorted(four), workers=1).to_dict()
    os.remove(os.path.join(folder, "x.summary.json"))


def test_a_missing_url_is_one_line_naming_it(tmp_path, capsys):
    url = f"file://{tmp_path}/nothing-here"
    assert cli.main(["summary", url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and url in err, err
    d = digest(url + ".json.gz")
    assert d.summary is None and url in d.error and "\n" not in d.error


def test_dask_flag_without_dask_says_how_to_install(four, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    folder = os.path.dirname(four[0])
    assert cli.main(["summary", folder, "--dask", "tcp://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'inductor-perf[dask]'" in err, err
    monkeypatch.setenv("INDUCTOR_PERF_DASK", "tcp://127.0.0.1:9")  # the variable does what the flag does
    assert cli.main(["summary", folder]) == 1
    assert "pip install 'inductor-perf[dask]'" in capsys.readouterr().err


def test_package_and_local_view_need_neither_dask_nor_fsspec(four):
    code = ("import sys\n"
            "for m in ('dask', 'distributed', 'fsspec', 's3fs'): sys.modules[m] = None\n"
            "import inductor_perf\n"
            f"v = inductor_perf.ranks_view({four[:2]!r})\n"
            "assert v.ranks_present == [0, 1], v.ranks_present\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'fsspec') "
            "and sys.modules[m] is not None]\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_url_without_fsspec_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    d = digest("s3://bucket/run/rank0.json.gz")
    assert d.summary is None and d.error.startswith("s3://bucket/run/rank0.json.gz: ")
    assert "pip install 'inductor-perf[dask]'" in d.error
    assert cli.main(["summary", "s3://bucket/run"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s3://bucket/run" in err and "inductor-perf[dask]" in err, err


def test_a_folder_with_a_run_of_its_own_on_an_executor(four, tmp_path, monkeypatch):
    """Every file streamed (light digests): the V100 trace (rank 1 of 2, no other rank of its job here) is
    a run of its own, whose row reads its full summary, made again by the executor; the result is the
    sequential path's, and the row has the device the full summary names (a light one has none)."""
    from inductor_perf.ranks.files import folder_files
    from inductor_perf.traces import engines

    monkeypatch.setattr(engines, "LARGE_TRACE_BYTES", 0)
    files = [*four[:2], os.path.realpath(os.path.join(REPO, "..", "shared", "traces", "v100_ranks2_r1_test.json.gz"))]
    want = folder_files(str(tmp_path), files, workers=1).to_dict()
    with Recording(2) as pool:
        got = folder_files(str(tmp_path), files, executor=pool).to_dict()
    assert got == want
    assert len(pool.futures) == 4  # three digests, then the run's full summary
    assert [r["file"] for r in got["runs"]] == ["v100_ranks2_r1_test.json.gz"]
    assert "V100" in got["runs"][0]["device"]  # its deviceProperties: Tesla V100-SXM2-16GB
