"""No verdict without evidence: a search in which every actor raised judges nothing.

Two actors that each raise on every schedule used to read as "0 of 6 schedules break the
invariant". The explorer now raises NoVerdict (with each actor's results), the stepper says so
instead of "ok", and a case file's cell gives the reason instead of a count.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

import cases
from helpers import Invariant, Lab, NoVerdict, Race, Stepper

ANYTHING = Invariant("anything", "nothing can go wrong", lambda client, results: True)


def _raises(key: str) -> Any:
    def write_then_fail(client: redis.Redis) -> Any:
        client.set(key, 1)
        return client.execute_command("NOSUCHCOMMAND", key)  # an error reply: ResponseError

    return write_then_fail


def test_two_actors_that_always_raise_give_no_verdict_with_both_errors(lab: Lab) -> None:
    key = lab.key("x")
    race = Race(lab, {"A": _raises(key), "B": _raises(key)}, watch=[key], invariant=ANYTHING)
    for reduce in (True, False):
        with pytest.raises(NoVerdict) as raised:
            race.explore(reduce=reduce)
        said = str(raised.value)
        assert said.startswith("no verdict: in every one of the 6 schedules")
        assert "A: ResponseError" in said and "B: ResponseError" in said
        assert raised.value.exploration.total == 6


def test_one_actor_that_returns_is_evidence(lab: Lab) -> None:
    key = lab.key("x")
    race = Race(
        lab,
        {"A": _raises(key), "B": lambda client: client.get(key)},
        watch=[key],
        invariant=ANYTHING,
    )
    found = race.explore()
    assert found.bad_count == 0 and found.total == 3
    ((text, count),) = found.returned()["A"].items()
    assert text.startswith("ResponseError: unknown command") and count == 3
    assert found.picture().splitlines()[-1].startswith("returned: A: ResponseError")


def test_the_summary_shows_what_each_client_returned(lab: Lab) -> None:
    key = lab.key("n")
    race = Race(
        lab,
        {"A": lambda c: c.incr(key), "B": lambda c: c.incr(key), "T": Race.lease_expires(key)},
        watch=[key],
        invariant=Invariant("two", "the counter ends at 2", lambda c, r: int(c.get(key)) == 2),
    )
    found = race.explore()
    assert found.returned() == {"A": {"1": 3, "2": 3}, "B": {"1": 3, "2": 3}}  # no clock
    assert found.table().splitlines()[-1] == "returned: A: 1 in 3, 2 in 3; B: 1 in 3, 2 in 3"


def test_the_stepper_gives_no_verdict_when_every_client_raised(lab: Lab) -> None:
    key = lab.key("x")
    stepper = Stepper(lab, {"A": _raises(key)}, watch=[key], invariant=ANYTHING)
    stepper.step("A")
    stepper.step("A")
    assert stepper.invariant_holds is None
    assert "no verdict" in stepper.invariant_words()


def test_a_case_file_whose_takes_all_raise_has_no_count(lab: Lab) -> None:
    def take_broken(client: redis.Redis, name: str) -> Any:
        return client.execute_command("NOSUCHCOMMAND", name)

    race = cases.lock_race(lab, "redis-py Lock", "exclusion")
    broken = {n: _take_with(fn, take_broken) for n, fn in race.actors.items()}
    verdict = cases.verdict(race.with_actors(broken))
    assert not verdict.explored
    assert verdict.cell().startswith("no verdict")


def _take_with(actor: Any, take: Any) -> Any:
    keywords = dict(actor.keywords)
    keywords["take"] = take
    return type(actor)(actor.func, *actor.args, **keywords)
