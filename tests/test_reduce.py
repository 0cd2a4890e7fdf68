"""Reduction: footprints of steps, DPOR (reduce=True), the preemption bound, and lazy scripts.

The central claim is checked on the lessons' own races (races/): one schedule per class of
equivalent schedules finds exactly the classes, and the verdicts, that every schedule finds.
"""

from __future__ import annotations

import itertools
import uuid
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import naive_limiter, take_forever

from benchmarks.explorer import read_modify_write  # the actor the benchmark times
from helpers import Lab
from helpers.backend.scripts import delete_library
from helpers.instruments.explore import Exploration, explore, normal_form
from helpers.instruments.footprint import (
    EVERYTHING,
    NOTHING,
    Footprint,
    KeyTable,
    Transactions,
)
from helpers.instruments.schedule import lease_expires, schedule_text
from races import dictionary, locks, ratelimit

LEASE_MS = 10_000


def _both(fn: Any, **kwargs: Any) -> dict[str, Any]:
    actor = partial(fn, **kwargs)
    return {"A": actor, "B": actor}


def _classes(found: Exploration) -> dict[str, bool]:
    """Return {class: verdict}, checking that every schedule of a class has the same verdict."""
    verdicts: dict[str, bool] = {}
    for outcome in found.outcomes:
        cls = found.class_of(outcome.schedule)
        assert verdicts.setdefault(cls, outcome.ok) == outcome.ok, f"class {cls} split"
    return verdicts


