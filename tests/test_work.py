"""helpers.instruments.work: exact work per call of every strategy, equal on every backend."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from helpers import Lab
from helpers.instruments.work import Work, count_work
from races import dictionary as dc
from races import locks
from races import ratelimit as rl

pytestmark = pytest.mark.filterwarnings("ignore:Call WATCH from a Pipeline object")

# (round trips, commands sent, commands the server ran, retries) per call, uncontended, warm.
RATELIMIT = {
    "naive_allow": (2, 2, 2, 0),  # GET, INCR
    "docs_pattern_allow": (2, 2, 2, 0),
    "plain_client_watch_allow": (2, 5, 5, 0),  # GET, MULTI/INCR/EXPIRE/EXEC (WATCH never sent)
    "lua_allow": (1, 1, 4, 0),  # EVALSHA running GET, INCR, PTTL
    "watch_allow": (3, 6, 6, 0),  # WATCH, GET, MULTI/INCR/EXPIRE/EXEC
    "incr_first_allow": (1, 1, 1, 0),
    "multi_allow": (1, 4, 4, 0),
    "ifeq_allow": (2, 2, 2, 0),  # GET, SET IFEQ
}
# acquire (SET NX PX) + the release
LOCKS = {
    "release_blind": (2, 2, 2, 0),
    "release_check_then_del": (3, 3, 3, 0),
    "release_lua": (2, 2, 4, 0),  # EVALSHA running GET, DEL
    "release_lua_checked": (2, 2, 4, 0),
    "release_watch": (4, 6, 6, 0),  # WATCH, GET, MULTI/DEL/EXEC
    "release_delex": (2, 2, 2, 0),
    "release_digest": (2, 2, 2, 0),
}
# registering a new string in a dictionary of 10
DICTIONARY = {
    "hgetall_hsetnx_get_or_put": (2, 2, 2, 0),
    "naive_get_or_put": (4, 4, 4, 0),
    "lua_get_or_put": (1, 1, 12, 0),
    "function_get_or_put": (1, 1, 12, 0),
    "watch_get_or_put": (5, 9, 9, 0),  # HGET, WATCH, HGET, HGET, MULTI/3 HSET/EXEC
    "hincrby_hsetnx_get_or_put": (4, 4, 4, 0),  # HGET, HINCRBY, HSETNX, HSET
}


def _counts(work: Work) -> tuple[float, float, float, float]:
    return (work.round_trips, work.sent, work.executed, work.retries)


def _limiter(lab: Lab, name: str) -> Callable[[Any], Any]:
    return partial(getattr(rl, name), key=lab.key("rl"), limit=10**9, window=60)


def _lock_turn(lab: Lab, name: str) -> Callable[[Any], Any]:
    release, key = getattr(locks, name), lab.key("lock")

    def turn(client: Any) -> Any:
        token = locks.new_token()
        locks.acquire(client, key, token, 60_000)
        return release(client, key, token)

    return turn


def _registration(lab: Lab, name: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    keys, words, strategy = dc.dict_keys(lab.ns, "work"), itertools.count(), getattr(dc, name)

    def prefill(client: Any) -> None:
        for i in range(1, 11):
            client.hset(keys.ids, i, f"w{i}")
            client.hset(keys.index, f"w{i}", i)
        client.hset(keys.meta, "last_id", 10)

    return (lambda client: strategy(client, f"new{next(words)}", keys)), prefill


@pytest.mark.parametrize("name", RATELIMIT)
def test_rate_limiters_work_per_admitted_request(lab: Lab, name: str) -> None:
    assert _counts(count_work(lab, _limiter(lab, name))) == RATELIMIT[name]


@pytest.mark.parametrize("name", LOCKS)
def test_lock_releases_work_per_turn(lab: Lab, name: str) -> None:
    assert _counts(count_work(lab, _lock_turn(lab, name))) == LOCKS[name]


@pytest.mark.parametrize("name", DICTIONARY)
def test_dictionary_registrations_work(lab: Lab, name: str) -> None:
    if not hasattr(dc, name):
        pytest.skip(f"races.dictionary has no {name}")
    fn, prefill = _registration(lab, name)
    assert _counts(count_work(lab, fn, setup=prefill)) == DICTIONARY[name]


def test_every_strategy_is_pinned() -> None:
    assert {n for n in vars(rl) if n.endswith("_allow")} <= set(RATELIMIT)
    assert {n for n in vars(locks) if n.startswith("release_")} <= set(LOCKS)
    found = {n for n in vars(dc) if n.endswith("_get_or_put")} - {"batch_get_or_put"}
    assert found <= set(DICTIONARY)


def test_commands_inside_a_script_are_counted_by_name(lab: Lab) -> None:
    work = count_work(lab, _limiter(lab, "lua_allow"))
    assert work.executed_by_command == {"evalsha": 1, "get": 1, "incr": 1, "pttl": 1}


def test_a_table_of_strategies_prints_the_counts(lab: Lab) -> None:
    table = count_work(lab, {n: _limiter(lab, n) for n in ("naive_allow", "lua_allow")}, calls=4)
    assert table["naive_allow"].round_trips == 2 and list(table) == ["naive_allow", "lua_allow"]
    assert table.table().splitlines()[1].split() == ["naive_allow", "2", "2", "2", "0"]


def test_an_aborted_exec_runs_none_of_its_commands_and_is_a_retry(lab: Lab) -> None:
    key = lab.key("k")

    def conflicted(client: Any) -> None:
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            client.incr(key)  # another connection changes the watched key
            pipe.multi()
            pipe.set(key, 0)
            _exec_quietly(pipe)

    work = count_work(lab, conflicted, calls=3)
    # WATCH, INCR, MULTI..EXEC: the SET queued is never run; MULTI and EXEC are
    assert _counts(work) == (3, 5, 4, 1)


def _exec_quietly(pipe: Any) -> None:
    try:
        pipe.execute()
    except Exception as exc:  # noqa: BLE001 - only WatchError is expected here
        assert type(exc).__name__ == "WatchError"


def test_the_labs_own_data_is_not_touched(lab: Lab) -> None:
    observer = lab.client()
    observer.set(lab.key("rl"), 5)
    count_work(lab, _limiter(lab, "naive_allow"), calls=3)
    assert observer.get(lab.key("rl")) == "5"


def test_counts_are_the_same_from_a_cluster(cluster_lab: Lab) -> None:
    work = count_work(cluster_lab, _limiter(cluster_lab, "watch_allow"))
    assert _counts(work) == RATELIMIT["watch_allow"]


def test_bad_counts_are_refused(lab: Lab) -> None:
    with pytest.raises(ValueError, match="calls"):
        count_work(lab, _limiter(lab, "naive_allow"), calls=0)
