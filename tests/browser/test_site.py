"""The lesson site (`make site`) as a reader sees it: every page of both views, in a real browser.

The site is built (scripts/lesson_site.py, into ``site/``) unless it is newer than everything it is
made from. Debian's chromium, driven by playwright, opens every page of the learner and the
instructor view from disk and checks:

- every internal link leads to a page that exists, and its ``#anchor`` to an element on it;
- every image loaded (naturalWidth > 0) and has alt text: a sentence, not a file name;
- the learner view holds no solution and no instructor note (no cell marked ``solution`` and no
  line that only a solution cell has), while the instructor view shows them;
- every run of cells tagged ``optional`` opens with a visible "Optional" admonition and every such
  cell is marked, in both views; every ``predict`` cell shows its question and choices;
- each notebook's links to glossary entries are links to the glossary page's entries;
- in the learner view every reveal (the outcome and the right choice) is folded, shown on a
  click; the instructor view shows them open.

Screenshots of the learner home page and of notebook 01's page (learner, and instructor with its
notes box and launch buttons) go to ``.browser-screenshots/``
(git-ignored). As in test_jupyterlab.py, the tests skip without playwright or chromium unless
RACELAB_REQUIRE_BROWSER=1 (.ci/run), and `pytest tests` skips them (`make test-browser` runs them).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from browser_kit import asked_for, browser  # noqa: F401 - fixtures pytest finds by name

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "site"
VIEWS = ("learner", "instructor")
SHOTS = REPO / ".browser-screenshots"
SOURCES = ["README.md", "docs", "notebooks", "scripts/lesson_site.py", "scripts/handouts.py"]
SCREENSHOTS = {
    "learner/index.html": "site-home",
    "learner/notebooks/01_get_then_incr.html": "site-01",
    "instructor/notebooks/01_get_then_incr.html": "site-01-instructor",  # the notes box
}
NOT_PAGES = {"genindex.html", "search.html"}  # Sphinx's own pages: no lesson content

# What each page holds, read in the browser: links, ids, images, solution marks and text.
READ_PAGE = """() => ({
  links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
  images: [...document.images].map(i => ({src: i.getAttribute('src'), alt: i.getAttribute('alt'),
                                          loaded: i.complete && i.naturalWidth > 0})),
  marked: document.querySelectorAll('.tag_solution, .tag_instructor, .handout-notes, .tag_handout-notes').length,
  optional: [...document.querySelectorAll('.admonition.optional')]
    .filter(e => e.offsetHeight > 0).map(e => e.innerText),
  optionalCells: document.querySelectorAll(".cell.tag_optional").length,
  folded: document.querySelectorAll("details.racelab-reveal:not([open])").length,
  text: document.body.innerText,
})"""


def _newest_source() -> float:
    paths = [REPO / s for s in SOURCES]
    files = [f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()]
    return max(f.stat().st_mtime for f in files)


@pytest.fixture(scope="module")
def site(request: pytest.FixtureRequest) -> Path:
    """Return site/, built now unless both views are newer than every source."""
    stamps = [SITE / view / "index.html" for view in VIEWS]
    if all(s.exists() and s.stat().st_mtime > _newest_source() for s in stamps):
        return SITE
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "lesson_site.py"), "--out", str(SITE)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"make site failed:\n{done.stdout}\n{done.stderr}"
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nsite: built in {time.monotonic() - start:.1f} s\n{done.stdout}")
    return SITE


@pytest.fixture(scope="module")
def pages(site: Path, browser: Any) -> dict[str, dict[str, Any]]:
    """Return what every page of both views holds, keyed by its path under site/."""
    seen: dict[str, dict[str, Any]] = {}
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        for view in VIEWS:
            for path in sorted((site / view).rglob("*.html")):
                name = path.relative_to(site).as_posix()
                page.goto(path.as_uri(), wait_until="load")
                seen[name] = page.evaluate(READ_PAGE)
                if name in SCREENSHOTS:
                    SHOTS.mkdir(exist_ok=True)
                    shot = SHOTS / f"{SCREENSHOTS[name]}.png"
                    page.screenshot(path=str(shot), full_page=name.endswith("index.html"))
    finally:
        page.close()
    return seen


def _target(site: Path, page: str, href: str) -> tuple[str, str] | None:
    """Return (page path under site/, anchor) of an internal link, None for an external one."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith("mailto:"):
        return None
    base = (site / page).parent
    target = (base / unquote(parts.path)).resolve() if parts.path else (site / page).resolve()
    if target.is_dir():
        target = target / "index.html"
    try:
        name = target.relative_to(site.resolve()).as_posix()
    except ValueError:
        name = str(target)  # outside the site: reported as broken below
    return name, unquote(parts.fragment)


