"""``inductor_perf.summarize``: an offline trace's summary as one object (report/notebook.py): its
dict is the CLI's ``summary --format json`` of the same trace, its text the CLI's text, its HTML the
report page (findings first) and it parses."""

from __future__ import annotations

import html
import json
import os
from html.parser import HTMLParser

import pytest

import inductor_perf
from inductor_perf.cli import main
from inductor_perf.errors import InductorPerfError

HERE = os.path.dirname(__file__)
GPT = os.path.join(HERE, "..", "..", "fixtures", "gpu", "gpt_bf16.trace.json.gz")


class _Tags(HTMLParser):
    """The start tags of a page, in order, with their attributes (html.parser is lenient: the test
    checks what it found)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))


def _cli(capsys: pytest.CaptureFixture, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_to_dict_is_the_cli_json(capsys):
    s = inductor_perf.summarize(GPT)
    assert s.to_dict() == json.loads(_cli(capsys, "summary", GPT, "--format", "json"))
    assert s.to_dict()["findings"]  # the findings are attached, as the CLI attaches them


def test_text_is_the_cli_text(capsys):
    s = inductor_perf.summarize(GPT)
    assert str(s) == s.text() == _cli(capsys, "summary", GPT)
    assert "\nBy op and input shapes (" in str(s)  # the table, not a see: line


def test_repr_html_is_the_page_with_findings_first():
    s = inductor_perf.summarize(GPT)
    frame = s._repr_html_()
    assert frame.startswith("<iframe srcdoc=\"")
    page = html.unescape(frame.split('srcdoc="', 1)[1].split('" title=', 1)[0])
    assert page == s.html()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    p = _Tags()
    p.feed(page)
    p.close()
    names = [t for t, _ in p.tags]
    assert names.count("section") == 1 and "svg" in names
    first = s.to_dict()["findings"][0]
    # the findings come before the headline and the tables
    assert page.index(html.escape(first["title"], quote=False)) < page.index("<dl class='head'>")
    assert page.index("<h3>By op and input shapes") > page.index("<dl class='head'>")


def test_several_traces_is_a_one_line_error(tmp_path):
    for n in (0, 1):
        (tmp_path / f"r{n}.json").write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(InductorPerfError) as e:
        inductor_perf.summarize(tmp_path)
    assert str(tmp_path) in str(e.value) and "\n" not in str(e.value)


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(InductorPerfError, match="nope.json"):
        inductor_perf.summarize(missing)
