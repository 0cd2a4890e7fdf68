"""Committed predictions: registration rules, the text a predict cell shows, and what reveal says.

The notebooks' own predictions (exercises/predict_NN.py) are checked too: each is well formed,
each notebook cell tagged ``predict`` names one, and every choice can be reached by some outcome
or carries the misconception a learner who picks it holds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from exercises import load_all
from exercises.predict import (
    CHOSEN,
    PREDICTIONS,
    Choice,
    PredictionError,
    display_order,
    predict,
    prediction,
    reveal,
)

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
)
PREDICT_CALL = re.compile(r'^predict\("([0-9]{2}\.\w+)"\)$')


@pytest.fixture
def two_clients():
    """Register a throwaway prediction and forget it (and any choice) afterwards."""
    p = prediction(
        "test.two_clients",
        "A and B each GET then INCR. How many are admitted?",
        {
            "one": Choice("1: one INCR", "check-at-write", "INCR checks nothing."),
            "two": Choice("2: two INCRs"),
            "zero": Choice(
                "0: no INCR", "conflict-detection", "Redis does not detect conflicting clients."
            ),
        },
        outcome=lambda admitted: {1: "one", 2: "two", 0: "zero"}[admitted],
    )
    yield p
    PREDICTIONS.pop(p.name, None)
    CHOSEN.pop(p.name, None)


def letter(p, text: str) -> str:
    """Return the letter under which prediction p shows the choice whose text starts with text."""
    return next(k for k, c in p.choices.items() if c.text.startswith(text))


def test_the_choices_are_shown_in_the_order_of_a_shuffle_seeded_by_the_name(two_clients) -> None:
    order = display_order("test.two_clients", ["one", "two", "zero"])
    assert sorted(order) == ["one", "two", "zero"]
    assert order == display_order("test.two_clients", ["one", "two", "zero"])  # fixed
    texts = {"one": "1: one INCR", "two": "2: two INCRs", "zero": "0: no INCR"}
    assert [c.text for c in two_clients.choices.values()] == [texts[i] for i in order]
    assert list(two_clients.choices) == ["a", "b", "c"]


def test_the_text_shows_the_question_and_every_choice(two_clients) -> None:
    text = repr(predict("test.two_clients"))
    shown = [f"  ({k}) {c.text}" for k, c in two_clients.choices.items()]
    assert text.splitlines()[:4] == [
        "Predict (test.two_clients): A and B each GET then INCR. How many are admitted?",
        *shown,
    ]
    bundle = predict("test.two_clients")._repr_mimebundle_()
    assert bundle["text/plain"] == text
    zero = letter(two_clients, "0:")
    assert f"<li><b>({zero})</b> 0: no INCR</li>" in bundle["text/html"]


def test_without_a_choice_reveal_gives_the_outcome_and_the_right_choice(two_clients) -> None:
    predict("test.two_clients")
    said = reveal("test.two_clients", 2)
    two = letter(two_clients, "2:")
    assert said.right == two and said.predicted is None
    assert repr(said).splitlines()[0] == f"Outcome: 2, so the answer is ({two}) 2: two INCRs."
    assert "no choice" in repr(said)


def test_a_wrong_choice_names_its_misconception_and_says_why(two_clients) -> None:
    predict("test.two_clients", letter(two_clients, "1:"))
    said = reveal("test.two_clients", 2)
    assert said.predicted is False
    assert 'the misconception "check-at-write"' in repr(said)
    assert "INCR checks nothing." in repr(said)


def test_a_right_choice_is_called_right_and_the_right_answer_follows_the_outcome(
    two_clients,
) -> None:
    predict("test.two_clients", f"({letter(two_clients, '2:').upper()})")
    assert reveal("test.two_clients", 2).predicted is True
    assert "right, you predicted it" in repr(reveal("test.two_clients", 2))
    assert reveal("test.two_clients", 1).predicted is False  # the answer is computed, not typed


def test_rerunning_the_predict_cell_keeps_the_choice(two_clients) -> None:
    wrong = letter(two_clients, "1:")
    predict("test.two_clients", wrong)
    again = predict("test.two_clients")  # Shift+Enter in the widget runs the cell again
    assert again.chosen == wrong and repr(again).endswith(f"committed: ({wrong})")
    assert reveal("test.two_clients", 2).chosen == wrong


def test_the_widget_commits_the_clicked_choice(two_clients) -> None:
    pytest.importorskip("ipywidgets")
    asked = predict("test.two_clients")
    _, radio, status = asked.widget().children
    assert status.value.startswith("not committed yet")
    radio.value = letter(two_clients, "0:")
    assert CHOSEN["test.two_clients"] == radio.value
    assert status.value == f"committed: ({radio.value})"
    assert reveal("test.two_clients", 0).predicted is True


def test_shift_enter_in_the_widget_keeps_the_choice_and_the_reveal_judges_the_last_one(
    two_clients,
) -> None:
    pytest.importorskip("ipywidgets")
    wrong, right = letter(two_clients, "1:"), letter(two_clients, "2:")
    _, radio, _ = predict("test.two_clients").widget().children
    radio.value = wrong
    radio.value = right  # the learner changes their mind: the last choice counts
    _, radio, status = predict("test.two_clients").widget().children  # the cell runs again
    assert radio.value == right and status.value == f"committed: ({right})"
    said = reveal("test.two_clients", 2)
    assert said.chosen == right and said.predicted is True


def test_bad_choices_and_unforeseen_outcomes_are_refused_in_one_line(two_clients) -> None:
    with pytest.raises(PredictionError, match="no choice 'z'; the choices are a, b, c"):
        predict("test.two_clients", "z")
    with pytest.raises(PredictionError, match="the outcome 7 matches none of the choices"):
        reveal("test.two_clients", 7)
    with pytest.raises(PredictionError, match="no prediction called 'test.nope'"):
        predict("test.nope")


@pytest.mark.parametrize(
    "choices, problem",
    [
        ({"x": Choice("x"), "y": Choice("y")}, "2 choices: give 3 or 4"),
        (
            {"x": Choice("x", "stale-read"), "y": Choice("y"), "z": Choice("z")},
            "without saying why",
        ),
        ({"x": Choice(""), "y": Choice("y"), "z": Choice("z")}, "needs a key and a text"),
        ({"a": Choice("x"), "y": Choice("y"), "z": Choice("z")}, "keyed by a letter"),
    ],
)
def test_a_malformed_prediction_is_refused(choices, problem) -> None:
    with pytest.raises(PredictionError, match=problem):
        prediction("test.bad", "?", choices, outcome=lambda v: "a")
    assert "test.bad" not in PREDICTIONS


def predict_cells(notebook: Path) -> list[str]:
    """Return the names of the predictions called by notebook's cells tagged predict."""
    cells = json.loads(notebook.read_text())["cells"]
    names = []
    for cell in cells:
        if "predict" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"]).strip()
            m = PREDICT_CALL.match(source)
            assert m, f'{notebook.name}: a predict cell is one call predict("NN.name"): {source!r}'
            names.append(m.group(1))
    return names


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_predict_cell_names_a_registered_prediction_that_a_later_cell_reveals(
    notebook: Path,
) -> None:
    load_all()
    cells = json.loads(notebook.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    for name in predict_cells(notebook):
        assert name in PREDICTIONS, f"{notebook.name}: predict({name!r}) is not registered"
        assert name.startswith(notebook.name[:2] + "."), f"{name} belongs to another notebook"
        asked = [i for i, s in enumerate(sources) if f'predict("{name}")' in s]
        revealed = [i for i, s in enumerate(sources) if f'reveal("{name}"' in s]
        assert revealed and min(revealed) > min(asked), f"{notebook.name}: {name} is never revealed"


def test_every_registered_prediction_is_asked_in_its_notebook() -> None:
    load_all()
    asked = {name for nb in NOTEBOOKS for name in predict_cells(nb)}
    registered = {name for name in PREDICTIONS if not name.startswith("test.")}
    assert registered <= asked, f"registered but asked nowhere: {sorted(registered - asked)}"


# --- choices that cannot be gamed (issue 38) ----------------------------------------------------

MAX_SHARE_OF_ONE_LETTER = 0.40
MAX_SHARE_SHORTEST = 1 / 3


def registered() -> dict:
    """Return the notebooks' registered predictions (not the tests' throwaway ones)."""
    load_all()
    return {n: p for n, p in PREDICTIONS.items() if not n.startswith("test.")}


def intended(p) -> str:
    """Return the letter of p's one choice that names no misconception: what the demo shows."""
    right = [k for k, c in p.choices.items() if not c.misconception]
    assert len(right) == 1, f"{p.name}: one choice names no misconception, not {right}"
    return right[0]


def test_no_letter_is_right_in_more_than_40_percent_of_the_predictions() -> None:
    predictions = registered()
    letters = Counter(intended(p) for p in predictions.values())
    letter, most = letters.most_common(1)[0]
    assert most <= MAX_SHARE_OF_ONE_LETTER * len(predictions), (
        f"({letter}) is right in {most} of {len(predictions)} predictions: {dict(letters)}"
    )


def test_the_right_choice_is_the_shortest_in_at_most_a_third_of_the_predictions() -> None:
    predictions = registered()
    shortest = [
        n
        for n, p in predictions.items()
        if len(p.choices[intended(p)].text) == min(len(c.text) for c in p.choices.values())
    ]
    assert len(shortest) <= MAX_SHARE_SHORTEST * len(predictions), (
        f"the right choice is the shortest in {len(shortest)} of {len(predictions)}: {shortest}"
    )


@pytest.mark.parametrize("name", sorted(registered()))
def test_every_choice_is_worded_alike_a_value_then_a_short_reason(name: str) -> None:
    texts = [c.text for c in PREDICTIONS[name].choices.values()]
    bare = [t for t in texts if ": " not in t]
    assert not bare, f"{name}: each choice is 'value: reason'; these are bare: {bare}"


# --- asked before answered (issue 38) -----------------------------------------------------------

OUTCOME = re.compile(r"Outcome: (.*?), so the answer is \((\w)\) (.*?)\.?$", re.M)
TOO_COMMON = {"True", "False", "None", "Yes", "No"}  # found everywhere, giving nothing away


def _shown(cell: dict) -> str:
    """Return what a learner reads of a cell before running on: prose, or a code cell's outputs."""
    if cell["cell_type"] == "markdown":
        return "".join(cell["source"])
    if cell["cell_type"] != "code":
        return ""
    return "\n".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for o in cell.get("outputs", [])
    )


