"""Add 1 to a shared counter without losing an update: the optimistic ways.

``INCR`` does the whole job in one command; a Lua script or a Function does it in one step too.
When the new value must be computed by the application, the two optimistic ways read, compute,
and write only if nobody wrote in between, trying again if somebody did:

* ``increment_with_watch``: ``WATCH`` the key, ``GET`` it, then ``MULTI``/``SET``/``EXEC``; the
  ``EXEC`` answers nil (redis-py raises ``WatchError``) if the key changed after the ``WATCH``;
* ``increment_with_ifeq``: ``GET`` it, then ``SET key new IFEQ old`` (Redis 8.4), which writes only
  if the key still holds ``old``; a missing key is created with ``SET key 1 NX``.

Both try at most ``max_attempts`` times and then raise :class:`races.GaveUp`: under heavy
contention an optimistic loop may never win, and a bounded loop says so instead of spinning.
"""

from __future__ import annotations

import redis

from races import GaveUp


def _check_attempts(max_attempts: int) -> None:
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")


def increment_with_watch(client: redis.Redis, key: str, max_attempts: int = 1000) -> int:
    """Add 1 to key with WATCH, GET, MULTI/SET/EXEC, trying again if key changed; return the new value."""
    _check_attempts(max_attempts)
    with client.pipeline(transaction=True) as pipe:
        for _ in range(max_attempts):
            try:
                pipe.watch(key)
                new = int(pipe.get(key) or 0) + 1
                pipe.multi()
                pipe.set(key, new)
                pipe.execute()
                return new
            except redis.WatchError:
                continue  # somebody wrote key after our WATCH: read it again
    raise GaveUp(max_attempts, f"{key} changed between every GET and EXEC")


def increment_with_ifeq(client: redis.Redis, key: str, max_attempts: int = 1000) -> int:
    """Add 1 to key with GET, then SET IFEQ the value read (SET NX if absent); return the new value."""
    _check_attempts(max_attempts)
    for _ in range(max_attempts):
        old = client.get(key)
        if old is None:
            if client.set(key, 1, nx=True):
                return 1
            continue  # somebody created it first: read it again
        new = int(old) + 1
        if client.set(key, new, ifeq=old):
            return new
    raise GaveUp(max_attempts, f"{key} changed between every GET and SET IFEQ")
