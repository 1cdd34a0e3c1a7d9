"""The real-browser tier (marker "browser"): pages opened in headless Chromium by
tools/browser_check.py.

Without Chromium every test here skips with the reason, so a developer's plain ``pytest`` passes;
``make test-browser`` sets INDUCTOR_PERF_REQUIRE_BROWSER=1, which turns that skip into a failure, so
that CI can never pass this tier by skipping it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "INDUCTOR_PERF_REQUIRE_BROWSER"


def _load_browser_check() -> ModuleType:
    """tools/ is not a package: load the harness from its file (as test_layout loads layout_check)."""
    name = "browser_check"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "browser_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def browser_check() -> ModuleType:
    """The harness module, once Chromium is known to be there (skip, or fail under
    INDUCTOR_PERF_REQUIRE_BROWSER=1, when it is not)."""
    mod = _load_browser_check()
    if mod.find_chromium() is None:
        reason = (f"Chromium not found ({', '.join(mod.CHROMIUM_NAMES)} on PATH or ${mod.CHROMIUM_ENV}); "
                  "`make test-browser` installs it with apt")
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 and {reason}", pytrace=False)
        pytest.skip(reason)
    return mod


@pytest.fixture
def open_page(browser_check: ModuleType, tmp_path: Path) -> Callable[..., Any]:
    """``open_page(html_text_or_path, **kw)``: write the text to a file when given text, open it in
    Chromium and return the :class:`PageCheck`."""

    def run(page: str | Path, **kw: Any) -> Any:
        if isinstance(page, str) and page.lstrip().startswith("<"):
            path = tmp_path / f"page{len(list(tmp_path.glob('page*.html')))}.html"
            path.write_text(page, encoding="utf-8")
            page = path
        return browser_check.check_page(page, **kw)

    return run
