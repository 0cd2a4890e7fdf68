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
    assert "Core session: 169 minutes" in page and "Advanced session" in page
    assert "](notebooks/01_get_then_incr.ipynb)" in page and "](../notebooks/" not in page
    instructor = lesson_site.home_page(README, WORKSHOP, "instructor")
    assert "docs/notes/" not in page and "docs/notes/00" in instructor


def test_the_learner_home_page_carries_no_instructor_text() -> None:
    page = lesson_site.home_page(README, WORKSHOP, "learner")
    instructor = lesson_site.home_page(README, WORKSHOP, "instructor")
    for text in ("How the minutes are estimated", "tests/test_workshop.py", "Pacing"):
        assert text not in page and text in instructor, text
    assert "### Advanced session: 175 minutes" in page  # the schedule itself stays


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


def _reveal_outputs(nb: nbformat.NotebookNode) -> list[list[nbformat.NotebookNode]]:
    return [c.outputs for c in nb.cells if c.cell_type == "code" and "reveal(" in c.source]


def test_the_learner_view_folds_each_reveal_and_the_instructor_view_keeps_it_open() -> None:
    binder = lesson_site.binder_url(README)
    learner = _reveal_outputs(lesson_site.view_notebook(NOTEBOOK, "learner", binder))
    instructor = _reveal_outputs(lesson_site.view_notebook(NOTEBOOK, "instructor", binder))
    assert len(learner) == len(instructor) >= 4
    for outputs in learner:
        (only,) = outputs
        page = only["data"]["text/html"]
        assert page.startswith('<details class="racelab-reveal"><summary>') and "answer is" in page
        assert "answer is" not in only["data"]["text/plain"]
    for outputs in instructor:
        assert any("answer is" in o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "details.racelab-reveal" in lesson_site.CSS


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


def test_instructor_notes_are_a_marked_box_right_after_the_title() -> None:
    binder = lesson_site.binder_url(README)
    stored = nbformat.read(NOTEBOOK, as_version=4)
    instructor = lesson_site.view_notebook(NOTEBOOK, "instructor", binder)
    title = stored.cells[0].source.partition("\n")[0]
    first = instructor.cells[0].source
    assert first.startswith(title + "\n\n:::{container} racelab-launch\n") and first.endswith(":::")
    notes = instructor.cells[1].source
    assert notes.startswith("::::{admonition} Instructor notes: 01 ")
    assert notes.splitlines()[1] == ":class: handout-notes" and notes.endswith("\n::::")
    rest = stored.cells[0].source.partition("\n")[2].strip()  # the story, after the notes
    assert instructor.cells[2].source == rest
    assert ".admonition.handout-notes" in lesson_site.CSS  # the style matches the box's classes
    learner = lesson_site.view_notebook(NOTEBOOK, "learner", binder)
    assert "handout-notes" not in "\n".join(c.source for c in learner.cells)


def test_each_lesson_page_offers_the_notebook_for_download(tmp_path: Path) -> None:
    src = lesson_site.write_sources("learner", tmp_path)
    view = nbformat.read(src / "notebooks" / NOTEBOOK.name, as_version=4)
    assert f"{{download}}`download it </ipynb/{NOTEBOOK.name}>`" in view.cells[0].source
    # the download is the repository's own notebook, and it is not built as a page
    assert (src / "ipynb" / NOTEBOOK.name).read_bytes() == NOTEBOOK.read_bytes()
    assert "ipynb/**" in lesson_site.config("learner")["exclude_patterns"]


def _colours(css: str, selector: str) -> dict[str, str]:
    """Return the --racelab-* colours the first rule of selector sets."""
    block = css.split(selector + " {", 1)[1].split("}", 1)[0]
    return dict(re.findall(r"--racelab-([\w-]+): (#[0-9A-Fa-f]{6})", block))


def test_the_sites_text_colours_meet_aa_in_light_and_dark_mode() -> None:
    from helpers.instruments.plots import contrast

    pages = {"body": "#ffffff", 'body[data-theme="dark"]': "#131416"}  # furo's backgrounds
    for selector, page in pages.items():
        colours = _colours(lesson_site.CSS, selector)
        pairs = (("solution", "solution-bg"), ("notes", "notes-bg"), ("ok", "ok"), ("bad", "bad"))
        for name, bg in pairs:  # ok and bad: outputs' text on the page itself
            for background in {page, colours[bg]} - {colours[name]}:
                ratio = contrast(colours[name], background)
                assert ratio >= 4.5, (selector, name, background, round(ratio, 2))
    dark = _colours(lesson_site.CSS, 'body[data-theme="dark"]')
    auto = _colours(lesson_site.CSS, '  body:not([data-theme="light"])')
    assert dark == auto  # the system's dark mode gets the same colours
    # the light green is a variable's value, or a selector of the outputs it re-colours: no rule
    # draws it whatever the mode
    rules = lesson_site.CSS.split("body {", 1)[1].split("}", 1)[1]
    assert re.findall(r"[:\s]#1a7f37\b(?!\"\])", rules) == []
    assert '.cell_output [style*="color:#1a7f37"] { color: var(--racelab-ok) !important; }' in rules


def test_code_cells_lose_myst_nbs_green_margin() -> None:
    rule = lesson_site.CSS.split("div.cell > div.cell_input {", 1)[1].split("}", 1)[0]
    assert "border-left-color: var(--mystnb-source-border-color)" in rule


def test_toctree_captions_get_the_aria_level_a_heading_needs() -> None:
    namespace: dict[str, object] = {}
    exec(lesson_site.CONF_SETUP, namespace)  # what the generated conf.py runs
    caption = '<p class="caption" role="heading"><span class="caption-text">Lessons</span></p>'
    context = {"body": caption, "furo_navigation_tree": caption * 2, "title": "x"}
    namespace["_caption_levels"](None, "index", "page.html", context, None)
    for name in ("body", "furo_navigation_tree"):
        assert 'role="heading">' not in context[name]
        assert context[name].count('role="heading" aria-level="2">') == len(context[name]) // len(
            caption
        )


def test_scroll_regions_are_made_focusable_on_every_page(tmp_path: Path) -> None:
    assert "site.js" in lesson_site.config("learner")["html_js_files"]
    src = lesson_site.write_sources("learner", tmp_path)
    script = (src / "_static" / "site.js").read_text()
    assert 'setAttribute("tabindex", "0")' in script and "scrollWidth > el.clientWidth" in script
    for aside in (".sidebar-drawer", ".toc-drawer"):  # furo's two unnamed <aside> landmarks
        assert f'"{aside}": "' in script
