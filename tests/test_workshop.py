"""docs/workshop.md: its schedule repeats each notebook's stated time, and each session adds up.

Each notebook states its time in a "## Time" section as ``Teaching: N minutes. Exercises: M
minutes.``. The schedule in docs/workshop.md has one table per session (a "### ... session: T
minutes" heading, rows ``| start | what | teaching | exercises | minutes |``, then "Total: T
minutes."). The core session (00-03, breaks, wrap-up) must fit 180 minutes with at least 10 of
slack; the advanced session has its own total. Each exercise declares at least its floor: its
prompt read, its solution typed at 15 s a line, and 5 minutes to run the check and read it. Every notebook is scheduled exactly once, and its instructor notes are linked.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKSHOP = ROOT / "docs" / "workshop.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TIME_LINE = re.compile(r"^Teaching: (\d+) minutes\. Exercises: (\d+) minutes\.$", re.M)
SESSION = re.compile(r"^### (\w+) session: (\d+) minutes$", re.M)
ROW = re.compile(r"^\| (\d+):(\d\d) \| (.+?) \|\s*(\d*)\s*\|\s*(\d*)\s*\|\s*(\d*)\s*\|$", re.M)
NOTEBOOK_LINK = re.compile(r"\(\.\./notebooks/(\d\d_\w+\.ipynb)\)")
CORE_LIMIT = 180
CORE_SLACK = 10  # minutes the core session leaves free inside CORE_LIMIT
CORE = {"00", "01", "02", "03"}


@dataclass
class Row:
    """One line of a session table: start minute, text, teaching, exercises, minutes."""

    start: int
    what: str
    teaching: int | None
    exercises: int | None
    minutes: int | None

    @property
    def notebook(self) -> str | None:
        """Return the notebook file the row links to, or None (a break, the wrap-up, the end)."""
        m = NOTEBOOK_LINK.search(self.what)
        return m.group(1) if m else None


def stated_time(path: Path) -> tuple[int, int]:
    """Return (teaching, exercises) minutes from a notebook's "## Time" section."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and "## Time" in text:
            section = text.split("## Time", 1)[1].split("\n## ", 1)[0]
            m = TIME_LINE.search(section)
            assert m, (
                f"{path.name}: the Time section must say exactly "
                "'Teaching: N minutes. Exercises: M minutes.'"
            )
            return int(m.group(1)), int(m.group(2))
    raise AssertionError(f"{path.name}: no '## Time' section")


def sessions(text: str) -> dict[str, tuple[int, str, list[Row]]]:
    """Return {session name: (stated total, text after the table, rows)} from workshop.md."""
    found = {}
    heads = list(SESSION.finditer(text))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else text.find("\n## ", head.end())
        body = text[head.end() : end if end > 0 else len(text)]
        rows = [
            Row(int(h) * 60 + int(m), what, *(int(x) if x else None for x in nums))
            for h, m, what, *nums in ROW.findall(body)
        ]
        found[head.group(1).lower()] = (int(head.group(2)), body, rows)
    return found


def number(row: Row) -> str:
    """Return the two-digit number of the row's notebook."""
    assert row.notebook
    return row.notebook[:2]


SESSIONS = sessions(WORKSHOP.read_text())


def test_the_schedule_has_a_core_and_an_advanced_session() -> None:
    assert set(SESSIONS) == {"core", "advanced"}, sorted(SESSIONS)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_notebook_states_its_time_and_the_schedule_repeats_it(notebook: Path) -> None:
    teaching, exercises = stated_time(notebook)
    rows = [
        row for _, _, rows in SESSIONS.values() for row in rows if row.notebook == notebook.name
    ]
    assert len(rows) == 1, f"{notebook.name} must appear once in docs/workshop.md's schedule"
    row = rows[0]
    assert (row.teaching, row.exercises) == (teaching, exercises), (
        f"{notebook.name} states {teaching} + {exercises} minutes; "
        f"the schedule says {row.teaching} + {row.exercises}"
    )
    assert row.minutes == teaching + exercises


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_start_times_follow_the_minutes_and_the_total_is_their_sum(name: str) -> None:
    total, body, rows = SESSIONS[name]
    assert rows and rows[0].start == 0
    clock = 0
    for row in rows:
        assert row.start == clock, f"{row.what!r} starts at {row.start} min, expected {clock}"
        clock += row.minutes or 0
    assert rows[-1].minutes is None, "the last row marks the end"
    assert clock == total, f"the {name} session's rows add up to {clock}, its heading says {total}"
    assert f"Total: {total} minutes." in body


def test_the_core_session_is_00_to_03_with_breaks_and_fits_three_hours() -> None:
    total, _, rows = SESSIONS["core"]
    assert {number(row) for row in rows if row.notebook} == CORE
    assert sum(1 for row in rows if row.what.startswith("Break")) >= 2
    assert any(row.what.startswith("Wrap-up") for row in rows)
    assert total <= CORE_LIMIT, f"the core session takes {total} minutes, over {CORE_LIMIT}"
    assert total + CORE_SLACK <= CORE_LIMIT, (
        f"the core session takes {total} minutes: less than {CORE_SLACK} of slack in "
        f"{CORE_LIMIT}; move material to Going further (optional), not time into the breaks"
    )


