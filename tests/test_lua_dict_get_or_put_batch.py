"""lua/dict_get_or_put_batch.lua: a batch of strings registered in one call, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import load_script, script_header
from races.dictionary import DictKeys, check_dictionary, dict_keys


def _setup(lab: Lab) -> tuple[Any, Any, DictKeys]:
    client = lab.client(decode_responses=False)
    return client, load_script(client, "dict_get_or_put_batch"), dict_keys(lab.ns, "d")


def test_header_documents_the_contract() -> None:
    header = script_header("dict_get_or_put_batch")
    assert header.startswith("dict_get_or_put_batch.lua:")
    for needle in (
        "KEYS[1]",
        "KEYS[3]",
        "ARGV[1..n]",
        "Returns:",
        "invalid-arguments",
        "invalid-counter",
        "inconsistent-dictionary",
        "WRONGTYPE",
    ):
        assert needle in header


def test_batch_returns_ids_in_order_new_strings_numbered_in_argv_order(lab: Lab) -> None:
    client, batch, keys = _setup(lab)
    assert batch(keys=keys.all(), args=[b"b", b"a"]) == [1, 2]
    ids = batch(keys=keys.all(), args=[b"c", b"a", b"", b"c", b"\x00\xff", b""])
    assert ids == [3, 2, 4, 3, 5, 4]
    assert all(type(i) is int for i in ids)
    assert client.hgetall(keys.ids) == {
        b"1": b"b",
        b"2": b"a",
        b"3": b"c",
        b"4": b"",
        b"5": b"\x00\xff",
    }
    assert check_dictionary(client, keys) == []


def test_batch_agrees_with_the_single_string_script(lab: Lab) -> None:
    client, batch, keys = _setup(lab)
    single = load_script(client, "dict_get_or_put")
    assert single(keys=keys.all(), args=[b"x"]) == 1
    assert batch(keys=keys.all(), args=[b"y", b"x"]) == [2, 1]
    assert single(keys=keys.all(), args=[b"y"]) == 2
    assert single(keys=keys.all(), args=[b"z"]) == 3


@pytest.mark.parametrize("count", [0, 10001])
def test_empty_or_oversized_batch_is_refused(lab: Lab, count: int) -> None:
    client, batch, keys = _setup(lab)
    with pytest.raises(redis.ResponseError, match="dict_get_or_put_batch: invalid-arguments: "):
        batch(keys=keys.all(), args=[b"s%d" % i for i in range(count)])
    assert lab.ns.keys(client) == []


def test_wrong_type_key_is_refused_and_nothing_is_written(lab: Lab) -> None:
    client, batch, keys = _setup(lab)
    client.set(keys.index, b"foreign")
    with pytest.raises(
        redis.ResponseError,
        match=r"^WRONGTYPE dict_get_or_put_batch: KEYS\[2\] holds a string, not a hash$",
    ):
        batch(keys=keys.all(), args=[b"a", b"b"])
    assert lab.ns.keys(client) == [keys.index.encode()]


def test_inconsistency_found_late_in_the_batch_writes_nothing(lab: Lab) -> None:
    client, batch, keys = _setup(lab)
    batch(keys=keys.all(), args=[b"a", b"b"])
    client.hset(keys.index, b"b", 1)  # corrupt: b's index entry points at a's id
    before = [client.dump(k) for k in keys.all()]
    with pytest.raises(
        redis.ResponseError, match="dict_get_or_put_batch: inconsistent-dictionary: "
    ):
        batch(keys=keys.all(), args=[b"new1", b"new2", b"b"])
    assert [client.dump(k) for k in keys.all()] == before


def test_64_clients_sending_overlapping_batches_keep_a_bijection_with_dense_ids(lab: Lab) -> None:
    import random

    from helpers import lua, run_clients

    keys = dict_keys(lab.ns, "d")
    words = [f"w{i}" for i in range(200)] + ["", "\x00", " ", "01", "1"]
    script = lua("dict_get_or_put_batch")

    def client_fn(client: Any, seed: int) -> list[tuple[str, int]]:
        batch = random.Random(seed).choices(words, k=25)  # repeats too
        return list(zip(batch, script(keys=keys.all(), args=batch, client=client)))

    run = run_clients(
        lab, client_fn, inputs=[[c * 100 + i for i in range(3)] for c in range(64)]
    )  # 64 x 3
    answers = [pair for _, _, pairs in run.outcomes for pair in pairs]
    assert check_dictionary(lab.client(), keys, answers) == []
    assert lab.client().hlen(keys.ids) == len({text for text, _ in answers})


def test_an_id_the_batch_would_assign_already_taken_is_refused_and_nothing_is_written(
    lab: Lab,
) -> None:
    # Regression: with ids {3: x}, index {x: 3}, last_id 1, a batch of two new strings wrote
    # ids 2 and 3, overwriting "x".
    client, script, keys = _setup(lab)
    client.hset(keys.ids, 3, b"x")
    client.hset(keys.index, b"x", 3)
    client.hset(keys.meta, "last_id", 1)
    before = [client.dump(k) for k in keys.all()]
    with pytest.raises(
        redis.ResponseError, match="dict_get_or_put_batch: inconsistent-dictionary: "
    ):
        script(keys=keys.all(), args=[b"y", b"z"], client=client)
    assert [client.dump(k) for k in keys.all()] == before
