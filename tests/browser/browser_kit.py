"""What both real-browser test modules share: finding chromium, the skip rule, the browser."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REQUIRE = os.environ.get("RACELAB_REQUIRE_BROWSER") == "1"
CHROMIUM = os.environ.get("RACELAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def no_browser(reason: str) -> None:
    """Skip with reason, or fail when RACELAB_REQUIRE_BROWSER=1 (CI must not skip these)."""
    if REQUIRE:
        pytest.fail(f"RACELAB_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(f"no browser: {reason}")


@pytest.fixture(scope="module", autouse=True)
def asked_for(request: pytest.FixtureRequest) -> None:
    """Skip unless the run names this folder or file: `pytest tests` does not start a browser."""
    here = Path(request.path).resolve()
    for arg in request.config.args:
        if Path(arg.split("::")[0]).resolve() in (here, here.parent):
            return
    pytest.skip("real-browser tests: run `make test-browser` (pytest tests/browser)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Yield Debian's chromium, launched headless by playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        no_browser(
            "playwright is not installed (pip install -e '.[test]', or pip install playwright)"
        )
    if not Path(CHROMIUM).is_file():
        no_browser(f"no chromium at {CHROMIUM} (apt-get install chromium, or set RACELAB_CHROMIUM)")
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        except Exception as exc:  # any launch failure is the one-line reason
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            no_browser(f"chromium at {CHROMIUM} did not start: {first}")
        try:
            yield chromium
        finally:
            chromium.close()
