"""A lock on one Redis key, as an application writes it: acquire, release, extend, fencing.

The lock is the pattern of the Redis ``SET`` docs: ``SET key token NX PX ttl`` with a token of
20 random bytes, so that only the client that wrote the token can recognise the lock as its own.
Every release takes ``(client, key, token)`` and returns True if *this call* deleted the key
(``release_lua_checked`` says "released", "expired" or "stolen" instead).

Broken on purpose (notebook 02 reproduces them):

- ``release_blind``: ``DEL key``. Deletes whoever's lock is there now.
- ``release_check_then_del``: ``GET``, compare in Python, ``DEL``. The lease can run out and
  another client take the lock between the GET and the DEL.

Fixes, each comparing and deleting in one step on the server:

- ``release_lua`` (lua/lock_release.lua) and ``release_lua_checked`` (lua/lock_release_checked.lua);
- ``release_watch``: WATCH, GET, then MULTI / DEL / EXEC, bounded attempts (``races.GaveUp``);
- ``release_delex``: Redis 8.4 ``DELEX key IFEQ token``; ``release_digest``: ``DELEX key IFDEQ
  digest``, the token's XXH3-64 (what ``DIGEST key`` returns) instead of the token.

A safe release cannot stop a holder that stalled past its lease from acting as if it still held
the lock; the resource must refuse it: ``acquire_fenced`` hands out a fencing token (INCR) with
each grant and ``write_fenced`` (lua/fenced_write.lua) refuses writes with an older one.

``lock_turn`` is one worker's turn at the lock under threaded load (wait, work, release), the
workload of the notebook's threaded runs. Timing (think time, gated steps) belongs to the client
a function is given, never to its body.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
import xxhash

from luaload import lua
from races import GaveUp, Namespace
from races.workload import Request, Workload

TOKEN_BYTES = 20
RELEASED, EXPIRED, STOLEN = "released", "expired", "stolen"
Release = Callable[[redis.Redis, str, str], bool | str]


def new_token(nbytes: int = TOKEN_BYTES) -> str:
    """Return a fresh random token: nbytes random bytes as hex (20 bytes: 40 characters)."""
    return secrets.token_hex(nbytes)


def token_digest(token: str | bytes) -> str:
    """Return the XXH3-64 of token as 16 hex digits: what DIGEST returns for a key holding token."""
    return xxhash.xxh3_64_hexdigest(token.encode() if isinstance(token, str) else token)


def acquire(client: redis.Redis, key: str, token: str, ttl_ms: int) -> bool:
    """Return True if SET key token NX PX ttl_ms took the lock (False: somebody holds it)."""
    return bool(client.set(key, token, nx=True, px=ttl_ms))


# --- releases, broken on purpose ----------------------------------------------------------

def release_blind(client: redis.Redis, key: str, token: str) -> bool:
    """Return True if DEL key deleted something."""
    return client.delete(key) == 1


def release_check_then_del(client: redis.Redis, key: str, token: str) -> bool:
    """Return True if GET matched token and the DEL after it deleted the key."""
    if client.get(key) != token:
        return False
    return client.delete(key) == 1


# --- releases that compare and delete in one step -------------------------------------------

def release_lua(client: redis.Redis, key: str, token: str) -> bool:
    """Return True if lua/lock_release.lua deleted the key (it held token)."""
    return lua("lock_release")(keys=[key], args=[token], client=client) == 1


def release_lua_checked(client: redis.Redis, key: str, token: str) -> str:
    """Return lua/lock_release_checked.lua's verdict: "released", "expired" or "stolen"."""
    reply = lua("lock_release_checked")(keys=[key], args=[token], client=client)
    return {1: RELEASED, None: EXPIRED, -1: STOLEN}[reply]


