"""Named invariants: what must hold after a race, said in one sentence, and how to check it.

In the spirit of Knossos's models, an invariant is an object with a name, a sentence a learner
reads ("at most one request is admitted") and a check ``(client, results) -> bool``, called with
a client of the race's server (to read the keys) and ``{actor: what it returned}`` for the actors
that have finished. The stepper, the explorer and the exercise checks print the sentence::

    at_most_one = Invariant(
        "at most one admitted",
        "at most one request is admitted",
        lambda client, results: list(results.values()).count(True) <= 1,
    )

A plain function works too (``Invariant.of(fn)``): its name, and its docstring's first line as
the sentence. An invariant that only makes sense once every actor has finished ("the counter is
2") takes ``final=True``; the stepper then judges it at the end only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helpers.errors import RaceLabError

Check = Callable[[Any, dict[str, Any]], bool]


class InvariantDefinitionError(RaceLabError, TypeError):
    """An invariant was given without a check, a sentence, or a check that returns a bool."""


def _as_clause(line: str) -> str:
    """Return a docstring's first line as a clause: 'If B ...' -> 'if B ...' (not 'ID ...')."""
    word = line.split(" ", 1)[0]
    return line[0].lower() + line[1:] if len(word) > 1 and word[1:].islower() else line


@dataclass(frozen=True)
class Invariant:
    """What must hold after a race: a short name, the sentence that says it, and its check."""

    name: str
    says: str
    check: Check
    final: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvariantDefinitionError("an invariant needs a name (a non-empty string)")
        if not isinstance(self.says, str) or not self.says.strip():
            raise InvariantDefinitionError(
                f"invariant {self.name!r} needs a sentence that says what must hold"
            )
        if not callable(self.check):
            raise InvariantDefinitionError(
                f"invariant {self.name!r}: check must be a function (client, results) -> bool"
            )

    @classmethod
    def of(cls, check: Invariant | Check, says: str | None = None) -> Invariant:
        """Return check as an Invariant: its name, and says or its docstring's first line."""
        if isinstance(check, Invariant):
            return check
        if not callable(check):
            raise InvariantDefinitionError(
                f"an invariant must be a function (client, results) -> bool, got {check!r}"
            )
        doc = (getattr(check, "__doc__", None) or "").strip()
        if doc and doc == (type(check).__doc__ or "").strip():  # a partial's or a class's doc
            doc = ""
        sentence = says or (_as_clause(doc.splitlines()[0].rstrip(".")) if doc else "")
        name = getattr(check, "__name__", "") or ""
        if name in ("", "<lambda>"):
            name = sentence
        if not sentence:
            raise InvariantDefinitionError(
                f"invariant {name or check!r} does not say what must hold: give it a docstring, "
                f"or write Invariant(name, sentence, check)"
            )
        return cls(name.replace("_", " "), sentence, check)

    def __call__(self, client: Any, results: dict[str, Any]) -> bool:
        """Return the check's verdict on the keys and results as they are now."""
        ok = self.check(client, results)
        if not isinstance(ok, bool):
            raise InvariantDefinitionError(
                f"invariant {self.name!r} must return True or False, got {ok!r}"
            )
        return ok

    def __str__(self) -> str:
        return self.says
