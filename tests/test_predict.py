"""Committed predictions: registration rules, the text a predict cell shows, and what reveal says.

The notebooks' own predictions (exercises/predict_NN.py) are checked too: each is well formed,
each notebook cell tagged ``predict`` names one, and every choice can be reached by some outcome
or carries the misconception a learner who picks it holds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from exercises import load_all
from exercises.predict import (
    CHOSEN,
    PREDICTIONS,
    Choice,
    PredictionError,
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
            "a": Choice("1", "check-at-write", "INCR checks nothing."),
            "b": Choice("2"),
            "c": Choice("0", "conflict-detection", "Redis does not detect conflicting clients."),
        },
        outcome=lambda admitted: {1: "a", 2: "b", 0: "c"}[admitted],
    )
    yield p
    PREDICTIONS.pop(p.name, None)
    CHOSEN.pop(p.name, None)


def test_the_text_shows_the_question_and_every_choice(two_clients) -> None:
    text = repr(predict("test.two_clients"))
    assert text.splitlines()[:4] == [
        "Predict (test.two_clients): A and B each GET then INCR. How many are admitted?",
        "  (a) 1",
        "  (b) 2",
        "  (c) 0",
    ]
    bundle = predict("test.two_clients")._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert "<li><b>(c)</b> 0</li>" in bundle["text/html"]


def test_without_a_choice_reveal_gives_the_outcome_and_the_right_choice(two_clients) -> None:
    predict("test.two_clients")
    said = reveal("test.two_clients", 2)
    assert said.right == "b" and said.predicted is None
    assert repr(said).splitlines()[0] == "Outcome: 2, so the answer is (b) 2."
    assert "no choice" in repr(said)


def test_a_wrong_choice_names_its_misconception_and_says_why(two_clients) -> None:
    predict("test.two_clients", "a")
    said = reveal("test.two_clients", 2)
    assert said.predicted is False
    assert 'the misconception "check-at-write"' in repr(said)
    assert "INCR checks nothing." in repr(said)


def test_a_right_choice_is_called_right_and_the_right_answer_follows_the_outcome(
    two_clients,
) -> None:
    predict("test.two_clients", "(B)")
    assert reveal("test.two_clients", 2).predicted is True
    assert "right, you predicted it" in repr(reveal("test.two_clients", 2))
    assert reveal("test.two_clients", 1).predicted is False  # the answer is computed, not typed


def test_rerunning_the_predict_cell_forgets_the_old_choice(two_clients) -> None:
    predict("test.two_clients", "a")
    assert predict("test.two_clients").chosen is None
    assert reveal("test.two_clients", 2).chosen is None


def test_the_widget_commits_the_clicked_choice(two_clients) -> None:
    pytest.importorskip("ipywidgets")
    asked = predict("test.two_clients")
    radio = asked.widget().children[1]
    radio.value = "c"
    assert CHOSEN["test.two_clients"] == "c"
    assert reveal("test.two_clients", 0).predicted is True


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
        ({"a": Choice("x"), "b": Choice("y")}, "2 choices: give 3 or 4"),
        (
            {"a": Choice("x", "stale-read"), "b": Choice("y"), "c": Choice("z")},
            "without saying why",
        ),
        ({"a": Choice(""), "b": Choice("y"), "c": Choice("z")}, "needs a key and a text"),
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
