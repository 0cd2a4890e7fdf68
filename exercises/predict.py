"""Committed predictions: the learner picks a choice before a demo, the demo's outcome grades it.

A prediction is two cells. Before the demo, a cell tagged ``predict`` asks the question::

    predict("01.two_clients")

In JupyterLab that shows the question with one radio button per choice. Where widgets cannot
render (nbval, the handouts, the site) the same cell shows the question and the choices as text,
and a learner commits in code instead: ``predict("01.two_clients", "b")``. Under the radio
buttons the widget says "committed: (b)". Running the predict cell again without a choice (as
Shift+Enter does while the focus is still in the widget) keeps the committed choice, and the
reveal judges the last choice committed.

The demo cell computes the outcome and ends with::

    reveal("01.two_clients", admitted)

which maps the observed value to the right choice (the registered ``outcome`` function; the right
answer is computed from what happened, never typed) and says whether the learner's choice was
right or, if not, which misconception it reflects. With no choice made (nbval), it prints the
outcome and the right choice only, so the stored output is the same on every run.

Each notebook registers its predictions in ``exercises/predict_NN.py``::

    prediction(
        "01.two_clients",
        "A and B each GET, compare with the limit, then INCR. How many are admitted?",
        {
            "one": Choice("1: the second INCR is refused", "check-at-write", "INCR checks ..."),
            "two": Choice("2: both read 4, so both find room"),
            "zero": Choice("0: the conflict makes both fail", "conflict-detection", "Redis ..."),
        },
        outcome=lambda admitted: {1: "one", 2: "two", 0: "zero"}[admitted],
    )

Every choice that the outcome may not map to names its misconception and explains it: a wrong
choice is never met with silence. Exactly one choice names none: the one the demo is built to
show.

**The letters follow a stated rule, not the author.** A registration names its choices by what
they say ("two", "zero"); the learner sees them as (a), (b), (c), (d) in the order of a fixed
shuffle seeded by the prediction's name (``display_order``), so the right letter is spread over
the predictions and a given prediction shows the same letters on every run. Every choice is
written the same way, a value then a short reason ("2: both read 4, ..."), so the right one is
not recognisable as the short bare one. ``tests/test_predict.py`` fails when one letter is right
in more than 40% of the registered predictions, or the right choice is the shortest in more than
a third.
"""

from __future__ import annotations

import html
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from racelab_errors import RaceLabError

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LETTERS = "abcd"


class PredictionError(RaceLabError):
    """A prediction is badly registered, unknown, or given a choice or outcome it does not have."""


@dataclass(frozen=True)
class Choice:
    """One answer a learner can pick: its text, and the misconception picking it wrongly shows."""

    text: str
    misconception: str = ""
    why: str = ""


@dataclass(frozen=True)
class Prediction:
    """One registered question: its choices, and the function from the outcome to the right one."""

    name: str
    question: str
    choices: dict[str, Choice]
    outcome: Callable[[Any], str]

    def text(self) -> str:
        """Return the question and its choices as plain text (what nbval and handouts show)."""
        lines = [f"Predict ({self.name}): {self.question}"]
        lines += [f"  ({key}) {choice.text}" for key, choice in self.choices.items()]
        lines.append(f'Choose one above, or commit in code: predict("{self.name}", "<letter>")')
        return "\n".join(lines)

    def html(self) -> str:
        """Return the question and its choices as an HTML list."""
        items = "".join(
            f"<li><b>({html.escape(k)})</b> {html.escape(c.text)}</li>"
            for k, c in self.choices.items()
        )
        return (
            f'<div class="racelab-predict"><p><b>Predict</b> ({html.escape(self.name)}): '
            f"{html.escape(self.question)}</p><ul>{items}</ul></div>"
        )


PREDICTIONS: dict[str, Prediction] = {}
CHOSEN: dict[str, str] = {}  # this kernel's committed choices, by prediction name


def display_order(name: str, ids: list[str]) -> list[str]:
    """Return the choice ids in the order the learner sees them, as (a), (b), ...

    The rule: ``random.Random(name).shuffle`` of the ids in registration order. Seeding with the
    name (a string seed is hashed the same way on every Python 3) fixes each prediction's letters
    across runs and machines, and spreads the right choice over the letters.
    """
    order = list(ids)
    random.Random(name).shuffle(order)
    return order


def prediction(
    name: str, question: str, choices: dict[str, Choice], outcome: Callable[[Any], str]
) -> Prediction:
    """Register and return a prediction; refuse one that is malformed or registered twice.

    choices are keyed by ids that say what the choice is ("two", "all"), and outcome maps the demo's
    value to one of those ids; the registered prediction keys them by letter, in display_order.
    """
    if not 3 <= len(choices) <= 4:
        raise PredictionError(f"prediction {name!r} has {len(choices)} choices: give 3 or 4")
    for key, choice in choices.items():
        if not (key and choice.text):
            raise PredictionError(f"prediction {name!r}: choice {key!r} needs a key and a text")
        if key in LETTERS:
            raise PredictionError(
                f"prediction {name!r}: choice {key!r} is keyed by a letter; name it by what it "
                "says (e.g. 'two'): the letters come from display_order"
            )
        if bool(choice.misconception) != bool(choice.why):
            raise PredictionError(
                f"prediction {name!r}: choice {key!r} names a misconception without saying why "
                "(or says why without a name): give both"
            )
    letter = {key: LETTERS[i] for i, key in enumerate(display_order(name, list(choices)))}
    shown = {letter[key]: choices[key] for key in sorted(choices, key=letter.__getitem__)}

    def right_letter(value: Any) -> str:
        key = outcome(value)
        return letter.get(key, key)

    new = Prediction(name, question, shown, right_letter)
    old = PREDICTIONS.get(name)
    if old is not None and (old.question, old.choices) != (new.question, new.choices):
        raise PredictionError(f"prediction {name!r} is registered twice")
    PREDICTIONS[name] = new
    return new


