"""Toy strategies shared by the tests of helpers.instruments (schedule, explore, race).

Each is an ordinary function of a redis-py client, as the lessons' strategies are.
"""

from __future__ import annotations

import uuid
from typing import Any


def naive_limiter(client: Any, key: str, limit: int = 5) -> str:
    """GET, compare in Python, INCR: the racy limiter of helpers.instruments.schedule's docstring."""
    count = int(client.get(key) or 0)
    if count < limit:
        client.incr(key)
        return "allowed"
    return "rejected"


def incr_first_limiter(client: Any, key: str, limit: int = 5) -> str:
    """INCR, then compare the value it returned: one round trip, no race."""
    return "allowed" if client.incr(key) <= limit else "rejected"


def lua_limiter(client: Any, key: str, limit: int = 5) -> str:
    """The check and the INCR in one EVAL: one round trip, no race."""
    script = (
        "local n = tonumber(redis.call('GET', KEYS[1]) or '0') "
        "if n >= tonumber(ARGV[1]) then return 0 end redis.call('INCR', KEYS[1]) return 1"
    )
    return "allowed" if client.eval(script, 1, key, limit) == 1 else "rejected"


def lost_update(client: Any, key: str) -> int:
    """GET, then SET value+1: concurrent increments are lost."""
    value = int(client.get(key) or 0) + 1
    client.set(key, value)
    return value


def watch_increment(client: Any, key: str, attempts: int = 3) -> str:
    """WATCH, GET, MULTI/SET/EXEC with bounded attempts: the optimistic increment."""
    import redis

    with client.pipeline(transaction=True) as pipe:
        for _ in range(attempts):
            try:
                pipe.watch(key)
                value = int(pipe.get(key) or 0)
                pipe.multi()
                pipe.set(key, value + 1)
                pipe.execute()
                return "done"
            except redis.WatchError:
                continue
    return "gave up"


def lock_holder(client: Any, key: str, token: str) -> str:
    """SET NX PX, then a blind DEL: whoever holds the lock at DEL time loses it."""
    if not client.set(key, token, nx=True, px=30_000):
        return "busy"
    client.delete(key)
    return "released"


def take_forever(client: Any, key: str, token: str) -> bool:
    """Take the lock with no TTL, then release it: a crash in between leaves it taken for good."""
    if not client.set(key, token, nx=True):
        return False
    client.delete(key)
    return True


def random_token_locker(client: Any, key: str) -> str:
    """SET NX with a fresh random token, GET to check it, DEL if held: each run sends new values."""
    token = uuid.uuid4().hex
    client.set(key, token, nx=True)
    held = client.get(key) in (token, token.encode())  # (a str where replies are decoded)
    if held:
        client.delete(key)
    return "held" if held else "not held"
