"""The one writer (``traces.files.write_atomic``) and every command that writes through it: an output
is never an input (same path, symlink, hard link), never a device, fifo or directory; a symlink is
written through; the mode is what ``open()`` gives under the umask; errors name the user's path."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import stat

import pytest

from inductor_perf import cli
from inductor_perf.traces import files as tf
from inductor_perf.errors import OutputError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
CPU_TRACE = os.path.join(FIXTURES, "mlp_cpu_compiled.trace.json")
SHAPES_TRACE = os.path.join(FIXTURES, "cpu_eager_shapes.pt.trace.json.gz")


def _write(data: bytes):
    return lambda f: f.write(data)


def _cli(argv, capsys):
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, [ln for ln in err.splitlines() if ln.startswith("inductor-perf:")]


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def open_mode(folder, mask: int) -> int:
    """The mode ``open(path, "w")`` gives a new file under ``mask``: what our files must get."""
    p = os.path.join(folder, f"reference-{mask:o}")
    with umask(mask):
        with open(p, "w"):
            pass
    mode = stat.S_IMODE(os.stat(p).st_mode)
    os.unlink(p)
    return mode


# --- the output is never an input --------------------------------------------------------------------
def test_same_path_refused_and_input_kept(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b"input")
    with pytest.raises(OutputError, match=r"t\.json: this is the input file; .*expected another output path"):
        tf.write_atomic(p, _write(b"output"), inputs=[p])
    assert p.read_bytes() == b"input" and os.listdir(tmp_path) == ["t.json"]


def test_output_through_a_symlink_to_the_input_refused(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b"input")
    link = tmp_path / "link.json"
    link.symlink_to(p)
    with pytest.raises(OutputError, match=r"link\.json: this is the input file .*t\.json"):
        tf.write_atomic(link, _write(b"output"), inputs=[p])
    with pytest.raises(OutputError, match="is the input file"):  # the input named through the link
        tf.write_atomic(p, _write(b"output"), inputs=[link])
    assert p.read_bytes() == b"input" and link.is_symlink()


def test_output_that_is_a_hard_link_of_the_input_refused(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b"input")
    other = tmp_path / "other.json"
    os.link(p, other)
    with pytest.raises(OutputError, match="is the input file"):
        tf.write_atomic(other, _write(b"output"), inputs=[p])
    assert p.read_bytes() == b"input" and other.read_bytes() == b"input"


def test_symlink_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.json"
    target.write_bytes(b"old")
    link = tmp_path / "out.json"
    link.symlink_to(os.path.join("real", "out.json"))  # relative, as `ln -s` makes them
    tf.write_atomic(link, _write(b"new"), inputs=[])
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "out.json")
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path / "real")) == ["out.json"]  # the temp file was beside the target


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "new.json")
    tf.write_atomic(link, _write(b"new"), inputs=[])
    assert link.is_symlink() and (tmp_path / "new.json").read_bytes() == b"new"


# --- targets that are not regular files -------------------------------------------------------------
def char_device(tmp_path) -> str:
    """A character device to write to: /dev/full, unless this process may replace entries of /dev
    (root), where a writer that replaced its output (the bug these tests catch) would replace the
    machine's own /dev/full: then a node of our own like it (major 1, minor 7) in ``tmp_path``."""
    if not os.access("/dev", os.W_OK):
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        return "/dev/full"
    p = tmp_path / "full"
    try:
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except (OSError, AttributeError) as e:
        pytest.skip(f"/dev is writable and no device node can be made here ({e})")
    return str(p)


def test_device_node_refused(tmp_path):
    device = char_device(tmp_path)
    with pytest.raises(OutputError) as e:
        tf.write_atomic(device, _write(b"x"), inputs=[])
    assert str(e.value) == f"{device}: is a character device; expected the path of a regular file to write"
    assert stat.S_ISCHR(os.stat(device).st_mode)  # still the device, not a file in its place