def release_watch(client: redis.Redis, key: str, token: str, max_attempts: int = 10) -> bool:
    """Return True if WATCH, GET == token, MULTI / DEL / EXEC deleted the key (GaveUp: no luck)."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    with client.pipeline(transaction=True) as pipe:
        for _ in range(max_attempts):
            try:
                pipe.watch(key)
                if pipe.get(key) != token:
                    pipe.unwatch()
                    return False
                pipe.multi()
                pipe.delete(key)
                return pipe.execute()[0] == 1
            except redis.WatchError:  # the key changed after WATCH: check again
                continue
    raise GaveUp(max_attempts, f"{key} changed between WATCH and EXEC every time")


def release_delex(client: redis.Redis, key: str, token: str) -> bool:
    """Return True if DELEX key IFEQ token (Redis >= 8.4) deleted the key."""
    return client.execute_command("DELEX", key, "IFEQ", token) == 1


def release_digest(client: redis.Redis, key: str, token: str) -> bool:
    """Return True if DELEX key IFDEQ <XXH3-64 of token> (Redis >= 8.4) deleted the key."""
    return client.execute_command("DELEX", key, "IFDEQ", token_digest(token)) == 1


# --- extend ---------------------------------------------------------------------------------

def extend_ifeq(client: redis.Redis, key: str, token: str, ttl_ms: int) -> bool:
    """Return True if SET key token IFEQ token PX ttl_ms (Redis >= 8.4) renewed the lease."""
    return bool(client.execute_command("SET", key, token, "IFEQ", token, "PX", ttl_ms))


def extend_lua(client: redis.Redis, key: str, token: str, ttl_ms: int) -> bool:
    """Return True if lua/lock_extend.lua renewed the lease to ttl_ms (the key held token)."""
    return lua("lock_extend")(keys=[key], args=[token, ttl_ms], client=client) == 1


# --- fencing --------------------------------------------------------------------------------

def acquire_fenced(client: redis.Redis, key: str, fence_key: str, token: str,
                   ttl_ms: int) -> int | None:
    """Return a fencing token if SET key token NX PX ttl_ms took the lock, else None.

    The token is INCR fence_key, in the same MULTI/EXEC as the SET, so every grant gets a larger
    number than the grants before it. If the INCR fails (fence_key is not a counter), a lock just
    taken is released before the error is raised: the caller never holds a lock it was told it
    did not get.
    """
    with client.pipeline(transaction=True) as pipe:
        pipe.set(key, token, nx=True, px=ttl_ms)
        pipe.incr(fence_key)
        taken, fence = pipe.execute(raise_on_error=False)
    if isinstance(fence, Exception):
        if taken:
            release_lua(client, key, token)
        raise fence
    return fence if taken else None


def write_fenced(client: redis.Redis, resource: str, fence_key: str, fence: int,
                 value: str) -> bool:
    """Return True if lua/fenced_write.lua wrote value, False if it refused fence as stale."""
    return lua("fenced_write")(keys=[resource, fence_key], args=[fence, value], client=client) == 1


def write_unfenced(client: redis.Redis, resource: str, value: str) -> bool:
    """Return True after SET resource value: a resource that trusts whoever calls it."""
    return bool(client.set(resource, value))


# --- one worker's turn under threaded load --------------------------------------------------

def lock_turn(client: redis.Redis, release: Release, key: str, ttl_ms: int, work: Iterator[float],
              retry_s: float = 0.001, max_attempts: int = 100_000) -> tuple[int, int, int, Any]:
    """Wait for the lock, work for next(work) seconds (a stall is a long one), release it.

    Return (asked, got, letting_go, released): when the successful SET NX was sent, when it
    answered, when the release began (time.monotonic_ns) and what the release returned.
    """
    token = new_token()
    for _ in range(max_attempts):
        asked = time.monotonic_ns()
        if acquire(client, key, token, ttl_ms):
            break
        time.sleep(retry_s)
    else:
        raise GaveUp(max_attempts, f"{key} stayed taken")
    got = time.monotonic_ns()
    time.sleep(next(work))
    letting_go = time.monotonic_ns()
    return asked, got, letting_go, release(client, key, token)


# --- the reference workload: what each release costs (benchmarks, relative_cost) --------------

def _reference_turn(ns: Namespace, release: Release, label: str) -> Request:
    """Return one uncontended turn: SET NX PX on a lock of its own each time, then release it."""
    serial = itertools.count()

    def turn(client: redis.Redis) -> bool | str:
        key, token = ns.key(f"ref:lock:{label}:{next(serial)}"), new_token()
        acquire(client, key, token, 60_000)
        return release(client, key, token)

    return turn


REFERENCE = Workload(
    name="lock_release_cost",
    title="Lock release",
    what="one uncontended turn: SET NX PX on a lock of its own, then the release",
    baseline="DEL (blind)",
    strategies={
        "DEL (blind)": release_blind,
        "GET + DEL": release_check_then_del,
        "Lua": release_lua,
        "Lua, checked": release_lua_checked,
        "WATCH": release_watch,
        "DELEX IFEQ": release_delex,
        "DELEX IFDEQ": release_digest,
    },
    request=_reference_turn,
    needs={"DELEX IFEQ": "delex", "DELEX IFDEQ": "delex"},
)