def _find(name: str) -> Prediction:
    """Return the registered prediction called name, importing every notebook's registrations."""
    from exercises import load_all

    load_all()
    if name not in PREDICTIONS:
        raise PredictionError(f"no prediction called {name!r}: known are {sorted(PREDICTIONS)}")
    return PREDICTIONS[name]


@dataclass
class Asked:
    """What a ``predict`` cell shows: the widget in JupyterLab, the text everywhere else."""

    prediction: Prediction
    chosen: str | None = None
    _view: Any = field(default=None, repr=False)

    def __repr__(self) -> str:
        text = self.prediction.text()
        if self.chosen is not None:
            text += f"\n{committed_text(self.chosen)}"
        return text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """Return the radio widget (when ipywidgets is installed) with the text and HTML beside it."""
        bundle: dict[str, Any] = {"text/plain": repr(self), "text/html": self.prediction.html()}
        try:
            view = self.widget()
        except ImportError:  # no ipywidgets: the text alone
            return bundle
        widget_view = view._repr_mimebundle_() or {}
        if WIDGET_VIEW in widget_view:
            bundle[WIDGET_VIEW] = widget_view[WIDGET_VIEW]
        return bundle

    def widget(self) -> Any:
        """Return the ipywidgets box: the question, one radio button per choice, what is committed.

        The radio starts at the choice already committed (re-running the cell, as Shift+Enter in
        the widget does, keeps it), and the line below it says "committed: (b)".
        """
        if self._view is None:
            # imported only when a widget is asked for; ipywidgets ships no type information
            import ipywidgets as w  # type: ignore[import-untyped]

            p = self.prediction
            radio = w.RadioButtons(
                options=[(f"({k}) {c.text}", k) for k, c in p.choices.items()],
                value=self.chosen,
                layout=w.Layout(width="auto"),
            )
            radio.add_class("racelab-predict-choices")
            status = w.HTML(committed_text(self.chosen))
            status.add_class("racelab-predict-committed")

            def commit(change: dict[str, Any]) -> None:
                if change["new"] is not None:
                    CHOSEN[p.name] = change["new"]
                    self.chosen = change["new"]
                    status.value = committed_text(self.chosen)

            radio.observe(commit, names="value")
            self._view = w.VBox(
                [w.HTML(f"<b>Predict:</b> {html.escape(p.question)}"), radio, status]
            )
        return self._view


def committed_text(chosen: str | None) -> str:
    """Return what the widget says under the choices: "committed: (b)", or that none is yet."""
    if chosen is None:
        return "not committed yet: choose one, then run the next cell"
    return f"committed: ({chosen})"


def predict(name: str, choice: str | None = None) -> Asked:
    """Return the question called name for display; with choice, commit to it first."""
    p = _find(name)
    if choice is not None:
        key = str(choice).strip().strip("()").lower()
        if key not in p.choices:
            raise PredictionError(
                f"{name}: there is no choice {choice!r}; the choices are {', '.join(p.choices)}"
            )
        CHOSEN[name] = key
    # without a choice, re-running the cell (Shift+Enter in the widget does) keeps the last one
    return Asked(p, CHOSEN.get(name))


@dataclass(frozen=True)
class Reveal:
    """The outcome of one prediction: the right choice, the learner's, and what a miss means."""

    name: str
    value: Any
    right: str
    chosen: str | None
    text: str

    @property
    def predicted(self) -> bool | None:
        """Return True or False once the learner committed, None if they made no choice."""
        return None if self.chosen is None else self.chosen == self.right

    def __repr__(self) -> str:
        return self.text


def reveal(name: str, value: Any) -> Reveal:
    """Return what the outcome value says about the prediction called name, in words."""
    p = _find(name)
    try:
        right = p.outcome(value)
    except Exception as exc:  # the demo produced a value the question did not foresee
        raise PredictionError(
            f"{name}: the outcome {value!r} matches none of the choices ({exc!r})"
        ) from exc
    if right not in p.choices:
        raise PredictionError(f"{name}: the outcome {value!r} maps to unknown choice {right!r}")
    chosen = CHOSEN.get(name)
    lines = [f"Outcome: {value!r}, so the answer is ({right}) {p.choices[right].text}."]
    if chosen is None:
        lines.append(f'You made no choice: next time commit first, e.g. predict("{name}", "a").')
    elif chosen == right:
        lines.append(f"You chose ({chosen}): right, you predicted it.")
    else:
        miss = p.choices[chosen]
        name_part = f'the misconception "{miss.misconception}"' if miss.misconception else "a miss"
        lines.append(f"You chose ({chosen}) {miss.text}: that reflects {name_part}.")
        if miss.why:
            lines.append(miss.why)
    return Reveal(name, value, right, chosen, "\n".join(lines))


__all__ = [
    "CHOSEN",
    "PREDICTIONS",
    "Asked",
    "Choice",
    "Prediction",
    "PredictionError",
    "Reveal",
    "committed_text",
    "display_order",
    "predict",
    "prediction",
    "reveal",
]