def test_both_views_have_every_notebook_and_the_glossary(pages: dict[str, dict[str, Any]]) -> None:
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for view in VIEWS:
        have = {name.split("/", 1)[1] for name in pages if name.startswith(view + "/")}
        wanted = {f"notebooks/{n}.html" for n in notebooks} | {"index.html", "docs/glossary.html"}
        assert wanted <= have, f"{view} view lacks {sorted(wanted - have)}"
        for n in notebooks:
            text = pages[f"{view}/notebooks/{n}.html"]["text"]
            assert "launch it on Binder" in text and "make lab" in text, f"{n}: no launch line"
            links = pages[f"{view}/notebooks/{n}.html"]["links"]
            (download,) = [h for h in links if "_downloads/" in h and h.endswith(f"/{n}.ipynb")]
            assert (SITE / view / "notebooks" / download).resolve().is_file(), download
    assert "Schedule" in pages["learner/index.html"]["text"]


def test_no_broken_internal_link(site: Path, pages: dict[str, dict[str, Any]]) -> None:
    broken = []
    for name, seen in pages.items():
        for href in seen["links"]:
            found = _target(site, name, href)
            if found is None:
                continue
            page, anchor = found
            if not page.endswith(".html") and (site / page).is_file():
                continue  # a download (the notebook's .ipynb), there on disk
            if page not in pages:
                broken.append(f"{name}: {href} (no page {page})")
            elif anchor and anchor not in pages[page]["ids"]:
                broken.append(f"{name}: {href} (no #{anchor} on {page})")
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:40])


def test_every_image_loads_and_has_alt_text(pages: dict[str, dict[str, Any]]) -> None:
    missing, no_alt = [], []
    for name, seen in pages.items():
        for image in seen["images"]:
            if not image["loaded"]:
                missing.append(f"{name}: {image['src'][:80]}")
            alt = (image["alt"] or "").strip()
            src_name = Path(urlsplit(image["src"] or "").path).name
            if len(alt.split()) < 4 or alt.endswith(".png") or src_name and src_name in alt:
                no_alt.append(f"{name}: {src_name or image['src'][:40]} (alt {alt[:60]!r})")
    assert not missing, f"{len(missing)} images did not load:\n" + "\n".join(missing)
    assert not no_alt, f"{len(no_alt)} images without alt text:\n" + "\n".join(no_alt)


def _solution_lines(path: Path) -> list[str]:
    """Return, per solution cell, its longest line that no other cell of the notebook has."""
    nb = nbformat.read(path, as_version=4)
    others = "\n".join(c.source for c in nb.cells if "solution" not in c.metadata.get("tags", []))
    lines = []
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            own = [ln.strip() for ln in cell.source.splitlines() if ln.strip() not in others]
            if own:
                lines.append(max(own, key=len))
    return lines


def test_solutions_only_in_the_instructor_view(pages: dict[str, dict[str, Any]]) -> None:
    checked = 0
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        learner = pages[f"learner/notebooks/{path.stem}.html"]
        instructor = pages[f"instructor/notebooks/{path.stem}.html"]
        assert learner["marked"] == 0, f"{path.stem}: the learner view shows solution/notes cells"
        for line in _solution_lines(path):
            assert line not in learner["text"], f"{path.stem}: learner view shows {line!r}"
            assert line in instructor["text"], f"{path.stem}: instructor view lacks {line!r}"
            checked += 1
    assert checked >= 8, f"only {checked} solution lines found: are solutions still tagged?"
    assert any(p["marked"] for n, p in pages.items() if n.startswith("instructor/notebooks/"))


