"""Notebook 05's exercise: which replies of reserve_seats may a caller retry as they are?

The check runs lua/reserve_seats.lua on keys of its own under the lab's prefix (one {hash tag},
so a cluster keeps them on one node), once per outcome, then retries the same request. A reply
is worth retrying when the first attempt left the caller not knowing the outcome (its reply was
lost: the timeout is simulated by discarding the reply of a call that ran) and the retry wrote
nothing new (no second reservation). Every other reply is a final answer: the retry repeats it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from exercises import Wrong, exercise
from exercises.judge import as_names
from helpers.backend.lab import Lab

CANDIDATES = (
    "RESERVED",
    "ALREADY_BOOKED",
    "SOLD_OUT",
    "NOT_ON_SALE",
    "WRONGTYPE",
    "invalid-booking-id",
    "TimeoutError",
)


@dataclass(frozen=True)
class Attempt:
    """One outcome: what the caller saw first, what the retry answered, and what it wrote."""

    first: str  # the reply text, or "(reply lost)"
    retry: str
    wrote_again: bool  # the retry changed the stored seats or bookings


def _text(call: Any) -> str:
    try:
        return str(call())
    except redis.ResponseError as exc:
        return str(exc).split(" script:")[0]


def _state(c: Any, left: str, booked: str) -> tuple[Any, Any]:
    kind = c.type(booked)
    return c.get(left), (c.hgetall(booked) if kind == "hash" else c.get(booked))


def attempts(lab: Lab) -> dict[str, Attempt]:
    """Return, for each candidate outcome, the first reply, the retry's reply and whether it wrote."""
    c = lab.client()
    left, booked = lab.ns.tagged("ex05", "seats_left"), lab.ns.tagged("ex05", "bookings")
    reserve = lab.script("reserve_seats", c)
    setups = {  # outcome -> (seats left, bookings is foreign data, booking id, earlier booking)
        "RESERVED": (3, False, "ann", False),
        "ALREADY_BOOKED": (3, False, "ann", True),
        "SOLD_OUT": (0, False, "ann", False),
        "NOT_ON_SALE": (None, False, "ann", False),
        "WRONGTYPE": (3, True, "ann", False),
        "invalid-booking-id": (3, False, "ann!", False),
        "TimeoutError": (3, False, "ann", False),
    }
    found = {}
    try:
        for outcome, (seats, foreign, who, earlier) in setups.items():
            c.delete(left, booked)
            if seats is not None:
                c.set(left, seats)
            if foreign:
                c.set(booked, "not a hash")
            request = lambda w=who: reserve(keys=[left, booked], args=[w, 2])  # noqa: E731
            if earlier:
                request()
            first = _text(request)
            if outcome == "TimeoutError":
                first = "(reply lost)"  # the script ran; the caller never saw its reply
            before = _state(c, left, booked)
            retry = _text(request)
            found[outcome] = Attempt(first, retry, _state(c, left, booked) != before)
    finally:
        c.delete(left, booked)
        lab.release(c)
    return found


@exercise(
    "05.retryable",
    answer="retry_as_is",
    wrong=[
        "retry_as_is = {'TimeoutError', 'SOLD_OUT'}",
        "retry_as_is = set()",
        "retry_as_is = {'RESERVED', 'TimeoutError'}",
        "retry_as_is = {'sold out'}",
        "retry_as_is = 'TimeoutError'",
        "retry_as_is = None",
    ],
    hint="set `retry_as_is` to a set of names from the list in the comment",
)
def retryable(lab: Lab, answer: object) -> str:
    """Run every outcome and its retry; compare the learner's set with the replies worth retrying."""
    chosen = as_names(answer, "`retry_as_is`", "{'RESERVED'}")
    unknown = sorted(str(a) for a in chosen if a not in CANDIDATES)
    if unknown:
        raise Wrong(f"{unknown} not in the list: use the names {list(CANDIDATES)}")
    runs = attempts(lab)
    truth = {o for o, a in runs.items() if a.first == "(reply lost)" and not a.wrote_again}
    for outcome in sorted(chosen - truth):
        a = runs[outcome]
        raise Wrong(
            f"{outcome}: the caller already has an answer ({a.first}); what would a retry "
            "tell it that it does not know?",
            detail=f"the retry of {outcome} answered {a.retry}: a final answer repeats",
        )
    for outcome in sorted(truth - chosen):
        a = runs[outcome]
        raise Wrong(
            f"one of the outcomes leaves the caller not knowing whether the seats were taken "
            f"(your set has {len(chosen)} name(s))",
            detail=f"after a {outcome} the retry with the same booking id answered {a.retry} "
            "and took no second seat: retrying is safe, and the only way to learn the outcome",
        )
    a = runs["TimeoutError"]
    return (
        f"only an unknown outcome is worth retrying: after a lost reply the retry answered "
        f"{a.retry} and wrote nothing new; every other reply repeats"
    )
