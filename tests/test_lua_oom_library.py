"""lua/oom_library.lua: library racelab_oom; over maxmemory only the allow-oom function starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import delete_library, load_library
from helpers.luakit import scratch_server, server_available

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server binary")
STEM, FUNCTIONS = "oom_library", ("racelab_oom_put", "racelab_oom_put_anyway")


@pytest.fixture
def client(lab: Lab) -> Iterator[redis.Redis]:
    """A client of the lab with racelab_oom loaded; the library is deleted afterwards."""
    c = lab.client()
    assert load_library(c, STEM) == "racelab_oom"
    try:
        yield c
    finally:
        delete_library(c, STEM)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_both_delete_one_key_and_set_the_other(
    lab: Lab, client: redis.Redis, function: str
) -> None:
    gone, kept = lab.key("gone"), lab.key("kept")
    client.set(gone, "old")
    assert client.fcall(function, 2, gone, kept, "v") == 1
    assert (client.exists(gone), client.get(kept)) == (0, "v")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_bad_arguments_write_nothing(lab: Lab, client: redis.Redis, function: str) -> None:
    with pytest.raises(redis.ResponseError, match=f"{function}: invalid-arguments: "):
        client.fcall(function, 1, lab.key("a"), "v")
    assert lab.ns.keys(client) == []


@needs_server
def test_over_maxmemory_put_is_refused_whole_and_put_anyway_runs() -> None:
    with scratch_server("--maxmemory-policy", "noeviction") as server:
        c = server.client(decode_responses=True)
        load_library(c, STEM)  # FUNCTION LOAD itself is refused over the limit
        c.set("ballast", "x" * 1_000_000)
        c.config_set("maxmemory", int(c.info("memory")["used_memory"]) - 500_000)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            c.fcall("racelab_oom_put", 2, "ballast", "new", "v")
        assert (c.exists("ballast"), c.exists("new")) == (1, 0)
        assert c.fcall("racelab_oom_put_anyway", 2, "ballast", "new", "v") == 1
        assert (c.exists("ballast"), c.get("new")) == (0, "v")
