"""lua/fenced_write.lua: the resource refuses writes with a fencing token older than the newest seen."""

from __future__ import annotations

import random

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import script_header

STEM = "fenced_write"


def keys_of(lab: Lab) -> list[str]:
    """Return [resource, fence] keys sharing one hash tag."""
    return [lab.ns.tagged("job", "resource"), lab.ns.tagged("job", "resource:fence")]


def test_header_lists_keys_argv_and_every_status() -> None:
    header = script_header(STEM)
    assert header.startswith(f"{STEM}.lua: ")
    for needle in (
        "KEYS[1]",
        "KEYS[2]",
        "ARGV[1]",
        "ARGV[2]",
        "Returns:",
        "  1  ",
        "  0  ",
        f"ERR {STEM}",
        "WRONGTYPE",
    ):
        assert needle in header


def test_first_write_is_accepted_and_records_the_token(lab: Lab) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    assert lab.script(STEM, c)(keys=[resource, fence], args=[33, "from 33"]) == 1
    assert c.get(resource) == "from 33"
    assert c.get(fence) == "33"


def test_same_token_may_write_again(lab: Lab) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    write = lab.script(STEM, c)
    assert write(keys=[resource, fence], args=[33, "one"]) == 1
    assert write(keys=[resource, fence], args=[33, "two"]) == 1
    assert c.get(resource) == "two"


def test_newer_token_is_accepted_and_older_token_is_refused(lab: Lab) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    write = lab.script(STEM, c)
    assert write(keys=[resource, fence], args=[34, "from 34"]) == 1
    assert write(keys=[resource, fence], args=[33, "from 33 (late)"]) == 0
    assert c.get(resource) == "from 34"
    assert c.get(fence) == "34"


def test_tokens_compare_as_numbers_not_strings(lab: Lab) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    write = lab.script(STEM, c)
    assert write(keys=[resource, fence], args=[10, "ten"]) == 1
    assert write(keys=[resource, fence], args=[9, "nine"]) == 0
    assert c.get(resource) == "ten"


def test_wrong_type_resource_is_an_error_and_nothing_changes(lab: Lab) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    c.rpush(resource, "x")
    with pytest.raises(
        redis.ResponseError,
        match=f"^WRONGTYPE {STEM}: the resource key holds a list, not a string$",
    ):
        lab.script(STEM, c)(keys=[resource, fence], args=[1, "v"])
    assert c.lrange(resource, 0, -1) == ["x"]
    assert c.exists(fence) == 0


@pytest.mark.parametrize("stored", ["abc", "-3", "1" * 16, "007", "0", "+5", " 5"])
def test_corrupt_fence_is_an_error_and_nothing_changes(lab: Lab, stored: str) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    c.set(fence, stored)
    with pytest.raises(
        redis.ResponseError,
        match=f"^WRONGTYPE {STEM}: the fence key does not hold a fencing token$",
    ):
        lab.script(STEM, c)(keys=[resource, fence], args=[5, "v"])
    assert c.exists(resource) == 0
    assert c.get(fence) == stored


def test_wrong_type_fence_is_an_error(lab: Lab) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    c.hset(fence, "n", 1)
    with pytest.raises(
        redis.ResponseError, match=f"^WRONGTYPE {STEM}: the fence key holds a non-string value$"
    ):
        lab.script(STEM, c)(keys=[resource, fence], args=[5, "v"])
    assert c.exists(resource) == 0


@pytest.mark.parametrize("token", ["0", "-1", "1.5", "1e3", " 7", "07", "x", "", "1" * 16])
def test_bad_token_is_an_error_and_nothing_changes(lab: Lab, token: str) -> None:
    c = lab.client()
    resource, fence = keys_of(lab)
    with pytest.raises(
        redis.ResponseError, match=f"{STEM}: invalid-arguments: the fencing token must be"
    ):
        lab.script(STEM, c)(keys=[resource, fence], args=[token, "v"])
    assert c.exists(resource, fence) == 0


@pytest.mark.parametrize(
    "n_keys, args",
    [
        (1, [1, "v"]),
        (3, [1, "v"]),
        (2, [1]),
        (2, [1, "v", "extra"]),
    ],
    ids=["one-key", "three-keys", "no-value", "extra-arg"],
)
def test_bad_arity_is_an_error_and_nothing_changes(lab: Lab, n_keys: int, args: list) -> None:
    c = lab.client()
    keys = [lab.ns.tagged("job", f"k{i}") for i in range(n_keys)]
    with pytest.raises(redis.ResponseError, match=f"{STEM}: invalid-arguments: expected 2 keys"):
        lab.script(STEM, c)(keys=keys, args=args)
    assert c.exists(*keys) == 0


def test_runs_on_a_cluster_when_both_keys_share_a_hash_tag(cluster_lab: Lab) -> None:
    c = cluster_lab.client()
    resource, fence = keys_of(cluster_lab)
    write = cluster_lab.script(STEM, c)
    assert write(keys=[resource, fence], args=[2, "new"]) == 1
    assert write(keys=[resource, fence], args=[1, "old"]) == 0
    assert c.get(resource) == "new"


@pytest.mark.parametrize(
    "names",
    [
        ("same", "same"),
        ("plain-resource", "plain-fence"),
        ("{a}resource", "{b}fence"),
        ("{}resource", "{}fence"),
    ],
    ids=["duplicate-key", "no-hash-tag", "different-tags", "empty-tags"],
)
def test_keys_that_are_equal_or_do_not_share_a_hash_tag_are_an_error_and_nothing_changes(
    lab: Lab, names
) -> None:
    # Regression: with KEYS[1] == KEYS[2] the script returned 1 and the "resource" ended up
    # holding the fencing token instead of the value.
    c = lab.client()
    keys = [lab.ns.tagged("job", "same")] * 2 if names[0] == "same" else [lab.key(n) for n in names]
    with pytest.raises(redis.ResponseError, match=f"{STEM}: invalid-arguments: .*hash tag"):
        lab.script(STEM, c)(keys=keys, args=[5, "v"])
    assert c.exists(*keys) == 0


def test_concurrent_writers_never_let_an_older_token_overwrite_a_newer_one(lab: Lab) -> None:
    from helpers import lua, run_clients

    resource, fence = keys_of(lab)
    tokens = list(range(1, 64 * 4 + 1))
    random.Random(7).shuffle(tokens)
    write = lua(STEM)

    def writer(client, token: int) -> tuple[int, bool]:
        return token, write(
            keys=[resource, fence], args=[token, f"from {token}"], client=client
        ) == 1

    run = run_clients(
        lab, writer, inputs=[tokens[i * 4 : (i + 1) * 4] for i in range(64)]
    )  # 64 clients x 4
    accepted = [token for op_client, _, (token, ok) in sorted(run.outcomes) if ok]
    c = lab.client()
    assert max(tokens) in accepted
    assert c.get(fence) == str(max(tokens))
    assert c.get(resource) == f"from {max(tokens)}"
    refused = {token for _, _, (token, ok) in run.outcomes if not ok}
    assert all(t < max(tokens) for t in refused)
