"""helpers.Race: one race given once, asked four ways; they agree on the known verdicts.

The naive limiter with one slot left breaks under ABAB (run), in 4 of 6 orders (explore), at
step 4 (stepper) and under lockstep threads (load); the Lua limiter breaks in none. Invalid parts
are refused when the race is defined, with a one-line RaceLabError.
"""

from __future__ import annotations

from functools import partial

import pytest

from helpers import Invariant, Lab, Race
from helpers.errors import RaceLabError
from helpers.instruments.history import Span
from helpers.instruments.invariant import InvariantDefinitionError
from helpers.instruments.load import RunResult
from helpers.instruments.scenario import RaceDefinitionError
from races import ratelimit as rl

WINDOW = 60
AT_MOST_ONE = Invariant(
    "at most one admitted",
    "at most one request is admitted",
    lambda client, results: list(results.values()).count(True) <= 1,
)


def limiter_race(lab: Lab, fn=rl.naive_allow) -> Race:
    """Return the race of two clients of fn with one slot left (counter 4, limit 5)."""
    key = lab.key("demo")
    allow = partial(fn, key=key, limit=5, window=WINDOW)
    return Race(
        lab,
        actors={"A": allow, "B": allow},
        setup=lambda c: c.set(key, 4, ex=WINDOW),
        watch=[key],
        invariant=AT_MOST_ONE,
    )


def test_the_naive_limiter_breaks_every_way_it_is_asked(lab: Lab) -> None:
    race = limiter_race(lab)
    trace = race.run("ABAB")
    assert trace.results == {"A": True, "B": True} and trace.final_state == "demo=6 (ttl)"
    explored = race.explore()
    assert (explored.total, explored.bad_count) == (6, 4)
    assert explored.summary() == (
        "4 of 6 schedules break the invariant, in 2 of 4 classes (at most one request is admitted)"
    )
    with race.stepper() as stepper:
        stepper.play("ABAB")
        assert stepper.broken_at == 4
        assert "at most one request is admitted" in stepper.invariant_words()
    load_key = lab.key("load")
    loaded = Race(
        lab,
        {"A": partial(rl.naive_allow, key=load_key, limit=100, window=WINDOW)},
        watch=[load_key],
    ).load(clients=8, iterations=100, mode="lockstep")
    assert isinstance(loaded, RunResult) and loaded.count(True) > 100


def test_the_lua_limiter_never_breaks(lab: Lab) -> None:
    race = limiter_race(lab).with_actors(
        {name: partial(rl.lua_allow, key=lab.key("demo"), limit=5, window=WINDOW) for name in "AB"}
    )
    assert race.run("AB").results == {"A": True, "B": False}
    assert race.explore().bad_count == 0
    with race.stepper() as stepper:
        stepper.play("AB")
        assert stepper.broken_at is None and stepper.explore_from_here().bad_count == 0
    load_key = lab.key("load")
    lua = partial(rl.lua_allow, key=load_key, limit=100, window=WINDOW)
    assert Race(lab, {"A": lua}, watch=[load_key]).load(clients=4, iterations=50).count(True) == 100


def test_load_resets_the_keys_and_runs_the_setup_first(lab: Lab) -> None:
    race = limiter_race(lab)  # one slot left; lockstep: both clients GET 4, then both INCR
    assert race.load(clients=2, iterations=3).count(True) == 2
    assert race.load(clients=2, iterations=3).count(True) == 2  # a fresh window again
    stuck = race.load(clients=2, iterations=3, fresh=False)
    assert stuck.count(True) == 0  # the counter was left above the limit


def test_a_plain_function_with_a_docstring_is_an_invariant(lab: Lab) -> None:
    def two_visits(client, results):
        """Two increments leave 2."""
        return client.get(visits) == "2"

    visits = lab.key("visits")
    count = partial(rl.lost_update_increment, key=visits)
    race = Race(lab, {"A": count, "B": count}, watch=[visits], invariant=two_visits)
    assert race.invariant.says == "two increments leave 2" and race.invariant.name == "two visits"
    assert race.explore().bad_count == 4


