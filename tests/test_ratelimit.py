"""helpers.ratelimit: each broken limiter breaks in the documented way, each fix holds.

Interleavings are forced without threads: a limiter's ``think`` hook (called between its read
and its write) runs another client's whole request, so every test here is deterministic.
"""

from __future__ import annotations

import random
import warnings

import pytest

from helpers import Lab
from helpers.instruments.explore import explore
from helpers.instruments.race import run_clients
from helpers.instruments.schedule import run_schedule
from helpers.ratelimit import (LUA_SCRIPT, LimiterStateError, lua_limit_or_error, TooMuchContention, admitted_over_limit,
                               backoff_delay, docs_pattern_allow, ifeq_cas_allow, incr_expire_multi_allow,
                               incr_first_allow, lost_update_increment, lua_allow, lua_limit, naive_allow,
                               plain_client_watch_allow, watch_allow, admits_at_most, compare_strategies, ifeq_program,
                               incr_first_program, lost_update_program, lua_program, multi_program,
                               naive_program, watch_program, client_functions)

WINDOW = 60


def once(action):
    """Return a think hook that runs action the first time it is called, then does nothing."""
    done = []

    def think() -> None:
        if not done:
            done.append(True)
            action()
    return think


def no_sleep(_seconds: float) -> None:
    """Stand-in for time.sleep in retry tests."""


@pytest.mark.parametrize("limiter", [naive_allow, incr_first_allow, incr_expire_multi_allow, watch_allow],
                         ids=lambda f: f.__name__)
def test_one_client_alone_gets_exactly_limit_requests_and_a_ttl(lab: Lab, limiter) -> None:
    c, key = lab.client(), lab.key("w")
    assert [limiter(c, key, 3, WINDOW) for _ in range(5)] == [True, True, True, False, False]
    assert 0 < c.ttl(key) <= WINDOW


