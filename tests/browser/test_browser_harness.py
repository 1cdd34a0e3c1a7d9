"""The harness itself (tools/browser_check.py) proved on hand-written pages: each detector must fire
on a page built to trip it and stay quiet on a clean one, or the report-page tests prove nothing."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

THREE_KERNELS = """<!doctype html><html><head><meta charset="utf-8"><title>three</title>
<style>circle { fill: steelblue }</style></head><body>
<svg width="200" height="100" xmlns="http://www.w3.org/2000/svg">
  <circle data-kernel="k0" id="pt-k0" cx="20" cy="50" r="5"/>
  <circle data-kernel="k1" id="pt-k1" cx="60" cy="50" r="5"/>
  <path data-kernel="k2" id="pt-k2" d="M 100 45 L 110 55"/>
  <circle cx="150" cy="50" r="5"/>
</svg>
<table><tr><td><a href="#pt-k0">k0</a></td></tr></table>
<img alt="inline" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<script>
  // Deferred work: only a page given virtual time sees this element.
  setTimeout(() => { document.body.insertAdjacentHTML("beforeend", '<p id="late">late</p>'); }, 3000);
</script>
</body></html>"""


def _page(body: str) -> str:
    return f"<!doctype html><html><head><meta charset='utf-8'><title>t</title></head><body>{body}</body></html>"


def test_clean_page_passes_and_counts_three_kernel_marks(open_page):
    r = open_page(THREE_KERNELS)
    assert r.ok and r.problems() == [] and r.requests == () and r.console == ()
    assert r.kernel_marks == 3  # three [data-kernel] elements; the fourth circle carries none
    assert r.title == "three"
    assert 'id="late"' in r.dom  # the 3 s timer ran: virtual time let deferred work finish
    assert r.seconds > 0  # wall time is reported; how long is machine-bound (check_page's timeout_s caps it)


def test_console_log_is_reported_but_is_no_problem(open_page):
    r = open_page(_page("<script>console.log('just saying', 42)</script>"))
    assert r.ok
    assert [(m.level, m.text) for m in r.console] == [("log", "just saying 42")]


def test_console_error_fails_with_its_text(open_page):
    r = open_page(_page("<script>console.error('chart failed: no data')</script>"))
    assert not r.ok
    assert [m.text for m in r.errors] == ["chart failed: no data"]
    assert any("chart failed: no data" in p for p in r.problems())


def test_console_warning_fails(open_page):
    r = open_page(_page("<script>console.warn('deprecated thing')</script>"))
    assert not r.ok and [m.text for m in r.warnings] == ["deprecated thing"] and r.errors == []


def test_uncaught_exception_fails_with_its_message(open_page):
    r = open_page(_page("<script>null.x;</script><p>after</p>"))
    assert not r.ok
    (err,) = r.errors
    assert err.source == "exception" and "TypeError" in err.text and err.line == 1


def test_exception_in_a_deferred_timer_and_a_rejected_promise_fail(open_page):
    r = open_page(_page("<script>setTimeout(() => { throw new Error('late boom'); }, 2000);"
                        "Promise.reject(new Error('nobody catches me'));</script>"))
    texts = " | ".join(m.text for m in r.errors)
    assert "late boom" in texts and "nobody catches me" in texts


@pytest.mark.parametrize("body,url", [
    ('<img src="http://example.com/x.png">', "http://example.com/x.png"),
    ('<script src="https://cdn.jsdelivr.net/npm/d3@7/dist/d3.min.js"></script>',
     "https://cdn.jsdelivr.net/npm/d3@7/dist/d3.min.js"),
    ('<script>fetch("http://example.org/data.json").catch(() => {});</script>', "http://example.org/data.json"),
    ('<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Inter">',
     "https://fonts.googleapis.com/css?family=Inter"),
    ('<div style="background: url(http://example.net/bg.png)">x</div>', "http://example.net/bg.png"),
])
def test_a_network_request_fails_with_the_url_named(open_page, body, url):
    r = open_page(_page(body))
    assert not r.ok
    assert url in r.requests
    assert f"request: {url}" in r.problems()


def test_another_local_file_is_a_request_too(open_page, tmp_path):
    # A page that needs a file beside it is not self-contained: it breaks when mailed alone.
    (tmp_path / "side.png").write_bytes(b"")
    r = open_page(_page('<img src="side.png">'))
    assert r.requests == ((tmp_path / "side.png").as_uri(),)


def test_screenshot_is_a_png_of_the_window_width(open_page, tmp_path):
    out = tmp_path / "shot.png"
    r = open_page(THREE_KERNELS, screenshot=str(out), window=(800, 600))
    data = out.read_bytes()
    assert r.screenshot == str(out) and data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk follows the signature
    assert width == 800 and 0 < height <= 600


def test_cli_exit_status(browser_check, tmp_path, capsys):
    clean, bad = tmp_path / "clean.html", tmp_path / "bad.html"
    clean.write_text(THREE_KERNELS)
    bad.write_text(_page("<script>console.error('x')</script>"))
    assert browser_check.main([str(clean)]) == 0
    assert "3 [data-kernel] elements" in capsys.readouterr().out
    assert browser_check.main([str(bad), "--json"]) == 1
    assert browser_check.main([str(tmp_path / "missing.html")]) == 2
    assert "not a file" in capsys.readouterr().err


def test_missing_browser_is_one_clear_error(browser_check, tmp_path, monkeypatch):
    monkeypatch.setenv(browser_check.CHROMIUM_ENV, str(tmp_path / "no-such-chromium"))
    assert browser_check.find_chromium() is None
    page = tmp_path / "p.html"
    page.write_text(_page("x"))
    with pytest.raises(browser_check.BrowserError, match="apt-get install -y chromium"):
        browser_check.check_page(Path(page))


# 400 translucent discs in pseudo-random colours (a fixed LCG, so every run draws the same): a
# picture whose raw PNG is well over 200 KB, as a real report's chart and tables are.
BUSY_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>busy</title></head>
<body style="margin:0"><canvas id="c" width="1400" height="1800"></canvas><script>
  const g = document.getElementById("c").getContext("2d");
  let s = 12345;
  const r = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < 400; i++) {
    g.fillStyle = `rgba(${255 * r() | 0}, ${255 * r() | 0}, ${255 * r() | 0}, 0.6)`;
    g.beginPath(); g.arc(1400 * r(), 1800 * r(), 4 + 30 * r(), 0, 7); g.fill();
  }
</script></body></html>"""


