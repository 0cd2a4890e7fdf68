"""Self-checks for the notebooks' exercises: ``check(lab, "01.schedules", my_answer)``.

An exercise is three cells. The learner's cell (tag ``exercise``) defines the answer with the
placeholder ``...`` and ends with ``check(...)``, which prints one of::

    ✗ not answered yet: <what to fill in>
    ✗ not right yet: <what went wrong, computed from the run>
    ✓ correct: <why>
    ✗ the server did not answer (<error>): not your answer

and never raises, so Run All goes on. The solution cell (tag ``solution``, collapsed) comes
*after* it, redefines the answer and ends with ``assert check(...)``: a ``Verdict`` is truthy
only when the answer passed, falsy when it did not, and raises ``ServerDidNotAnswer`` when the
server failed, because then nobody knows (an ``assert`` says so instead of a bare failure).

A check is registered per notebook in ``exercises/exNN.py``::

    @exercise("01.schedules", answer="my_prediction",
              wrong=["my_prediction = {'ABBA': 1}"])
    def schedules(lab: Lab, answer: object) -> str:
        ...raise Wrong("nudge", detail="what gives it away"); return "why it is right"

Only ``...`` (anywhere in the answer) or a function that raises ``NotImplementedError`` means
"not answered yet": ``None`` is an answer like any other. Hints are progressive: the first wrong
try of an exercise prints the nudge (``Wrong``'s message); the second wrong try of the same
exercise in this kernel, or ``hint(name)``, adds the ``detail`` that gives the answer away.
``wrong`` lists source snippets that define a wrong answer: ``tests/test_exercises.py`` proves,
for every exercise, that the stub cell is "not answered", each wrong snippet is "not right" and
the solution cell is "correct"; ``tests/test_misconceptions.py`` runs a misconception battery.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from exercises.predict import predict, reveal
from helpers.backend.lab import Lab, ServerUnavailable, connect
from helpers.errors import RaceLabError
from helpers.instruments.deadline import TimeLimitReached, time_limit
from helpers.instruments.load import ConnectionLost

UNANSWERED, WRONG, CORRECT, FAULT, SLOW = "unanswered", "wrong", "correct", "fault", "slow"
TIME_LIMIT_S = 10.0  # a check stops the learner's code that runs longer: too slow, not wrong
# Error replies that mean "the server cannot serve now", whatever the command was.
_FAULT_REPLIES = ("BUSY ", "LOADING ", "OOM ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN ")
_FAULT_CLASSES = (
    redis.ConnectionError,  # refused, reset, BusyLoadingError; AuthenticationError too
    redis.TimeoutError,  # NoReply (helpers.backend.connection) derives from it
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ClusterDownError,  # MasterDownError too
    redis.exceptions.TryAgainError,
    ConnectionLost,  # a connection broke during a run of threaded clients
)
# The socket's own errors (refused, reset, timed out) when redis-py did not wrap them; not the
# suite's own timeouts (RunTimeout: the clients under test did not finish, which is theirs).
_SOCKET_FAULTS = (ConnectionError, TimeoutError)


class Wrong(RaceLabError):
    """Raised by a check: the answer is wrong; the message nudges, detail gives more away."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class NotAnswered(RaceLabError):
    """Raised by a check (or the learner's stub): there is no answer yet."""


class ServerDidNotAnswer(RaceLabError, RuntimeError):
    """Raised by ``bool(verdict)`` when the server failed during the check: no verdict exists."""


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
    """The outcome of one check: status (unanswered, wrong, correct, fault) and a message."""

    name: str
    status: str
    message: str
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        if self.status == FAULT:
            raise ServerDidNotAnswer(f"{self.name}: {self.message}")
        return self.status == CORRECT

    def __repr__(self) -> str:
        marks = {
            CORRECT: "✓ correct",
            UNANSWERED: "✗ not answered yet",
            WRONG: "✗ not right yet",
            FAULT: "✗ no verdict",
            SLOW: "✗ too slow",
        }
        return f"{self.name}: {marks[self.status]}: {self.message}"


EXERCISES: dict[str, Exercise] = {}
WRONG_TRIES: Counter[str] = Counter()  # wrong answers per exercise in this kernel
LAST_DETAIL: dict[str, str] = {}  # the detail of each exercise's last wrong answer


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
    """Return True if answer is, or contains, ... (the stub's placeholder); None is an answer."""
    if answer is Ellipsis:
        return True
    if isinstance(answer, dict):
        return any(has_placeholder(k) or has_placeholder(v) for k, v in answer.items())
    if isinstance(answer, (list, tuple, set, frozenset)):
        return any(has_placeholder(item) for item in answer)
    return False


