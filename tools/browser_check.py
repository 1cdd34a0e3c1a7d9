"""Open a local HTML page in headless Chromium and say what a reader's browser would see.

    python tools/browser_check.py PAGE.html [--screenshot OUT.png] [--window 1400x1800] [--json]

Reports the console messages (with their level: error, warning, log...), the uncaught exceptions,
every URL the page tried to fetch, and the DOM after its scripts ran (with the number of elements
carrying ``data-kernel``, the report's roofline points). Exit status 0 when the page logged no error or
warning, threw nothing and fetched nothing; 1 otherwise (each problem on one line); 2 when Chromium
could not be found or run.

Why the DevTools protocol and not Chromium's log: with ``--enable-logging=stderr`` Chromium prints a
web page's console messages at level INFO whatever their real level (only its own pages keep theirs),
so ``console.log`` and ``console.error`` cannot be told apart there; its net log also holds the
browser's own background requests. Over ``--remote-debugging-pipe`` (two pipes, no port, no extra
package) the page's own target reports each message's level (``Runtime.consoleAPICalled``), each
uncaught exception (``Runtime.exceptionThrown``), the browser's messages about the page such as a
failed load (``Log.entryAdded``), and each request the page made (``Network.requestWillBeSent``).

Nothing leaves the machine: host names resolve to nothing and the proxy is a closed local port, so a
request is seen and fails. Each run uses a fresh temporary profile. Virtual time (5 s by default, as
``--virtual-time-budget``) lets timers and deferred scripts finish without waiting in real time.
Torch-free and standard library only: CI machines run it before anything else is installed.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# The names Debian, Ubuntu and Google give the browser; INDUCTOR_PERF_CHROMIUM overrides.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ENV = "INDUCTOR_PERF_CHROMIUM"
# Schemes a self-contained page may use: inline data, blobs it makes itself, about:blank.
ALLOWED_SCHEMES = ("data:", "blob:", "about:")
# A page's console levels (Runtime.consoleAPICalled types, Log.entryAdded levels) that are problems.
PROBLEM_LEVELS = frozenset({"error", "warning", "assert"})
KERNEL_SELECTOR = "[data-kernel]"


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or stopped answering."""


@dataclass(frozen=True)
class ConsoleMessage:
    """One console message of the page: ``level`` is "error", "warning", "log", "info", "debug"...
    ``source`` says who wrote it: "console-api" (the page's script), "exception" (uncaught), or the
    browser's own log ("network", "javascript", "security"...)."""

    level: str
    text: str
    source: str
    url: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = f" ({self.url}{'' if self.line is None else f':{self.line}'})" if self.url else ""
        return f"{self.level} [{self.source}]: {self.text}{where}"


@dataclass(frozen=True)
class PageCheck:
    """What Chromium saw on one page. ``requests``: each URL the page tried to fetch other than
    itself and ``data:``/``blob:``/``about:`` URLs, in order, once each. ``dom``: the document's
    outer HTML after scripts ran. ``seconds``: wall time of the whole run, browser start included."""

    page: str
    console: tuple[ConsoleMessage, ...]
    requests: tuple[str, ...]
    dom: str
    kernel_marks: int
    title: str
    seconds: float
    screenshot: str | None = None
    chromium: str = field(default="", compare=False)

    @property
    def errors(self) -> list[ConsoleMessage]:
        """Console errors and uncaught exceptions."""
        return [m for m in self.console if m.level in ("error", "assert")]

    @property
    def warnings(self) -> list[ConsoleMessage]:
        return [m for m in self.console if m.level == "warning"]

    def problems(self) -> list[str]:
        """One line per console error or warning and per URL fetched; empty when the page is clean."""
        lines = [str(m) for m in self.console if m.level in PROBLEM_LEVELS]
        lines += [f"request: {url}" for url in self.requests]
        return lines

    @property
    def ok(self) -> bool:
        return not self.problems()


