"""scripts/lesson_site.py: what each view's pages are made of (no Sphinx run: tests/browser does that)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import lesson_site  # noqa: E402 - scripts/ is not a package

README = (REPO / "README.md").read_text()
WORKSHOP = (REPO / "docs" / "workshop.md").read_text()
NOTEBOOK = REPO / "notebooks" / "01_get_then_incr.ipynb"


def _cell_tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.metadata.get("tags", []))


def _tags(nb: nbformat.NotebookNode) -> set[str]:
    return {t for cell in nb.cells for t in cell.metadata.get("tags", [])}


def test_home_page_is_the_story_and_the_schedule_without_the_badge_image() -> None:
    page = lesson_site.home_page(README, WORKSHOP, "learner")
    assert page.startswith("# redis-race-lab") and "badge_logo" not in page
    assert "Core session: 170 minutes" in page and "Advanced session" in page
    assert "](notebooks/01_get_then_incr.ipynb)" in page and "](../notebooks/" not in page
    instructor = lesson_site.home_page(README, WORKSHOP, "instructor")
    assert "docs/notes/" not in page and "docs/notes/00" in instructor


def test_the_learner_home_page_carries_no_instructor_text() -> None:
    page = lesson_site.home_page(README, WORKSHOP, "learner")
    instructor = lesson_site.home_page(README, WORKSHOP, "instructor")
    for text in ("How the minutes are estimated", "tests/test_workshop.py", "Pacing"):
        assert text not in page and text in instructor, text
    assert "### Advanced session: 170 minutes" in page  # the schedule itself stays


def test_learner_notebook_has_no_solution_and_a_launch_line() -> None:
    binder = lesson_site.binder_url(README)
    learner = lesson_site.view_notebook(NOTEBOOK, "learner", binder)
    stored = nbformat.read(NOTEBOOK, as_version=4)
    assert "solution" in _tags(stored) and not {"solution", "instructor"} & _tags(learner)
    first = learner.cells[0].source
    assert first.startswith("# ") and f"{binder}?labpath=notebooks%2F{NOTEBOOK.name}" in first
    assert "make lab" in first and not any(t.startswith("nbval") for t in _tags(learner))


def test_instructor_notebook_keeps_solutions_and_inserts_the_notes() -> None:
    binder = lesson_site.binder_url(README)
    instructor = lesson_site.view_notebook(NOTEBOOK, "instructor", binder)
    assert "solution" in _tags(instructor)
    notes = instructor.cells[1]
    assert notes.metadata["tags"] == ["handout-notes"]
    assert "](../workshop.md" not in notes.source  # links rewritten for notebooks/


def test_a_readme_without_the_badge_cannot_be_launched() -> None:
    with pytest.raises(lesson_site.SiteError, match="Binder badge"):
        lesson_site.binder_url("# no badge here\n")


def _sample(tmp_path: Path) -> Path:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("# Sample\n\nA [**round trip**](../docs/glossary.md#round-trip) costs."),
        md("## Going further (optional)\n\nThis section is optional."),
        code("deep = 1"),
        md("## Cleanup"),
    ]
    for cell in cells[1:3]:
        cell.metadata["tags"] = ["optional"]
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    path = tmp_path / "01_sample.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("view", ["learner", "instructor"])
def test_optional_cells_open_with_an_optional_admonition(tmp_path: Path, view: str) -> None:
    nb = lesson_site.view_notebook(_sample(tmp_path), view, lesson_site.binder_url(README))
    sources = [c.source for c in nb.cells]
    at = sources.index(lesson_site.OPTIONAL_ADMONITION)
    assert sources[at + 1].startswith("## Going further") and sources.count(sources[at]) == 1
    assert sources[at].startswith(":::{admonition} Optional\n:class: optional\n")
    assert ".tag_optional" in lesson_site.CSS


def test_glossary_links_keep_the_form_that_reaches_the_glossary_page(tmp_path: Path) -> None:
    src = lesson_site.write_sources("learner", tmp_path)
    view = nbformat.read(src / "notebooks" / NOTEBOOK.name, as_version=4)
    stored = nbformat.read(NOTEBOOK, as_version=4)
    kept = [c for c in stored.cells if not {"solution", "instructor"} & set(_cell_tags(c))]
    links = [
        m for c in kept for m in re.findall(r"\]\(\.\./docs/glossary\.md#[a-z0-9-]+\)", c.source)
    ]
    shown = "\n".join(c.source for c in view.cells)
    assert all(link in shown for link in links)
    # the link resolves from notebooks/ to the glossary copied beside it: MyST turns it into
    # docs/glossary.html#<entry> (tests/browser/test_site.py checks every such link's anchor)
    assert (src / "notebooks" / ".." / "docs" / "glossary.md").resolve().is_file()
    assert lesson_site.config("learner")["myst_heading_anchors"] >= 2