def server_fault(exc: BaseException) -> BaseException | None:
    """Return the server failure behind exc (itself, its cause or context), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _FAULT_CLASSES):
            return current
        if isinstance(current, _SOCKET_FAULTS) and not isinstance(current, RaceLabError):
            return current
        if isinstance(current, redis.ResponseError) and str(current).startswith(_FAULT_REPLIES):
            return current
        current = current.__cause__ or current.__context__
    return None


def fault_in(values: Any) -> BaseException | None:
    """Return the first server failure among values (e.g. an actor's results), or None."""
    for value in values:
        if isinstance(value, BaseException) and server_fault(value) is not None:
            return value
    return None


def _server_answers(lab: Lab) -> BaseException | None:
    """Return the failure if the lab's server does not answer a PING now, else None."""
    try:
        client = lab.client()
        try:
            client.ping()
        finally:
            lab.release(client)
    except Exception as exc:  # noqa: BLE001 - classified: only a server failure is returned
        return server_fault(exc)
    return None


def _fault_verdict(name: str, exc: BaseException) -> Verdict:
    text = " ".join(str(exc).split())
    if isinstance(exc, ServerUnavailable):  # its advice is the verdict's own, said below
        text = text.partition("; ")[0]
    text = text[:200]
    message = (
        f"the server did not answer ({type(exc).__name__}: {text}): not your answer; "
        "run the cell again once the server is back (lab.describe() says where it is)"
    )
    return Verdict(name, FAULT, message, [message])


def load_all() -> dict[str, Exercise]:
    """Import every exercises.exNN and exercises.predict_NN module and return the registry."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith(("ex", "predict_")):
            importlib.import_module(f"{__name__}.{module.name}")
    return EXERCISES


def _wrong_verdict(name: str, exc: Wrong) -> Verdict:
    """Return the verdict on a wrong answer: the nudge, and the detail from the second try on."""
    WRONG_TRIES[name] += 1
    message = str(exc)
    if exc.detail:
        LAST_DETAIL[name] = exc.detail
        if WRONG_TRIES[name] >= 2:
            message = f"{message.rstrip('.')}{'' if message.endswith(('?', '!')) else '.'} "
            message += f"More: {exc.detail}"
        else:
            message += f" (stuck? try again, or: from exercises import hint; hint({name!r}))"
    return Verdict(name, WRONG, message, [str(exc)])


_EMBEDDED: dict[str, Lab] = {}  # a learner's checking labs, one per notebook, kept per kernel


def checking_lab(lab: Lab) -> Lab:
    """Return the lab a check runs the answer on: lab itself, or an embedded one for a learner.

    A learner's own ACL user on a shared server may call the suite's scripts but not EVAL text
    of their own (``python -m helpers acl --learners``), and an answer is often exactly that: so
    for a learner, every check runs on an embedded lab of the same notebook, in this kernel.
    """
    if lab is None or not lab.ns.learner:
        return lab
    if lab.ns.notebook not in _EMBEDDED:
        _EMBEDDED[lab.ns.notebook] = connect(lab.ns.notebook, backend="embedded")
    return _EMBEDDED[lab.ns.notebook]


def check(lab: Lab, name: str, answer: Any) -> Verdict:
    """Return the verdict on answer for the exercise called name (printed as one line)."""
    load_all()
    if name not in EXERCISES:
        raise KeyError(f"no exercise called {name!r}: known are {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    lab = checking_lab(lab)
    try:
        with time_limit(TIME_LIMIT_S):
            return _judge(lab, ex, answer)
    except TimeLimitReached:
        return _slow_verdict(ex)


def _slow_verdict(ex: Exercise) -> Verdict:
    """Return the verdict on an answer stopped at the time limit: too slow, not wrong."""
    message = (
        f"your `{ex.answer}` ran past {TIME_LIMIT_S:g} s and was stopped: that is too slow, not "
        "wrong (does it sleep, wait for something, or loop without end?)"
    )
    return Verdict(ex.name, SLOW, message, [message])


def _judge(lab: Lab, ex: Exercise, answer: Any) -> Verdict:
    """Return the verdict of ex's check on answer (check() without its time limit)."""
    name = ex.name
    try:
        if has_placeholder(answer):  # inside the try: an answer that contains itself is wrong
            return Verdict(name, UNANSWERED, ex.hint or f"replace the ... in `{ex.answer}`")
        why = ex.check(lab, answer)
    except NotAnswered as exc:
        return Verdict(name, UNANSWERED, str(exc) or f"fill in `{ex.answer}`")
    except NotImplementedError as exc:
        return Verdict(name, UNANSWERED, str(exc) or f"write the body of `{ex.answer}`")
    except Wrong as exc:
        down = _server_answers(lab) if lab is not None else None
        return _fault_verdict(name, down) if down else _wrong_verdict(name, exc)
    except Exception as exc:  # the learner's code failed, or the server did: say which
        fault = server_fault(exc) or (_server_answers(lab) if lab is not None else None)
        if fault is not None:
            return _fault_verdict(name, fault)
        text = f"running your answer raised {type(exc).__name__}: {' '.join(str(exc).split())}"
        return Verdict(name, WRONG, text, [text])
    return Verdict(name, CORRECT, why)


class Hint(str):
    """A hint's text; shows without quotes in a notebook."""

    def __repr__(self) -> str:
        return str(self)


def hint(name: str) -> Hint:
    """Return the detail of name's last wrong answer (the exercise's first hint before that)."""
    load_all()
    if name not in EXERCISES:
        raise KeyError(f"no exercise called {name!r}: known are {sorted(EXERCISES)}")
    if name in LAST_DETAIL:
        return Hint(f"{name}: {LAST_DETAIL[name]}")
    ex = EXERCISES[name]
    return Hint(f"{name}: {ex.hint or f'fill in `{ex.answer}`'}; run the check for more")


__all__ = [
    "CORRECT",
    "EXERCISES",
    "FAULT",
    "SLOW",
    "TIME_LIMIT_S",
    "UNANSWERED",
    "WRONG",
    "Exercise",
    "Hint",
    "NotAnswered",
    "ServerDidNotAnswer",
    "Verdict",
    "Wrong",
    "check",
    "checking_lab",
    "exercise",
    "fault_in",
    "has_placeholder",
    "hint",
    "load_all",
    "predict",
    "reveal",
    "server_fault",
]
