"""What the checks share: reading a learner's values, and saying what a failing trace did.

A diagnosis is computed from the run it describes: the step numbers, clients, commands and
replies come from the ``Trace`` of the failing schedule, never from a sentence typed in advance.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from typing import Any

from exercises import Wrong, fault_in
from helpers.instruments.schedule import Trace, TraceRow

SHORT = 48  # characters of a command kept in a diagnosis


def _is_bool(value: Any) -> bool:
    """Return True for True/False and numpy's booleans (numpy.True_)."""
    kind = type(value)
    return isinstance(value, bool) or (
        kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")
    )


def whole(value: Any) -> int | None:
    """Return value as an int if it is a whole number of any numeric type, else None.

    12, 12.0, numpy.int64(12), numpy.float64(12.0) and Decimal("12") are all 12; True, 12.5,
    "12" and None are not whole numbers.
    """
    if _is_bool(value):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (numbers.Real, Decimal)):
        try:
            number = int(math.floor(value))
        except (ValueError, OverflowError, ArithmeticError):  # nan, inf
            return None
        return number if number == value else None
    return None


def as_bool(value: Any, what: str) -> bool:
    """Return value as a bool (True/False, or 1/0 of any numeric type); else raise Wrong."""
    if _is_bool(value):
        return bool(value)
    if whole(value) in (0, 1):
        return bool(value)
    raise Wrong(f"{what} is {value!r}: answer True or False")


def as_count(value: Any, what: str) -> int:
    """Return value as a whole number (12, 12.0, numpy's or Decimal's 12); else raise Wrong."""
    if isinstance(value, bool):
        raise Wrong(f"{what} is {value!r}: give a number, not True/False")
    number = whole(value)
    if number is not None:
        return number
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        raise Wrong(f"{what} is the string {value!r}: write the number {value.strip()}, no quotes")
    raise Wrong(f"{what} is {value!r}: give a whole number")


def as_names(value: Any, what: str, example: str) -> set[Any]:
    """Return a set, list or tuple of names as a set; raise Wrong for a bare string or a scalar."""
    if isinstance(value, str):
        raise Wrong(f"{what} is the string {value!r}: give a set of names, e.g. {{{value!r}}}")
    if not isinstance(value, (set, frozenset, list, tuple)):
        raise Wrong(f"{what} should be a set such as {example}, not {value!r}")
    try:
        return set(value)
    except TypeError:
        raise Wrong(f"{what} should hold names (strings), not {value!r}") from None


def short(command: str) -> str:
    """Return a command's text cut to SHORT characters."""
    return command if len(command) <= SHORT else command[: SHORT - 3] + "..."


def row_text(row: TraceRow) -> str:
    """Return one step as "A's DEL lock at step 5 (reply 1)"."""
    return f"{row.client}'s {short(row.command)} at step {row.step} (reply {row.reply})"


def writes(trace: Trace) -> list[TraceRow]:
    """Return the steps that changed the watched keys."""
    before, changed = trace.initial_state, []
    for row in trace.rows:
        if row.state != before:
            changed.append(row)
        before = row.state
    return changed


def aborted_exec(trace: Trace) -> str | None:
    """Return "B's EXEC at step 8 was aborted by A's write at step 5 (...)", or None."""
    for row in trace.rows:
        if "EXEC" not in row.command or row.reply not in ("nil", "None"):
            continue
        watched = [r.step for r in trace.rows if r.client == row.client and r.step < row.step]
        watched_at = next(
            (r.step for r in trace.rows if r.client == row.client and "WATCH" in r.command), 0
        )
        by = [r for r in writes(trace) if r.client != row.client and watched_at < r.step < row.step]
        if by and watched:
            w = by[-1]
            return (
                f"{row.client}'s EXEC at step {row.step} was aborted by {w.client}'s write at "
                f"step {w.step} ({short(w.command)}), after {row.client}'s WATCH at step "
                f"{watched_at}, and {row.client} gave up instead of trying again"
            )
    return None


def raise_if_fault(results: Any) -> None:
    """Re-raise a server failure found among an actor's results (an explorer records them)."""
    found = fault_in(results)
    if found is not None:
        raise found


def story(trace: Trace) -> str:
    """Return the steps that changed the keys, in order, each with its reply."""
    changed = writes(trace)
    if not changed:
        return f"in {trace.schedule} no step changed the keys"
    return f"in {trace.schedule}: " + "; ".join(row_text(r) for r in changed)
