"""helpers.backend.fake84's pure parts: SET option parsing and expiry arithmetic (rules measured on Redis 8.6.3).

The behaviour on a server is tested against a real Redis in tests/test_embedded.py and
tests/test_differential.py; these pin the parser's table directly.
"""

from __future__ import annotations

import pytest
import redis
from fakeredis._helpers import SimpleError

from helpers.backend.fake84 import expiry_ms, parse_set_options


def test_parse_returns_flags_expiry_and_condition() -> None:
    flags, expiry, condition = parse_set_options((b"get", b"IFEQ", b"v", b"px", b"100"))
    assert flags == {b"get", b"ifeq", b"px"}
    assert expiry == (b"px", b"100")
    assert condition == (b"ifeq", b"v")


def test_the_operand_of_a_condition_is_taken_verbatim_even_if_it_looks_like_an_option() -> None:
    assert parse_set_options((b"IFEQ", b"NX"))[2] == (b"ifeq", b"NX")


def test_the_last_of_repeated_same_kind_options_wins() -> None:
    _, expiry, condition = parse_set_options(
        (b"EX", b"1", b"EX", b"2", b"IFNE", b"a", b"IFNE", b"b")
    )
    assert expiry == (b"ex", b"2") and condition == (b"ifne", b"b")


@pytest.mark.parametrize(
    "args",
    [
        (b"NX", b"IFEQ", b"v"),
        (b"XX", b"IFDNE", b"d"),
        (b"IFEQ", b"v", b"IFNE", b"v"),
        (b"IFEQ",),
        (b"NX", b"XX"),
        (b"PX", b"1", b"EXAT", b"1"),
        (b"KEEPTTL", b"PX", b"1"),
        (b"PX", b"1", b"KEEPTTL"),
        (b"NOPE",),
        (b"",),
    ],
)
def test_conflicting_dangling_or_unknown_options_raise_syntax_error(
    args: tuple[bytes, ...],
) -> None:
    with pytest.raises(SimpleError, match="syntax error"):
        parse_set_options(args)


def test_nx_after_a_condition_is_accepted() -> None:
    assert parse_set_options((b"IFEQ", b"v", b"NX"))[0] == {b"ifeq", b"nx"}


def test_conditions_are_a_syntax_error_when_not_allowed() -> None:
    with pytest.raises(SimpleError, match="syntax error"):
        parse_set_options((b"IFEQ", b"v"), conditions_allowed=False)


def test_relative_expiry_adds_now_and_absolute_does_not() -> None:
    assert expiry_ms(b"ex", b"10", now_ms=1_000) == 11_000
    assert expiry_ms(b"px", b"10", now_ms=1_000) == 1_010
    assert expiry_ms(b"exat", b"10", now_ms=1_000) == 10_000
    assert expiry_ms(b"pxat", b"10", now_ms=1_000) == 10


@pytest.mark.parametrize(
    "option,raw",
    [
        (b"ex", b"0"),
        (b"px", b"-1"),
        (b"ex", b"9223372036854776"),
        (b"px", b"9223372036854775807"),
        (b"exat", b"9223372036854776"),
    ],
)
def test_out_of_range_expiry_is_invalid_expire_time(option: bytes, raw: bytes) -> None:
    with pytest.raises(SimpleError, match="invalid expire time in 'set' command"):
        expiry_ms(option, raw, now_ms=1_700_000_000_000)


def test_non_canonical_integer_expiry_is_not_an_integer() -> None:
    with pytest.raises(SimpleError, match="not an integer"):
        expiry_ms(b"px", b"01", now_ms=0)


# ---- WATCH and expiry: EXEC aborts when a watched key expired after the WATCH (Redis >= 6.0.9) ----


def _watch_then_exec(client, key: str, wait_s: float) -> object:
    """WATCH key, GET it, wait, then MULTI/INCR/EXEC; return EXEC's reply or 'aborted'."""
    import time

    import redis

    with client.pipeline(transaction=True) as pipe:
        pipe.watch(key)
        pipe.get(key)
        time.sleep(wait_s)
        pipe.multi()
        pipe.incr(key)
        try:
            return pipe.execute()
        except redis.WatchError:
            return "aborted"


def test_exec_aborts_when_a_watched_key_expires_after_the_watch(lab) -> None:
    client, key = lab.client(), lab.key("watched")
    client.set(key, 5, px=50)
    assert _watch_then_exec(client, key, 0.15) == "aborted"
    assert client.exists(key) == 0  # nothing ran: no counter without a TTL left behind


def test_exec_runs_when_the_watched_key_has_no_ttl_or_is_missing(lab) -> None:
    client, key = lab.client(), lab.key("watched")
    client.set(key, 5)
    assert _watch_then_exec(client, key, 0.0) == [6]
    client.delete(key)
    assert _watch_then_exec(client, key, 0.0) == [1]


def test_exec_runs_when_the_watched_key_was_already_expired_at_watch(lab) -> None:
    import time

    client, key = lab.client(), lab.key("watched")
    client.set(key, 5, px=1)
    time.sleep(0.05)  # expired before WATCH: its expiry is not a change seen by this transaction
    assert _watch_then_exec(client, key, 0.0) == [1]


def test_exec_runs_when_the_ttl_has_not_run_out_yet(lab) -> None:
    client, key = lab.client(), lab.key("watched")
    client.set(key, 5, px=60_000)
    assert _watch_then_exec(client, key, 0.0) == [6]


def test_plain_fakeredis_still_runs_exec_after_a_watched_key_expired() -> None:
    # Fails the day fakeredis aborts by itself: then the override in helpers/backend/fake84.py can go.
    import fakeredis

    client = fakeredis.FakeRedis(
        server=fakeredis.FakeServer(version=(8, 4, 0)), decode_responses=True
    )
    client.set("watched", 5, px=50)
    assert _watch_then_exec(client, "watched", 0.15) == [1]


# --- the replication calls Redis 8 keeps in the Lua API (redis-limiters' semaphore calls one) ---


def test_scripts_may_call_the_replication_functions_redis_still_has(lab) -> None:
    client = lab.client()
    assert client.eval("return redis.replicate_commands()", 0) == 1
    levels = "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_REPLICA, redis.REPL_ALL}"
    assert client.eval(levels, 0) == [0, 1, 2, 3]
    assert client.eval("redis.set_repl(redis.REPL_ALL); return 'ok'", 0) == "ok"
    with pytest.raises(Exception, match="Invalid replication flags"):
        client.eval("redis.set_repl(9)", 0)


def test_xdel_that_deletes_an_entry_aborts_a_transaction_watching_the_stream(lab) -> None:
    stream = lab.key("jobs")
    writer, watcher = lab.client(), lab.client()
    first = writer.xadd(stream, {"item": "job-1"})
    for ids, aborted in (([b"0-1"], False), ([first], True)):  # 0-1: nothing deleted
        pipe = watcher.pipeline()
        pipe.watch(stream)
        writer.xdel(stream, *ids)
        pipe.multi()
        pipe.xlen(stream)
        if aborted:
            with pytest.raises(redis.WatchError):
                pipe.execute()
        else:
            assert pipe.execute() == [1]
        pipe.reset()
