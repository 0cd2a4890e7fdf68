"""helpers/luakit.py: stable error text, tables, background calls, throwaway servers."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from helpers.luakit import (error_text, increment_with_ifeq, increment_with_watch, longest_wait_during,
                            outcome_of, outcome_text, reservation_action, restarted,
                            reply_text, run_in_background, run_increments,
                            scratch_server, server_available, text_table)


def test_error_text_strips_the_script_location_of_a_real_server() -> None:
    exc = redis.ResponseError("user_script:1: Attempt to modify a readonly table script: "
                              + "a" * 40 + ", on @user_script:1.")
    assert error_text(exc) == "ResponseError: Attempt to modify a readonly table"


def test_error_text_keeps_a_plain_message() -> None:
    assert error_text(redis.ResponseError("WRONGTYPE Operation")) == "ResponseError: WRONGTYPE Operation"


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
        "a     bee", "----  ---", "1     2", "long  3"]


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
        assert server is not None and server.client().config_get("maxmemory")["maxmemory"] in ("10485760", b"10485760")
    assert not server.is_running()


@pytest.mark.parametrize("strategy", ["watch", "ifeq"])
def test_compare_and_set_increments_lose_no_update_under_threads(lab, strategy: str) -> None:
    if strategy == "ifeq" and not lab.caps.set_ifeq:
        pytest.skip("this backend has no SET IFEQ")
    key = lab.key("counter")
    lab.client().set(key, 0)
    increment = increment_with_watch if strategy == "watch" else increment_with_ifeq
    result = run_increments(lab, strategy, increment, key, threads=4, per_thread=50)
    assert result.operations == 200 and result.final == 200 and result.lost_updates == 0
    assert result.retries >= 0 and result.micros_per_op > 0


def test_a_racy_increment_is_reported_as_lost_updates(lab) -> None:

    def get_then_set(client, key: str) -> int:
        value = int(client.get(key))
        time.sleep(0.0005)
        client.set(key, value + 1)
        return 0

    key = lab.key("counter")
    lab.client().set(key, 0)
    result = run_increments(lab, "get-then-set", get_then_set, key, threads=4, per_thread=20)
    assert result.lost_updates == 80 - result.final and result.lost_updates > 0


def test_ifeq_increment_refuses_a_missing_key(lab) -> None:
    with pytest.raises(KeyError):
        increment_with_ifeq(lab.client(), lab.key("missing"))


def test_run_increments_reraises_a_worker_error(lab) -> None:
    key = lab.key("h")
    lab.client().hset(key, "f", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        run_increments(lab, "incr", lambda c, k: c.incr(k) and 0, key, threads=2, per_thread=3)


def test_reservation_action_separates_business_outcomes_faults_and_lost_replies() -> None:
    assert reservation_action(["SOLD_OUT", 0]).startswith("business: tell the customer")
    assert reservation_action(["RESERVED", 3]) == "business: confirm the booking"
    assert reservation_action(["ALREADY_BOOKED", 2]).startswith("business: an earlier attempt")
    assert "SAME booking id" in reservation_action(redis.TimeoutError("timed out"))
    assert "SAME booking id" in reservation_action(redis.ConnectionError("reset"))
    assert reservation_action(redis.ResponseError("WRONGTYPE x")).startswith("technical fault")
    assert reservation_action(["MAYBE", 1]).startswith("unexpected outcome")
    assert reservation_action(None).startswith("unexpected outcome")


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
        raise redis.exceptions.RedisClusterException("EVAL - all keys must map to the same key slot")
    assert reply_text(refuses) == "RedisClusterException: EVAL - all keys must map to the same key slot"


def test_short_outcomes_names_exceptions_and_keeps_values() -> None:
    from helpers.luakit import short_outcomes
    assert short_outcomes([1, redis.exceptions.OutOfMemoryError("x"), "OK"]) == [1, "OutOfMemoryError", "OK"]


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_set_memory_headroom_puts_maxmemory_above_current_use() -> None:
    from helpers.luakit import set_memory_headroom
    with scratch_server() as server:
        c = server.client(decode_responses=True)
        limit = set_memory_headroom(c, 1_000_000)
        assert int(c.config_get("maxmemory")["maxmemory"]) == limit
        assert 0 < limit - int(c.info("memory")["used_memory"]) <= 1_000_000


@pytest.mark.parametrize("strategy", ["watch", "ifeq"])
def test_optimistic_increments_give_up_after_max_retries(lab, strategy: str, monkeypatch) -> None:
    from helpers.luakit import TooManyRetries
    if strategy == "ifeq" and not lab.caps.set_ifeq:
        pytest.skip("this backend has no SET IFEQ")
    key, rival = lab.key("counter"), lab.client()
    client = lab.client()
    client.set(key, 0)
    if strategy == "watch":
        original_get = type(client.pipeline()).get

        def get_then_rival_writes(pipe, name):  # another client changes the key after every read
            value = original_get(pipe, name)
            rival.incr(key)
            return value
        monkeypatch.setattr(type(client.pipeline()), "get", get_then_rival_writes)
        with pytest.raises(TooManyRetries):
            increment_with_watch(client, key, max_retries=3)
    else:
        class RacingClient:
            def get(self, name):
                value = client.get(name)
                rival.incr(name)
                return value

            def execute_command(self, *args):
                return client.execute_command(*args)
        with pytest.raises(TooManyRetries):
            increment_with_ifeq(RacingClient(), key, max_retries=3)