def test_the_screenshots_are_saved(pages: dict[str, dict[str, Any]]) -> None:
    for shot in SCREENSHOTS.values():
        path = SHOTS / f"{shot}.png"
        assert path.exists() and path.stat().st_size > 10_000, f"no screenshot {path}"


def _cells(path: Path, view: str) -> list[Any]:
    """Return the notebook's cells the view keeps (the learner view drops solutions and notes)."""
    cells = nbformat.read(path, as_version=4).cells
    dropped = {"solution", "instructor"} if view == "learner" else set()
    return [c for c in cells if not dropped & set(c.metadata.get("tags", []))]


def _runs(cells: list[Any], tag: str) -> int:
    """Return how many runs of consecutive cells carry tag."""
    flags = [tag in c.metadata.get("tags", []) for c in cells]
    return sum(f and (i == 0 or not flags[i - 1]) for i, f in enumerate(flags))


def test_optional_cells_are_marked_in_both_views(pages: dict[str, dict[str, Any]]) -> None:
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for view in VIEWS:
            cells = _cells(path, view)
            seen = pages[f"{view}/notebooks/{path.stem}.html"]
            tagged = sum(  # MyST-NB gives code cells their tags as classes, not markdown ones
                c.cell_type == "code" and "optional" in c.metadata.get("tags", []) for c in cells
            )
            assert len(seen["optional"]) == _runs(cells, "optional"), (view, path.stem)
            assert all(text.startswith("Optional") for text in seen["optional"]), seen["optional"]
            assert seen["optionalCells"] == tagged, (view, path.stem, seen["optionalCells"])


def test_predict_cells_show_their_question_and_choices(pages: dict[str, dict[str, Any]]) -> None:
    from exercises import load_all
    from exercises.predict import PREDICTIONS

    load_all()
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        text = pages[f"learner/notebooks/{path.stem}.html"]["text"]
        for cell in _cells(path, "learner"):
            found = re.match(r"""\s*predict\(\s*["']([^"']+)["']""", cell.source)
            if "predict" not in cell.metadata.get("tags", []) or found is None:
                continue
            asked = PREDICTIONS[found[1]]
            assert asked.question in text, f"{path.stem}: {found[1]}'s question is not shown"
            for key, choice in asked.choices.items():
                assert f"({key}) {choice.text}" in text, f"{path.stem}: {found[1]} lacks ({key})"


def test_reveals_are_folded_for_learners_and_open_for_instructors(
    site: Path, pages: dict[str, dict[str, Any]], browser: Any
) -> None:
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        reveals = sum(
            c.cell_type == "code" and bool(re.search(r"^reveal\(", c.source, re.M))
            for c in _cells(path, "learner")
        )
        learner = pages[f"learner/notebooks/{path.stem}.html"]
        instructor = pages[f"instructor/notebooks/{path.stem}.html"]
        assert learner["folded"] == reveals, (path.stem, learner["folded"], reveals)
        assert "the answer is" not in learner["text"], f"{path.stem}: an answer shows unfolded"
        assert instructor["folded"] == 0, f"{path.stem}: the instructor view folds a reveal"
        assert instructor["text"].count("the answer is") >= reveals, path.stem
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto((site / "learner/notebooks/01_get_then_incr.html").as_uri(), wait_until="load")
        folded = page.locator("details.racelab-reveal").first
        assert "the answer is" not in folded.inner_text()
        folded.locator("summary").click()
        assert "the answer is" in folded.inner_text()  # one click shows it
    finally:
        page.close()


def test_glossary_links_reach_the_glossary_page(pages: dict[str, dict[str, Any]]) -> None:
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for view in VIEWS:
            wanted = {
                anchor
                for c in _cells(path, view)
                if c.cell_type == "markdown"
                for anchor in re.findall(r"\]\(\.\./docs/glossary\.md#([a-z0-9-]+)\)", c.source)
            }
            links = pages[f"{view}/notebooks/{path.stem}.html"]["links"]
            have = {h.split("#", 1)[1] for h in links if h.startswith("../docs/glossary.html#")}
            assert wanted <= have, f"{view} {path.stem}: no glossary link for {wanted - have}"
