"""lua/lock_extend.lua: extend a lease only while the caller owns the lock (1 / 0), on both backends."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import script_header

TOKEN = "a" * 40
OTHER = "b" * 40
STEM = "lock_extend"


def test_header_lists_keys_argv_and_every_status() -> None:
    header = script_header(STEM)
    assert header.startswith(f"{STEM}.lua: ")
    for needle in (
        "KEYS[1]",
        "ARGV[1]",
        "ARGV[2]",
        "Returns:",
        "  1  ",
        "  0  ",
        f"ERR {STEM}",
        "WRONGTYPE",
    ):
        assert needle in header


def test_owner_gets_the_new_lease_replacing_the_remaining_time(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=1_000)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN, 120_000]) == 1
    assert c.get(key) == TOKEN
    assert 60_000 < c.pttl(key) <= 120_000


def test_extend_can_shorten_the_lease(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=120_000)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN, 5_000]) == 1
    assert 0 < c.pttl(key) <= 5_000


def test_missing_key_returns_0_and_does_not_resurrect_the_lock(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN, 60_000]) == 0
    assert c.exists(key) == 0


def test_expired_lease_returns_0_and_stays_expired(lab: Lab, wait_until_gone) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=5)
    wait_until_gone(c, key)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN, 60_000]) == 0
    assert c.exists(key) == 0


def test_foreign_token_returns_0_and_leaves_the_owners_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, OTHER, px=30_000)
    assert lab.script(STEM, c)(keys=[key], args=[TOKEN, 600_000]) == 0
    assert c.get(key) == OTHER
    assert 0 < c.pttl(key) <= 30_000


def test_wrong_type_key_is_an_error_and_is_unchanged(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.sadd(key, TOKEN)
    with pytest.raises(
        redis.ResponseError, match=f"^WRONGTYPE {STEM}: the lock key holds a non-string value$"
    ):
        lab.script(STEM, c)(keys=[key], args=[TOKEN, 60_000])
    assert c.smembers(key) == {TOKEN}
    assert c.pttl(key) == -1


@pytest.mark.parametrize(
    "ttl", ["0", "-5", "1.5", "1e3", " 100", "100 ", "0100", "abc", "", "1" * 13]
)
def test_bad_ttl_is_an_error_and_changes_nothing(lab: Lab, ttl: str) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, TOKEN, px=30_000)
    with pytest.raises(redis.ResponseError, match=f"{STEM}: invalid-arguments: ttl_ms must be"):
        lab.script(STEM, c)(keys=[key], args=[TOKEN, ttl])
    assert 0 < c.pttl(key) <= 30_000


@pytest.mark.parametrize(
    "keys, args",
    [
        ([], [TOKEN, 1000]),
        (["lock", "other"], [TOKEN, 1000]),
        (["lock"], [TOKEN]),
        (["lock"], [TOKEN, 1000, "extra"]),
        (["lock"], ["", 1000]),
    ],
    ids=["no-key", "two-keys", "no-ttl", "extra-arg", "empty-token"],
)
def test_bad_arguments_are_an_error_and_change_nothing(
    lab: Lab, keys: list[str], args: list
) -> None:
    c = lab.client()
    full_keys = [lab.key(k) for k in keys]
    for k in full_keys:
        c.set(k, "", px=30_000)
    with pytest.raises(redis.ResponseError, match=f"{STEM}: invalid-arguments: "):
        lab.script(STEM, c)(keys=full_keys, args=args)
    assert all(0 < c.pttl(k) <= 30_000 for k in full_keys)
