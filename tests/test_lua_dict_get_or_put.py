"""lua/dict_get_or_put.lua: get-or-put-if-absent on a string<->id dictionary, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from helpers import Lab, lua, run_clients
from helpers.backend.scripts import load_script, script_header
from races.dictionary import DictKeys, check_dictionary, dict_keys


def _setup(lab: Lab, name: str = "d") -> tuple[Any, Any, DictKeys]:
    client = lab.client(decode_responses=False)
    return client, load_script(client, "dict_get_or_put"), dict_keys(lab.ns, name)


def _state(client: Any, keys: DictKeys) -> list[Any]:
    return [client.dump(k) for k in keys.all()]


def test_header_lists_keys_argv_and_every_error() -> None:
    header = script_header("dict_get_or_put")
    assert header.startswith("dict_get_or_put.lua:")
    for needle in (
        "KEYS[1]",
        "KEYS[2]",
        "KEYS[3]",
        "ARGV[1]",
        "Returns:",
        "invalid-arguments",
        "invalid-counter",
        "inconsistent-dictionary",
        "WRONGTYPE",
    ):
        assert needle in header


def test_first_strings_get_dense_ids_and_repeats_get_the_same_id(lab: Lab) -> None:
    client, script, keys = _setup(lab)
    ids = [
        script(keys=keys.all(), args=[t])
        for t in [b"price", b"volume", b"price", b"sector", b"volume"]
    ]
    assert ids == [1, 2, 1, 3, 2]
    assert all(type(i) is int for i in ids)
    assert client.hgetall(keys.ids) == {b"1": b"price", b"2": b"volume", b"3": b"sector"}
    assert client.hgetall(keys.index) == {b"price": b"1", b"volume": b"2", b"sector": b"3"}
    assert client.hget(keys.meta, "last_id") == b"3"
    assert check_dictionary(client, keys) == []


def test_empty_string_is_a_string_like_any_other(lab: Lab) -> None:
    client, script, keys = _setup(lab)
    assert script(keys=keys.all(), args=[b"a"]) == 1
    assert script(keys=keys.all(), args=[b""]) == 2
    assert script(keys=keys.all(), args=[b""]) == 2
    assert client.hget(keys.ids, 2) == b""
    assert client.hget(keys.index, b"") == b"2"
    assert check_dictionary(client, keys) == []


def test_binary_strings_are_stored_byte_for_byte(lab: Lab) -> None:
    client, script, keys = _setup(lab)
    samples = [
        b"\x00",
        b"\x00\x00",
        b"\xff\xfe\x00tail",
        b"caf\xc3\xa9",
        b"caf\xe9",
        b"{dict:d}",
        b"1",
        b"last_id",
    ]
    ids = [script(keys=keys.all(), args=[s]) for s in samples]
    assert ids == list(range(1, len(samples) + 1))
    assert [script(keys=keys.all(), args=[s]) for s in samples] == ids
    assert client.hgetall(keys.ids) == {str(i).encode(): s for i, s in zip(ids, samples)}
    assert check_dictionary(client, keys) == []


def test_very_long_strings_round_trip(lab: Lab) -> None:
    client, script, keys = _setup(lab)
    long_a = b"a" * (1 << 20)
    long_b = long_a[:-1] + b"b"
    assert script(keys=keys.all(), args=[long_a]) == 1
    assert script(keys=keys.all(), args=[long_b]) == 2
    assert script(keys=keys.all(), args=[long_a]) == 1
    assert client.hget(keys.ids, 2) == long_b
    assert check_dictionary(client, keys) == []


@pytest.mark.parametrize("which", [0, 1, 2])
def test_wrong_type_key_is_refused_and_nothing_is_written(lab: Lab, which: int) -> None:
    client, script, keys = _setup(lab)
    script(keys=keys.all(), args=[b"existing"])
    client.unlink(keys.all()[which])
    client.rpush(keys.all()[which], b"foreign")
    before = _state(client, keys)
    with pytest.raises(
        redis.ResponseError,
        match=rf"^WRONGTYPE dict_get_or_put: KEYS\[{which + 1}\] holds a list, not a hash$",
    ):
        script(keys=keys.all(), args=[b"new"])
    assert _state(client, keys) == before


@pytest.mark.parametrize(
    "keys_args",
    [
        ("ids,index", [b"x"]),
        ("ids,index,meta", []),
        ("ids,index,meta", [b"x", b"y"]),
        ("ids,ids,meta", [b"x"]),
        ("untagged", [b"x"]),
        ("other-tag", [b"x"]),
    ],
    ids=["two-keys", "no-string", "two-strings", "repeated-key", "no-hash-tag", "different-tags"],
)
def test_invalid_arguments_are_refused_and_nothing_is_written(
    lab: Lab, keys_args: tuple[str, list[bytes]]
) -> None:
    client, script, keys = _setup(lab)
    spec, args = keys_args
    if spec == "untagged":
        given = [lab.key("ids"), lab.key("index"), lab.key("meta")]
    elif spec == "other-tag":
        given = [keys.ids, keys.index, dict_keys(lab.ns, "other").meta]
    else:
        given = [getattr(keys, name) for name in spec.split(",")]
    with pytest.raises(redis.ResponseError, match="dict_get_or_put: invalid-arguments: "):
        script(keys=given, args=args)
    assert lab.ns.keys(client) == []


@pytest.mark.parametrize(
    "counter", [b"abc", b"-1", b"01", b"1.5", b" 1", b"9007199254740991", b"99999999999999999"]
)
def test_corrupt_counter_is_refused_and_nothing_is_written(lab: Lab, counter: bytes) -> None:
    client, script, keys = _setup(lab)
    client.hset(keys.meta, "last_id", counter)
    before = _state(client, keys)
    with pytest.raises(redis.ResponseError, match="dict_get_or_put: invalid-counter: "):
        script(keys=keys.all(), args=[b"x"])
    assert _state(client, keys) == before


def test_dictionary_written_behind_the_scripts_back_is_refused(lab: Lab) -> None:
    client, script, keys = _setup(lab)
    script(keys=keys.all(), args=[b"a"])
    client.hset(keys.ids, 2, b"sneaked-in")  # ids now has 2 fields, the counter says 1
    before = _state(client, keys)
    with pytest.raises(redis.ResponseError, match="dict_get_or_put: inconsistent-dictionary: "):
        script(keys=keys.all(), args=[b"b"])
    assert _state(client, keys) == before
    client.hset(keys.index, b"a", 2)  # the index points at an id holding another string
    with pytest.raises(redis.ResponseError, match="dict_get_or_put: inconsistent-dictionary: "):
        script(keys=keys.all(), args=[b"a"])


def _words(size: int) -> list[str]:
    return [f"column_{i:04d}" for i in range(size)]


def _register_concurrently(
    lab: Lab, keys: DictKeys, workers: int, words: list[str]
) -> list[tuple[str, int]]:
    script = lua("dict_get_or_put")

    def register_all(client: Any, order: list[str]) -> list[tuple[str, int]]:
        return [(w, int(script(keys=keys.all(), args=[w], client=client))) for w in order]

    orders = [
        [words[n % 3 :] + words[: n % 3]] for n in range(workers)
    ]  # one call per worker, 3 orders
    result = run_clients(lab, register_all, inputs=orders)
    return [pair for _client, _iteration, pairs in result.outcomes for pair in pairs]


def test_many_concurrent_workers_keep_a_bijection_with_dense_ids(lab: Lab) -> None:
    keys = dict_keys(lab.ns, "d")
    words = _words(30)
    answers = _register_concurrently(lab, keys, workers=48, words=words)
    assert check_dictionary(lab.client(), keys, answers) == []
    assert lab.client().hlen(keys.ids) == len(words)
    assert len(answers) == 48 * len(words)


def test_works_on_a_cluster_because_the_keys_share_a_slot(cluster_lab: Lab) -> None:
    keys = dict_keys(cluster_lab.ns, "d")
    client = cluster_lab.client(decode_responses=False)
    assert len({client.keyslot(k) for k in keys.all()}) == 1
    script = load_script(client, "dict_get_or_put")
    assert [script(keys=keys.all(), args=[t]) for t in [b"a", b"", b"\x00\xff", b"a"]] == [
        1,
        2,
        3,
        1,
    ]
    answers = _register_concurrently(cluster_lab, keys, workers=16, words=_words(12))
    assert check_dictionary(client, keys, answers) == []
    assert client.hlen(keys.ids) == 15


def test_a_next_id_already_taken_in_ids_is_refused_instead_of_overwritten(lab: Lab) -> None:
    # Regression: ids {2: x}, index {x: 2}, last_id 1 passed the HLEN check, and registering "y"
    # overwrote ids[2] with "y": "x" lost its string and the index pointed at the wrong one.
    client, script, keys = _setup(lab)
    client.hset(keys.ids, 2, b"x")
    client.hset(keys.index, b"x", 2)
    client.hset(keys.meta, "last_id", 1)
    before = _state(client, keys)
    with pytest.raises(redis.ResponseError, match="dict_get_or_put: inconsistent-dictionary: "):
        script(keys=keys.all(), args=[b"y"])
    assert _state(client, keys) == before
