"""races.ratelimit: each broken limiter breaks in the documented way, each fix holds.

Interleavings are forced with run_schedule / explore (gated clients, one step per round trip), so
they are deterministic; threaded runs use lockstep rounds, so the naive overshoot shows on every
run. The last tests check that one function object per strategy is what notebook 01 interleaves,
explores, threads and benchmarks.
"""

from __future__ import annotations

import ast
import json
import warnings
from functools import partial
from pathlib import Path

import pytest

from benchmarks import ratelimit_cost as bench
from helpers import Lab, ScheduleRun, explore, run_clients, run_schedule
from helpers.instruments.spec import RaceSpec
from races import GaveUp
from races import ratelimit as rl
from races.ratelimit import (
    LimiterStateError,
    as_count,
    docs_pattern_allow,
    ifeq_allow,
    incr_first_allow,
    lost_update_increment,
    lua_allow,
    lua_limit,
    multi_allow,
    naive_allow,
    plain_client_watch_allow,
    watch_allow,
)

WINDOW = 60
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_get_then_incr.ipynb"
LIMITERS = [naive_allow, lua_allow, watch_allow, incr_first_allow, multi_allow, ifeq_allow]
FIXES = [lua_allow, watch_allow, incr_first_allow, multi_allow, ifeq_allow]
# Every strategy notebook 01 runs, by the name the benchmark's table gives it (None: not benchmarked).
NOTEBOOK_STRATEGIES = {
    naive_allow: "naive",
    lua_allow: "lua",
    watch_allow: "watch",
    incr_first_allow: "incr-first",
    multi_allow: "multi",
    ifeq_allow: "ifeq",
    docs_pattern_allow: None,
    plain_client_watch_allow: None,
    lost_update_increment: None,
}
ids = lambda f: f.__name__  # noqa: E731


def needs_ifeq(lab: Lab, fn) -> None:
    """Skip when fn needs SET ... IFEQ and the backend lacks it."""
    if fn is ifeq_allow and not lab.caps.set_ifeq:
        pytest.skip(f"SET ... IFEQ not supported by the {lab.kind} backend")


def one_slot_left(lab: Lab, limit: int = 5):
    """Return (key, setup) for a window with one request left."""
    key = lab.key("w")
    return key, (lambda c: c.set(key, limit - 1, ex=WINDOW))


def pair(fn, key: str, limit: int = 5) -> dict:
    """Return two actors A and B running the same limiter."""
    limiter = partial(fn, key=key, limit=limit, window=WINDOW)
    return {"A": limiter, "B": limiter}


def admits_at_most_one(_client, results: dict) -> bool:
    return list(results.values()).count(True) <= 1


# --- one client ------------------------------------------------------------------------------


@pytest.mark.parametrize("limiter", LIMITERS, ids=ids)
def test_one_client_alone_gets_exactly_limit_requests_and_a_ttl(lab: Lab, limiter) -> None:
    needs_ifeq(lab, limiter)
    c, key = lab.client(), lab.key("w")
    assert [limiter(c, key, 3, WINDOW) for _ in range(5)] == [True, True, True, False, False]
    assert 0 < c.ttl(key) <= WINDOW


