"""Nondeterminism is found after a search: the breaking schedules and a sample of the rest are
each replayed twice, and an actor whose result (or an invariant whose verdict) changes stops the
search with NotDeterministic naming the actor and the schedule. On embedded and real.
"""

from __future__ import annotations

import itertools
import time
from functools import partial

import pytest

from helpers import Lab, explore
from helpers.instruments.determinism import (
    MAX_BREAKING,
    PASSING_SAMPLE,
    Ending,
    difference,
    spread,
)
from helpers.instruments.explore import NotDeterministic, Outcome


def counter_actor(client, key: str, calls: itertools.count) -> str:
    """Add one; return which call of this process it was (state kept between replays)."""
    client.incr(key)
    return f"call {next(calls) % 2}"


def test_an_actor_whose_result_changes_between_replays_stops_the_search(lab: Lab) -> None:
    key, calls = lab.key("n"), itertools.count()
    actors = {"A": partial(counter_actor, key=key, calls=calls), "B": lambda c: c.incr(key)}
    with pytest.raises(NotDeterministic) as found:
        explore(lab, actors, lambda c, r: True, watch=[key])
    said = str(found.value)
    assert said.startswith("nondeterministic: actor A's outcome changed between two replays of ")
    assert "'call 0' in one, 'call 1' in the other" in said or "'call 1' in one" in said
    assert "entropy" in said  # says where to look


def test_a_clock_the_race_does_not_control_is_found(lab: Lab) -> None:
    """CLOCK_MONOTONIC read through clock_gettime is wall time (logical_time does not cover it)."""
    key = lab.key("stamp")

    def stamper(client):
        client.set(key, time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        return client.get(key)

    with pytest.raises(NotDeterministic, match="actor A's outcome changed between two replays"):
        explore(lab, {"A": stamper}, lambda c, r: True, watch=[key])


def test_an_invariant_whose_verdict_changes_with_the_same_results_is_found(lab: Lab) -> None:
    key, flips = lab.key("n"), itertools.count()
    actors = {"A": lambda c: c.incr(key), "B": lambda c: c.incr(key)}
    with pytest.raises(NotDeterministic, match="the invariant held in one replay of .* and broke"):
        explore(lab, actors, lambda c, r: next(flips) % 3 != 1, watch=[key])


def test_an_actor_that_stamps_with_time_time_is_not_nondeterministic(lab: Lab) -> None:
    """The same actor on the wall clock would differ in every replay: the run's clock does not."""
    key = lab.key("stamp")

    def stamper(client):
        client.set(key, repr(time.time()))
        return client.get(key)

    found = explore(lab, {"A": stamper, "B": stamper}, lambda c, r: True, watch=[key])
    assert found.total == 6


def test_the_replays_cover_every_breaking_schedule_and_a_sample_of_the_rest() -> None:
    outcomes = [Outcome(f"S{i}", i % 3 == 0, {}, "", texts={"A": "x"}) for i in range(300)]
    bad = [o for o in outcomes if not o.ok]
    assert spread(bad, MAX_BREAKING)[0] is bad[0] and len(spread(bad, MAX_BREAKING)) == MAX_BREAKING
    assert spread(bad[:5], MAX_BREAKING) == bad[:5]  # every one, when they are few
    good = spread([o for o in outcomes if o.ok], PASSING_SAMPLE)
    assert len(good) == PASSING_SAMPLE and len({o.schedule for o in good}) == PASSING_SAMPLE


def test_difference_names_the_actor_then_the_verdict() -> None:
    same = Ending(True, {"A": "True", "B": "'busy'"})
    assert difference("ABAB", same, Ending(True, dict(same.texts))) is None
    said = difference("ABAB", same, Ending(False, {"A": "True", "B": "False"}))
    assert said is not None and said.startswith(
        "nondeterministic: actor B's outcome changed between two replays of ABAB ('busy' in one, "
        "False in the other)"
    )
    said = difference("AB", same, Ending(False, dict(same.texts)))
    assert said is not None and said.startswith(
        "nondeterministic: the invariant held in one replay of AB and broke in another"
    )


def test_a_new_object_in_every_replay_is_no_change_of_outcome() -> None:
    one = Ending(True, {"A": "<redis.lock.Lock object at 0x7f3a2c1b9d10>"})
    other = Ending(True, {"A": "<redis.lock.Lock object at 0x7f3a2c0e4f50>"})
    assert difference("AB", one, other) is None
    assert difference("AB", one, Ending(True, {"A": "None"})) is not None
