"""GET then INCR: fixed-window rate limiters, broken and fixed, one function per strategy.

Every limiter answers one question: may this request pass in the window whose counter is
``key``, with at most ``limit`` requests per ``window`` seconds? It returns True (admitted) or
False (rejected), and takes a redis-py client as its first argument.

Broken on purpose (notebook 01 reproduces them):

- ``naive_allow``: GET, compare in Python, INCR (EXPIRE on the first hit). Clients that read
  the same value all pass the check: the window admits more than ``limit``.
- ``docs_pattern_allow``: "Rate limiter 2" of Redis's INCR page: the same race, and its
  ``current > limit`` test admits ``limit + 1`` even with a single client.
- ``lost_update_increment``: GET, then SET value + 1: concurrent increments are lost.
- ``plain_client_watch_allow``: the redis-py trap: ``Redis.watch()`` on a plain client sends
  nothing (redis-py only warns), so the transaction guards nothing.

Fixes:

- ``lua_allow``: lua/rate_limit_fixed_window.lua, check and count in one script.
- ``watch_allow``: WATCH, GET, then MULTI / INCR / EXPIRE NX / EXEC, bounded attempts.
- ``incr_first_allow``: INCR, then compare the value it returns (rejected requests count too).
- ``multi_allow``: INCR and EXPIRE NX in one MULTI/EXEC: no counter is ever left without a TTL.
- ``ifeq_allow``: Redis 8.4 compare-and-set, ``SET key n+1 IFEQ n KEEPTTL``, bounded attempts.

Timing (think time, gated steps) belongs to the client a limiter is given, never to its body;
retries are counted by that client too (failed EXEC or conditional SET).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from functools import partial

import redis

from luaload import lua
from racelab_errors import RaceLabError
from races import GaveUp, Namespace
from races.workload import Request, Workload

ADMITTED, REJECTED, REFUSED = 1, 0, 2  # the Lua limiter's statuses
_COUNT = re.compile(r"0|[1-9][0-9]{0,18}")  # what INCR leaves in a counter that never went below 0


class LimiterStateError(RaceLabError, RuntimeError):
    """A limiter refused to run: the stored counter (or the Lua limiter's input) is invalid."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"rate limiter refused to run: {reason}")
        self.reason = reason


def as_count(value: str | bytes | None) -> int:
    """Return a GET reply as a count (a missing key is 0); refuse what INCR cannot have left."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if text is None:
        return 0
    if not _COUNT.fullmatch(text):  # int() would take "-3" (3 requests too many) or " 5"
        raise LimiterStateError(f"invalid-counter: the counter holds {value!r}")
    return int(text)


# --- broken on purpose -------------------------------------------------------------------

def naive_allow(client: redis.Redis, key: str, limit: int, window: int) -> bool:
    """Return True if admitted: GET, compare in Python, INCR."""
    count = as_count(client.get(key))
    if count >= limit:
        return False
    if client.incr(key) == 1:
        client.expire(key, window)  # the first hit starts the window
    return True


def docs_pattern_allow(client: redis.Redis, key: str, limit: int, window: int) -> bool:
    """Return True if admitted, as "Rate limiter 2" of Redis's INCR page does (admits limit + 1)."""
    current = client.get(key)
    if current is not None and int(current) > limit:
        return False
    if client.incr(key) == 1:
        client.expire(key, window)
    return True


def lost_update_increment(client: redis.Redis, key: str) -> int:
    """Return the value written by GET, then SET value + 1."""
    value = as_count(client.get(key)) + 1
    client.set(key, value)
    return value


def plain_client_watch_allow(client: redis.Redis, key: str, limit: int, window: int) -> bool:
    """Return True if admitted, with WATCH called on the plain client: the redis-py trap."""
    client.watch(key)  # redis-py warns "Call WATCH from a Pipeline object" and sends NOTHING
    count = as_count(client.get(key))
    if count >= limit:
        return False
    pipe = client.pipeline(transaction=True)  # MULTI ... EXEC, but no key is watched
    pipe.incr(key)
    pipe.expire(key, window, nx=True)
    pipe.execute()
    return True


# --- fixes -------------------------------------------------------------------------------

def lua_limit(client: redis.Redis, key: str, limit: int | str, window: int | str) -> list:
    """Return the Lua limiter's reply: [1, count] admitted, [0, count] rejected, [2, reason]."""
    return lua("rate_limit_fixed_window")(keys=[key], args=[limit, window], client=client)


def lua_allow(client: redis.Redis, key: str, limit: int, window: int) -> bool:
    """Return True if the Lua limiter admits the request; raise LimiterStateError on status 2."""
    status, value = lua_limit(client, key, limit, window)
    if status == REFUSED:
        raise LimiterStateError(value)
    return status == ADMITTED


def watch_allow(client: redis.Redis, key: str, limit: int, window: int,
                max_attempts: int = 100) -> bool:
    """Return True if admitted: WATCH, GET, then MULTI/INCR/EXPIRE NX/EXEC; GaveUp after max_attempts."""
    with client.pipeline(transaction=True) as pipe:  # WATCH on the pipeline, never on the client
        for attempt in range(max_attempts):
            try:
                pipe.watch(key)  # from here the pipeline runs each command at once
                if as_count(pipe.get(key)) >= limit:
                    return False  # leaving the with block sends UNWATCH
                pipe.multi()  # from here commands are queued, sent together by execute()
                pipe.incr(key)
                pipe.expire(key, window, nx=True)  # NX: only the first hit sets the TTL
                pipe.execute()  # raises WatchError (EXEC answered nil) if the key changed
                return True
            except redis.WatchError:
                time.sleep(random.uniform(0, 0.0001 * 2 ** min(attempt, 6)))  # jittered backoff
    raise GaveUp(max_attempts)


def incr_first_allow(client: redis.Redis, key: str, limit: int, window: int) -> bool:
    """Return True if the value INCR returns is within limit (atomic; rejected requests count too)."""
    count = client.incr(key)
    if count < 1:  # the counter held a negative number: INCR cannot check first, so refuse now
        raise LimiterStateError(f"invalid-counter: INCR returned {count}")
    if count == 1:
        client.expire(key, window)  # a crash just before this line leaves a window that never ends
    return count <= limit


def multi_allow(client: redis.Redis, key: str, limit: int, window: int) -> bool:
    """Return True if INCR, sent with EXPIRE NX in one MULTI/EXEC, returns a value within limit."""
    pipe = client.pipeline(transaction=True)
    pipe.incr(key)
    pipe.expire(key, window, nx=True)  # NX: the TTL is set once, so the window stays fixed
    count, _ = pipe.execute()
    if count < 1:  # as in incr_first_allow
        raise LimiterStateError(f"invalid-counter: INCR returned {count}")
    return count <= limit


def ifeq_allow(client: redis.Redis, key: str, limit: int, window: int,
               max_attempts: int = 100) -> bool:
    """Return True if admitted by compare-and-set (Redis 8.4 SET ... IFEQ); GaveUp after max_attempts."""
    for _ in range(max_attempts):
        current = client.get(key)
        count = as_count(current)
        if count >= limit:
            return False
        if current is None:  # first hit: create the counter with its TTL, unless someone just did
            written = client.set(key, 1, nx=True, ex=window)
        else:  # write n+1 only if the counter still holds n; keep the window's TTL
            written = client.set(key, count + 1, ifeq=current, keepttl=True)
        if written:
            return True
    raise GaveUp(max_attempts)


# --- the reference workload: what each fix costs (benchmarks, relative_cost) ------------------

def _reference_request(ns: Namespace, fn: Callable[..., bool], label: str) -> Request:
    """Return one request: fn on a counter of label's own, with a limit never reached."""
    return partial(fn, key=ns.key(f"ref:rl:{label}"), limit=10**9, window=60)


def _reference_reset(ns: Namespace, labels: Sequence[str]) -> Request:
    """Return a reset: delete every label's counter (one DEL each: no cross-slot call)."""
    keys = [ns.key(f"ref:rl:{label}") for label in labels]
    return lambda client: [client.delete(key) for key in keys]


REFERENCE = Workload(
    name="ratelimit_cost",
    title="Rate limiter",
    what="one admitted request (limit never reached)",
    baseline="naive",
    strategies={
        "naive": naive_allow,
        "lua": lua_allow,
        "watch": watch_allow,
        "incr-first": incr_first_allow,
        "multi": multi_allow,
        "ifeq": ifeq_allow,
    },
    request=_reference_request,
    reset=_reference_reset,
    needs={"ifeq": "set_ifeq"},
)