def _screenshot_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "screenshot_report", Path(__file__).resolve().parents[2] / "tools" / "screenshot_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_screenshot_tool_keeps_the_png_under_the_limit(browser_check, tmp_path):
    pytest.importorskip("PIL", reason="Pillow shrinks the picture (it comes with matplotlib)")
    tool = _screenshot_tool()
    page, out = tmp_path / "busy.html", tmp_path / "docs" / "report.png"
    page.write_text(BUSY_PAGE)
    raw = browser_check.check_page(page, screenshot=str(tmp_path / "raw.png"))
    assert (tmp_path / "raw.png").stat().st_size > 200 * 1024  # else nothing here would be shrunk
    line = tool.screenshot(str(page), str(out), max_kb=200)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) <= 200 * 1024
    assert struct.unpack(">I", data[16:20])[0] in (1400, 1260, 1120, 980, 840, 700)  # full width or scaled
    assert f"{len(data) / 1024:.0f} KB" in line and raw.ok
    assert not list(out.parent.glob("*.tmp"))


def test_screenshot_tool_refuses_a_broken_page(browser_check, tmp_path):
    tool = _screenshot_tool()
    page, out = tmp_path / "bad.html", tmp_path / "report.png"
    page.write_text(_page('<img src="http://example.com/x.png">'))
    with pytest.raises(ValueError, match="http://example.com/x.png"):
        tool.screenshot(str(page), str(out))
    assert not out.exists()