def find_chromium() -> str | None:
    """The browser to run: ``$INDUCTOR_PERF_CHROMIUM`` when set, else the first of
    :data:`CHROMIUM_NAMES` on PATH; None when there is none."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        return shutil.which(env) or (env if os.access(env, os.X_OK) else None)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _chromium_args(binary: str, profile: str, window: tuple[int, int]) -> list[str]:
    return [
        binary, "--headless=new", "--no-sandbox", "--remote-debugging-pipe",
        f"--user-data-dir={profile}", f"--window-size={window[0]},{window[1]}",
        # Any request is observable and fails: no name resolves, the proxy is a closed port.
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
        # Fewer of the browser's own requests and first-run work: faster start, quieter log.
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
        "--disable-gpu", "--hide-scrollbars", "--mute-audio", "about:blank",
    ]


class _Pipe:
    """The DevTools protocol over Chromium's two pipes: it reads commands from fd 3 and writes
    replies and events to fd 4, each message a JSON object ended by a NUL byte."""

    def __init__(self, to_browser: int, from_browser: int) -> None:
        self._out = to_browser
        self._in = from_browser
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data):]
        return self._next_id

    def _read_one(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed its DevTools pipe (it exited)")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def wait(self, done: Callable[[dict[str, Any]], bool], deadline: float) -> dict[str, Any]:
        """Read messages until ``done(message)``; every event read on the way is kept in ``events``."""
        while True:
            msg = self._read_one(deadline)
            if "method" in msg:
                self.events.append(msg)
            if done(msg):
                return msg

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             *, deadline: float) -> dict[str, Any]:
        """Send a command and return its result; an error reply raises :class:`BrowserError`."""
        mid = self.send(method, params, session)
        reply = self.wait(lambda m: m.get("id") == mid, deadline)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message', reply['error'])}")
        return reply.get("result", {})


def _remote_text(obj: dict[str, Any]) -> str:
    """The text a console shows for one ``Runtime.RemoteObject`` argument."""
    if "value" in obj:
        return obj["value"] if isinstance(obj["value"], str) else json.dumps(obj["value"])
    return str(obj.get("description") or obj.get("unserializableValue") or obj.get("type", ""))


def _console_messages(events: list[dict[str, Any]]) -> list[ConsoleMessage]:
    """The page's console messages, in order, from the protocol events read."""
    out: list[ConsoleMessage] = []
    for ev in events:
        method, p = ev.get("method"), ev.get("params") or {}
        if method == "Runtime.consoleAPICalled":
            frame = ((p.get("stackTrace") or {}).get("callFrames") or [{}])[0]
            out.append(ConsoleMessage(p.get("type", "log"), " ".join(_remote_text(a) for a in p.get("args", [])),
                                      "console-api", frame.get("url", ""), _line(frame.get("lineNumber"))))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails") or {}
            text = (d.get("exception") or {}).get("description") or d.get("text", "exception")
            out.append(ConsoleMessage("error", f"uncaught {text}", "exception", d.get("url", ""),
                                      _line(d.get("lineNumber"))))
        elif method == "Log.entryAdded":
            e = p.get("entry") or {}
            if e.get("source") != "console-api":  # those also arrive as Runtime.consoleAPICalled
                out.append(ConsoleMessage(e.get("level", "info"), e.get("text", ""), e.get("source", ""),
                                          e.get("url", ""), _line(e.get("lineNumber"))))
    return out


def _line(zero_based: Any) -> int | None:
    return zero_based + 1 if isinstance(zero_based, int) else None


def _requests(events: list[dict[str, Any]], page_url: str) -> list[str]:
    """Each URL the page asked for, once, other than the page itself and inline schemes."""
    seen: dict[str, None] = {}
    for ev in events:
        if ev.get("method") == "Network.requestWillBeSent":
            url = ((ev.get("params") or {}).get("request") or {}).get("url", "")
            if url and url.split("#")[0] != page_url and not url.startswith(ALLOWED_SCHEMES):
                seen.setdefault(url)
    return list(seen)


def _open_page(pipe: _Pipe, url: str, budget_ms: int, deadline: float) -> str:
    """Open ``url`` in a new tab with the domains that report problems enabled, let its virtual
    time run out, and return the tab's session id."""
    target = pipe.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
    session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                        deadline=deadline)["sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        pipe.call(f"{domain}.enable", session=session, deadline=deadline)
    # The page's clock stands still until it is loading (a budget given on about:blank runs out
    # there at once); then it gets ``budget_ms``, paused while a fetch is pending so that a slow
    # request cannot cut the budget short.
    pipe.call("Emulation.setVirtualTimePolicy", {"policy": "pause"}, session, deadline=deadline)
    nav = pipe.call("Page.navigate", {"url": url}, session, deadline=deadline)
    if nav.get("errorText"):
        raise BrowserError(f"could not open {url}: {nav['errorText']}")
    pipe.call("Emulation.setVirtualTimePolicy",
              {"policy": "pauseIfNetworkFetchesPending", "budget": budget_ms}, session, deadline=deadline)
    pipe.wait(lambda m: m.get("method") == "Emulation.virtualTimeBudgetExpired"
              and m.get("sessionId") == session, deadline)
    # Let the page run on in real time while the DOM and a picture are taken.
    pipe.call("Emulation.setVirtualTimePolicy", {"policy": "advance"}, session, deadline=deadline)
    return session


def _evaluate(pipe: _Pipe, session: str, expression: str, deadline: float) -> Any:
    result = pipe.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                       session, deadline=deadline)
    if "exceptionDetails" in result:
        raise BrowserError(f"evaluating {expression!r} failed: {result['exceptionDetails'].get('text')}")
    return result.get("result", {}).get("value")


def _screenshot(pipe: _Pipe, session: str, out: str, window: tuple[int, int], deadline: float) -> str:
    """A PNG of the top of the page, ``window`` wide and as tall as the page up to ``window``'s
    height (no blank band under a short page), written to ``out``."""
    import base64

    tall = _evaluate(pipe, session, "document.documentElement.scrollHeight", deadline)
    height = min(window[1], int(tall)) if isinstance(tall, (int, float)) and tall > 0 else window[1]
    shot = pipe.call("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": False,
        "clip": {"x": 0, "y": 0, "width": window[0], "height": height, "scale": 1}},
        session, deadline=deadline)
    Path(out).write_bytes(base64.b64decode(shot["data"]))
    return out


