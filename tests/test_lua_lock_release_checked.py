"""lua/lock_release_checked.lua: compare-and-delete that says why it did not release (1 / nil / -1)."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import script_header

TOKEN = "a" * 40
OTHER = "b" * 40
STEM = "lock_release_checked"


def test_header_lists_keys_argv_and_every_status() -> None:
    header = script_header(STEM)
    assert header.startswith(f"{STEM}.lua: ")
    for needle in (
        "KEYS[1]",
        "ARGV[1]",
        "Returns:",
        "  1  ",
        "  nil  ",
        "  -1  ",
        f"ERR {STEM}",
        "WRONGTYPE",
    ):
        assert needle in header


def test_own_token_deletes_the_key_and_returns_1(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=60_000)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN]) == 1
    assert c.exists(key) == 0


def test_missing_key_returns_nil(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN]) is None
    assert c.exists(key) == 0


def test_second_release_returns_nil_not_minus_1(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=60_000)
    release = lab.script(STEM, c)
    assert release(keys=[key], args=[TOKEN]) == 1
    assert release(keys=[key], args=[TOKEN]) is None


def test_foreign_token_returns_minus_1_and_keeps_the_owners_lock_and_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, OTHER, px=60_000)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN]) == -1
    assert c.get(key) == OTHER
    assert 0 < c.pttl(key) <= 60_000


def test_expired_lease_returns_nil(lab: Lab, wait_until_gone) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=5)
    wait_until_gone(c, key)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN]) is None


def test_expired_lease_retaken_by_another_client_returns_minus_1(lab: Lab, wait_until_gone) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=5)
    wait_until_gone(c, key)
    assert c.set(key, OTHER, nx=True, px=60_000)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN]) == -1
    assert c.get(key) == OTHER


def test_binary_token_is_compared_byte_for_byte(lab: Lab) -> None:
    c, key = lab.client(decode_responses=False), lab.key("lock")
    token = b"\x00\xff" + bytes(range(20))
    c.set(key, token, px=60_000)
    release = lab.script(STEM, c)
    assert release(keys=[key], args=[token[:-1]]) == -1
    assert release(keys=[key], args=[token]) == 1


def test_wrong_type_key_is_an_error_and_is_not_deleted(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.hset(key, "token", TOKEN)
    with pytest.raises(
        redis.ResponseError, match=f"^WRONGTYPE {STEM}: the lock key holds a non-string value$"
    ):
        lab.script(STEM, c)(keys=[key], args=[TOKEN])
    assert c.hgetall(key) == {"token": TOKEN}


@pytest.mark.parametrize(
    "keys, args",
    [
        ([], [TOKEN]),
        (["lock", "other"], [TOKEN]),
        (["lock"], []),
        (["lock"], [TOKEN, "extra"]),
        (["lock"], [""]),
    ],
    ids=["no-key", "two-keys", "no-token", "extra-arg", "empty-token"],
)
def test_bad_arguments_are_an_error_and_delete_nothing(
    lab: Lab, keys: list[str], args: list[str]
) -> None:
    c = lab.client()
    full_keys = [lab.key(k) for k in keys]
    for k in full_keys:
        c.set(k, "", px=60_000)  # an empty token must not match an empty value
    with pytest.raises(redis.ResponseError, match=f"{STEM}: invalid-arguments: "):
        lab.script(STEM, c)(keys=full_keys, args=args)
    assert all(c.exists(k) for k in full_keys)