def test_fifo_and_directory_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match=r"pipe: is a fifo \(named pipe\); expected the path of a regular file"):
        tf.write_atomic(fifo, _write(b"x"), inputs=[])  # refused before opening it: never blocks
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(OutputError, match=r": is a directory; expected"):
        tf.write_atomic(tmp_path, _write(b"x"), inputs=[])
    assert os.listdir(tmp_path) == ["pipe"]


def test_missing_folder_names_the_users_path_not_ours(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError) as e:
        tf.write_atomic("nodir/x.json", _write(b"x"), inputs=[])
    msg = str(e.value)
    assert msg == "nodir/x.json: could not write it: the folder nodir does not exist; expected an existing folder"
    assert ".tmp" not in msg


def test_write_failure_names_the_path_and_leaves_nothing(tmp_path):
    out = tmp_path / "o.json"
    out.write_bytes(b"previous")

    def full(f):
        f.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match=r"o\.json: could not write it: No space left on device$"):
        tf.write_atomic(out, full, inputs=[])
    assert out.read_bytes() == b"previous" and os.listdir(tmp_path) == ["o.json"]


def test_output_error_is_an_os_error():
    # callers that take any failed write alike (the backend's tag store) keep catching it
    assert issubclass(OutputError, OSError)


# --- the mode is open()'s under the umask -----------------------------------------------------------
def _writers(tmp_path, monkeypatch):
    """Every writer, each as (name, function writing its files, the files it writes)."""
    from inductor_perf.devices import calibrate
    from inductor_perf.tagging import store as tag_store
    from inductor_perf.augment.core import augment_file
    from inductor_perf.capture.session import process_trace
    from inductor_perf.report.html import write_report
    from inductor_perf.model.tags import GraphTags

    monkeypatch.setenv("INDUCTOR_PERF_CACHE_DIR", str(tmp_path / "cal"))
    monkeypatch.setattr(tag_store, "tags_dir", lambda: str(tmp_path / "tags"))
    m = calibrate.Measurement(key=calibrate.machine_key("cpu", threads=1), gemm_tflops={"float32": 1.0},
                              mem_bandwidth_gbs=10.0, seconds=1.0, measured_at="t")
    g = GraphTags(instance_id=0, graph_id=0, is_backward=False, cache_key="k")

    def cap():
        r = process_trace(CPU_TRACE, str(tmp_path / "cap"))
        return [r.trace_path, r.summary_txt_path, r.summary_json_path, r.report_path]

    def ranks():  # rank 0's cross-rank summary of two ranks' traces
        from inductor_perf.ranks.after_capture import write_cross_rank

        (tmp_path / "ranks").mkdir()
        for r in (0, 1):
            shutil.copy(os.path.join(FIXTURES, "gpu", "sanity.trace.json.gz"),
                        tmp_path / "ranks" / f"h_pid1_rank{r}_t.trace.json.gz")
        txt = write_cross_rank(str(tmp_path / "ranks"), str(tmp_path / "ranks" / "h_pid1_rank0_t"), 2, 0.0, 0.0)
        return [txt, txt[: -len(".txt")] + ".json"]

    return [
        ("write_atomic", lambda: tf.write_atomic(tmp_path / "a.bin", _write(b"x"), inputs=[]) or [tmp_path / "a.bin"]),
        ("save_trace gz", lambda: tf.save_trace({"traceEvents": []}, tmp_path / "t.json.gz", inputs=[])
         or [tmp_path / "t.json.gz"]),
        ("augment full", lambda: augment_file(SHAPES_TRACE, tmp_path / "f.json.gz", engine="full")
         and [tmp_path / "f.json.gz"]),
        ("augment stream", lambda: augment_file(SHAPES_TRACE, tmp_path / "s.json", engine="stream")
         and [tmp_path / "s.json"]),
        ("report", lambda: [write_report(CPU_TRACE, tmp_path / "r.html")]),
        ("calibrate", lambda: [calibrate.save(m)]),
        ("tag store", lambda: tag_store.store(g) or [os.path.join(tag_store.tags_dir(), f) for f in
                                                     os.listdir(tag_store.tags_dir())]),
        ("capture", cap),
        ("cross-rank summary", ranks),
    ]


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_every_writer_gives_open_mode_under_umask(tmp_path, monkeypatch, mask):
    pytest.importorskip("orjson")  # the stream engine
    want = open_mode(tmp_path, mask)
    assert want == 0o666 & ~mask  # what open() does, by hand
    with umask(mask):
        assert tf.umask() == mask
        for name, writer in _writers(tmp_path, monkeypatch):
            files = writer()
            assert files, name
            for f in files:
                assert stat.S_IMODE(os.stat(f).st_mode) == want, (name, f, oct(os.stat(f).st_mode))


