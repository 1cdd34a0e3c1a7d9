"""The engine names and the large-trace threshold (traces/engines.py): every command that takes
``engine=`` refuses the same unknown names, and ``auto`` streams a file from the same size on."""

from __future__ import annotations

import os

import pytest

from inductor_perf.traces import engines

MB50 = 50 * 1000 * 1000  # "50 MB of JSON text", as the CLI help and README say


def _sized(path, size: int) -> str:
    """A file of ``size`` bytes (sparse: nothing is written but its end)."""
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


def _gz_claiming(path, size: int) -> str:
    """A gzip file whose trailer says it holds ``size`` bytes of text (all ``text_size`` reads of it)."""
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b" + bytes(30) + (size % (1 << 32)).to_bytes(4, "little"))
    return str(path)


def test_large_from_50_mb_of_text(tmp_path):
    assert engines.LARGE_TRACE_BYTES == MB50
    assert engines.is_large(_sized(tmp_path / "at.json", MB50))
    assert not engines.is_large(_sized(tmp_path / "under.json", MB50 - 1))
    # a .gz counts by its text, not by its (36-byte) size on disk
    assert engines.is_large(_gz_claiming(tmp_path / "big.json.gz", MB50))
    assert not engines.is_large(_gz_claiming(tmp_path / "small.json.gz", MB50 - 1))
    assert not engines.is_large(str(tmp_path / "missing.json"))  # the whole load says what is wrong


def test_streams_by_engine(tmp_path):
    small, big = _sized(tmp_path / "s.json", 10), _sized(tmp_path / "b.json", MB50)
    assert [engines.streams(small, e) for e in ("auto", "full", "stream")] == [False, False, True]
    assert [engines.streams(big, e) for e in ("auto", "full", "stream")] == [True, False, True]


def test_every_command_refuses_the_same_unknown_engine(tmp_path):
    from inductor_perf.augment.core import augment_file
    from inductor_perf.comparison.runner import diff_files
    from inductor_perf.comparison.sides import side_of_file
    from inductor_perf.summary.files import summarize_path

    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": []}')
    expected = "expected one of 'auto', 'full', 'stream'"
    for command, call in (("augment", lambda: augment_file(p, tmp_path / "o.json", engine="fast")),
                          ("summary", lambda: list(summarize_path(str(p), engine="fast"))),
                          ("diff", lambda: diff_files(p, p, engine="fast")),
                          ("diff", lambda: side_of_file(p, engine="fast"))):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == f"unknown {command} engine 'fast'; {expected}"
    assert not os.path.exists(tmp_path / "o.json")


def test_cli_offers_the_engines(capsys):
    from inductor_perf import cli

    for command in ("summary", "diff"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "{auto,full,stream}" in out and "50 MB" in out
