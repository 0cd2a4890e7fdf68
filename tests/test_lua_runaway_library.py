"""lua/runaway_library.lua: a read-only loop as a Function; FUNCTION STATS names it while BUSY, FUNCTION KILL stops it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import delete_library, load_library
from helpers.luakit import run_in_background, scratch_server, server_available, wait_for_busy

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server binary")
SPIN = "racelab_runaway_spin"


@pytest.fixture
def client(lab: Lab) -> Iterator[redis.Redis]:
    """A client of the lab with racelab_runaway loaded; the library is deleted afterwards."""
    c = lab.client()
    assert load_library(c, "runaway_library") == "racelab_runaway"
    try:
        yield c
    finally:
        delete_library(c, "runaway_library")


def test_it_loops_and_returns_the_iterations_through_fcall_ro(client: redis.Redis) -> None:
    assert client.fcall_ro(SPIN, 0, "1000") == 1000


@pytest.mark.parametrize("args", [["0"], ["1e3"], ["10000000000001"], ["-5"], []])
def test_bad_arguments_are_refused(client: redis.Redis, args: list[str]) -> None:
    with pytest.raises(redis.ResponseError, match=f"{SPIN}: invalid-arguments: "):
        client.fcall(SPIN, 0, *args)


def test_a_key_is_refused(lab: Lab, client: redis.Redis) -> None:
    with pytest.raises(redis.ResponseError, match=f"{SPIN}: invalid-arguments: "):
        client.fcall(SPIN, 1, lab.key("k"), "10")


@needs_server
def test_while_busy_function_stats_names_it_and_function_kill_stops_it() -> None:
    with scratch_server("--busy-reply-threshold", "100") as server:
        runner, other = server.client(decode_responses=True), server.client(decode_responses=True)
        load_library(runner, "runaway_library")
        running = run_in_background(lambda: runner.fcall(SPIN, 0, 10**12))
        assert wait_for_busy(other, "probe").startswith("BUSY")
        stats = other.function_stats()["running_script"]
        assert stats["name"] == SPIN and stats["command"][:2] == ["FCALL", SPIN]
        assert stats["duration_ms"] >= 100
        assert other.function_kill() == "OK"
        assert "killed" in str(running.join()).lower() and other.ping() is True
