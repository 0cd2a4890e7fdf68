"""Notebook 00's exercise: predict what the counter holds after the schedule AABB."""

from __future__ import annotations

from functools import partial

from exercises import Wrong, exercise
from exercises.judge import as_count
from helpers.backend.lab import Lab
from helpers.instruments.schedule import Trace, run_schedule
from races.ratelimit import lost_update_increment

START = 10


def run_visits(lab: Lab, schedule: str) -> Trace:
    """Return the trace of two GET-then-SET visits, started at 10, run in schedule."""
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
    return trace


def counter_after(lab: Lab, schedule: str) -> int:
    """Return the counter after two GET-then-SET visits, started at 10, run in schedule."""
    return int(run_visits(lab, schedule).final_state.removeprefix("ex00_visits="))


@exercise(
    "00.aabb",
    answer="predicted",
    wrong=["predicted = 11", "predicted = 10", "predicted = '12 visits'", "predicted = None"],
    hint="set `predicted` to the number you expect the counter to hold",
)
def aabb(lab: Lab, answer: object) -> str:
    """Run AABB on fresh keys and compare the counter with the prediction."""
    predicted = as_count(answer, "`predicted`")
    trace = run_visits(lab, "AABB")
    actual = int(trace.final_state.removeprefix("ex00_visits="))
    if predicted != actual:
        reads = [
            f"{r.client}'s GET at step {r.step} read {r.reply}"
            for r in trace.rows
            if r.command.startswith("GET")
        ]
        raise Wrong(
            f"you predicted {predicted}; the schedule ran and left another value. "
            "Who read what, and when?",
            detail="; ".join(reads)
            + f", each SET wrote what its client read plus 1: the counter holds {actual}",
        )
    return (
        f"the counter holds {actual}: each client read after the other's write, "
        "so no visit was lost"
    )