def _answers(reveal_cell: dict) -> set[str]:
    """Return the texts that give a prediction's answer away: the value its reveal computed (as
    printed) and the right choice's value (before its reason), each if specific enough."""
    found = OUTCOME.search(_shown(reveal_cell))
    assert found, f"no Outcome line in the stored reveal: {''.join(reveal_cell['source'])!r}"
    value, _, choice = found.groups()
    answers = {value, choice.split(": ")[0]}
    return {a for a in answers if len(a) > 1 and a not in TOO_COMMON}


def giveaways(cells: list[dict]) -> list[str]:
    """Return, for each predict cell, each answer shown between the previous reveal and it."""
    after_reveal, problems = 0, []
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        found = PREDICT_CALL.match(source.strip()) if cell["cell_type"] == "code" else None
        if found and "predict" in cell["metadata"].get("tags", []):
            name = found.group(1)
            shown = next(
                j
                for j in range(i + 1, len(cells))
                if f'reveal("{name}"' in "".join(cells[j]["source"])
            )
            for answer in _answers(cells[shown]):
                pattern = re.compile(rf"(?<![\w.]){re.escape(answer)}(?![\w.])")
                problems += [
                    f"{name}: {answer!r} is shown in cell {k} before the question"
                    for k in range(after_reveal, i)
                    if pattern.search(_shown(cells[k]))
                ]
        if cell["cell_type"] == "code" and "reveal(" in source:
            after_reveal = i + 1
    return problems


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_nothing_before_a_predict_cell_gives_its_answer(notebook: Path) -> None:
    problems = giveaways(json.loads(notebook.read_text())["cells"])
    assert not problems, "\n".join(problems)


def test_an_answer_printed_or_said_before_its_question_is_found() -> None:
    def cell(kind: str, source: str, tags: tuple = (), out: str = "") -> dict:
        outputs = [{"output_type": "stream", "name": "stdout", "text": out}] if out else []
        return {"cell_type": kind, "source": source, "metadata": {"tags": list(tags)}} | (
            {"outputs": outputs} if kind == "code" else {}
        )

    reveal_out = "Outcome: 68, so the answer is (c) all but two: only where one finishes first."
    cells = [
        cell("markdown", "Two ids in all but two of the orders."),
        cell("code", "run()", out="68 of 70 schedules break"),
        cell("code", 'predict("03.every_order")', tags=("predict",)),
        cell("code", 'reveal("03.every_order", x)', out=reveal_out),
    ]
    assert sorted(giveaways(cells)) == [
        "03.every_order: '68' is shown in cell 1 before the question",
        "03.every_order: 'all but two' is shown in cell 0 before the question",
    ]
    assert giveaways(cells[2:]) == []
