"""Self-checks for the notebooks' exercises: ``check(lab, "01.schedules", my_answer)``.

An exercise is three cells. The learner's cell (tag ``exercise``) defines the answer with a
placeholder and ends with ``check(...)``, which prints one of::

    ✗ not answered yet: <what to fill in>
    ✗ not right yet: <what is wrong>
    ✓ correct: <why>

and never raises, so Run All goes on. The solution cell (tag ``solution``, collapsed) comes
*after* it, redefines the answer and ends with ``assert check(...)``: a ``Verdict`` is truthy
only when the answer passed.

A check is registered per notebook in ``exercises/exNN.py``::

    @exercise("01.schedules", answer="my_prediction",
              wrong=["my_prediction = {'ABBA': 1}"])
    def schedules(lab: Lab, answer: object) -> str:
        ...raise Wrong("...") if the answer is wrong; return "why it is right"

A placeholder anywhere in the answer (``None``, ``...``, or a function that raises
``NotImplementedError``) means "not answered yet". ``wrong`` lists source snippets that define
a wrong answer: ``tests/test_exercises.py`` proves, for every exercise, that the stub cell is
"not answered", each wrong snippet is "not right" and the solution cell is "correct".
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exercises.predict import predict, reveal
from helpers.backend.lab import Lab
from helpers.errors import RaceLabError

UNANSWERED, WRONG, CORRECT = "unanswered", "wrong", "correct"


class Wrong(RaceLabError):
    """Raised by a check: the answer is wrong, and the message says what is wrong."""


class NotAnswered(RaceLabError):
    """Raised by a check (or the learner's stub): there is no answer yet."""


@dataclass(frozen=True)
class Exercise:
    """One registered exercise: its name, the answer variable and known wrong answers."""

    name: str
    answer: str
    check: Callable[[Lab, Any], str]
    wrong: tuple[str, ...] = ()
    hint: str = ""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: status (unanswered, wrong, correct) and a message."""

    name: str
    status: str
    message: str
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        mark = (
            "✓ correct"
            if self
            else ("✗ not answered yet" if self.status == UNANSWERED else "✗ not right yet")
        )
        return f"{self.name}: {mark}: {self.message}"


EXERCISES: dict[str, Exercise] = {}


def exercise(
    name: str, answer: str, wrong: list[str] | tuple[str, ...] = (), hint: str = ""
) -> Callable[[Callable[[Lab, Any], str]], Callable[[Lab, Any], str]]:
    """Return a decorator that registers a check function under name."""

    def register(fn: Callable[[Lab, Any], str]) -> Callable[[Lab, Any], str]:
        if name in EXERCISES and EXERCISES[name].check is not fn:
            raise ValueError(f"exercise {name!r} is registered twice")
        EXERCISES[name] = Exercise(name, answer, fn, tuple(wrong), hint)
        return fn

    return register


def has_placeholder(answer: Any) -> bool:
    """Return True if answer is, or contains, None or ... (the stub's placeholders)."""
    if answer is None or answer is Ellipsis:
        return True
    if isinstance(answer, dict):
        return any(has_placeholder(k) or has_placeholder(v) for k, v in answer.items())
    if isinstance(answer, (list, tuple, set, frozenset)):
        return any(has_placeholder(item) for item in answer)
    return False


def load_all() -> dict[str, Exercise]:
    """Import every exercises.exNN and exercises.predict_NN module and return the registry."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith(("ex", "predict_")):
            importlib.import_module(f"{__name__}.{module.name}")
    return EXERCISES


def check(lab: Lab, name: str, answer: Any) -> Verdict:
    """Return the verdict on answer for the exercise called name (printed as one line)."""
    load_all()
    if name not in EXERCISES:
        raise KeyError(f"no exercise called {name!r}: known are {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    try:
        if has_placeholder(answer):  # inside the try: an answer that contains itself is wrong
            return Verdict(name, UNANSWERED, ex.hint or f"replace the None or ... in `{ex.answer}`")
        why = ex.check(lab, answer)
    except NotAnswered as exc:
        return Verdict(name, UNANSWERED, str(exc) or f"fill in `{ex.answer}`")
    except NotImplementedError as exc:
        return Verdict(name, UNANSWERED, str(exc) or f"write the body of `{ex.answer}`")
    except Wrong as exc:
        return Verdict(name, WRONG, str(exc), [str(exc)])
    except Exception as exc:  # the learner's code failed: that is the answer's fault, say how
        text = f"running your answer raised {type(exc).__name__}: {exc}"
        return Verdict(name, WRONG, text, [text])
    return Verdict(name, CORRECT, why)


__all__ = [
    "EXERCISES",
    "Exercise",
    "NotAnswered",
    "Verdict",
    "Wrong",
    "check",
    "exercise",
    "has_placeholder",
    "load_all",
    "predict",
    "reveal",
]
