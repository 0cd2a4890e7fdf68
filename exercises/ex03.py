"""Self-checks of notebook 03 (register each string once): the fewest steps, and a one-trip fix.

Each check computes the truth itself on fresh keys under the lab's prefix (a Stepper playing the
learner's schedule; the explorer, threads in lockstep and the client's round-trip count running
the learner's function) and deletes those keys afterwards.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from exercises import Wrong, exercise
from exercises.judge import aborted_exec, raise_if_fault, row_text
from helpers.backend.lab import Lab
from helpers.backend.modes import client_stats
from helpers.instruments.explore import TooManySchedules
from helpers.instruments.invariant import Invariant
from helpers.instruments.load import run_clients
from helpers.instruments.scenario import Race
from helpers.instruments.schedule import ScheduleError, Trace
from helpers.instruments.stepper import Stepper
from races.dictionary import DictKeys, check_dictionary, dict_keys, naive_get_or_put

WORDS = ["price", "volume", "open", "close"]
PLAN = [random.Random(worker).sample(WORDS, 3) for worker in range(8)]  # 8 workers x 3 strings
ONE_STEP = (
    "the lookup (HGET of the index) and the registration (HINCRBY of last_id, then both HSETs) "
    "must be one atomic step, which no other worker's command can come between"
)
FORGETS_TO_LOOK_UP = '''
SCRIPT = """
local id = redis.call("HINCRBY", KEYS[3], "last_id", 1)
redis.call("HSET", KEYS[1], id, ARGV[1])
redis.call("HSET", KEYS[2], ARGV[1], id)
return id
"""
def my_get_or_put(client, text, keys):
    return client.eval(SCRIPT, 3, *keys, text)
'''  # one atomic round trip, but a known string gets a new id each time


@contextmanager
def fresh_keys(lab: Lab) -> Iterator[DictKeys]:
    """Yield the keys of a new dictionary under the lab's prefix; delete them afterwards."""
    keys = dict_keys(lab.ns, f"ex03-{uuid.uuid4().hex[:8]}")
    try:
        yield keys
    finally:
        lab.client().delete(*keys)


def one_id_per_string(keys: DictKeys, text: str) -> Callable[[Any, dict[str, Any]], bool]:
    """Return the stepper's invariant: no string has two ids; each finished worker got text's id."""

    def invariant(client: Any, results: dict[str, Any]) -> bool:
        """No string has two ids, and every finished worker holds the id ids keeps for it"""
        answers = [(text, got) for got in results.values()]
        return not check_dictionary(client, keys, answers, indexed=False, dense=False)

    return invariant


def _lookups(trace: Trace) -> str:
    """Return what each worker's lookup (HGET of the index) found in trace."""
    found = [
        f"{r.client}'s lookup at step {r.step} "
        + ("missed" if r.reply in ("nil", "None") else f"found id {r.reply}")
        for r in trace.rows
        if r.command.startswith("HGET ")
    ]
    return ", ".join(found) if found else f"no worker looked up 'price' in {trace.schedule}"


def _breaks(stepper: Stepper, schedule: str) -> bool | None:
    """Return whether schedule breaks the stepper's invariant (None: not a valid schedule)."""
    try:
        stepper.play(schedule)
    except ScheduleError:
        return None
    return stepper.broken_at is not None


@exercise(
    "03.fewest_steps",
    answer="my_schedule",
    wrong=[
        "my_schedule = 'AAAAB'",
        "my_schedule = 'ABAAABB'",
        "my_schedule = 'ABABABAB'",
        "my_schedule = 'ABC'",
        "my_schedule = None",
    ],
    hint="replace the ... in `my_schedule` with a schedule such as 'ABBA'",
)
def fewest_steps(lab: Lab, answer: object) -> str:
    """Check that answer breaks the naive get-or-put's invariant and that no shorter one does."""
    if not isinstance(answer, str) or not answer.strip():
        raise Wrong(f"give the schedule as a string of A and B, e.g. 'ABBA', not {answer!r}")
    schedule = "".join(answer.split()).upper()
    with fresh_keys(lab) as keys:
        actor = partial(naive_get_or_put, text="price", keys=keys)
        with Stepper(
            lab,
            {"A": actor, "B": actor},
            watch=list(keys),
            invariant=one_id_per_string(keys, "price"),
        ) as stepper:
            try:
                stepper.play(schedule)
            except ScheduleError as exc:
                raise Wrong(f"{answer!r} is not a schedule of workers A and B: {exc}") from None
            broken_at = stepper.broken_at
            if broken_at is None:
                raise Wrong(
                    f"after {schedule} every string still has one id: {_lookups(stepper.trace)}",
                    detail="both lookups must miss: both must run before either HSET of the "
                    "index, and both workers must then register",
                )
            if broken_at < len(schedule):
                raise Wrong(
                    f"{schedule} breaks it after step {broken_at}: leave out the steps "
                    f"after that one"
                )
            shorter = ("".join(s) for s in itertools.product("AB", repeat=broken_at - 1))
            faster = next((s for s in shorter if _breaks(stepper, s)), None)
    if faster is not None:
        raise Wrong(
            f"{schedule} breaks it in {broken_at} steps, but it can be done in fewer",
            detail=f"{faster} breaks it in {len(faster)}",
        )
    return (
        f"{schedule} gives 'price' two ids after {broken_at} steps, and no schedule of "
        f"{broken_at - 1} steps does: both lookups, both HINCRBYs, both HSETs of ids"
    )