def test_clock_actors_are_part_of_the_race(lab: Lab) -> None:
    lock = lab.key("lock")

    def take(client, token: str) -> bool:
        return bool(client.set(lock, token, nx=True, px=10_000))

    race = Race(
        lab,
        {
            "A": partial(take, token="a"),
            "T": Race.lease_expires(lock),
            "B": partial(take, token="b"),
        },
        watch=[lock],
    )
    trace = race.run("ATB")
    assert trace.results["A"] is True and trace.results["B"] is True
    assert trace.rows[1].command == "(clock) TTL of lock runs out"
    ticks = Race.clock(lambda client: "tick", "(clock) a second passes")
    assert Race(lab, {"T": ticks}).run("T").results == {"T": "tick"}


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ({"actors": {}}, "actors must map a name"),
        ({"actors": {"A": 42}}, "actor 'A' is not a function"),
        ({"actors": {"A B": len}}, "without spaces"),
        ({"actors": {"A": len}, "watch": ["elsewhere:key"]}, "not under this lab's prefix"),
        ({"actors": {"A": len}, "watch": "demo"}, "must be a list of keys"),
        ({"actors": {"A": len}, "setup": print}, "must name its keys"),
        ({"actors": {"A": len}, "invariant": lambda c, r: True}, "does not say what must hold"),
        ({"actors": {"A": len}, "fixes": {"lua": {"Z": len}}}, "must replace some of the actors"),
    ],
)
def test_invalid_parts_are_refused_once_in_one_line(lab: Lab, parts: dict, message: str) -> None:
    with pytest.raises(RaceDefinitionError, match=message) as caught:
        Race(lab, **parts)
    assert isinstance(caught.value, RaceLabError) and "\n" not in str(caught.value)


def test_explore_and_load_say_what_they_miss(lab: Lab) -> None:
    race = Race(lab, {"A": len, "B": str})
    with pytest.raises(RaceDefinitionError, match="needs the race's invariant"):
        race.explore()
    with pytest.raises(RaceDefinitionError, match="pass actor='A'"):
        race.load()


def test_an_invariant_needs_a_sentence_and_a_bool() -> None:
    with pytest.raises(InvariantDefinitionError, match="needs a sentence"):
        Invariant("x", "", lambda c, r: True)
    odd = Invariant("odd", "returns a bool", lambda c, r: "yes")
    with pytest.raises(InvariantDefinitionError, match="must return True or False"):
        odd(None, {})
    assert str(AT_MOST_ONE) == "at most one request is admitted"


def test_run_result_overlaps_finds_two_clients_holding_a_span_at_once() -> None:
    from helpers.instruments.history import Op

    run = RunResult(2, 1, history=[Op(0, "turn", 0, 10, (0, 10)), Op(1, "turn", 5, 20, (5, 20))])
    span_of = lambda op: Span(op.client_id, *op.result)  # noqa: E731
    assert [s.client for s in run.spans(span_of)] == [0, 1]
    assert [(o.start_ns, o.end_ns) for o in run.overlaps(span_of)] == [(5, 10)]
    assert run.overlaps(lambda op: None) == []


def test_a_race_s_fixes_are_the_stepper_s_strategy_menu(lab: Lab) -> None:
    lua = partial(rl.lua_allow, key=lab.key("demo"), limit=5, window=WINDOW)
    race = limiter_race(lab)
    with_fix = Race(
        lab,
        race.actors,
        race.setup,
        race.watch,
        invariant=race.invariant,
        fixes={"Lua": {"A": lua, "B": lua}},
    )
    with with_fix.with_actors({}).stepper() as stepper:
        assert stepper.play("ABAB").broken_at == 4
        stepper.use("Lua")
        assert stepper.explore_from_here().bad_count == 0
