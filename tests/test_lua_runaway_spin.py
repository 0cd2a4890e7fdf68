"""lua/runaway_spin.lua: loops without or after a write; BUSY, SCRIPT KILL and UNKILLABLE on a throwaway server."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import lua_source
from helpers.luakit import run_in_background, scratch_server, server_available, wait_for_busy

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server binary")


def test_read_mode_returns_the_iterations_and_writes_nothing(lab: Lab) -> None:
    c = lab.client()
    assert lab.script("runaway_spin", c)(keys=[lab.key("m")], args=[1000, "read"]) == 1000
    assert lab.ns.keys(c) == []


def test_write_mode_sets_the_marker_first(lab: Lab) -> None:
    c = lab.client()
    assert lab.script("runaway_spin", c)(keys=[lab.key("m")], args=[10, "write"]) == 10
    assert c.get(lab.key("m")) == "started"


def test_delete_mode_deletes_the_marker_first(lab: Lab) -> None:
    c = lab.client()
    c.set(lab.key("m"), "old")
    assert lab.script("runaway_spin", c)(keys=[lab.key("m")], args=[10, "delete"]) == 10
    assert c.exists(lab.key("m")) == 0


@pytest.mark.parametrize(
    "args",
    [
        ["0", "read"],
        ["1e3", "read"],
        ["10000000000001", "read"],
        ["10", "loop"],
        ["10"],
        ["-5", "write"],
    ],
)
def test_bad_arguments_are_refused_before_any_write(lab: Lab, args: list[str]) -> None:
    c = lab.client()
    with pytest.raises(redis.ResponseError, match="runaway_spin: invalid-arguments: "):
        lab.script("runaway_spin", c)(keys=[lab.key("m")], args=args)
    assert lab.ns.keys(c) == []


@needs_server
def test_a_read_only_runaway_makes_others_busy_and_script_kill_stops_it() -> None:
    with scratch_server("--busy-reply-threshold", "50") as server:
        runner, other = server.client(decode_responses=True), server.client(decode_responses=True)
        script = runner.register_script(lua_source("runaway_spin"))
        background = run_in_background(lambda: script(keys=["m"], args=[10**12, "read"]))
        assert wait_for_busy(other, "m").startswith("BUSY")
        assert other.script_kill() is True
        outcome = background.join()
        assert isinstance(outcome, redis.ResponseError) and "killed" in str(outcome).lower()
        assert other.ping() is True


@needs_server
def test_a_runaway_that_wrote_is_unkillable_and_only_shutdown_nosave_ends_it() -> None:
    with scratch_server("--busy-reply-threshold", "50") as server:
        runner = server.client(decode_responses=True, retry_on_error=[], socket_timeout=5)
        other = server.client(decode_responses=True)
        script = runner.register_script(lua_source("runaway_spin"))
        background = run_in_background(lambda: script(keys=["m"], args=[10**12, "write"]))
        wait_for_busy(other, "m")
        with pytest.raises(redis.ResponseError, match="^UNKILLABLE"):
            other.script_kill()
        other.shutdown(nosave=True)
        server.process.wait(timeout=10)
        assert not server.is_running()
        assert isinstance(background.join(), redis.ConnectionError)


@needs_server
def test_a_runaway_whose_first_write_command_changed_nothing_is_unkillable_too() -> None:
    with scratch_server("--busy-reply-threshold", "50") as server:
        runner = server.client(decode_responses=True, retry_on_error=[], socket_timeout=5)
        other = server.client(decode_responses=True)
        assert runner.exists("never-existed") == 0
        script = runner.register_script(lua_source("runaway_spin"))
        background = run_in_background(
            lambda: script(keys=["never-existed"], args=[10**12, "delete"])
        )
        wait_for_busy(other, "never-existed")
        with pytest.raises(redis.ResponseError, match="^UNKILLABLE"):
            other.script_kill()
        other.shutdown(nosave=True)
        server.process.wait(timeout=10)
        assert isinstance(background.join(), redis.ConnectionError)
