"""Prefix sharing answers every schedule as live replays do (helpers.instruments.sharing).

A search that shares prefixes answers the round trips a replay shares with the one before from
that replay's record, and puts the embedded server's keyspace back where the replay leaves it.
Every test compares it with the plain search (share_prefixes=False): the same schedules in the
same order, each with the same verdict, results and footprints. On a real server every replay
runs live, and the Exploration says why.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from programs import random_token_locker, watch_increment
from searches import shared_and_live

from helpers import Lab, lease_expires
from helpers.instruments import sharing as sharing_module
from helpers.instruments.dpor import NotDeterministic


def both(lab: Lab, actors: dict[str, Any], invariant: Any, **options: Any) -> Any:
    """Explore with and without sharing; assert the same answer; return the shared one."""
    return shared_and_live(lab, actors, invariant, **options)[0]


def counter(key: str, rounds: int):
    """An actor that reads key and writes it back plus one, rounds times."""

    def actor(client):
        for _ in range(rounds):
            client.set(key, int(client.get(key) or 0) + 1)
        return int(client.get(key) or 0)

    return actor


def at_most(key: str, limit: int):
    def invariant(client, results) -> bool:
        return int(client.get(key) or 0) <= limit

    return invariant


@pytest.mark.parametrize("reduce", [False, True])
def test_shared_prefixes_answer_every_schedule_as_live_replays_do(lab: Lab, reduce: bool) -> None:
    key = lab.key("n")
    race = {"A": counter(key, 2), "B": partial(watch_increment, key=key)}
    found = both(lab, race, at_most(key, 2), watch=[key], reduce=reduce)
    assert found.bad_count > 0  # the lost update: a race, not a quiet one
    if lab.kind == "embedded":
        assert found.sharing_off == "" and found.shared_steps > 0
    else:
        assert found.shared_steps == 0 and "cannot be put back" in found.sharing_off


def test_the_comparison_catches_a_sharing_that_forgets_the_keyspace(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    if lab.kind != "embedded":
        pytest.skip("prefixes are shared on the embedded backend only")
    key = lab.key("n")
    race = {"A": counter(key, 2), "B": counter(key, 2)}
    monkeypatch.setattr(sharing_module, "_restore", lambda server, keyspace: None)
    # the outcomes differ, or the determinism check's live replays disagree with them
    with pytest.raises((AssertionError, NotDeterministic)):
        both(lab, race, at_most(key, 4), watch=[key], reduce=False)


def test_a_reply_an_actor_changes_does_not_change_the_record(lab: Lab) -> None:
    key = lab.key("log")

    def appender(name: str):
        def actor(client):
            client.rpush(key, name)
            seen = client.lrange(key, 0, -1)
            seen.append(b"mine")  # the actor's own list, not the record's
            client.rpush(key, len(seen))
            return seen

        return actor

    both(lab, {"A": appender("a"), "B": appender("b")}, lambda c, r: True, watch=[key])


def test_random_tokens_end_sharing_and_every_replay_after_runs_live(lab: Lab) -> None:
    key = lab.key("lock")
    locker = partial(random_token_locker, key=key)
    found = both(lab, {"A": locker, "B": locker}, lambda c, r: True, watch=[key])
    if lab.kind == "embedded":
        assert "random token" in found.sharing_off


def test_a_blocking_call_and_a_thread_pool_are_answered_as_live(lab: Lab) -> None:
    key, out = lab.key("queue"), lab.key("out")

    def pusher(client):
        client.rpush(key, "job")
        client.incr(out)
        return "pushed"

    def popper(client):
        got = client.blpop([key], timeout=1)
        client.incr(out)
        return "got" if got else "timed out"

    def pooled(client):
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            done = list(pool.map(lambda _: client.incr(out), range(2)))
        return sorted(done)

    both(lab, {"A": pusher, "B": popper}, lambda c, r: True, watch=[key, out])
    both(lab, {"A": pusher, "B": pooled}, lambda c, r: True, watch=[key, out], reduce=False)


def test_a_connection_state_command_ends_sharing_for_the_rest_of_its_replay(lab: Lab) -> None:
    key = lab.key("n")

    def named(client):
        client.incr(key)
        client.client_setname("racer")
        return int(client.incr(key))

    both(lab, {"A": named, "B": counter(key, 2)}, at_most(key, 10), watch=[key])


def test_clocks_and_faults_replay_live_and_say_why(lab: Lab) -> None:
    if lab.kind != "embedded":
        pytest.skip("on a real server every search replays live (the first test)")
    key = lab.key("n")
    race = {"A": counter(key, 1), "T": lease_expires(key)}
    assert "clock" in both(lab, race, at_most(key, 9), watch=[key]).sharing_off
    crashes = both(lab, {"A": counter(key, 1), "B": counter(key, 1)}, at_most(key, 9),
                   watch=[key], crashes=1)  # fmt: skip
    assert "fault" in crashes.sharing_off


def test_keys_outside_the_race_keep_their_values_and_a_full_server_replays_live(
    lab: Lab,
) -> None:
    if lab.kind != "embedded":
        pytest.skip("prefixes are shared on the embedded backend only")
    key, other = lab.key("n"), lab.key("other")
    client = lab.client()
    client.hset(other, mapping={"a": 1, "b": 2})
    client.expire(other, 600)
    found = both(lab, {"A": counter(key, 2), "B": counter(key, 1)}, at_most(key, 3), watch=[key])
    assert found.shared_steps > 0
    assert client.hgetall(other) == {"a": "1", "b": "2"} and 0 < client.ttl(other) <= 600
    client.mset({lab.key(f"filler:{i}"): i for i in range(sharing_module.MAX_KEYS + 1)})
    full = both(lab, {"A": counter(key, 1), "B": counter(key, 1)}, at_most(key, 2), watch=[key])
    assert "keys" in full.sharing_off and full.shared_steps == 0


def test_a_server_whose_keys_hold_many_members_replays_live(lab: Lab) -> None:
    if lab.kind != "embedded":
        pytest.skip("prefixes are shared on the embedded backend only")
    key, big = lab.key("n"), lab.key("big")
    lab.client().sadd(big, *range(sharing_module.MAX_MEMBERS + 1))
    found = both(lab, {"A": counter(key, 1), "B": counter(key, 1)}, at_most(key, 2), watch=[key])
    assert "members" in found.sharing_off and found.shared_steps == 0


def test_a_copied_keyspace_is_put_back_whole_and_stays_intact(lab: Lab) -> None:
    if lab.kind != "embedded":
        pytest.skip("the embedded server's keyspace only")
    client, server = lab.client(), lab.fake_server
    h, lst, z, s = (lab.key(x) for x in ("h", "l", "z", "s"))
    client.hset(h, mapping={"f": "1"})
    client.rpush(lst, "a", "b")
    client.zadd(z, {"m": 1.5})
    client.sadd(s, "x")
    client.pexpire(lst, 90_000)
    kept = sharing_module._copy(server)
    client.hset(h, "f", "2")
    client.rpush(lst, "c")
    client.zadd(z, {"n": 2})
    client.srem(s, "x")
    client.persist(lst)
    for _ in range(2):  # the copy is put back twice: it must not be the one the writes change
        sharing_module._restore(server, kept)
        assert client.hgetall(h) == {"f": "1"}
        assert client.lrange(lst, 0, -1) == ["a", "b"]
        assert client.zrange(z, 0, -1, withscores=True) == [("m", 1.5)]
        assert client.smembers(s) == {"x"}
        assert 0 < client.pttl(lst) <= 90_000
        client.rpush(lst, "d")
        client.sadd(s, "y")
