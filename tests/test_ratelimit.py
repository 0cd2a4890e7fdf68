"""helpers.ratelimit: each broken limiter breaks in the documented way, each fix holds.

Interleavings are forced without threads: a limiter's ``think`` hook (called between its read
and its write) runs another client's whole request, so every test here is deterministic.
"""

from __future__ import annotations

import random
import threading
import time
import warnings

import pytest
import redis

from helpers import Lab
from helpers.ratelimit import (LUA_SCRIPT, LimiterStateError, TooMuchContention, admitted_over_limit,
                               backoff_delay, docs_pattern_allow, ifeq_cas_allow, incr_expire_multi_allow,
                               incr_first_allow, lost_update_increment, lua_allow, lua_limit, naive_allow,
                               plain_client_watch_allow, watch_allow)

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
    """Run request(client) each times in each of clients threads; return how many were admitted."""
    start = threading.Barrier(clients)
    admitted: list[bool] = []
    errors: list[BaseException] = []

    def client_thread() -> None:
        c = lab.client()
        try:
            start.wait(timeout=30)
            admitted.extend(request(c) for _ in range(each))
        except (redis.RedisError, TooMuchContention, threading.BrokenBarrierError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client_thread) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not errors, errors
    return sum(admitted)


def yield_gil() -> None:
    """Think time of zero that still lets another thread run (widens the race window)."""
    time.sleep(0)


@pytest.mark.parametrize("name", ["lua", "watch", "incr_first", "incr_expire_multi", "ifeq_cas"])
def test_fixes_never_admit_more_than_the_limit_under_16_threads(lab: Lab, name: str) -> None:
    if name == "ifeq_cas" and not lab.caps.set_ifeq:
        pytest.skip(f"SET ... IFEQ not supported by the {lab.kind} backend")
    key, limit = lab.key("w"), 50
    requests = {
        "lua": lambda c: lua_allow(lab.script(LUA_SCRIPT, c), key, limit, WINDOW),
        "watch": lambda c: watch_allow(c, key, limit, WINDOW, think=yield_gil, max_attempts=1000),
        "incr_first": lambda c: incr_first_allow(c, key, limit, WINDOW, think=yield_gil),
        "incr_expire_multi": lambda c: incr_expire_multi_allow(c, key, limit, WINDOW),
        "ifeq_cas": lambda c: ifeq_cas_allow(c, key, limit, WINDOW, think=yield_gil, max_attempts=1000),
    }
    assert _hammer(lab, requests[name]) == limit
