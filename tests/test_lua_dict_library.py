"""lua/dict_library.lua: the racelab_dict Function library (FCALL racelab_dict_get_or_put), on every backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from helpers import Lab, run_clients
from helpers.backend import embedded
from helpers.backend.scripts import (
    delete_library,
    library_name,
    load_library,
    lua_source,
    script_header,
)
from races.dictionary import FUNCTION, DictKeys, check_dictionary, dict_keys

LIB = "dict_library"


def _library_names(client: Any) -> set[str]:
    names = set()
    for entry in client.function_list():
        fields = dict(zip(entry[::2], entry[1::2]))
        name = fields.get("library_name", fields.get(b"library_name"))
        names.add(name.decode() if isinstance(name, bytes) else name)
    return names


@pytest.fixture
def loaded(lab: Lab) -> Iterator[Any]:
    """A bytes client of lab with racelab_dict loaded; the library is deleted afterwards."""
    client = lab.client(decode_responses=False)
    load_library(client, LIB)
    try:
        yield client
    finally:
        delete_library(client, LIB)


def _call(client: Any, keys: list[str], *args: Any) -> Any:
    return client.fcall(FUNCTION, len(keys), *keys, *args)


def _state(client: Any, keys: DictKeys) -> list[Any]:
    return [client.dump(k) for k in keys.all()]


def test_file_declares_library_racelab_dict_and_documents_its_contract() -> None:
    assert lua_source(LIB).splitlines()[0] == "#!lua name=racelab_dict"
    assert library_name(LIB) == "racelab_dict"
    header = script_header(LIB)
    assert header.startswith("dict_library.lua:")
    for needle in (
        "FCALL racelab_dict_get_or_put",
        "KEYS[1]",
        "KEYS[3]",
        "ARGV[1]",
        "Returns:",
        "invalid-arguments",
        "invalid-counter",
        "inconsistent-dictionary",
        "WRONGTYPE",
    ):
        assert needle in header


def test_fcall_gets_or_puts_with_dense_ids_and_integer_replies(lab: Lab, loaded: Any) -> None:
    keys = dict_keys(lab.ns, "d")
    ids = [_call(loaded, keys.all(), t) for t in [b"price", b"", b"price", b"\x00\xff", b""]]
    assert ids == [1, 2, 1, 3, 2]
    assert all(type(i) is int for i in ids)
    assert loaded.hgetall(keys.ids) == {b"1": b"price", b"2": b"", b"3": b"\x00\xff"}
    assert check_dictionary(loaded, keys) == []


def test_very_long_strings_round_trip(lab: Lab, loaded: Any) -> None:
    keys = dict_keys(lab.ns, "d")
    long_a = b"\xfe" * (1 << 20)
    assert _call(loaded, keys.all(), long_a) == 1
    assert _call(loaded, keys.all(), long_a + b"!") == 2
    assert _call(loaded, keys.all(), long_a) == 1
    assert loaded.hget(keys.ids, 1) == long_a


@pytest.mark.parametrize("which", [0, 1, 2])
def test_wrong_type_key_is_refused_and_nothing_is_written(
    lab: Lab, loaded: Any, which: int
) -> None:
    keys = dict_keys(lab.ns, "d")
    _call(loaded, keys.all(), b"existing")
    loaded.unlink(keys.all()[which])
    loaded.set(keys.all()[which], b"foreign")
    before = _state(loaded, keys)
    with pytest.raises(
        redis.ResponseError,
        match=rf"^WRONGTYPE racelab_dict_get_or_put: KEYS\[{which + 1}\] holds a string, not a hash$",
    ):
        _call(loaded, keys.all(), b"new")
    assert _state(loaded, keys) == before


def test_invalid_arguments_and_corrupt_counter_write_nothing(lab: Lab, loaded: Any) -> None:
    keys = dict_keys(lab.ns, "d")
    with pytest.raises(redis.ResponseError, match="racelab_dict_get_or_put: invalid-arguments: "):
        _call(loaded, keys.all()[:2], b"x")
    with pytest.raises(redis.ResponseError, match="racelab_dict_get_or_put: invalid-arguments: "):
        _call(loaded, keys.all())
    with pytest.raises(redis.ResponseError, match="racelab_dict_get_or_put: invalid-arguments: "):
        _call(loaded, [lab.key("a"), lab.key("b"), lab.key("c")], b"x")
    assert lab.ns.keys(loaded) == []
    loaded.hset(keys.meta, "last_id", b"x1")
    with pytest.raises(redis.ResponseError, match="racelab_dict_get_or_put: invalid-counter: "):
        _call(loaded, keys.all(), b"x")
    assert lab.ns.keys(loaded) == [keys.meta.encode()]


def test_many_concurrent_workers_keep_a_bijection_with_dense_ids(lab: Lab, loaded: Any) -> None:
    keys = dict_keys(lab.ns, "d")
    words = [f"column_{i:04d}" for i in range(25)]
    workers = 48

    def register_all(client: Any, order: list[str]) -> list[tuple[str, int]]:
        return [(w, _call(client, keys.all(), w)) for w in order]

    orders = [[words[::-1] if n % 2 else words] for n in range(workers)]  # one call per worker
    result = run_clients(lab, register_all, inputs=orders)
    answers = [pair for _client, _iteration, pairs in result.outcomes for pair in pairs]
    assert check_dictionary(loaded, keys, answers) == []
    assert loaded.hlen(keys.ids) == len(words)


def test_delete_removes_only_racelab_dict(lab: Lab) -> None:
    client = lab.client()
    before = _library_names(client) - {"racelab_dict"}
    assert load_library(client, LIB) in ("racelab_dict", b"racelab_dict")
    assert "racelab_dict" in _library_names(client)
    assert delete_library(client, LIB) is True
    assert _library_names(client) == before
    assert delete_library(client, LIB) is False


def test_function_survives_script_flush_that_makes_evalsha_fail() -> None:
    # SCRIPT FLUSH is refused on servers the suite does not own: use a private embedded server.
    client = embedded.new_client(embedded.new_server())
    keys = ["{dict:d}:ids", "{dict:d}:index", "{dict:d}:meta"]
    load_library(client, LIB)
    sha = client.script_load(lua_source("dict_get_or_put"))
    assert client.evalsha(sha, 3, *keys, "a") == 1
    client.script_flush()
    with pytest.raises(redis.exceptions.NoScriptError):
        client.evalsha(sha, 3, *keys, "b")
    assert client.fcall(FUNCTION, 3, *keys, "b") == 2


def test_fcall_works_on_a_cluster(cluster_lab: Lab) -> None:
    client = cluster_lab.client(decode_responses=False)
    keys = dict_keys(cluster_lab.ns, "d")
    load_library(client, LIB)
    try:
        assert [_call(client, keys.all(), t) for t in [b"a", b"", b"a"]] == [1, 2, 1]
        assert check_dictionary(client, keys) == []
    finally:
        delete_library(client, LIB)


def test_a_next_id_already_taken_in_ids_is_refused_instead_of_overwritten(
    lab: Lab, loaded: Any
) -> None:
    # Regression: the HLEN check passed and the function overwrote ids[2], which held "x".
    keys = dict_keys(lab.ns, "taken")
    loaded.hset(keys.ids, 2, b"x")
    loaded.hset(keys.index, b"x", 2)
    loaded.hset(keys.meta, "last_id", 1)
    before = _state(loaded, keys)
    with pytest.raises(
        redis.ResponseError, match="racelab_dict_get_or_put: inconsistent-dictionary: "
    ):
        _call(loaded, keys.all(), b"y")
    assert _state(loaded, keys) == before
