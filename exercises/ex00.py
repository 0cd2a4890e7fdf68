"""Notebook 00's exercise: predict what the counter holds after the schedule AABB."""

from __future__ import annotations

from functools import partial

from exercises import Wrong, exercise
from helpers.backend.lab import Lab
from helpers.instruments.schedule import run_schedule
from races.ratelimit import lost_update_increment

START = 10


def counter_after(lab: Lab, schedule: str) -> int:
    """Return the counter after two GET-then-SET visits, started at 10, run in schedule."""
    key = lab.key("ex00_visits")
    visit = partial(lost_update_increment, key=key)
    try:
        trace = run_schedule(
            lab, {"A": visit, "B": visit}, schedule, setup=lambda c: c.set(key, START), watch=[key]
        )
    finally:
        client = lab.client()
        client.delete(key)
        lab.release(client)
    return int(trace.final_state.removeprefix("ex00_visits="))


@exercise(
    "00.aabb",
    answer="predicted",
    wrong=["predicted = 11", "predicted = 10", "predicted = '12 visits'"],
    hint="set `predicted` to the number you expect the counter to hold",
)
def aabb(lab: Lab, answer: object) -> str:
    """Run AABB on fresh keys and compare the counter with the prediction."""
    if not isinstance(answer, int) or isinstance(answer, bool):
        raise Wrong(f"`predicted` should be a whole number of visits, not {answer!r}")
    actual = counter_after(lab, "AABB")
    if answer != actual:
        raise Wrong(
            f"you predicted {answer}; the schedule ran and the counter holds {actual}. "
            "Who read what, and when?"
        )
    return (
        f"the counter holds {actual}: each client read after the other's write, "
        "so no visit was lost"
    )
