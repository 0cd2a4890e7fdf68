"""helpers/luakit.py: stable error text, tables, background calls, throwaway servers."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from helpers.luakit import (error_text, longest_wait_during, reply_text, run_in_background,
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
