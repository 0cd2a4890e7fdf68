"""`make handouts` (scripts/handouts.py): the student edition hides solutions and test markers,
every PDF has pages, every plot of the notebooks is embedded in the HTML, and the cheat sheet is
one page whose figures are what helpers.count_work counts.

Builds both editions once into a temporary folder (about a minute: chromium prints two PDFs).
Without chromium the test skips, saying why; RACELAB_REQUIRE_BROWSER=1 (.ci/run) fails instead.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS: list[Path] = []  # the copies the handouts were built from (see built)

spec = importlib.util.spec_from_file_location("handouts", REPO / "scripts" / "handouts.py")
handouts = importlib.util.module_from_spec(spec)
sys.modules["handouts"] = handouts  # its dataclasses look their module up while it loads
spec.loader.exec_module(handouts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return the folder both editions were built into."""
    try:
        handouts.find_chromium()
    except handouts.HandoutError as exc:
        if os.environ.get("RACELAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"RACELAB_REQUIRE_BROWSER=1 but {exc}", pytrace=False)
        pytest.skip(str(exc).splitlines()[0])
    out = tmp_path_factory.mktemp("handouts")
    copies = tmp_path_factory.mktemp("notebooks")  # what is built is what is checked
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        NOTEBOOKS.append(Path(shutil.copy(path, copies)))
    written = handouts.build(out, notebooks=NOTEBOOKS)
    assert sorted(p.name for p in written) == [
        "cheatsheet.html",
        "cheatsheet.pdf",
        "instructor.html",
        "instructor.pdf",
        "student.html",
        "student.pdf",
    ]
    return out


@pytest.fixture(scope="module")
def cheatsheet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return the cheat sheet's HTML page, built alone (its PDF beside it)."""
    try:
        chromium = handouts.find_chromium()
    except handouts.HandoutError as exc:
        if os.environ.get("RACELAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"RACELAB_REQUIRE_BROWSER=1 but {exc}", pytrace=False)
        pytest.skip(str(exc).splitlines()[0])
    out = tmp_path_factory.mktemp("cheatsheet")
    written = handouts.build_cheatsheet(out, chromium)
    assert [p.name for p in written] == ["cheatsheet.html", "cheatsheet.pdf"]
    return out / "cheatsheet.html"


def _cells(tag: str) -> list[nbformat.NotebookNode]:
    return [
        cell
        for path in NOTEBOOKS
        for cell in nbformat.read(path, as_version=4).cells
        if tag in cell.metadata.get("tags", [])
    ]


def _text(page: str) -> str:
    """Return the page's visible text: tags removed, entities decoded."""
    body = re.sub(r"<style.*?</style>|<script.*?</script>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def _output_text(cell: nbformat.NotebookNode) -> str:
    """Return the text of a cell's outputs (streams and text/plain), e.g. a Lua listing."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def _distinct_lines(cell: nbformat.NotebookNode, others: str) -> list[str]:
    """Return the cell's code lines long enough to be its own and absent from the other cells."""
    lines = [line.strip() for line in cell.source.splitlines()]
    return [line for line in lines if len(line) > 25 and line not in others]


def test_student_edition_has_no_solution_and_no_test_marker(built: Path) -> None:
    page = (built / "student.html").read_text()
    assert not re.search("nbval", page, re.I), "the student edition mentions nbval: " + ", ".join(
        repr(page[max(0, m.start() - 60) : m.end() + 20]) for m in re.finditer("nbval", page, re.I)
    )
    assert "celltag_solution" not in page and "celltag_instructor" not in page
    kept = "\n".join(  # what the student edition may show: kept cells and their outputs
        c.source + "\n" + _output_text(c)
        for p in NOTEBOOKS
        for c in nbformat.read(p, as_version=4).cells
        if not {"solution", "instructor"} & set(c.metadata.get("tags", []))
    )
    solutions = _cells("solution")
    assert solutions, "no cell is tagged solution: nothing to check"
    text = _text(page)
    leaked = [line for cell in solutions for line in _distinct_lines(cell, kept) if line in text]
    assert not leaked, f"solution lines in the student edition: {leaked[:5]}"


def test_instructor_edition_shows_solutions_and_notes(built: Path) -> None:
    page = (built / "instructor.html").read_text()
    assert page.count("celltag_solution") >= len(_cells("solution"))
    text = _text(page)
    for notes in sorted((REPO / "docs" / "notes").glob("[0-9][0-9].md")):
        first = next(line for line in notes.read_text().splitlines() if line.strip())
        assert first.lstrip("# ").strip() in text, f"{notes.name} is not in the instructor edition"
    if (REPO / "docs" / "workshop.md").exists():
        assert "Schedule" in text


def test_both_editions_have_a_table_of_contents_linking_every_notebook(built: Path) -> None:
    for edition in handouts.EDITIONS:
        page = (built / f"{edition}.html").read_text()
        toc = re.search(r'<nav class="handout-toc">(.*?)</nav>', page, re.S)
        assert toc, f"{edition}: no table of contents"
        anchors = re.findall(r'href="#([^"]+)"', toc.group(1))
        assert len(anchors) >= 2 * len(NOTEBOOKS)
        assert all(f'id="{a}"' in page for a in anchors), f"{edition}: a contents link goes nowhere"


def _pages(pdf: Path) -> int:
    """Return the PDF's page count (pdfinfo when installed, else its /Type /Page objects)."""
    if shutil.which("pdfinfo"):
        info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
        return int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))
    return len(re.findall(rb"/Type\s*/Page\b", pdf.read_bytes()))


def _page_sizes(pdf: Path) -> set[tuple[int, int]]:
    """Return the PDF's page sizes in whole points (pdfinfo when installed, else its MediaBoxes)."""
    if shutil.which("pdfinfo"):
        info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
        found = re.findall(r"^Page size:\s+([\d.]+) x ([\d.]+) pts", info.stdout, re.M)
    else:
        number = rb"(-?[\d.]+)"
        boxes = re.findall(rb"/MediaBox\s*\[\s*" + rb"\s+".join([number] * 4), pdf.read_bytes())
        found = [(float(x1) - float(x0), float(y1) - float(y0)) for x0, y0, x1, y1 in boxes]
    return {(round(float(w)), round(float(h))) for w, h in found}


def _is_a4(size: tuple[int, int]) -> bool:
    """Return True if a page size in points is A4 (210 x 297 mm = 595 x 842 pt, give or take 3)."""
    return abs(size[0] - 595) <= 3 and abs(size[1] - 842) <= 3  # US Letter is 612 x 792


def test_every_pdf_has_pages_on_a4(built: Path) -> None:
    for edition in handouts.EDITIONS:
        pdf = built / f"{edition}.pdf"
        assert pdf.read_bytes()[:5] == b"%PDF-"
        assert _pages(pdf) > len(NOTEBOOKS), f"{pdf.name}: {_pages(pdf)} pages"
    for name in (*handouts.EDITIONS, "cheatsheet"):
        sizes = _page_sizes(built / f"{name}.pdf")
        assert sizes and all(map(_is_a4, sizes)), f"{name}.pdf is not all A4: {sizes}"


def test_every_handout_page_asks_for_one_paper_size(tmp_path: Path) -> None:
    # No chromium needed: the HTML each PDF is printed from sets its @page size.
    first = sorted((REPO / "notebooks").glob("00_*.ipynb"))
    written = handouts.build(tmp_path / "a4", pdf=False, notebooks=first)
    assert len(written) == 3
    for page in written:
        sizes = re.findall(r"@page\s*\{[^}]*size:\s*([\w ]+);", page.read_text())
        assert sizes == ["A4"], (page.name, sizes)
    (letter,) = handouts.build(tmp_path / "letter", pdf=False, editions=False, paper="Letter")
    assert re.findall(r"@page\s*\{[^}]*size:\s*([\w ]+);", letter.read_text()) == ["letter"]
    with pytest.raises(handouts.HandoutError, match="unknown paper size 'A5'"):
        handouts.build(tmp_path / "a5", pdf=False, paper="A5")


def test_every_plot_is_embedded(built: Path) -> None:
    for edition in handouts.EDITIONS:
        removed = handouts.REMOVED[edition]
        expected = sum(
            "image/png" in out.get("data", {})
            for path in NOTEBOOKS
            for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "code" and not removed & set(cell.metadata.get("tags", []))
            for out in cell.get("outputs", [])
        )
        page = (built / f"{edition}.html").read_text()
        assert page.count('src="data:image/png;base64,') == expected, edition
        assert not re.search(r'<img[^>]+src="(?!data:)', page), f"{edition}: an image is a link"


def test_without_chromium_the_build_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACELAB_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(handouts.HandoutError, match="apt-get install chromium"):
        handouts.find_chromium()
    assert handouts.main(["--out", "/nonexistent/handouts"]) == 1


def _sheet_figures(page: str) -> dict[tuple[str, str], dict[str, float]]:
    """Return {(race, fix): {field: value}} read from the cheat sheet's decision tables."""
    rows = re.findall(r'<tr[^>]*data-race="([^"]+)" data-fix="([^"]+)">(.*?)</tr>', page, re.S)
    return {
        (html.unescape(race), html.unescape(fix)): {
            name: float(value) for name, value in re.findall(r'data-field="(\w+)">([\d.]+)<', cells)
        }
        for race, fix, cells in rows
    }


def test_the_cheat_sheet_is_one_page(cheatsheet: Path) -> None:
    assert _pages(cheatsheet.with_suffix(".pdf")) == 1


def test_the_cheat_sheets_figures_are_count_works(cheatsheet: Path) -> None:
    from helpers import connect, count_work

    page = cheatsheet.read_text()
    shown, races = _sheet_figures(page), handouts.cheat_races()
    assert len(shown) == sum(len(race.fixes) for race in races) >= 14
    lab = connect("test_handouts", backend="embedded")
    try:
        for race in races:
            for fix in race.fixes:
                work = count_work(lab, fix.call)
                counted = {"round_trips": work.round_trips, "sent": work.sent}
                counted["executed"] = work.executed
                assert shown[race.title, fix.name] == counted, (race.title, fix.name)
                for command in (name for name, n in work.executed_by_command.items() if n):
                    assert html.escape(handouts.COMMANDS[command]) in page, command
    finally:
        lab.close()


def test_a_command_the_sheet_cannot_describe_stops_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    races = handouts.cheat_races()[:1]
    work = handouts.cheat_work(races)
    monkeypatch.delitem(handouts.COMMANDS, "incr")
    with pytest.raises(handouts.HandoutError, match="incr"):
        handouts.cheatsheet_html(races, work)


# --- optional cells, predictions and glossary links (no chromium: the HTML only) ------------


def _notebook(tmp_path: Path, cells: list[nbformat.NotebookNode]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / "01_sample.ipynb"
    nbformat.write(nb, path)
    return path


def _tagged(cell: nbformat.NotebookNode, tag: str) -> nbformat.NotebookNode:
    cell.metadata["tags"] = [tag]
    return cell


def _going_further() -> list[nbformat.NotebookNode]:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    return [
        md("# Sample\n\nA [**round trip**](../docs/glossary.md#round-trip) costs."),
        md("## Key points\n\n- one"),
        _tagged(md("## Going further (optional)\n\nThis section is optional."), "optional"),
        _tagged(code("deep = 1"), "optional"),
        md("## Cleanup"),
        _tagged(code("later = 2"), "optional"),
    ]


@pytest.mark.parametrize("edition", handouts.EDITIONS)
def test_each_run_of_optional_cells_opens_with_a_label(tmp_path: Path, edition: str) -> None:
    book = handouts.edition_notebook(edition, [_notebook(tmp_path, _going_further())])
    sources = [c.source for c in book.cells]
    labels = [i for i, s in enumerate(sources) if s == handouts.OPTIONAL_LABEL]
    assert [sources[i + 1][:13] for i in labels] == ["## Going furt", "later = 2"]
    page = handouts.to_html(book, "Sample")
    assert page.count("celltag_optional") >= 3
    assert "Optional: not needed for the exercises" in _text(page)


def test_optional_label_is_visible_in_the_html(tmp_path: Path) -> None:
    page = handouts.to_html(
        handouts.edition_notebook("student", [_notebook(tmp_path, _going_further())]), "Sample"
    )
    label = page.index('class="optional-label"')
    assert label < page.rindex("Going further (optional)") and ".optional-label {" in page


def test_glossary_links_jump_to_the_editions_own_glossary(tmp_path: Path) -> None:
    book = handouts.edition_notebook("student", [_notebook(tmp_path, _going_further())])
    assert "](#glossary-round-trip)" in book.cells[0].source
    assert "../docs/glossary.md" not in "\n".join(c.source for c in book.cells)
    page = handouts.to_html(book, "Sample")
    assert 'href="#glossary-round-trip"' in page and 'id="glossary-round-trip"' in page
    ids = set(re.findall(r'id="(glossary-[a-z0-9-]+)"', page))
    targets = set(re.findall(r'href="#(glossary-[a-z0-9-]+)"', page))
    assert len(ids) >= 30 and targets <= ids, sorted(targets - ids)  # entries link each other too


def test_a_predict_cell_shows_its_question_and_choices(tmp_path: Path) -> None:
    from exercises.predict import PREDICTIONS, Choice, prediction

    choices = {
        "one": Choice("1: one", "check-at-write", "INCR checks nothing."),
        "two": Choice("2: two"),
        "none": Choice("0: none", "conflict-detection", "Redis detects no conflict."),
    }
    sample = prediction(
        "99.handout_sample", "How many are admitted?", choices, lambda n: ["one", "two"][n - 1]
    )
    try:
        asked = _tagged(nbformat.v4.new_code_cell('predict("99.handout_sample")'), "predict")
        stored = _tagged(nbformat.v4.new_code_cell('predict("99.stored")'), "predict")
        stored.outputs = [
            nbformat.v4.new_output("display_data", data={"text/html": "<p>as stored</p>"})
        ]
        path = _notebook(tmp_path, [nbformat.v4.new_markdown_cell("# Sample"), asked, stored])
        page = handouts.to_html(handouts.edition_notebook("student", [path]), "Sample")
    finally:
        PREDICTIONS.pop("99.handout_sample")
    text = _text(page)
    assert "How many are admitted?" in text and 'class="racelab-predict"' in page
    assert all(f"({k}) {c.text}" in text for k, c in sample.choices.items())
    assert "as stored" in text  # a stored question is shown as it is


def _reveal_cell() -> nbformat.NotebookNode:
    """Return a stored reveal cell: the demo's printed trace, then reveal's outcome and answer."""
    cell = nbformat.v4.new_code_cell('print(trace)\nreveal("99.sample", 2)')
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="A=True B=True\n"),
        nbformat.v4.new_output(
            "execute_result",
            data={"text/plain": "Outcome: 2, so the answer is (c) 2: both."},
            execution_count=1,
        ),
    ]
    return cell


