"""scripts/lesson_site.py: what each view's pages are made of (no Sphinx run: tests/browser does that)."""

from __future__ import annotations

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


def _tags(nb: nbformat.NotebookNode) -> set[str]:
    return {t for cell in nb.cells for t in cell.metadata.get("tags", [])}


def test_home_page_is_the_story_and_the_schedule_without_the_badge_image() -> None:
    page = lesson_site.home_page(README, WORKSHOP, "learner")
    assert page.startswith("# redis-race-lab") and "badge_logo" not in page
    assert "Core session: 170 minutes" in page and "Advanced session" in page
    assert "](notebooks/01_get_then_incr.ipynb)" in page and "](../notebooks/" not in page
    assert "docs/notes/" not in page and "docs/notes/00" in lesson_site.home_page(
        README, WORKSHOP, "instructor"
    )


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