def test_umask_fallback_without_proc(monkeypatch):
    real_open = open

    def no_proc(path, *a, **k):
        if str(path) == "/proc/self/status":
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_proc)
    tf._umask_once.cache_clear()
    try:
        with umask(0o027):
            assert tf.umask() == 0o027
        with umask(0o077):
            assert tf.umask() == 0o027  # read once, as its docstring says
    finally:
        tf._umask_once.cache_clear()


# --- the commands ------------------------------------------------------------------------------------
def test_report_onto_its_input_refused(tmp_path, capsys):
    src = tmp_path / "T.json"
    shutil.copy(CPU_TRACE, src)
    before = src.read_bytes()
    rc, lines = _cli(["report", str(src), "-o", str(src)], capsys)
    assert rc == 1 and lines == [f"inductor-perf: error: {src}: this is the input file; writing it would "
                                 "destroy the input: expected another output path"]
    assert src.read_bytes() == before


def test_report_of_a_directory_onto_one_of_its_traces_refused(tmp_path, capsys):
    shutil.copy(CPU_TRACE, tmp_path / "a.json")
    before = (tmp_path / "a.json").read_bytes()
    rc, lines = _cli(["report", str(tmp_path), "-o", str(tmp_path / "a.json")], capsys)
    assert rc == 1 and "is the input file" in lines[0] and (tmp_path / "a.json").read_bytes() == before


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_augment_onto_input_through_a_symlink_refused(tmp_path, engine):
    from inductor_perf.augment.core import augment_file

    src = tmp_path / "t.json.gz"
    shutil.copy(SHAPES_TRACE, src)
    link = tmp_path / "out.json.gz"
    link.symlink_to(src)
    before = src.read_bytes()
    with pytest.raises(OutputError, match="is the input file"):
        augment_file(src, link, engine=engine)
    assert src.read_bytes() == before and link.is_symlink()


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_augment_writes_through_a_symlink(tmp_path, engine):
    pytest.importorskip("orjson")
    from inductor_perf.augment.core import augment_file

    (tmp_path / "d").mkdir()
    target = tmp_path / "d" / "aug.json.gz"
    target.write_bytes(b"old")
    link = tmp_path / "aug.json.gz"
    link.symlink_to(target)
    augment_file(SHAPES_TRACE, link, engine=engine)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(gzip.decompress(target.read_bytes()))["traceEvents"]


def test_augment_to_dev_full_refused_and_the_device_kept(tmp_path, capsys):
    device = char_device(tmp_path)
    rc, lines = _cli(["augment", SHAPES_TRACE, "-o", device], capsys)
    assert rc == 1 and lines == [f"inductor-perf: error: {device}: is a character device; expected the path of "
                                 "a regular file to write"]
    assert stat.S_ISCHR(os.stat(device).st_mode)


@pytest.mark.parametrize("command", ["augment", "report"])
def test_missing_output_folder_named(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    rc, lines = _cli([command, CPU_TRACE, "-o", "missing_dir/x.json"], capsys)
    assert rc == 1 and lines == ["inductor-perf: error: missing_dir/x.json: could not write it: the folder "
                                 "missing_dir does not exist; expected an existing folder"]
    assert os.listdir(tmp_path) == []