def test_docs_pattern_admits_limit_plus_one_even_with_one_client(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert sum(docs_pattern_allow(c, key, 10, WINDOW) for _ in range(20)) == 11


def test_incr_first_counts_rejected_attempts_too(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert [incr_first_allow(c, key, 3, WINDOW) for _ in range(7)].count(True) == 3
    assert c.get(key) == "7"  # the counter says 7 "requests" though only 3 were admitted


@pytest.mark.parametrize("limiter", [watch_allow, multi_allow], ids=ids)
def test_the_first_ttl_is_kept_by_later_hits(lab: Lab, limiter) -> None:
    c, key = lab.client(), lab.key("w")
    assert limiter(c, key, 5, 100)
    c.expire(key, 7)
    assert limiter(c, key, 5, 100)
    assert c.get(key) == "2" and 0 < c.ttl(key) <= 7


def test_multi_gives_an_existing_ttl_less_counter_a_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, 2)
    assert multi_allow(c, key, 5, 100)
    assert 0 < c.ttl(key) <= 100


def test_lua_limit_returns_the_status_contract(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert [lua_limit(c, key, 2, WINDOW) for _ in range(3)] == [[1, 1], [1, 2], [0, 2]]
    assert lua_limit(c, key, "1.5", WINDOW) == [2, "invalid-arguments"]


def test_lua_allow_raises_on_status_2(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert [lua_allow(c, key, 1, WINDOW) for _ in range(2)] == [True, False]
    c.persist(key)
    with pytest.raises(LimiterStateError) as info:
        lua_allow(c, key, 1, WINDOW)
    assert info.value.reason == "missing-ttl"


# --- the stored counter is validated -----------------------------------------------------------


@pytest.mark.parametrize(
    "value, count",
    [(None, 0), ("0", 0), ("12", 12), (b"7", 7), ("9999999999999999999", 9999999999999999999)],
)
def test_as_count_reads_what_incr_leaves(value, count) -> None:
    assert as_count(value) == count


@pytest.mark.parametrize(
    "stored", ["-3", "abc", " 5", "1.5", "05", "+1", "", "1e3", "99999999999999999999"]
)
def test_as_count_refuses_anything_else(stored: str) -> None:
    with pytest.raises(LimiterStateError, match="invalid-counter"):
        as_count(stored)


@pytest.mark.parametrize(
    "strategy",
    [naive_allow, watch_allow, ifeq_allow, plain_client_watch_allow, lost_update_increment],
    ids=ids,
)
def test_strategies_that_read_the_counter_refuse_a_corrupt_one_and_write_nothing(
    lab: Lab, strategy
) -> None:
    # Regression: int() took "-3" as -3, so a limiter admitted 3 requests over the limit (the Lua
    # limiter answers invalid-counter for the same state).
    needs_ifeq(lab, strategy)
    c, key = lab.client(), lab.key("w")
    c.set(key, "-3", ex=WINDOW)
    args = (c, key) if strategy is lost_update_increment else (c, key, 2, WINDOW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # plain_client_watch_allow's trap
        with pytest.raises(LimiterStateError, match="invalid-counter"):
            strategy(*args)
    assert c.get(key) == "-3"


@pytest.mark.parametrize("limiter", [incr_first_allow, multi_allow], ids=ids)
def test_incr_first_limiters_refuse_a_negative_counter_instead_of_admitting(
    lab: Lab, limiter
) -> None:
    # Regression: a counter holding -5 made INCR return -4, which is <= limit, so the request was
    # admitted. INCR has already run by then: a single command cannot check first (Lua can).
    c, key = lab.client(), lab.key("w")
    c.set(key, "-5", ex=WINDOW)
    with pytest.raises(LimiterStateError, match="invalid-counter: INCR returned -4"):
        limiter(c, key, 2, WINDOW)
    assert c.get(key) == "-4"


# --- forced schedules ---------------------------------------------------------------------------


def test_forced_schedule_abab_makes_the_naive_limiter_admit_both(lab: Lab) -> None:
    key, setup = one_slot_left(lab)
    trace = run_schedule(lab, pair(naive_allow, key), "ABAB", setup=setup, watch=[key])
    assert trace.results == {"A": True, "B": True}
    assert [(r.client, r.command, r.reply) for r in trace.rows] == [
        ("A", "GET w", "'4'"),
        ("B", "GET w", "'4'"),
        ("A", "INCRBY w 1", "5"),
        ("B", "INCRBY w 1", "6"),
    ]
    assert trace.final_state == "w=6 (ttl)"


def test_forced_schedule_abab_loses_an_update(lab: Lab) -> None:
    key = lab.key("n")
    count = partial(lost_update_increment, key=key)
    trace = run_schedule(lab, {"A": count, "B": count}, "ABAB", watch=[key])
    assert trace.results == {"A": 1, "B": 1} and trace.final_state == "n=1"


def test_watch_on_a_plain_client_sends_nothing_and_both_are_admitted(lab: Lab) -> None:
    key, setup = one_slot_left(lab)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = run_schedule(
            lab, pair(plain_client_watch_allow, key), "ABBA", setup=setup, watch=[key]
        )
    assert [r.command.split()[0] for r in trace.rows] == ["GET", "GET", "MULTI,", "MULTI,"]
    assert trace.results == {"A": True, "B": True} and trace.final_state == "w=6 (ttl)"
    assert any(
        issubclass(w.category, DeprecationWarning) and "Pipeline" in str(w.message) for w in caught
    )


def test_watch_on_the_pipeline_aborts_the_stale_exec_and_rejects_on_retry(lab: Lab) -> None:
    key, setup = one_slot_left(lab)
    trace = run_schedule(lab, pair(watch_allow, key), "AABBBAAAA", setup=setup, watch=[key])
    assert [(r.client, r.command.split(",")[0], r.reply) for r in trace.rows] == [
        ("A", "WATCH w", "'OK'"),
        ("A", "GET w", "'4'"),
        ("B", "WATCH w", "'OK'"),
        ("B", "GET w", "'4'"),
        ("B", "MULTI", "[5, 0]"),
        ("A", "MULTI", "nil"),
        ("A", "WATCH w", "'OK'"),
        ("A", "GET w", "'5'"),
        ("A", "UNWATCH", "'OK'"),
    ]
    assert trace.results == {"A": False, "B": True} and trace.final_state == "w=5 (ttl)"


def test_ifeq_refuses_the_stale_write_and_rejects_on_retry_keeping_the_ttl(lab: Lab) -> None:
    needs_ifeq(lab, ifeq_allow)
    key, setup = one_slot_left(lab)
    trace = run_schedule(lab, pair(ifeq_allow, key), "ABABB", setup=setup, watch=[key])
    assert [(r.command, r.reply) for r in trace.rows][2:] == [
        ("SET w 5 IFEQ 4 KEEPTTL", "'OK'"),
        ("SET w 5 IFEQ 4 KEEPTTL", "nil"),
        ("GET w", "'5'"),
    ]
    assert trace.results == {"A": True, "B": False} and trace.final_state == "w=5 (ttl)"


def bump(key: str, times: int):
    """Return an actor that writes 1, 2, ... times to key (keeping its TTL): each write breaks a WATCH or an IFEQ."""

    def actor(client) -> None:
        for value in range(1, times + 1):
            client.set(key, value, keepttl=True)

    return actor


@pytest.mark.parametrize(
    "limiter, schedule", [(watch_allow, "AABAAABA"), (ifeq_allow, "ABAABA")], ids=["watch", "ifeq"]
)
def test_optimistic_limiters_give_up_after_max_attempts_without_writing(
    lab: Lab, limiter, schedule
) -> None:
    needs_ifeq(lab, limiter)
    key = lab.key("w")
    actors = {
        "A": partial(limiter, key=key, limit=1000, window=WINDOW, max_attempts=2),
        "B": bump(key, 2),
    }
    with ScheduleRun(
        RaceSpec(lab, actors, setup=lambda c: c.set(key, "0", ex=WINDOW), watch=[key])
    ) as run:
        *steps, last = schedule
        for name in steps:
            run.step(name)
        with pytest.raises(GaveUp) as info:
            run.step(last)
        assert info.value.attempts == 2
        assert run.observer.get(key) == "2"  # B's last write: A wrote nothing


def test_incr_first_leaves_a_counter_without_ttl_if_its_client_dies_after_incr(lab: Lab) -> None:
    key = lab.key("w")
    for limiter, ttl_left in ((incr_first_allow, False), (multi_allow, True)):
        with ScheduleRun(
            RaceSpec(lab, {"A": partial(limiter, key=key, limit=5, window=WINDOW)}, watch=[key])
        ) as run:
            run.step("A")  # one round trip, then the client dies
        assert (lab.client().ttl(key) > 0) is ttl_left, limiter.__name__


# --- every schedule -------------------------------------------------------------------------------


def test_explorer_finds_4_of_6_bad_schedules_for_the_naive_limiter(lab: Lab) -> None:
    key, setup = one_slot_left(lab)
    found = explore(lab, pair(naive_allow, key), admits_at_most_one, setup=setup, watch=[key])
    assert (found.total, found.bad_count) == (6, 4)
    assert sorted(found.bad) == ["ABAB", "ABBA", "BAAB", "BABA"]


def test_explorer_finds_4_of_6_schedules_losing_an_update(lab: Lab) -> None:
    key = lab.key("n")
    count = partial(lost_update_increment, key=key)
    found = explore(lab, {"A": count, "B": count}, lambda c, _r: c.get(key) == "2", watch=[key])
    assert (found.total, found.bad_count) == (6, 4)


@pytest.mark.parametrize(
    "limiter, total",
    [(lua_allow, 2), (watch_allow, 20), (incr_first_allow, 2), (multi_allow, 2), (ifeq_allow, 6)],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_explorer_finds_no_bad_schedule_for_each_fix(lab: Lab, limiter, total: int) -> None:
    needs_ifeq(lab, limiter)
    key, setup = one_slot_left(lab)
    found = explore(lab, pair(limiter, key), admits_at_most_one, setup=setup, watch=[key])
    assert (found.total, found.bad_count) == (total, 0)
    assert all(sorted(o.results.values()) == [False, True] for o in found.outcomes)


# --- threads --------------------------------------------------------------------------------------


def test_naive_limiter_overshoots_on_every_lockstep_run(lab: Lab) -> None:
    key = lab.key("w")
    for _ in range(3):
        lab.client().delete(key)
        result = run_clients(
            lab,
            partial(naive_allow, key=key, limit=50, window=WINDOW),
            clients=8,
            iterations=25,
            mode="lockstep",
        )
        assert result.count(True) > 50


def test_lost_updates_under_lockstep_threads(lab: Lab) -> None:
    key = lab.key("n")
    run_clients(
        lab, partial(lost_update_increment, key=key), clients=8, iterations=10, mode="lockstep"
    )
    assert int(lab.client().get(key)) < 80


@pytest.mark.parametrize("limiter", FIXES, ids=ids)
def test_fixes_admit_exactly_the_limit_under_the_same_lockstep_load(lab: Lab, limiter) -> None:
    needs_ifeq(lab, limiter)
    key = lab.key("w")
    result = run_clients(
        lab,
        partial(limiter, key=key, limit=50, window=WINDOW),
        clients=8,
        iterations=25,
        mode="lockstep",
    )
    assert (result.count(True), result.count(False)) == (50, 150)
    assert 0 < lab.client().ttl(key) <= WINDOW
    assert (result.retries > 0) is (limiter in (watch_allow, ifeq_allow))  # only these retry


@pytest.mark.parametrize("limiter", [watch_allow, multi_allow, lua_allow], ids=ids)
def test_limiters_work_on_a_cluster(cluster_lab: Lab, limiter) -> None:
    c, key = cluster_lab.client(), cluster_lab.ns.tagged("rl", "w")
    assert [limiter(c, key, 2, WINDOW) for _ in range(3)] == [True, True, False]
    assert 0 < c.ttl(key) <= WINDOW


# --- one function object everywhere ---------------------------------------------------------------


def notebook_strategies() -> set[str]:
    """Return the names of races.ratelimit functions that notebook 01's code cells use (as rl.NAME)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    names = set()
    for source in ("".join(c["source"]) for c in cells if c["cell_type"] == "code"):
        source = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
        )
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "rl"
            ):
                names.add(node.attr)
    return {
        n for n in names if callable(getattr(rl, n, None)) and n.endswith(("_allow", "_increment"))
    }


def test_every_strategy_of_notebook_01_is_checked_below() -> None:
    assert notebook_strategies() == {fn.__name__ for fn in NOTEBOOK_STRATEGIES}


@pytest.mark.parametrize("fn", list(NOTEBOOK_STRATEGIES), ids=ids)
def test_one_function_object_is_interleaved_explored_threaded_and_benchmarked(lab: Lab, fn) -> None:
    needs_ifeq(lab, fn)
    key = lab.key("w")
    kwargs = (
        {"key": key} if fn is lost_update_increment else {"key": key, "limit": 5, "window": WINDOW}
    )
    strategy = partial(fn, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # plain_client_watch_allow's trap
        trace = run_schedule(lab, {"A": strategy}, "A", watch=[key], finish=True)
        found = explore(lab, {"A": strategy, "B": strategy}, lambda c, r: True, watch=[key])
        threaded = run_clients(lab, strategy, clients=2, iterations=2)
    assert trace.actors["A"].func is fn
    assert found.actors["A"].func is fn and found.actors["B"].func is fn
    assert threaded.fn.func is fn
    if NOTEBOOK_STRATEGIES[fn] is not None:
        assert bench.STRATEGIES[NOTEBOOK_STRATEGIES[fn]] is fn