def _compare(lab: Lab, actors: dict[str, Any], invariant: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Explore every schedule and one per class; assert the same classes and verdicts."""
    every = explore(lab, actors, invariant, reduce=False, classes=True, **kwargs)
    fewer = explore(lab, actors, invariant, reduce=True, **kwargs)
    assert _classes(fewer) == _classes(every)
    assert fewer.runs == fewer.classes == every.classes  # one schedule per class, no more
    assert fewer.bad_classes == every.bad_classes and fewer.complete and fewer.reduced
    # The classes run stand for exactly the schedules an exhaustive search runs, verdicts too.
    assert (fewer.total, fewer.bad, fewer.good) == (every.total, every.bad, every.good)
    assert [o.results for o in fewer.schedules] == [o.results for o in every.outcomes]
    return every, fewer


# ------------------------------------------------------------------ footprints


def test_footprints_come_from_the_command_table(lab: Lab) -> None:
    table = KeyTable(lab.client(), known=["a", "b"])
    assert table.of_command(("GET", "k")) == Footprint(frozenset({b"k"}))
    assert table.of_command(("SET", "k", "1")) == Footprint(frozenset({b"k"}), frozenset({b"k"}))
    assert table.of_command(("MGET", "a", "b")).reads == {b"a", b"b"}
    assert table.of_command(("DEL", "a", "b")).writes == {b"a", b"b"}
    assert table.of_command(("SET", "a", "1", "EX", "60")).writes == {b"a"}
    assert table.of_command(("EVALSHA", "f" * 40, 2, "a", "b", "x")).writes == {b"a", b"b"}
    assert table.of_command(("EVALSHA_RO", "f" * 40, 1, "a", "x")) == Footprint(frozenset({b"a"}))
    assert table.of_command(("FCALL", "fn", 1, b"a")).writes == {b"a"}
    assert table.of_command(("PING",)) == NOTHING and table.of_command(("MULTI",)) == NOTHING
    assert table.of_command(("SCRIPT", "LOAD", "return 1")) == EVERYTHING
    assert table.of_command(("KEYS", "*")) == EVERYTHING
    assert table.of_command(("NO-SUCH-COMMAND", "k")) == EVERYTHING
    block = table.footprint([("MULTI",), ("GET", "a"), ("SET", "b", "1"), ("EXEC",)])
    assert block == Footprint(frozenset({b"a", b"b"}), frozenset({b"b"}))


def test_a_command_whose_keys_move_asks_the_server_or_conflicts_with_everything(lab: Lab) -> None:
    found = KeyTable(lab.client()).of_command(("ZUNIONSTORE", "d", 2, "a", "b"))
    if lab.kind == "embedded":  # fakeredis has no COMMAND GETKEYS
        assert found == EVERYTHING
    else:
        assert found.writes == {b"d", b"a", b"b"}


def test_a_transaction_sent_one_command_at_a_time_counts_its_keys_at_exec(lab: Lab) -> None:
    table, tx = KeyTable(lab.client()), Transactions()
    assert tx.footprint(table, [("WATCH", "x")]) == Footprint(frozenset({b"x"}))
    assert tx.footprint(table, [("MULTI",)]) == NOTHING
    assert tx.footprint(table, [("SET", "y", "1")]) == NOTHING  # queued: it runs at EXEC
    # EXEC writes what was queued and reads what was watched (a write to x would abort it).
    assert tx.footprint(table, [("EXEC",)]) == Footprint(frozenset({b"x", b"y"}), frozenset({b"y"}))
    assert tx.footprint(table, [("EXEC",)]) == NOTHING  # nothing open any more
    assert tx.footprint(table, [("MULTI",), ("INCR", "z"), ("EXEC",)]).writes == {b"z"}


def test_independence_is_no_write_to_what_the_other_touches() -> None:
    read_a, read_b = Footprint(frozenset({b"a"})), Footprint(frozenset({b"b"}))
    write_a = Footprint(frozenset({b"a"}), frozenset({b"a"}))
    assert not read_a.conflicts(read_a) and not write_a.conflicts(read_b)
    assert write_a.conflicts(read_a) and read_a.conflicts(write_a) and write_a.conflicts(write_a)
    assert EVERYTHING.conflicts(NOTHING) and NOTHING.conflicts(EVERYTHING)


def test_the_normal_form_moves_commuting_steps_and_keeps_conflicts() -> None:
    read, write = Footprint(frozenset({b"k"})), Footprint(frozenset({b"k"}), frozenset({b"k"}))
    assert normal_form("BAAB", [read, read, write, write], "AB") == "ABAB"  # the GETs commute
    assert normal_form("BBA", [read, write, read], "AB") == "BBA"  # A's GET reads B's write


_STEP_NAMES = st.sampled_from(["A", "B", "C", "A!", "B~", "restart"])
_KEYS = st.frozensets(st.sampled_from([b"k1", b"k2"]), max_size=2)
_FOOTPRINTS = st.one_of(
    st.just(EVERYTHING), st.builds(Footprint, _KEYS, st.frozensets(st.just(b"k1"), max_size=1))
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_STEP_NAMES, _FOOTPRINTS), max_size=7), st.permutations("ABC"))
def test_the_normal_form_is_the_least_order_that_keeps_every_conflict(
    steps: list[tuple[str, Footprint]], order: list[str]
) -> None:
    """By definition, against every permutation: the least by actor order among the orders in
    which each step still comes after every earlier step of its actor or in conflict with it."""
    names, footprints = [n for n, _ in steps], [f for _, f in steps]
    actor = [n[0] if n != "restart" else n for n in names]
    rank = {a: i for i, a in enumerate(order)}

    def keeps(perm: tuple[int, ...]) -> bool:
        at = {i: p for p, i in enumerate(perm)}
        return all(
            at[j] < at[i]
            for i in range(len(names))
            for j in range(i)
            if actor[j] == actor[i] or footprints[j].conflicts(footprints[i])
        )

    least = min(
        (p for p in itertools.permutations(range(len(names))) if keeps(p)),
        key=lambda p: [(rank.get(actor[i], len(rank)), names[i]) for i in p],
    )
    assert normal_form(names, footprints, order) == schedule_text([names[i] for i in least])


# ------------------------------------------------------------------ the known answers, in classes


def test_naive_limiter_4_of_6_schedules_are_2_of_4_classes(lab: Lab) -> None:
    key = lab.key("counter")
    every, fewer = _compare(
        lab,
        _both(ratelimit.naive_allow, key=key, limit=5, window=60),
        lambda client, results: list(results.values()).count(True) <= 1,
        setup=lambda c: c.set(key, 4, ex=60),
        watch=[key],
    )
    assert (every.total, every.bad_count) == (6, 4)
    assert (fewer.runs, len(fewer.bad_classes)) == (4, 2)
    assert [o.schedule for o in fewer.outcomes if not o.ok] == ["ABAB", "ABBA"]
    assert {o.schedule: fewer.orders(o.schedule) for o in fewer.outcomes} == {
        "AAB": 1,
        "ABAB": 2,
        "ABBA": 2,
        "BBA": 1,  # ABAB stands for BAAB too: the GETs commute
    }
    assert fewer.summary() == "4 of 6 schedules break the invariant, in 2 of 4 classes"


def test_lost_update_counter_keeps_its_verdicts_in_classes(lab: Lab) -> None:
    key = lab.key("visits")
    every, fewer = _compare(
        lab,
        _both(ratelimit.lost_update_increment, key=key),
        lambda client, results: client.get(key) == "2",
        watch=[key],
    )
    assert (every.bad_count, fewer.runs, len(fewer.bad_classes)) == (4, 4, 2)


@pytest.mark.parametrize(
    "name", ["lua_allow", "incr_first_allow", "watch_allow", "multi_allow", "ifeq_allow"]
)
def test_every_limiter_fix_has_no_bad_class(lab: Lab, name: str) -> None:
    if name == "ifeq_allow" and not lab.caps.delex:
        pytest.skip(f"{lab.kind} backend has no SET IFEQ")
    key = lab.key("counter")
    every, fewer = _compare(
        lab,
        _both(getattr(ratelimit, name), key=key, limit=5, window=60),
        lambda client, results: list(results.values()).count(True) <= 1,
        setup=lambda c: c.set(key, 4, ex=60),
        watch=[key],
    )
    assert every.bad_count == fewer.bad_count == 0


def _holder(client: Any, release: Any, key: str) -> Any:
    if not locks.acquire(client, key, "tok-A", LEASE_MS):
        return "busy"
    return release(client, key, "tok-A")


@pytest.mark.parametrize(
    "name, every_bad, classes, bad_classes",
    [
        # Every step writes the one lock key (SET NX, DEL, the clock's PEXPIREAT), so no two
        # schedules are equivalent, except where WATCH and GET only read it.
        ("release_blind", (11, 1), 11, 1),
        ("release_check_then_del", (17, 1), 17, 1),
        ("release_lua", (11, 0), 11, 0),
        ("release_lua_checked", (11, 0), 11, 0),
        ("release_watch", (30, 0), 27, 0),
        ("release_delex", (11, 0), 11, 0),
        ("release_digest", (11, 0), 11, 0),
    ],
)
def test_lock_releases_keep_their_verdicts_in_classes(
    lab: Lab, name: str, every_bad: tuple[int, int], classes: int, bad_classes: int
) -> None:
    if name in ("release_delex", "release_digest") and not lab.caps.delex:
        pytest.skip(f"{lab.kind} backend has no DELEX")
    key = lab.key("lock")
    actors = {
        "A": partial(_holder, release=getattr(locks, name), key=key),
        "T": lease_expires(key, value="tok-A"),
        "B": partial(locks.acquire, key=key, token="tok-B", ttl_ms=LEASE_MS),
    }
    every, fewer = _compare(
        lab,
        actors,
        lambda client, results: results["B"] is not True or client.get(key) == "tok-B",
        watch=[key],
    )
    assert (every.total, every.bad_count) == every_bad
    assert (fewer.runs, len(fewer.bad_classes)) == (classes, bad_classes)


def _dictionary_invariant(keys: Any, texts: dict[str, str], indexed: bool) -> Any:
    def sound(client: Any, results: dict[str, Any]) -> bool:
        answers = [(texts[name], got) for name, got in results.items()]
        return len(results) == len(texts) and not dictionary.check_dictionary(
            client, keys, answers, indexed
        )

    return sound


@pytest.mark.parametrize(
    "name, every_bad, fewer_bad",
    [
        ("naive_get_or_put", (70, 68), (10, 8)),
        ("hgetall_hsetnx_get_or_put", (6, 0), (4, 0)),
        ("lua_get_or_put", (2, 0), (2, 0)),
        ("function_get_or_put", (2, 0), (2, 0)),
        ("hincrby_hsetnx_get_or_put", None, None),
    ],
)
def test_dictionary_strategies_keep_their_verdicts_in_classes(
    lab: Lab, name: str, every_bad: Any, fewer_bad: Any
) -> None:
    keys = dictionary.dict_keys(lab.ns, "cols")
    fn = getattr(dictionary, name)
    actors = {"A": partial(fn, text="price", keys=keys), "B": partial(fn, text="price", keys=keys)}
    indexed = name != "hgetall_hsetnx_get_or_put"  # that version keeps no index
    invariant = _dictionary_invariant(keys, {"A": "price", "B": "price"}, indexed)
    try:  # the Function version loads its library when it finds it missing (lazily)
        every, fewer = _compare(lab, actors, invariant, watch=list(keys))
    finally:
        delete_library(lab.client(), "dict_library")
    if every_bad is not None:
        assert (every.total, every.bad_count) == every_bad
    if fewer_bad is not None:
        assert (fewer.runs, len(fewer.bad_classes)) == fewer_bad
    assert (fewer.bad_count == 0) == (every.bad_count == 0)


# ------------------------------------------------------------------ reduction and the bound


def test_actors_that_never_conflict_need_one_schedule(lab: Lab) -> None:
    keys = {n: lab.key(f"n-{n}") for n in "AB"}
    actors = {n: partial(read_modify_write, key=keys[n], steps=8) for n in "AB"}
    found = explore(lab, actors, lambda c, r: True, watch=list(keys.values()), reduce=True)
    assert (found.runs, found.classes, found.complete) == (1, 1, True)
    assert found.total == 12_870 and found.summary().startswith("0 of 12870 schedules")


def test_three_by_four_on_one_key_completes_with_two_preemptions(lab: Lab) -> None:
    key = lab.key("n")
    actors = {n: partial(read_modify_write, key=key, steps=4) for n in "ABC"}
    found = explore(lab, actors, lambda c, r: True, watch=[key], preemptions=2, keep_traces=False)
    assert found.total == 402 and not found.complete and found.preemptions == 2
    assert found.summary().endswith("(at most 2 preemptions: not every schedule)")


def test_the_bound_counts_preemptions_as_chess_does(lab: Lab) -> None:
    key = lab.key("n")
    actors = {n: partial(read_modify_write, key=key, steps=8) for n in "AB"}
    found = explore(lab, actors, lambda c, r: True, watch=[key], preemptions=2, keep_traces=False)
    assert found.total == 114  # 2 with none, 2 x 7 with one, 2 x 7 x 7 with two
    assert "AAAAAAAABBBBBBBB" in found.good and "AABBBBBBBBAAAAAA" in found.good
    none = explore(lab, actors, lambda c, r: True, watch=[key], preemptions=0)
    assert none.good == ["AAAAAAAABBBBBBBB", "BBBBBBBBAAAAAAAA"]


def test_a_bound_that_cuts_nothing_leaves_the_search_complete(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        {"A": partial(naive_limiter, key=key), "B": partial(naive_limiter, key=key)},
        lambda client, results: True,
        setup=lambda c: c.set(key, 4, ex=60),
        watch=[key],
        preemptions=5,
    )
    assert (found.total, found.complete) == (6, True)


def test_reduce_and_preemptions_do_not_combine(lab: Lab) -> None:
    with pytest.raises(ValueError, match="use one of them"):
        explore(lab, {"A": lambda c: c.ping()}, lambda c, r: True, reduce=True, preemptions=1)
    with pytest.raises(ValueError, match="preemptions"):
        explore(lab, {"A": lambda c: c.ping()}, lambda c, r: True, preemptions=-1)


# ------------------------------------------------------------------ server-global state


def test_an_actor_that_loads_its_script_lazily_explores_deterministically(lab: Lab) -> None:
    key = lab.key("counter")
    # A body no server has seen: the first EVALSHA answers NOSCRIPT, redis-py loads it, retries.
    script = lab.client().register_script(
        f"-- {uuid.uuid4().hex}\nreturn redis.call('INCR', KEYS[1])"
    )

    def lazy(client: Any) -> int:
        value = int(client.get(key) or 0)
        return script(keys=[key], client=client) + value

    for reduce in (False, True):
        found = explore(lab, {"A": lazy, "B": lazy}, lambda c, r: True, watch=[key], reduce=reduce)
        # Every replay saw the script loaded: 2 steps each (GET, EVALSHA), never NOSCRIPT.
        assert all(len(o.schedule) == 4 for o in found.outcomes)
        assert found.runs == (6 if not reduce else 4) and found.total == 6  # the GETs commute


# ------------------------------------------------------------------ faults: a client crashes


def _take_with_lease(client: Any, key: str, token: str) -> bool:
    """Take the lock with a lease, then release it."""
    if not locks.acquire(client, key, token, LEASE_MS):
        return False
    return locks.release_blind(client, key, token)


def test_a_crash_between_round_trips_changes_the_verdict(lab: Lab) -> None:
    key = lab.key("lock")
    actors = {"A": partial(take_forever, key=key, token="a")}

    def freed(client: Any, results: dict[str, Any]) -> bool:
        return client.exists(key) == 0

    assert explore(lab, actors, freed, watch=[key]).bad_count == 0
    for reduce in (False, True):
        found = explore(lab, actors, freed, watch=[key], crashes=1, reduce=reduce)
        # A! before its SET changes nothing; A! after it leaves a lock nobody will ever free.
        assert (sorted(found.good), found.bad) == (["A!", "AA"], ["A A!"])
        crashed = next(o for o in found.outcomes if o.schedule == "A A!")
        assert crashed.results == {} and crashed.result_text == "A=(crashed)"
    assert "lock=a" in str(found.trace("A A!"))


def test_a_lease_survives_its_holder_s_crash_until_it_runs_out(lab: Lab) -> None:
    key = lab.key("lock")
    actors = {
        "A": partial(_take_with_lease, key=key, token="a"),
        "T": lease_expires(key, value="a"),
        "B": partial(locks.acquire, key=key, token="b", ttl_ms=LEASE_MS),
    }

    def b_got_it_or_a_holds_it(client: Any, results: dict[str, Any]) -> bool:
        return results.get("B") is True or client.get(key) == "a"

    invariant, options = b_got_it_or_a_holds_it, {"watch": [key], "crashes": 1}
    every = explore(lab, actors, invariant, reduce=False, classes=True, **options)
    fewer = explore(lab, actors, invariant, reduce=True, **options)
    assert _classes(fewer) == _classes(every) and fewer.runs == fewer.classes
    assert (fewer.total, fewer.bad, fewer.good) == (every.total, every.bad, every.good)
    taken_then_crashed = 0
    for outcome in every.outcomes:
        names = outcome.schedule.split()
        took = "A" in names and "A!" in names and names.index("A") < names.index("A!")
        if took and outcome.results["B"]:
            # A died holding the lock: B got it only once the lease had run out.
            assert "T" in names and names.index("T") < names.index("B"), outcome.schedule
            taken_then_crashed += 1
    assert taken_then_crashed > 0