def test_docs_pattern_admits_limit_plus_one_even_with_one_client(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    admitted = sum(docs_pattern_allow(c, key, 10, WINDOW) for _ in range(20))
    assert admitted == 11
    assert admitted_over_limit(admitted, 10) == 1


def test_naive_limiter_overshoots_when_a_request_falls_between_get_and_incr(lab: Lab) -> None:
    a, b, key = lab.client(), lab.client(), lab.key("w")
    b_result = []
    allowed = naive_allow(a, key, 1, WINDOW, think=once(lambda: b_result.append(naive_allow(b, key, 1, WINDOW))))
    assert allowed and b_result == [True]
    assert a.get(key) == "2"


def test_read_modify_write_counter_loses_the_interleaved_update(lab: Lab) -> None:
    a, b, key = lab.client(), lab.client(), lab.key("n")
    written = lost_update_increment(a, key, think=once(lambda: lost_update_increment(b, key)))
    assert written == 1
    assert a.get(key) == "1"  # two increments, one survives


def test_watch_on_a_plain_client_sends_nothing_and_still_overshoots(lab: Lab) -> None:
    a, b, key = lab.client(), lab.client(), lab.key("w")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        allowed = plain_client_watch_allow(a, key, 1, WINDOW,
                                           think=once(lambda: plain_client_watch_allow(b, key, 1, WINDOW)))
    assert allowed
    assert a.get(key) == "2"
    assert any(issubclass(w.category, DeprecationWarning) and "Pipeline" in str(w.message) for w in caught)


def test_watch_on_the_pipeline_retries_and_rejects_after_interference(lab: Lab) -> None:
    a, b, key = lab.client(), lab.client(), lab.key("w")
    retries = []
    allowed = watch_allow(a, key, 1, WINDOW, think=once(lambda: watch_allow(b, key, 1, WINDOW)),
                          on_retry=lambda: retries.append(1), sleep=no_sleep)
    assert not allowed
    assert retries == [1]
    assert a.get(key) == "1"


def test_watch_gives_up_after_max_attempts_without_writing(lab: Lab) -> None:
    a, b, key = lab.client(), lab.client(), lab.key("w")
    b.set(key, 0, ex=WINDOW)
    retries, delays = [], []
    with pytest.raises(TooMuchContention) as info:
        watch_allow(a, key, 1000, WINDOW, think=lambda: b.set(key, 0, keepttl=True), max_attempts=4,
                    on_retry=lambda: retries.append(1), sleep=delays.append)
    assert info.value.attempts == 4
    assert len(retries) == 4 and len(delays) == 3  # no pointless sleep after the last attempt
    assert a.get(key) == "0"


def test_watch_first_hit_sets_the_ttl_once_and_later_hits_keep_it(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert watch_allow(c, key, 5, 100)
    c.expire(key, 7)
    assert watch_allow(c, key, 5, 100)
    assert c.get(key) == "2"
    assert 0 < c.ttl(key) <= 7


@pytest.mark.parametrize("limiter", [watch_allow, ifeq_cas_allow], ids=lambda f: f.__name__)
def test_optimistic_limiters_refuse_zero_attempts(lab: Lab, limiter) -> None:
    with pytest.raises(ValueError):
        limiter(lab.client(), lab.key("w"), 1, WINDOW, max_attempts=0)


def test_backoff_delay_is_jittered_and_capped() -> None:
    rng = random.Random(7)
    for attempt in range(1, 12):
        ceiling = min(0.01, 0.001 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, 0.001, 0.01, rng) for _ in range(50)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # jitter spreads over the range, not a constant


def test_backoff_delay_survives_huge_attempt_numbers_and_rejects_nonsense() -> None:
    assert 0.0 <= backoff_delay(10_000, 0.001, 0.01) <= 0.01
    for bad in [(0, 0.001, 0.01), (1, -0.001, 0.01), (1, 0.001, -1.0), (1, float("nan"), 0.01), (1, 0.001, float("nan"))]:
        with pytest.raises(ValueError):
            backoff_delay(*bad)


def test_incr_first_counts_rejected_attempts_too(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    results = [incr_first_allow(c, key, 3, WINDOW) for _ in range(7)]
    assert results.count(True) == 3
    assert c.get(key) == "7"  # the counter says 7 "requests" though only 3 were admitted


def test_incr_first_cannot_overshoot_when_interleaved(lab: Lab) -> None:
    a, b, key = lab.client(), lab.client(), lab.key("w")
    b_result = []
    a_result = incr_first_allow(a, key, 1, WINDOW,
                                think=once(lambda: b_result.append(incr_first_allow(b, key, 1, WINDOW))))
    assert [a_result, *b_result].count(True) == 1


def test_incr_expire_multi_keeps_the_first_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert incr_expire_multi_allow(c, key, 5, 100)
    c.expire(key, 7)
    assert incr_expire_multi_allow(c, key, 5, 100)
    assert 0 < c.ttl(key) <= 7


def test_incr_expire_multi_gives_an_existing_ttl_less_counter_a_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, 2)
    assert incr_expire_multi_allow(c, key, 5, 100)
    assert 0 < c.ttl(key) <= 100


def test_lua_limit_returns_status_and_count(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    script = lab.script(LUA_SCRIPT, c)
    assert [lua_limit(script, key, 2, WINDOW) for _ in range(3)] == [(1, 1), (1, 2), (0, 2)]
    assert lua_limit(script, key, "1.5", WINDOW) == (2, "invalid-arguments")


def test_lua_allow_raises_on_invalid_state_and_admits_otherwise(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    script = lab.script(LUA_SCRIPT, c)
    assert [lua_allow(script, key, 1, WINDOW) for _ in range(2)] == [True, False]
    c.persist(key)
    with pytest.raises(LimiterStateError) as info:
        lua_allow(script, key, 1, WINDOW)
    assert info.value.reason == "missing-ttl"


def test_ifeq_compare_and_set_retries_after_interference(lab: Lab) -> None:
    if not lab.caps.set_ifeq:
        pytest.skip(f"SET ... IFEQ not supported by the {lab.kind} backend")
    a, b, key = lab.client(), lab.client(), lab.key("w")
    a.set(key, 0, ex=50)
    retries = []
    allowed = ifeq_cas_allow(a, key, 1, WINDOW, think=once(lambda: ifeq_cas_allow(b, key, 1, WINDOW)),
                             on_retry=lambda: retries.append(1), sleep=no_sleep)
    assert not allowed and retries == [1]
    assert a.get(key) == "1"
    assert 0 < a.ttl(key) <= 50  # KEEPTTL: the window did not move


def test_ifeq_first_hit_creates_the_counter_with_a_ttl(lab: Lab) -> None:
    if not lab.caps.set_ifeq:
        pytest.skip(f"SET ... IFEQ not supported by the {lab.kind} backend")
    c, key = lab.client(), lab.key("w")
    assert [ifeq_cas_allow(c, key, 2, WINDOW) for _ in range(3)] == [True, True, False]
    assert 0 < c.ttl(key) <= WINDOW


def _hammer(lab: Lab, request, clients: int = 16, each: int = 15) -> int:
    """Run request(ctx) each times in each of clients threads; return how many were admitted."""
    return run_clients(lab, request, clients=clients, iterations=each).count(True)


@pytest.mark.parametrize("name", ["lua", "watch", "incr_first", "incr_expire_multi", "ifeq_cas"])
def test_fixes_never_admit_more_than_the_limit_under_16_threads(lab: Lab, name: str) -> None:
    if name == "ifeq_cas" and not lab.caps.set_ifeq:
        pytest.skip(f"SET ... IFEQ not supported by the {lab.kind} backend")
    key, limit = lab.key("w"), 50
    requests = {
        "lua": lambda ctx: lua_allow(lab.script(LUA_SCRIPT, ctx.client), key, limit, WINDOW),
        "watch": lambda ctx: watch_allow(ctx.client, key, limit, WINDOW, think=ctx.think, max_attempts=1000),
        "incr_first": lambda ctx: incr_first_allow(ctx.client, key, limit, WINDOW, think=ctx.think),
        "incr_expire_multi": lambda ctx: incr_expire_multi_allow(ctx.client, key, limit, WINDOW),
        "ifeq_cas": lambda ctx: ifeq_cas_allow(ctx.client, key, limit, WINDOW, think=ctx.think, max_attempts=1000),
    }
    assert _hammer(lab, requests[name]) == limit


def test_naive_limiter_under_threads_overshoots_with_think_time(lab: Lab) -> None:
    key, limit = lab.key("w"), 50
    result = run_clients(lab, lambda ctx: naive_allow(ctx.client, key, limit, WINDOW, think=ctx.think),
                         clients=8, iterations=25)
    assert result.count(True) > limit  # every thread yields between GET and INCR: many read the same value


def _one_slot_left(lab: Lab, limit: int = 5):
    key = lab.key("w")
    return key, (lambda c: c.set(key, limit - 1, ex=WINDOW))


def test_forced_schedule_abab_makes_the_naive_limiter_admit_both(lab: Lab) -> None:
    key, setup = _one_slot_left(lab)
    trace = run_schedule(lab, {"A": naive_program(key, 5, WINDOW), "B": naive_program(key, 5, WINDOW)},
                         "ABAB", setup=setup, watch=[key])
    assert trace.results == {"A": "allowed", "B": "allowed"}
    assert [row.reply for row in trace.rows] == ["'4'", "'4'", "5", "6"]


def test_explorer_finds_4_of_6_bad_schedules_for_the_naive_limiter(lab: Lab) -> None:
    key, setup = _one_slot_left(lab)
    found = explore(lab, {"A": naive_program(key, 5, WINDOW), "B": naive_program(key, 5, WINDOW)},
                    admits_at_most(1), setup=setup, watch=[key])
    assert (found.total, found.bad_count) == (6, 4)
    assert sorted(found.bad) == ["ABAB", "ABBA", "BAAB", "BABA"]


def test_explorer_finds_4_of_6_schedules_losing_an_update(lab: Lab) -> None:
    key = lab.key("n")
    found = explore(lab, {"A": lost_update_program(key), "B": lost_update_program(key)},
                    lambda c, _results: c.get(key) == "2", setup=lambda c: c.delete(key), watch=[key])
    assert (found.total, found.bad_count) == (6, 4)


@pytest.mark.parametrize("program", [lua_program, watch_program, incr_first_program, multi_program, ifeq_program],
                         ids=lambda f: f.__name__)
def test_explorer_finds_no_bad_schedule_for_each_fix(lab: Lab, program) -> None:
    if program is ifeq_program and not lab.caps.set_ifeq:
        pytest.skip(f"SET ... IFEQ not supported by the {lab.kind} backend")
    key, setup = _one_slot_left(lab)
    found = explore(lab, {"A": program(key, 5, WINDOW), "B": program(key, 5, WINDOW)},
                    admits_at_most(1), setup=setup, watch=[key])
    assert found.total >= 2 and found.bad_count == 0
    assert all(sorted(o.results.values()) == ["allowed", "rejected"] for o in found.outcomes)


def test_admits_at_most_counts_allowed_results() -> None:
    assert admits_at_most(1)(None, {"A": "allowed", "B": "rejected"})
    assert not admits_at_most(1)(None, {"A": "allowed", "B": "allowed"})


def test_lua_program_reports_the_status_2_reason(lab: Lab) -> None:
    key = lab.key("w")
    trace = run_schedule(lab, {"A": lua_program(key, "1e3", WINDOW)}, "A", watch=[key])
    assert trace.results == {"A": "invalid-arguments"}


def test_client_functions_admit_exactly_the_limit_except_naive(lab: Lab) -> None:
    key = lab.key("w")
    names = ("lua", "watch", "incr-first", "multi") + (("ifeq",) if lab.caps.set_ifeq else ())
    for name, fn in client_functions(key, 20, WINDOW, names).items():
        lab.client().delete(key)
        assert run_clients(lab, fn, clients=4, iterations=10).count(True) == 20, name


def test_client_functions_reject_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown strategies"):
        client_functions("k", 1, 1, ("naive", "optimistic"))


def test_lua_limit_or_error_names_the_redis_error_code(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    script = lab.script(LUA_SCRIPT, c)
    assert lua_limit_or_error(script, key, 2, WINDOW) == (1, 1)
    c.delete(key)
    c.rpush(key, "x")
    assert lua_limit_or_error(script, key, 2, WINDOW) == "error WRONGTYPE"


def test_compare_strategies_keeps_repeats_runs_per_strategy_and_client_count(lab: Lab) -> None:
    key = lab.key("w")
    fns = client_functions(key, 10**6, WINDOW, ("naive", "lua"), think=False)
    runs = compare_strategies(lab, key, fns, (1, 2), requests=4, repeats=2)
    assert {name: {n: len(rs) for n, rs in per.items()} for name, per in runs.items()} == \
        {"naive": {1: 2, 2: 2}, "lua": {1: 2, 2: 2}}
    assert all(r.count(True) == 4 and r.clients == n for per in runs.values() for n, rs in per.items() for r in rs)


def test_compare_strategies_rejects_nonsense(lab: Lab) -> None:
    with pytest.raises(ValueError):
        compare_strategies(lab, lab.key("w"), {}, (0,), requests=4, repeats=1)


def test_watch_and_multi_limiters_work_on_a_cluster(cluster_lab: Lab) -> None:
    c, key = cluster_lab.client(), cluster_lab.ns.tagged("rl", "w")
    assert [watch_allow(c, key, 2, WINDOW) for _ in range(3)] == [True, True, False]
    c.delete(key)
    assert [incr_expire_multi_allow(c, key, 2, WINDOW) for _ in range(3)] == [True, True, False]
    assert 0 < c.ttl(key) <= WINDOW


FIXED_LIMITERS = [incr_first_allow, incr_expire_multi_allow, watch_allow, ifeq_cas_allow]


@pytest.mark.parametrize("limit, window", [(5, 0), (5, -5), (0, 60), (-1, 60), (True, 60), (5, 1.5), ("5", 60)])
@pytest.mark.parametrize("limiter", FIXED_LIMITERS, ids=lambda f: f.__name__)
def test_fixed_limiters_refuse_a_non_positive_limit_or_window_and_write_nothing(lab: Lab, limiter, limit,
                                                                                window) -> None:
    # Regression: with window 0 (or negative) incr_first_allow and incr_expire_multi_allow
    # expired their own counter at once (EXPIRE 0 deletes the key) and admitted every request.
    c, key = lab.client(), lab.key("w")
    with pytest.raises(ValueError, match="limit|window"):
        limiter(c, key, limit, window)
    assert c.exists(key) == 0


def test_client_functions_refuse_a_window_of_zero() -> None:
    with pytest.raises(ValueError, match="window"):
        client_functions("k", 5, 0, ("incr-first",))


@pytest.mark.parametrize("limiter", FIXED_LIMITERS, ids=lambda f: f.__name__)
def test_fixed_limiters_never_admit_over_the_limit_with_64_clients(lab: Lab, limiter) -> None:
    if limiter is ifeq_cas_allow and not lab.caps.set_ifeq:
        pytest.skip("SET ... IFEQ needs Redis >= 8.4")
    key, limit = lab.key("w"), 37
    kwargs = {"max_attempts": 10_000} if limiter in (watch_allow, ifeq_cas_allow) else {}
    result = run_clients(lab, lambda ctx: limiter(ctx.client, key, limit, WINDOW, think=ctx.think, **kwargs),
                         clients=64, iterations=3)
    assert result.count(True) == limit
    assert result.count(False) == 64 * 3 - limit
    assert 0 < lab.client().ttl(key) <= WINDOW


@pytest.mark.parametrize("stored", ["-3", "abc", " 5", "1.5", "05", "+1", ""])
@pytest.mark.parametrize("limiter", [naive_allow, watch_allow, ifeq_cas_allow], ids=lambda f: f.__name__)
def test_limiters_that_read_the_counter_refuse_a_corrupt_one_and_write_nothing(lab: Lab, limiter, stored) -> None:
    # Regression: int() took "-3" as -3, so watch_allow / ifeq_cas_allow admitted 3 requests
    # over the limit (the Lua limiter answers invalid-counter for the same state).
    c, key = lab.client(), lab.key("w")
    c.set(key, stored, ex=WINDOW)
    with pytest.raises(LimiterStateError, match="invalid-counter"):
        limiter(c, key, 2, WINDOW)
    assert c.get(key) == stored


@pytest.mark.parametrize("limiter", [incr_first_allow, incr_expire_multi_allow], ids=lambda f: f.__name__)
def test_incr_first_limiters_refuse_a_negative_counter_instead_of_admitting(lab: Lab, limiter) -> None:
    # Regression: a counter holding -5 made INCR return -4, which is <= limit, so the request was
    # admitted (and every later one until the counter climbed past the limit). INCR has already
    # run by then: a single command cannot check first, the Lua limiter does (invalid-counter).
    c, key = lab.client(), lab.key("w")
    c.set(key, "-5", ex=WINDOW)
    with pytest.raises(LimiterStateError, match="invalid-counter: INCR returned -4"):
        limiter(c, key, 2, WINDOW)
    assert c.get(key) == "-4"