def test_the_advanced_session_holds_every_other_notebook() -> None:
    _, _, rows = SESSIONS["advanced"]
    numbers = {number(row) for row in rows if row.notebook}
    assert numbers == {p.name[:2] for p in NOTEBOOKS} - CORE


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_notebook_has_instructor_notes_linked_from_the_workshop_page(notebook: Path) -> None:
    notes = f"notes/{notebook.name[:2]}.md"
    assert f"]({notes})" in WORKSHOP.read_text(), f"docs/workshop.md does not link {notes}"
    assert (ROOT / "docs" / notes).is_file(), f"docs/{notes} is missing"


def test_the_workshop_page_is_linked_from_the_readme_and_from_00() -> None:
    assert "docs/workshop.md" in (ROOT / "README.md").read_text()
    start = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
    assert any("../docs/workshop.md" in "".join(c["source"]) for c in start["cells"])


def test_every_local_link_of_the_workshop_page_exists() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", WORKSHOP.read_text()):
        if "://" not in target:
            assert (WORKSHOP.parent / target).exists() or target.startswith("notes/"), target


def load_timing():
    """Return scripts/timing.py as a module (the estimator `make timing` runs)."""
    spec = importlib.util.spec_from_file_location("timing", ROOT / "scripts" / "timing.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["timing"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


TIMING = load_timing()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_notebook_fits_its_stated_minutes_by_the_estimate_of_its_required_cells(
    notebook: Path,
) -> None:
    est = TIMING.estimate(notebook)
    teaching, exercises = stated_time(notebook)
    assert not est.undeclared, (
        f"{notebook.name}: the exercises at cells {est.undeclared} must declare '(N minutes)' "
        "in the markdown cell above their stub"
    )
    assert not est.unmeasured, (
        f"{notebook.name}: {est.unmeasured} code cells have no measured run time: "
        f"run `python scripts/notebooks.py execute notebooks/{notebook.name}`"
    )
    assert est.teaching <= 60 * teaching, (
        f"{notebook.name}: the required cells take {est.teaching / 60:.0f} minutes to teach, "
        f"over the {teaching} stated; tag depth `optional` (make timing shows the parts)"
    )
    assert est.exercises <= 60 * exercises, (
        f"{notebook.name}: the exercises declare {est.exercises / 60:.0f} minutes, "
        f"over the {exercises} stated"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_exercise_declares_at_least_reading_typing_and_checking(notebook: Path) -> None:
    cells = json.loads(notebook.read_text())["cells"]
    stubs = [i for i, cell in enumerate(cells) if "exercise" in TIMING.tags(cell)]
    assert stubs, f"{notebook.name} has no exercise"
    for i in stubs:
        declared = TIMING.DECLARED.search(TIMING.source(cells[i - 1]))
        assert declared, f"{notebook.name}: the exercise at cell {i} declares no '(N minutes)'"
        floor = TIMING.exercise_floor(cells, i)
        assert int(declared.group(1)) >= floor, (
            f"{notebook.name}: the exercise at cell {i} declares {declared.group(1)} minutes; "
            f"reading its prompt, typing its solution and checking it take {floor}"
        )
    assert not TIMING.estimate(notebook, include_optional=True).short


@pytest.mark.parametrize(
    "notebook", [nb for nb in NOTEBOOKS if nb.name[:2] in CORE], ids=lambda p: p.name[:2]
)
def test_a_core_notebook_asks_a_committed_prediction_every_10_minutes(notebook: Path) -> None:
    teaching, exercises = stated_time(notebook)
    needed = -(-(teaching + exercises) // 10)
    est = TIMING.estimate(notebook)
    assert est.prediction_cells >= needed, (
        f"{notebook.name}: {est.prediction_cells} committed predictions (cells tagged predict) "
        f"for {teaching + exercises} minutes; at least {needed}"
    )


def test_the_estimator_counts_each_part_by_its_stated_rate(tmp_path: Path) -> None:
    code = {"cell_type": "code", "metadata": {}, "source": "a = 1\n\nb = 2\n", "outputs": []}
    shown = {
        "cell_type": "code",
        "metadata": {},
        "source": "show(f)",
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n2\n3\n"}],
    }
    cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": "Teaching: 1 minutes. Exercises: 2 minutes.",
        },
        {"cell_type": "markdown", "metadata": {}, "source": " ".join(["word"] * 200)},
        code,
        shown,
        {
            "cell_type": "code",
            "metadata": {"tags": ["predict"]},
            "source": 'predict("x.y")',
            "outputs": [],
        },
        {"cell_type": "markdown", "metadata": {"tags": ["optional"]}, "source": "word " * 999},
        {"cell_type": "markdown", "metadata": {}, "source": "### Exercise (2 minutes)"},
        {
            "cell_type": "code",
            "metadata": {"tags": ["exercise"]},
            "source": "x = ...\n" * 9,
            "outputs": [],
        },
        {
            "cell_type": "code",
            "metadata": {"tags": ["solution"]},
            "source": "x = 1\n" * 9,
            "outputs": [],
        },
    ]
    notebook = tmp_path / "99_probe.ipynb"
    notebook.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    est = TIMING.estimate(notebook)
    assert (est.prose, est.code, est.listings, est.predictions) == (
        60 + 60 * 6 / 200,
        2 * 15 + 15 + 15,
        30,
        60,
    )
    assert est.run == 3 * 5 and est.unmeasured == 3
    assert est.exercises == 120 and est.stated == (1, 2)
    # the floor: 3 words read, 9 lines typed (15 s each), 5 minutes of checking: 7.4, so 8
    assert TIMING.exercise_floor(cells, 7) == 8 and est.short == [(7, 2, 8)]
    assert not TIMING.fits_stated(est)
    assert TIMING.estimate(notebook, include_optional=True).prose > est.prose + 4 * 60
