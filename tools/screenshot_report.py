"""Take the README's picture of a report page: docs/report.png.

    python tools/screenshot_report.py PAGE.html docs/report.png [--window 1400x1800] [--max-kb 200]

Opens the page in headless Chromium (tools/browser_check.py), refuses when the page logs an error or
a warning or fetches anything (a picture of a broken page must not reach the README), takes the top
``--window`` pixels, then keeps the PNG under ``--max-kb``: first 256 colours picked for this image
(a report is flat colours and text, so it looks the same), then, only if still too big, smaller in
steps of 10 %. The last line printed says the size, the pixels and how the file was reduced.
Shrinking needs Pillow (installed with matplotlib); without it a picture already under the limit is
kept as Chromium wrote it, and a larger one is an error that says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# A palette this size keeps anti-aliased text and the chart's colour ramps smooth.
COLOURS = 256
MIN_SCALE = 0.5  # below half size the page's text is unreadable: fail rather than shrink further


def _browser_check() -> Any:
    name = "browser_check"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "browser_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def shrink_png(data: bytes, max_bytes: int) -> tuple[bytes, str]:
    """``data`` (a PNG) reduced to at most ``max_bytes``, and a phrase saying how.

    Raises ValueError when it cannot get there (Pillow missing, or still too big at half size)."""
    if len(data) <= max_bytes:
        return data, "as Chromium wrote it"
    try:
        from PIL import Image
    except ImportError:
        raise ValueError(f"the PNG is {len(data) // 1024} KB, over {max_bytes // 1024} KB, and Pillow is not "
                         "installed to reduce it: pip install pillow (or a smaller --window)") from None
    image = Image.open(io.BytesIO(data)).convert("RGB")
    scale = 1.0
    while scale >= MIN_SCALE - 1e-9:
        size = (round(image.width * scale), round(image.height * scale))
        img = image if scale == 1.0 else image.resize(size, Image.LANCZOS)
        buf = io.BytesIO()
        img.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            buf, format="PNG", optimize=True)
        if buf.tell() <= max_bytes:
            how = f"{COLOURS} colours" + ("" if scale == 1.0 else f", scaled to {scale:.0%}")
            return buf.getvalue(), how
        scale -= 0.1
    raise ValueError(f"still over {max_bytes // 1024} KB at {MIN_SCALE:.0%} size: use a smaller --window")


def screenshot(page: str, out: str, *, window: tuple[int, int] = (1400, 1800), max_kb: int = 200) -> str:
    """Write ``out``, a PNG of the top of ``page`` under ``max_kb`` KB; return a one-line account.

    Raises ValueError when the page has problems or the picture cannot be made small enough, and
    browser_check.BrowserError when Chromium cannot run."""
    bc = _browser_check()
    with tempfile.TemporaryDirectory(prefix="screenshot_report_") as tmp:
        raw = str(Path(tmp) / "raw.png")
        result = bc.check_page(page, screenshot=raw, window=window)
        if not result.ok:
            raise ValueError(f"{page} is not clean in Chromium, no picture taken:\n  "
                             + "\n  ".join(result.problems()))
        data = Path(raw).read_bytes()
    small, how = shrink_png(data, max_kb * 1024)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp_out = Path(out).with_suffix(".png.tmp")
    tmp_out.write_bytes(small)
    shutil.move(str(tmp_out), out)
    width, height = int.from_bytes(small[16:20], "big"), int.from_bytes(small[20:24], "big")
    return (f"{out}: {len(small) / 1024:.0f} KB, {width}x{height} px ({how}; Chromium's PNG was "
            f"{len(data) / 1024:.0f} KB); {result.kernel_marks} [data-kernel] marks on the page")


def main(argv: list[str] | None = None) -> int:
    bc = _browser_check()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", help="a local HTML file (a report page)")
    ap.add_argument("out", help="the PNG to write, e.g. docs/report.png")
    ap.add_argument("--window", type=bc._window, default=(1400, 1800), help="WIDTHxHEIGHT (default 1400x1800)")
    ap.add_argument("--max-kb", type=int, default=200, help="largest file to write, in KB (default 200)")
    args = ap.parse_args(argv)
    if args.max_kb <= 0:
        ap.error("--max-kb must be positive")
    try:
        print(screenshot(args.page, args.out, window=args.window, max_kb=args.max_kb))
    except (ValueError, FileNotFoundError, bc.BrowserError) as e:
        print(f"screenshot_report: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