def check_page(page: str | os.PathLike[str], *, screenshot: str | None = None,
               window: tuple[int, int] = (1400, 1800), budget_ms: int = 5000, timeout_s: float = 60.0,
               chromium: str | None = None) -> PageCheck:
    """Open the local file ``page`` in headless Chromium and return what it saw.

    Raises :class:`BrowserError` when Chromium is missing, fails to start, or the page does not load
    within ``timeout_s``; :class:`FileNotFoundError` when ``page`` is not a file.

    >>> r = check_page("docs/page.html")  # doctest: +SKIP
    >>> r.ok, r.kernel_marks, r.problems()  # doctest: +SKIP
    (True, 12, [])
    """
    path = Path(page).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{page}: not a file (expected a local HTML page)")
    binary = chromium or find_chromium()
    if binary is None:
        raise BrowserError(f"Chromium not found (tried {', '.join(CHROMIUM_NAMES)} on PATH and "
                           f"${CHROMIUM_ENV}); on Debian/Ubuntu: apt-get install -y chromium")
    start = time.monotonic()
    deadline = start + timeout_s
    url = path.as_uri()
    with tempfile.TemporaryDirectory(prefix="browser_check_", ignore_cleanup_errors=True) as profile:
        proc, pipe = _launch(binary, profile, window)
        try:
            session = _open_page(pipe, url, budget_ms, deadline)
            dom = _evaluate(pipe, session, "document.documentElement.outerHTML", deadline) or ""
            marks = _evaluate(pipe, session, f"document.querySelectorAll({KERNEL_SELECTOR!r}).length", deadline)
            title = _evaluate(pipe, session, "document.title", deadline) or ""
            shot = _screenshot(pipe, session, screenshot, window, deadline) if screenshot else None
            pipe.send("Browser.close")
        finally:
            _stop(proc, pipe)
    return PageCheck(page=str(path), console=tuple(_console_messages(pipe.events)),
                     requests=tuple(_requests(pipe.events, url)), dom=dom, kernel_marks=int(marks or 0),
                     title=title, seconds=round(time.monotonic() - start, 2), screenshot=shot, chromium=binary)


def _launch(binary: str, profile: str, window: tuple[int, int]) -> tuple[subprocess.Popen[bytes], _Pipe]:
    """Start Chromium with its DevTools pipes on fds 3 (commands in) and 4 (replies out)."""
    cmd_r, cmd_w = os.pipe()
    out_r, out_w = os.pipe()

    def child_fds() -> None:
        # Move both ends above 4 first, so that placing one cannot overwrite the other.
        high_r, high_w = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)  # os.dup2 makes 3 and 4 inheritable; every other fd of ours is not
        os.dup2(high_w, 4)

    try:
        proc = subprocess.Popen(_chromium_args(binary, profile, window), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                close_fds=False, preexec_fn=child_fds)
    except OSError as e:
        for fd in (cmd_r, cmd_w, out_r, out_w):
            os.close(fd)
        raise BrowserError(f"could not start {binary}: {e}") from e
    os.close(cmd_r)
    os.close(out_w)
    return proc, _Pipe(cmd_w, out_r)


def _stop(proc: subprocess.Popen[bytes], pipe: _Pipe) -> None:
    """Wait briefly for Chromium to exit after Browser.close, then kill it; close our pipe ends."""
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for fd in (pipe._out, pipe._in):
        try:
            os.close(fd)
        except OSError:
            pass


def _window(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected WIDTHxHEIGHT in pixels, e.g. 1400x1800")
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be positive")
    return w, h


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", help="a local HTML file")
    ap.add_argument("--screenshot", metavar="OUT.png", help="also write a PNG of the top of the page")
    ap.add_argument("--window", type=_window, default=(1400, 1800), help="WIDTHxHEIGHT (default 1400x1800)")
    ap.add_argument("--budget-ms", type=int, default=5000, help="virtual time the page gets (default 5000)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON (DOM left out)")
    args = ap.parse_args(argv)
    try:
        r = check_page(args.page, screenshot=args.screenshot, window=args.window, budget_ms=args.budget_ms)
    except (BrowserError, FileNotFoundError) as e:
        print(f"browser_check: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"page": r.page, "ok": r.ok, "problems": r.problems(), "kernel_marks": r.kernel_marks,
                          "title": r.title, "seconds": r.seconds, "screenshot": r.screenshot,
                          "console": [str(m) for m in r.console], "requests": list(r.requests)}, indent=1))
    else:
        print(f"{r.page}: {'clean' if r.ok else 'PROBLEMS'}; {r.kernel_marks} [data-kernel] elements; "
              f"{len(r.console)} console messages; {len(r.requests)} requests; {r.seconds} s")
        for line in r.problems():
            print(f"  {line}")
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