def test_the_student_edition_folds_each_reveal_and_the_instructor_edition_does_not(
    tmp_path: Path,
) -> None:
    path = _notebook(tmp_path, [nbformat.v4.new_markdown_cell("# Sample"), _reveal_cell()])
    student = handouts.edition_notebook("student", [path])
    (folded,) = [c for c in student.cells if c.cell_type == "code"]
    (output,) = folded.outputs
    page = output["data"]["text/html"]
    assert page.startswith('<details class="racelab-reveal"><summary>')
    assert " open" not in page.split(">", 1)[0]  # closed until the learner opens it
    assert page.index("</summary>") < page.index("A=True B=True") < page.index("answer is (c)")
    assert "answer is" not in output["data"]["text/plain"]
    instructor = handouts.edition_notebook("instructor", [path])
    (shown,) = [c for c in instructor.cells if c.cell_type == "code"]
    assert [o["output_type"] for o in shown.outputs] == ["stream", "execute_result"]
    html_page = handouts.to_html(student, "Sample")
    assert 'details class="racelab-reveal"' in html_page and "details.racelab-reveal" in html_page


def test_every_reveal_of_the_notebooks_is_folded_for_students() -> None:
    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    student = handouts.edition_notebook("student", notebooks)
    reveals = [c for c in student.cells if c.cell_type == "code" and "reveal(" in c.source]
    assert len(reveals) >= 22
    for cell in reveals:
        shown = "".join(
            "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
            for o in cell.outputs
        )
        assert "the answer is" not in shown, cell.source
        assert all("racelab-reveal" in o["data"]["text/html"] for o in cell.outputs)
    instructor = handouts.edition_notebook("instructor", notebooks)
    texts = [
        "".join(o.get("data", {}).get("text/plain", ""))
        for c in instructor.cells
        if c.cell_type == "code" and "reveal(" in c.source
        for o in c.outputs
    ]
    assert sum("the answer is" in t for t in texts) >= 22


def test_a_finished_progress_bars_empty_output_is_dropped(tmp_path: Path) -> None:
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={}),
        nbformat.v4.new_output("stream", name="stdout", text="done\n"),
    ]
    book = handouts.edition_notebook("student", [_notebook(tmp_path, [cell])])
    assert [o["output_type"] for o in book.cells[0].outputs] == ["stream"]
