"""lua/runaway_fill.lua: writes every key; maxmemory refuses it only when the server is over the limit at its first write."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import lua_source
from helpers.luakit import scratch_server, server_available

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server binary")


def test_every_key_gets_the_value(lab: Lab) -> None:
    c = lab.client()
    keys = [lab.ns.tagged("f", str(i)) for i in range(3)]
    assert lab.script("runaway_fill", c)(keys=keys, args=["v"]) == 3
    assert c.mget(keys) == ["v", "v", "v"]


def test_a_count_repeats_the_value_inside_the_script(lab: Lab) -> None:
    c = lab.client()
    keys = [lab.ns.tagged("f", "a"), lab.ns.tagged("f", "b")]
    assert lab.script("runaway_fill", c)(keys=keys, args=["ab", "3"]) == 2
    assert c.mget(keys) == ["ababab", "ababab"]


@pytest.mark.parametrize(
    "args", [[], ["a", "b"], ["a", "0"], ["a", "1e3"], ["a", "100000001"], ["a", "2", "c"]]
)
def test_bad_arguments_write_nothing(lab: Lab, args: list[str]) -> None:
    c = lab.client()
    with pytest.raises(redis.ResponseError, match="runaway_fill: invalid-arguments: "):
        lab.script("runaway_fill", c)(keys=[lab.key("a")], args=args)
    with pytest.raises(redis.ResponseError, match="runaway_fill: invalid-arguments: "):
        lab.script("runaway_fill", c)(keys=[], args=["v"])
    assert lab.ns.keys(c) == []


@needs_server
def test_a_script_started_under_maxmemory_runs_to_the_end_past_it_and_the_next_one_is_refused() -> (
    None
):
    with scratch_server("--maxmemory-policy", "noeviction") as server:
        c = server.client(decode_responses=True)
        fill = c.register_script(lua_source("runaway_fill"))
        fill.sha = c.script_load(fill.script)
        c.config_set("maxmemory", c.info("memory")["used_memory"] + 1_000_000)
        keys = [f"k{i}" for i in range(16)]
        assert fill(keys=keys, args=["x" * 256_000]) == 16
        assert c.exists(*keys) == 16
        memory = c.info("memory")
        assert memory["used_memory"] > memory["maxmemory"]
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            fill(keys=["late1", "late2"], args=["x"])
        assert c.exists("late1", "late2") == 0
