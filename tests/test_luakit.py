"""helpers/luakit.py (stable error text, tables, background calls, throwaway servers) and the
counter strategies of notebook 05 (races/counters.py)."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

import pytest
import redis

from helpers import client_stats, run_clients, run_schedule
from helpers.backend.modes import Command, Mode, command_name
from helpers.luakit import (
    error_text,
    longest_wait_during,
    outcome_of,
    outcome_text,
    reply_text,
    restarted,
    run_in_background,
    scratch_server,
    server_available,
    text_table,
)
from races import GaveUp
from races.counters import increment_with_ifeq, increment_with_watch


def test_error_text_strips_the_script_location_of_a_real_server() -> None:
    exc = redis.ResponseError(
        "user_script:1: Attempt to modify a readonly table script: "
        + "a" * 40
        + ", on @user_script:1."
    )
    assert error_text(exc) == "ResponseError: Attempt to modify a readonly table"


def test_error_text_keeps_a_plain_message() -> None:
    assert (
        error_text(redis.ResponseError("WRONGTYPE Operation"))
        == "ResponseError: WRONGTYPE Operation"
    )


def test_reply_text_gives_the_repr_of_a_result_or_the_error_text() -> None:
    assert reply_text(lambda: [1, None]) == "[1, None]"

    def fails() -> None:
        raise redis.ResponseError("BUSY Redis is busy")

    assert reply_text(fails) == "ResponseError: BUSY Redis is busy"


def test_reply_text_does_not_swallow_non_redis_errors() -> None:
    with pytest.raises(ZeroDivisionError):
        reply_text(lambda: 1 / 0)


def test_text_table_aligns_columns_under_a_rule() -> None:
    assert text_table(["a", "bee"], [[1, 2], ["long", 3]]).splitlines() == [
        "a     bee",
        "----  ---",
        "1     2",
        "long  3",
    ]


def test_background_call_returns_its_result_or_its_redis_error() -> None:
    assert run_in_background(lambda: 7).join() == 7

    def fails() -> None:
        raise redis.ResponseError("boom")

    assert str(run_in_background(fails).join()) == "boom"


def test_background_join_times_out_on_a_call_still_running() -> None:
    release = threading.Event()
    background = run_in_background(release.wait)
    with pytest.raises(TimeoutError):
        background.join(timeout=0.05)
    release.set()
    assert background.join() is True


def test_longest_wait_during_reports_the_call_duration_and_probe_waits() -> None:
    class Probe:
        def get(self, key: str) -> None:
            time.sleep(0.001)

    seconds, longest = longest_wait_during(lambda: time.sleep(0.05), Probe(), "k")
    assert seconds >= 0.05
    assert 0.001 <= longest < seconds + 1


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_scratch_server_runs_inside_the_block_and_stops_after() -> None:
    with scratch_server("--maxmemory", "10mb") as server:
        assert server is not None and server.client().config_get("maxmemory")["maxmemory"] in (
            "10485760",
            b"10485760",
        )
    assert not server.is_running()


def test_outcome_of_returns_the_value_or_the_redis_error() -> None:
    assert outcome_of(lambda: 5) == 5
    error = redis.ResponseError("ERR x")

    def fails() -> None:
        raise error

    assert outcome_of(fails) is error
    assert outcome_text(error) == "ResponseError: ERR x" and outcome_text([1]) == "[1]"


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_restarted_keeps_saved_data_and_functions_but_not_the_script_cache() -> None:

    with scratch_server() as server:
        c = server.client(decode_responses=True)
        c.set("k", "v")
        sha = c.script_load("return 1")
        with restarted(server) as new:
            assert not server.is_running()
            fresh = new.client(decode_responses=True)
            assert fresh.get("k") == "v"
            assert fresh.script_exists(sha) == [False]
        assert not new.is_running()


def test_reply_text_reports_redis_py_cluster_refusals() -> None:
    def refuses() -> None:
        raise redis.exceptions.RedisClusterException(
            "EVAL - all keys must map to the same key slot"
        )

    assert (
        reply_text(refuses)
        == "RedisClusterException: EVAL - all keys must map to the same key slot"
    )


def test_short_outcomes_names_exceptions_and_keeps_values() -> None:
    from helpers.luakit import short_outcomes

    assert short_outcomes([1, redis.exceptions.OutOfMemoryError("x"), "OK"]) == [
        1,
        "OutOfMemoryError",
        "OK",
    ]


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_set_memory_headroom_puts_maxmemory_above_current_use() -> None:
    from helpers.luakit import set_memory_headroom

    with scratch_server() as server:
        c = server.client(decode_responses=True)
        limit = set_memory_headroom(c, 1_000_000)
        assert int(c.config_get("maxmemory")["maxmemory"]) == limit
        assert 0 < limit - int(c.info("memory")["used_memory"]) <= 1_000_000


# ------------------------------------------------ races/counters.py: the optimistic increments

STRATEGIES = {"watch": increment_with_watch, "ifeq": increment_with_ifeq}


def _strategy(lab: Any, name: str) -> Any:
    if name == "ifeq" and not lab.caps.set_ifeq:
        pytest.skip("this backend has no SET IFEQ")
    return STRATEGIES[name]


@pytest.mark.parametrize("name", STRATEGIES)
def test_an_increment_creates_a_missing_counter_then_adds_one(lab, name: str) -> None:
    increment, key, client = _strategy(lab, name), lab.key("counter"), lab.client()
    assert [increment(client, key) for _ in range(3)] == [1, 2, 3]
    assert client.get(key) == "3" and client_stats(client).retries == 0


@pytest.mark.parametrize("name", STRATEGIES)
def test_concurrent_increments_lose_no_update_and_each_returns_its_own_value(
    lab, name: str
) -> None:
    increment, key = _strategy(lab, name), lab.key("counter")
    # think mode: a pause before every round trip, so the clients do interleave
    result = run_clients(
        lab, partial(increment, key=key), clients=4, iterations=30, mode="think", think_s=0.0005
    )
    assert sorted(v for _, _, v in result.outcomes) == list(range(1, 121))
    assert lab.client().get(key) == "120"


# Forced schedules. WATCH path, one round trip per letter: WATCH, GET, MULTI/SET/EXEC.
# IFEQ path: GET, SET IFEQ.
RETRY_SCHEDULES = {"watch": "AABBBAAAA", "ifeq": "ABBAAA"}


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_lost_conditional_write_is_retried_and_counted(lab, name: str) -> None:
    increment, key = _strategy(lab, name), lab.key("counter")
    actor = partial(increment, key=key)
    trace = run_schedule(
        lab,
        {"A": actor, "B": actor},
        RETRY_SCHEDULES[name],
        setup=lambda c: c.set(key, 0),
        watch=[key],
    )
    assert trace.results == {"A": 2, "B": 1}  # B wrote between A's read and A's write: A read again
    assert lab.client().get(key) == "2"


class RivalWritesFirst(Mode):
    """Straight, except that another client INCRs key just before each conditional write is sent."""

    def __init__(self, rival: Any, key: str) -> None:
        super().__init__()
        self.rival, self.key, self.rival_writes = rival, key, 0

    def before_round_trip(self, commands: list[Command]) -> None:
        super().before_round_trip(commands)
        if any(command_name(c) in ("EXEC", "SET") for c in commands):
            self.rival.incr(self.key)
            self.rival_writes += 1


@pytest.mark.parametrize("name", STRATEGIES)
def test_an_increment_gives_up_after_max_attempts(lab, name: str) -> None:
    increment, key = _strategy(lab, name), lab.key("counter")
    lab.client().set(key, 0)
    mode = RivalWritesFirst(lab.client(), key)
    client = lab.client(mode=mode)
    with pytest.raises(GaveUp, match="gave up after 3 attempts") as gave_up:
        increment(client, key, max_attempts=3)
    assert gave_up.value.attempts == 3
    assert client_stats(client).retries == 3 == mode.rival_writes  # every write lost to the rival
    assert lab.client().get(key) == "3"  # only the rival's writes landed


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("max_attempts", [0, -1])
def test_an_increment_without_attempts_is_a_value_error(lab, name: str, max_attempts: int) -> None:
    increment, key, client = _strategy(lab, name), lab.key("counter"), lab.client()
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        increment(client, key, max_attempts=max_attempts)
    assert client_stats(client).round_trips == 0 and client.exists(key) == 0


def test_without_a_recent_enough_server_the_demos_say_which_server_was_found(monkeypatch) -> None:
    # Regression (issue 17): with only Redis 7.0 on the machine the demos said "no binary".
    from pathlib import Path

    from helpers.luakit import missing_server_text

    old = Path(__file__).resolve().parent.parent / ".redis" / "7.0" / "bin" / "redis-server"
    if not old.exists():
        pytest.skip("Redis 7.0 is fetched by make other-servers")
    monkeypatch.setenv("RACELAB_REDIS_SERVER", str(old))
    text = missing_server_text()
    assert (
        text.startswith("no redis-server >= 8.4")
        and "found: 7.0" in text
        and "explained, not run" in text
    )
    monkeypatch.delenv("RACELAB_REDIS_SERVER")
    assert missing_server_text() == "" or "no redis-server" in missing_server_text()


def test_error_text_strips_the_function_location_too() -> None:
    exc = redis.ResponseError(
        "Script attempted to access keys that do not hash to the same slot "
        "script: racelab_hidden_key, on @user_function:4."
    )
    assert error_text(exc) == (
        "ResponseError: Script attempted to access keys that do not hash to the same slot"
    )


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_wait_for_replica_link_returns_once_the_replica_synced() -> None:
    from helpers.backend.server import RedisServer
    from helpers.luakit import wait_for_replica_link

    with scratch_server() as primary:
        args = ["--replicaof", "127.0.0.1", str(primary.port)]
        with RedisServer(extra_args=args) as replica, replica.client() as copy:
            wait_for_replica_link(copy)
            assert copy.info("replication")["master_link_status"] == "up"
    with scratch_server() as alone, alone.client() as client:
        with pytest.raises(TimeoutError, match="not up"):
            wait_for_replica_link(client, timeout=0.1)
