"""One race spec and one options value, each checked once, with one exception type for races."""

from __future__ import annotations

import inspect

import pytest

from helpers import Lab, Race
from helpers.instruments.explore import explore
from helpers.instruments.spec import ExploreOptions, RaceDefinitionError, RaceSpec


def _get(key: str):  # noqa: ANN202 - an actor
    return lambda client: client.get(key)


def test_explore_takes_the_race_then_its_options() -> None:
    parameters = inspect.signature(explore).parameters
    race = ["lab", "actors", "invariant", "setup", "watch", "reset"]
    assert list(parameters) == [*race, "options"]
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD


@pytest.mark.parametrize(
    ("actors", "message"),
    [
        ({}, "actors must map a name"),
        ({"A B": print}, "without spaces"),
        ({"A": "not a function"}, "not a function of a client"),
    ],
)
def test_every_instrument_refuses_a_bad_race_with_one_exception(
    lab: Lab, actors: dict, message: str
) -> None:
    key = lab.key("k")
    with pytest.raises(RaceDefinitionError, match=message):
        RaceSpec(lab, actors, watch=(key,))
    with pytest.raises(RaceDefinitionError, match=message):
        explore(lab, actors, lambda client, results: True, watch=[key])
    with pytest.raises(RaceDefinitionError, match=message):
        Race(lab, actors, watch=[key])


def test_a_foreign_key_is_refused_before_anything_is_deleted(lab: Lab) -> None:
    with pytest.raises(RaceDefinitionError, match="not under this lab's prefix"):
        RaceSpec(lab, {"A": _get("x")}, watch=("somebody:else",))


def test_a_race_holds_its_spec_and_swapping_actors_checks_again(lab: Lab) -> None:
    key = lab.key("k")
    race = Race(lab, {"A": _get(key), "B": _get(key)}, watch=[key])
    assert race.spec.watch == (key,) and race.spec.keys == (key,)
    with pytest.raises(RaceDefinitionError, match="not a function"):
        race.spec.with_actors({"A": 3})


def test_options_are_one_checked_value() -> None:
    assert ExploreOptions().reduce is True
    assert ExploreOptions(preemptions=2).reduce is False
    crashes = ExploreOptions.of(crashes=2)
    assert crashes.faults == ("crash",) and crashes.max_faults == 2
    # The limit's default is set when the search knows whether its replays run live.
    assert ExploreOptions().max_schedules is None
    assert ExploreOptions().limit(live=False) == 50_000
    assert ExploreOptions().limit(live=True) == 20_000
    assert ExploreOptions(max_schedules=7).limit(live=False) == 7
    for bad, message in [
        ({"reduce": True, "preemptions": 1}, "do not combine"),
        ({"budget_s": float("inf")}, "budget_s"),
        ({"max_schedules": 0}, "max_schedules"),
        ({"max_schedules": 2.5}, "max_schedules"),
        ({"faults": ("meteor",)}, "unknown fault"),
    ]:
        with pytest.raises(ValueError, match=message):
            ExploreOptions(**bad)
    with pytest.raises(TypeError, match="unknown explore option 'reduced'"):
        ExploreOptions.of(reduced=True)


def test_an_options_value_and_keywords_give_the_same_search(lab: Lab) -> None:
    key = lab.key("k")
    actors = {"A": lambda c: c.incr(key), "B": lambda c: c.incr(key)}
    holds = lambda client, results: int(client.get(key)) == 2  # noqa: E731
    by_value = explore(lab, actors, holds, watch=[key], options=ExploreOptions(reduce=False))
    by_keyword = explore(lab, actors, holds, watch=[key], reduce=False)
    assert by_value.summary() == by_keyword.summary() == "0 of 2 schedules break the invariant"