def _registers_alone(fn: Callable[..., Any], client: Any, keys: DictKeys) -> None:
    """Raise Wrong unless fn alone numbers price, volume, price as 1, 2, 1 in a sound dictionary."""
    got = [fn(client, text, keys) for text in ("price", "volume", "price")]
    if got != [1, 2, 1]:
        raise Wrong(f"alone, registering price, volume, price gave ids {got}, not [1, 2, 1]")
    problems = check_dictionary(client, keys, [("price", 1), ("volume", 2)])
    if problems:
        raise Wrong(f"alone, the dictionary is not sound: {'; '.join(problems)}")


def _between(trace: Trace) -> str:
    """Return which of B's steps ran between A's first and last step in trace."""
    a_rows = [r for r in trace.rows if r.client == "A"]
    if len(a_rows) < 2:
        return f"in {trace.schedule}"
    first, last = a_rows[0], a_rows[-1]
    inside = [r for r in trace.rows if r.client != "A" and first.step < r.step < last.step]
    if not inside:
        return f"in {trace.schedule}"
    return (
        f"in {trace.schedule}, {row_text(inside[0])} ran between {row_text(first)} and "
        f"{row_text(last)}"
    )


def _survives_every_order(lab: Lab, fn: Callable[..., Any], keys: DictKeys) -> int:
    """Raise Wrong if an order of two workers registering price breaks it; return the orders."""
    actor = partial(fn, text="price", keys=keys)

    def sound(client: Any, results: dict[str, Any]) -> bool:
        answers = [("price", got) for got in results.values()]
        return len(results) == 2 and not check_dictionary(client, keys, answers)

    one_id_each = Invariant("sound dictionary", "price has one id, and the ids are 1..N", sound)
    try:
        found = Race(
            lab, {"A": actor, "B": actor}, watch=list(keys), invariant=one_id_each
        ).explore()
    except TooManySchedules:
        raise Wrong(
            "two workers' round trips have too many orders to try: one script, one "
            "round trip, is what is asked"
        ) from None
    for outcome in found.outcomes:
        raise_if_fault(outcome.results.values())
    if found.bad_count:
        first = found.bad[0]
        trace = found.trace(first)  # replays it: the keys now hold what that order left
        problems = check_dictionary(lab.client(), keys)
        if not check_dictionary(lab.client(), keys, dense=False):
            raise Wrong(
                f"one id per string, but {found.bad_count} of {found.total} orders of "
                f"two workers leave a hole in the ids, e.g. {first}: "
                f"{'; '.join(problems)}; the ids must stay 1..N",
                detail=f"{_between(trace)}: {ONE_STEP}",
            )
        raise Wrong(
            f"{found.bad_count} of {found.total} orders of two workers registering "
            f"'price' break the dictionary, e.g. {first}: {'; '.join(problems)}",
            detail=aborted_exec(trace) or f"{_between(trace)}: {ONE_STEP}",
        )
    return found.total


@exercise(
    "03.get_or_put",
    answer="my_get_or_put",
    wrong=[
        "my_get_or_put = naive_get_or_put",
        "my_get_or_put = watch_get_or_put",
        "my_get_or_put = hincrby_hsetnx_get_or_put",
        FORGETS_TO_LOOK_UP,
    ],
    hint="two workers may register the same new string at the same moment: what must they "
    "never both see, and what leaves no room for it?",
)
def get_or_put(lab: Lab, answer: object) -> str:
    """Check answer(client, text, keys): sound alone, in every order, under threads; one trip."""
    if not callable(answer):
        raise Wrong(f"my_get_or_put must be a function (client, text, keys) -> id, not {answer!r}")
    client = lab.client()
    with fresh_keys(lab) as keys:
        _registers_alone(answer, client, keys)
        before = client_stats(client)
        answer(client, "open", keys)
        trips = (client_stats(client) - before).round_trips
    with fresh_keys(lab) as keys:
        orders = _survives_every_order(lab, answer, keys)
    with fresh_keys(lab) as keys:
        run = run_clients(
            lab, partial(answer, keys=keys), inputs=PLAN, mode="lockstep", timeout=120
        )
        answers = [(PLAN[worker][i], got) for worker, i, got in run.outcomes]
        problems = check_dictionary(client, keys, answers)
    if problems:
        raise Wrong(
            f"{len(PLAN)} threads in lockstep broke the dictionary: {'; '.join(problems[:2])}",
            detail=ONE_STEP,
        )
    if trips != 1:
        raise Wrong(f"sound, but a new string costs {trips} round trips: make it one (one script)")
    return (
        f"one round trip; sound alone, in all {orders} orders of two workers and under "
        f"{len(PLAN)} threads in lockstep"
    )
