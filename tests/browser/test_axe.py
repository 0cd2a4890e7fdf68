"""Accessibility of the lesson site, measured with axe-core in a real browser.

The site (scripts/lesson_site.py, built as test_site.py builds it) is opened in Debian's chromium
and axe-core (pinned in tests/browser/package.json; ``npm ci`` in tests/browser installs it, and
this module runs that when it is missing) checks it: every rule in light mode, and the colour
contrast again in dark mode (the theme follows the system's colour scheme; no other rule depends
on it). The test fails on any violation axe rates critical or serious, naming the rule, the page
and the first element, and prints the count of every rule's violations, whatever their impact.

By default it checks one page of each kind (PAGES: both home pages, a notebook page of each view,
the page with the most coloured outputs, an instructor notes page, each docs page, the search
page), which takes seconds; RACELAB_AXE_ALL=1 checks every page of both views in both modes
(about a minute and a half). Each page loads once, is checked in light mode, then switched to
dark (the theme is CSS, so it follows at once) and checked again.

Without chromium it skips (or fails under RACELAB_REQUIRE_BROWSER=1, as the other browser tests
do); without node and npm, or when npm cannot install axe-core, it skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from browser_kit import asked_for, browser  # noqa: F401 - fixtures pytest finds by name
from test_site import VIEWS, site  # noqa: F401 - the site fixture: built once, when stale

HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
FAILING = {"critical", "serious"}
PAGES = [
    "learner/index.html",
    "learner/notebooks/01_get_then_incr.html",
    "learner/docs/workshop.html",
    "learner/docs/glossary.html",
    "learner/search.html",
    "instructor/index.html",
    "instructor/notebooks/01_get_then_incr.html",
    "instructor/notebooks/03_hgetall_hsetnx.html",
    "instructor/docs/notes/01.html",
    "instructor/docs/setup.html",
    "instructor/docs/security.html",
]
# what axe checks in each mode: every rule in light mode; in dark mode what the colours change
MODES: dict[str, dict[str, Any]] = {
    "light": {},
    "dark": {"runOnly": {"type": "rule", "values": ["color-contrast"]}},
}

# the colour scheme the page's CSS sees now
SCHEME = "() => matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'"
# axe.run over the whole page; one entry per violated rule, with its first element.
RUN_AXE = """async (only) => {
  const result = await axe.run(document, Object.assign({resultTypes: ["violations"]}, only));
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, nodes: v.nodes.length,
    first: v.nodes[0].target.join(" "), help: v.help,
  }));
}"""


@pytest.fixture(scope="module")
def axe_source() -> str:
    """Return axe-core's script, installed with npm ci from tests/browser/package.json if needed."""
    if not AXE.exists():
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            pytest.skip("no node/npm to install axe-core (tests/browser/package.json)")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not AXE.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"npm ci could not install axe-core: {last}")
    return AXE.read_text()


def test_no_critical_or_serious_axe_violation(
    site: Path,  # noqa: F811 - the imported fixture
    browser: Any,  # noqa: F811
    axe_source: str,
    request: pytest.FixtureRequest,
) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    failing = []
    if os.environ.get("RACELAB_AXE_ALL") == "1":
        pages = [p for view in VIEWS for p in sorted((site / view).rglob("*.html"))]
    else:
        pages = [site / name for name in PAGES]
        assert all(p.is_file() for p in pages), [p for p in pages if not p.is_file()]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        for path in pages:  # each page loads once; the theme is CSS, so it follows at once
            page.emulate_media(color_scheme="light")
            page.goto(path.as_uri(), wait_until="load")
            page.add_script_tag(content=axe_source)
            for mode, only in MODES.items():
                page.emulate_media(color_scheme=mode)
                assert page.evaluate(SCHEME) == mode, f"{path}: the page is not in {mode} mode"
                name = f"{path.relative_to(site).as_posix()} ({mode})"
                for violation in page.evaluate(RUN_AXE, only):
                    counts[(violation["impact"], violation["id"])] += violation["nodes"]
                    if violation["impact"] in FAILING:
                        failing.append(
                            f"{name}: {violation['impact']} {violation['id']} x{violation['nodes']}"
                            f" ({violation['help']}; first: {violation['first']})"
                        )
    finally:
        page.close()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        summary = ", ".join(
            f"{rule} ({impact}) {n}" for (impact, rule), n in sorted(counts.items())
        )
        reporter.write_line(
            f"\naxe-core: {len(pages)} pages x {len(MODES)} modes: {summary or 'no violation'}"
        )
    assert not failing, f"{len(failing)} critical or serious violations:\n" + "\n".join(
        failing[:40]
    )
