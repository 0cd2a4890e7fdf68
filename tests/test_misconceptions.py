"""Every check rejects its misconception battery with a computed message, and hints progressively.

The battery (``tests/misconceptions.py``) runs in the namespace of each notebook's setup cell on
the embedded backend, exactly as a learner's cell would. A wrong answer must be "not right yet"
on the first try with a nudge that holds back the detail, and on the second try with a message
matching the case's ``says`` (a step, a reply or a count from the run). ``ACCEPTED`` answers,
written differently from the solution cells, must pass.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from misconceptions import ACCEPTED, CASES, Case
from test_exercises import (
    EXERCISE_CELLS,
    cells,
    embedded,  # noqa: F401 - the fixture, used by every test below
    run_cell,
    source,
    tags,
)

import exercises
from exercises import CORRECT, WRONG, check, hint, load_all

pytestmark = pytest.mark.usefixtures("embedded")
NOTEBOOK_OF = {name: path for path, name, _, _ in EXERCISE_CELLS}
BY_NAME: dict[str, list[Case]] = defaultdict(list)
for _case in CASES + ACCEPTED:
    BY_NAME[_case.name].append(_case)


@pytest.fixture
def fresh_tries() -> Iterator[None]:
    """Forget the kernel's count of wrong tries before and after a test."""
    exercises.WRONG_TRIES.clear()
    exercises.LAST_DETAIL.clear()
    yield
    exercises.WRONG_TRIES.clear()
    exercises.LAST_DETAIL.clear()


def setup_namespace(path: Path) -> dict:
    """Return the namespace after the notebook's setup cell ran."""
    namespace: dict = {"__name__": "__main__"}
    run_cell(next(source(c) for c in cells(path) if "setup" in tags(c)), namespace)
    return namespace


def answer_of(namespace: dict, name: str, snippet: str) -> object:
    """Run snippet in a copy of namespace and return the exercise's answer variable."""
    local = dict(namespace)
    run_cell(snippet, local)
    return local[load_all()[name].answer]


def test_every_check_has_a_battery_of_at_least_four_misconceptions() -> None:
    counts = {name: sum(c.name == name for c in CASES) for name in load_all()}
    assert counts and min(counts.values()) >= 4, counts
    assert sum(len(load_all()[n].wrong) for n in counts) + len(CASES) >= 100
    themes = " ".join(c.misconception for c in CASES)
    for theme in (
        "as text",
        "legitimate None",
        "truthy",
        "WATCH without retry",
        "valid but harmless",
        "off by one",
    ):
        assert theme in themes, theme
    assert len(ACCEPTED) >= 2


@pytest.mark.parametrize("name", sorted(BY_NAME), ids=sorted(BY_NAME))
def test_the_battery_is_rejected_with_computed_messages(fresh_tries: None, name: str) -> None:
    namespace = setup_namespace(NOTEBOOK_OF[name])
    lab = namespace["lab"]
    try:
        for case in BY_NAME[name]:
            answer = answer_of(namespace, name, case.snippet)
            first = check(lab, name, answer)
            if not case.says:  # an accepted answer
                assert first.status == CORRECT, f"{case.misconception}: {first!r}"
                continue
            assert first.status == WRONG, f"{case.misconception}: {first!r}"
            second = check(lab, name, answer)
            assert second.status == WRONG
            assert re.search(case.says, second.message), (
                f"{case.misconception}: {case.says!r} not in {second.message!r}"
            )
            assert "\n" not in repr(second)
            exercises.WRONG_TRIES.clear()
            exercises.LAST_DETAIL.clear()
    finally:
        lab.cleanup()
        lab.close()


def test_hints_progress_from_a_nudge_to_the_detail(fresh_tries: None) -> None:
    namespace = setup_namespace(NOTEBOOK_OF["06.killable"])
    lab = namespace["lab"]
    try:
        wrong = {"loops, never wrote": True, "wrote one key, then loops": True}
        assert "run the check" in hint("06.killable")  # nothing tried yet: the first hint
        first = check(lab, "06.killable", wrong)
        assert first.status == WRONG
        assert "from exercises import hint; hint('06.killable')" in first.message
        assert "could not stop" not in first.message  # the nudge does not give it away
        assert "could not stop" in hint("06.killable")  # hint() does, at once
        second = check(lab, "06.killable", dict(wrong))
        assert "could not stop" in second.message  # and so does the second wrong try
        other = check(lab, "06.partial_writes", {"pipeline of 16 SETs"})
        assert other.status == WRONG and "wrote" not in other.message  # counted per exercise
        assert exercises.WRONG_TRIES == {"06.killable": 2, "06.partial_writes": 1}
    finally:
        lab.cleanup()
        lab.close()


def test_only_the_ellipsis_means_not_answered(fresh_tries: None) -> None:
    namespace = setup_namespace(NOTEBOOK_OF["06.killable"])
    lab = namespace["lab"]
    try:
        unanswered = {"loops, never wrote": ..., "wrote one key, then loops": False}
        assert check(lab, "06.killable", unanswered).status == "unanswered"
        legit_none = {"loops, never wrote": None, "wrote one key, then loops": False}
        assert check(lab, "06.killable", legit_none).status == WRONG
    finally:
        lab.cleanup()
        lab.close()


# --- diagnoses computed from the run, and numbers of every type (issue 38) ----------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (12, 12),
        (12.0, 12),
        ("numpy.int64(12)", 12),
        ("numpy.float64(12.0)", 12),
        ("Decimal('12')", 12),
        ("Decimal('12.0')", 12),
        (12.5, None),
        ("Decimal('12.5')", None),
        (True, None),
        ("numpy.True_", None),
        (float("nan"), None),
        (float("inf"), None),
        ("'12'", None),
        (None, None),
    ],
)
def test_a_whole_number_of_any_numeric_type_counts(value: object, expected: int | None) -> None:
    from decimal import Decimal

    import numpy

    from exercises.judge import whole

    if isinstance(value, str):
        value = eval(value, {"numpy": numpy, "Decimal": Decimal})  # noqa: S307 - the table above
    assert whole(value) == expected


def test_a_fenced_write_that_is_already_one_step_is_told_to_look_at_what_the_step_does() -> None:
    from exercises.ex07 import _advice
    from helpers.instruments.schedule import Trace, TraceRow

    script = "EVAL <script> 2 {ex07}:report {ex07}:report_fence"
    rows = [
        TraceRow(1, "A", f"{script} 1 old", "1", "{ex07}:report=old"),
        TraceRow(2, "B", f"{script} 2 new", "1", "{ex07}:report=new"),
    ]
    said = _advice(Trace("AB", rows, {}), "{ex07}:report", "{ex07}:report_fence")
    assert said.startswith("each write already ran as one step (A's EVAL")
    assert "one script" not in said and "report=new" in said
    two_steps = rows[:1] + [TraceRow(3, "A", "SET {ex07}:report_fence 1", "'OK'", "")] + rows[1:]
    said = _advice(Trace("AAB", two_steps, {}), "{ex07}:report", "{ex07}:report_fence")
    assert said == "the comparison and the write must be one step (one script)"
