"""lua/demo_library.lua: library racelab_demo; FCALL writes, FCALL_RO reads only no-writes functions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import delete_library, library_name, load_library

STEM = "demo_library"


@pytest.fixture
def client(lab: Lab) -> Iterator[object]:
    """A client of the lab with racelab_demo loaded; the library is deleted afterwards."""
    c = lab.client()
    assert load_library(c, STEM) == "racelab_demo"
    try:
        yield c
    finally:
        delete_library(c, STEM)


def test_the_library_is_named_for_the_suite() -> None:
    assert library_name(STEM) == "racelab_demo"


def test_hit_adds_and_peek_reads_through_fcall_ro(lab: Lab, client: redis.Redis) -> None:
    key = lab.key("hits")
    assert client.fcall_ro("racelab_demo_peek", 1, key) == 0
    assert client.fcall("racelab_demo_hit", 1, key, 5) == 5
    assert client.fcall("racelab_demo_hit", 1, key, "1000") == 1005
    assert client.fcall_ro("racelab_demo_peek", 1, key) == 1005


def test_fcall_ro_refuses_the_writing_function_and_nothing_is_written(
    lab: Lab, client: redis.Redis
) -> None:
    key = lab.key("hits")
    with pytest.raises(redis.ResponseError, match="write flag"):
        client.fcall_ro("racelab_demo_hit", 1, key, 5)
    assert client.exists(key) == 0


def test_only_peek_carries_the_no_writes_flag(client: redis.Redis) -> None:
    [library] = client.function_list(library="racelab_demo")
    functions = dict(zip(library[::2], library[1::2]))["functions"]
    flags = {
        dict(zip(f[::2], f[1::2]))["name"]: dict(zip(f[::2], f[1::2]))["flags"] for f in functions
    }
    assert flags == {"racelab_demo_hit": [], "racelab_demo_peek": ["no-writes"]}


@pytest.mark.parametrize("amount", ["0", "1001", "abc", "1e3", "-1", ""])
def test_bad_amounts_are_refused_and_nothing_is_written(
    lab: Lab, client: redis.Redis, amount: str
) -> None:
    key = lab.key("hits")
    with pytest.raises(redis.ResponseError, match="racelab_demo_hit: invalid-arguments: "):
        client.fcall("racelab_demo_hit", 1, key, amount)
    assert client.exists(key) == 0


@pytest.mark.parametrize("function", ["racelab_demo_hit", "racelab_demo_peek"])
def test_a_non_integer_counter_is_an_error(lab: Lab, client: redis.Redis, function: str) -> None:
    key = lab.key("hits")
    client.set(key, "lots")
    args = [5] if function.endswith("hit") else []
    with pytest.raises(redis.ResponseError, match=f"{function}: invalid-counter: "):
        client.fcall(function, 1, key, *args)
    assert client.get(key) == "lots"


def test_a_hash_counter_raises_wrongtype(lab: Lab, client: redis.Redis) -> None:
    key = lab.key("hits")
    client.hset(key, "f", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        client.fcall("racelab_demo_hit", 1, key, 1)


@pytest.mark.parametrize("function", ["racelab_demo_hit", "racelab_demo_peek"])
@pytest.mark.parametrize(
    "stored", ["9999999999999999", "9007199254740993", "-9007199254740992", "12345678901234567"]
)
def test_a_counter_outside_53_bit_integers_is_an_error(
    lab: Lab, client: redis.Redis, function: str, stored: str
) -> None:
    # Regression: peek of "9999999999999999" replied 10000000000000000 (a Lua number rounds it).
    key = lab.key("hits")
    client.set(key, stored)
    args = [1] if function.endswith("hit") else []
    with pytest.raises(redis.ResponseError, match=f"{function}: invalid-counter: "):
        client.fcall(function, 1, key, *args)
    assert client.get(key) == stored


def test_hit_refuses_to_take_the_counter_past_2_53(lab: Lab, client: redis.Redis) -> None:
    key = lab.key("hits")
    client.set(key, "9007199254740000")
    with pytest.raises(redis.ResponseError, match="racelab_demo_hit: counter-overflow: "):
        client.fcall("racelab_demo_hit", 1, key, 1000)
    assert client.get(key) == "9007199254740000"
    assert client.fcall("racelab_demo_hit", 1, key, 991) == 9007199254740991
    assert client.fcall_ro("racelab_demo_peek", 1, key) == 9007199254740991
    assert client.fcall_ro("racelab_demo_peek", 1, key) == int(client.get(key))
