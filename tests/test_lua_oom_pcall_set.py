"""lua/oom_pcall_set.lua: redis.pcall hands the script the OOM error; the script still returns."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import lua_source
from helpers.luakit import scratch_server, server_available

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server binary")


def test_a_set_that_succeeds_answers_written(lab: Lab) -> None:
    c = lab.client()
    assert lab.script("oom_pcall_set", c)(keys=[lab.key("k")], args=["v"]) == [1, "OK"]
    assert c.get(lab.key("k")) == "v"


@pytest.mark.parametrize("keys,args", [(0, ["v"]), (1, []), (2, ["v"])])
def test_bad_arguments_write_nothing(lab: Lab, keys: int, args: list[str]) -> None:
    c = lab.client()
    names = [lab.key(f"k{i}") for i in range(keys)]
    with pytest.raises(redis.ResponseError, match="oom_pcall_set: invalid-arguments: "):
        lab.script("oom_pcall_set", c)(keys=names, args=args)
    assert lab.ns.keys(c) == []


@needs_server
def test_over_maxmemory_the_oom_error_comes_back_as_a_reply_and_nothing_is_written() -> None:
    with scratch_server("--maxmemory-policy", "noeviction") as server:
        c = server.client(decode_responses=True)
        c.set("ballast", "x" * 1_000_000)
        c.config_set("maxmemory", int(c.info("memory")["used_memory"]) - 500_000)
        written, message = c.eval(lua_source("oom_pcall_set"), 1, "new", "v")
        assert written == 0 and message.startswith("OOM command not allowed")
        assert c.exists("new") == 0
