"""lua/oom_delete_then_set.lua: over maxmemory a DEL-first script runs whole; behind "#!lua" it is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import lua_source
from helpers.luakit import scratch_server, server_available

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server binary")
SOURCE = lua_source("oom_delete_then_set")


def test_deletes_one_key_and_sets_the_other(lab: Lab) -> None:
    c = lab.client()
    gone, kept = lab.key("gone"), lab.key("kept")
    c.set(gone, "old")
    assert lab.script("oom_delete_then_set", c)(keys=[gone, kept], args=["v"]) == 1
    assert (c.exists(gone), c.get(kept)) == (0, "v")
    assert lab.script("oom_delete_then_set", c)(keys=[gone, kept], args=["w"]) == 0


@pytest.mark.parametrize("keys,args", [(1, ["v"]), (2, []), (2, ["v", "w"])])
def test_bad_arguments_write_nothing(lab: Lab, keys: int, args: list[str]) -> None:
    c, names = lab.client(), [lab.key(f"k{i}") for i in range(keys)]
    with pytest.raises(redis.ResponseError, match="oom_delete_then_set: invalid-arguments: "):
        lab.script("oom_delete_then_set", c)(keys=names, args=args)
    assert lab.ns.keys(c) == []


@pytest.fixture
def over_limit() -> Iterator[redis.Redis]:
    """A client of a throwaway server whose used memory is above its maxmemory (noeviction)."""
    with scratch_server("--maxmemory-policy", "noeviction") as server:
        c = server.client(decode_responses=True)
        c.set("ballast", "x" * 1_000_000)
        c.config_set("maxmemory", int(c.info("memory")["used_memory"]) - 500_000)
        yield c


@needs_server
@pytest.mark.parametrize("first_line", ["", "#!lua flags=allow-oom\n"])
def test_over_the_limit_it_runs_whole_without_flags_or_with_allow_oom(
    over_limit: redis.Redis, first_line: str
) -> None:
    assert over_limit.eval(first_line + SOURCE, 2, "ballast", "new", "v" * 1000) == 1
    assert (over_limit.exists("ballast"), over_limit.get("new")) == (0, "v" * 1000)


@needs_server
def test_over_the_limit_a_shebang_without_allow_oom_is_refused_before_it_starts(
    over_limit: redis.Redis,
) -> None:
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        over_limit.eval("#!lua\n" + SOURCE, 2, "ballast", "new", "v")
    assert (over_limit.exists("ballast"), over_limit.exists("new")) == (1, 0)
