"""Fixed-window rate limiters, broken and fixed, one small function per strategy.

Every limiter answers one question: may this request pass in the window whose counter is
``key``, with at most ``limit`` requests per ``window`` seconds? They return True (allowed)
or False (rejected). ``think`` is called between a limiter's read and its write (the gap
another client can fall into); pass a harness's ``ctx.think`` to widen that gap on purpose.

Broken on purpose (for the notebook to reproduce):

- ``naive_allow``: GET, compare in Python, INCR (EXPIRE on the first hit). Clients that read
  the same value all pass the check: the window admits more than ``limit``.
- ``docs_pattern_allow``: "Rate limiter 2" from Redis's INCR documentation: the same race, and
  its ``current > limit`` test admits ``limit + 1`` even with a single client.
- ``lost_update_increment``: GET, then SET value+1: concurrent increments are lost.
- ``plain_client_watch_allow``: the redis-py trap: ``Redis.watch()`` on a plain client sends
  nothing (redis-py only emits a DeprecationWarning), so the "transaction" guards nothing.

Fixes:

- ``lua_limit`` / ``lua_allow``: lua/rate_limit_fixed_window.lua, one atomic script.
- ``watch_allow``: WATCH/MULTI/EXEC on a pipeline, bounded attempts with jittered backoff.
- ``incr_first_allow``: INCR, then compare the returned value (also counts rejected attempts).
- ``incr_expire_multi_allow``: INCR + EXPIRE NX in one MULTI/EXEC (no TTL-less counter ever).
- ``ifeq_cas_allow``: Redis 8.4 compare-and-set, ``SET key n+1 IFEQ n KEEPTTL``, bounded retries.

The ``*_program`` functions are the same strategies as step-by-step programs for
``helpers.instruments.schedule`` / ``helpers.instruments.explore``: one yielded step per Redis command, so a forced
schedule can put another client's command between any two of them. A Lua script or a
MULTI/EXEC pipeline is one ``call`` step: nothing can run inside it.

``client_functions`` wraps the strategies as ``client_fn(ctx)`` for ``helpers.race.run_clients``
(think time and retry counting wired to the context). ``check_sliding_window`` is the stress
check of the notebook's sliding-window exercise (solution: lua/rate_limit_sliding_window.lua).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import Any

import redis

from helpers.instruments.race import run_clients
from helpers.instruments.schedule import Program, call, cmd
from helpers.backend.scripts import load_script

Think = Callable[[], None] | None
OnRetry = Callable[[], None] | None

LUA_SCRIPT = "rate_limit_fixed_window"
_COUNTER_TEXT = re.compile(r"0|[1-9][0-9]{0,18}")  # what INCR leaves in a counter that never went below 0
ALLOWED, REJECTED, INVALID = 1, 0, 2


class LimiterStateError(RuntimeError):
    """A limiter refused to run: invalid arguments or an invalid stored counter (the Lua limiter's status 2)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"rate limiter refused to run: {reason}")
        self.reason = reason


class TooMuchContention(RuntimeError):
    """An optimistic limiter gave up after its maximum number of attempts."""

    def __init__(self, attempts: int) -> None:
        super().__init__(f"gave up after {attempts} attempts: the key kept changing under us")
        self.attempts = attempts


def _pause(think: Think) -> None:
    """Call think if given (the gap between a limiter's read and its write)."""
    if think is not None:
        think()


def _check_limits(limit: int, window: int) -> None:
    """Raise ValueError unless limit and window are positive ints (0 or less would disable the limiter)."""
    for name, value in (("limit", limit), ("window", window)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _as_int(value: Any) -> int:
    """Return a GET reply (None, str or bytes) as an int; a missing key counts as 0.

    Anything but a canonical non-negative decimal raises LimiterStateError("invalid-counter"), as
    the Lua limiter refuses it: int() would take "-3" (3 requests too many) or " 5".
    """
    if value is None:
        return 0
    text = value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else str(value)
    if _COUNTER_TEXT.fullmatch(text) is None:
        raise LimiterStateError(f"invalid-counter: the counter holds {value!r}")
    return int(text)


# --- broken on purpose -------------------------------------------------------------------

def naive_allow(client: Any, key: str, limit: int, window: int, think: Think = None) -> bool:
    """Return True if admitted, by GET, compare, INCR (racy: concurrent callers overshoot)."""
    count = _as_int(client.get(key))
    if count >= limit:
        return False
    _pause(think)
    if client.incr(key) == 1:
        client.expire(key, window)
    return True


def docs_pattern_allow(client: Any, key: str, limit: int, window: int, think: Think = None) -> bool:
    """Return True if admitted, as Redis's INCR docs "Rate limiter 2" does (`> limit`: admits limit+1)."""
    current = client.get(key)
    if current is not None and int(current) > limit:
        return False
    _pause(think)
    if client.incr(key) == 1:
        client.expire(key, window)
    return True


def lost_update_increment(client: Any, key: str, think: Think = None) -> int:
    """Return the value written by GET then SET value+1 (racy: concurrent increments are lost)."""
    value = _as_int(client.get(key)) + 1
    _pause(think)
    client.set(key, value)
    return value


def plain_client_watch_allow(client: Any, key: str, limit: int, window: int, think: Think = None) -> bool:
    """Return True if admitted, with WATCH called on the plain client: the redis-py trap (still racy)."""
    client.watch(key)  # redis-py: emits a DeprecationWarning and sends NOTHING to the server
    count = _as_int(client.get(key))
    if count >= limit:
        return False
    _pause(think)
    pipe = client.pipeline()  # transaction=True: MULTI ... EXEC, but no key is watched
    pipe.incr(key)
    pipe.expire(key, window, nx=True)
    pipe.execute()
    return True


# --- fixes -------------------------------------------------------------------------------

def lua_limit(script: Any, key: str, limit: int | str, window: int | str) -> tuple[int, int | str]:
    """Return the Lua limiter's (status, value): (1, count) allowed, (0, count) rejected, (2, reason)."""
    status, value = script(keys=[key], args=[limit, window])
    return int(status), value


def lua_limit_or_error(script: Any, key: str, limit: int | str, window: int | str) -> tuple[int, int | str] | str:
    """Return lua_limit's (status, value), or "error CODE" (e.g. "error WRONGTYPE") for a Redis error reply."""
    try:
        return lua_limit(script, key, limit, window)
    except redis.ResponseError as exc:
        return f"error {str(exc).split()[0]}"


def lua_allow(script: Any, key: str, limit: int, window: int) -> bool:
    """Return True if the Lua limiter admits the request; raise LimiterStateError on status 2."""
    status, value = lua_limit(script, key, limit, window)
    if status == INVALID:
        raise LimiterStateError(str(value))
    return status == ALLOWED


def backoff_delay(attempt: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Return a "full jitter" delay in seconds for retry number attempt (1-based): uniform in [0, min(cap, base*2^(attempt-1))]."""
    if attempt < 1 or not base_s >= 0 or not cap_s >= 0:  # written so that NaN fails too
        raise ValueError(f"need attempt >= 1 and non-negative delays, got {attempt}, {base_s}, {cap_s}")
    ceiling = min(cap_s, base_s * 2.0 ** min(attempt - 1, 64))  # capped exponent: no float overflow
    return (rng or random).uniform(0.0, ceiling)


def watch_allow(client: Any, key: str, limit: int, window: int, think: Think = None,
                max_attempts: int = 50, backoff_s: float = 0.0002, backoff_cap_s: float = 0.005,
                on_retry: OnRetry = None, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Return True if admitted, by WATCH (on the pipeline) / GET / MULTI / INCR / EXEC with bounded retries.

    Each time EXEC aborts because another client changed the key, ``on_retry`` is called and
    the attempt is retried after a jittered backoff; after ``max_attempts`` aborted attempts
    TooMuchContention is raised. There is no ``while True``.
    """
    _check_limits(limit, window)
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    with client.pipeline(transaction=True) as pipe:  # transaction=True: a cluster pipeline needs it for WATCH
        for attempt in range(1, max_attempts + 1):
            try:
                pipe.watch(key)  # on the pipeline: WATCH goes out on the pipeline's own connection
                current = pipe.get(key)  # immediate mode after watch(): runs now
                count = _as_int(current)
                if count >= limit:
                    pipe.unwatch()
                    return False
                _pause(think)
                pipe.multi()
                if current is None:
                    pipe.set(key, 1, ex=window)  # first hit: the TTL is set once, with the value
                else:
                    pipe.incr(key)
                pipe.execute()  # raises WatchError if the key changed since WATCH
                return True
            except redis.WatchError:
                if on_retry is not None:
                    on_retry()
                if attempt < max_attempts:
                    sleep(backoff_delay(attempt, backoff_s, backoff_cap_s))
    raise TooMuchContention(max_attempts)


def incr_first_allow(client: Any, key: str, limit: int, window: int, think: Think = None) -> bool:
    """Return True if the value INCR returns is within limit (atomic; rejected attempts still count)."""
    _check_limits(limit, window)
    count = client.incr(key)
    if count < 1:  # the counter held a negative number: refuse (INCR cannot check first; Lua can)
        raise LimiterStateError(f"invalid-counter: INCR returned {count}")
    if count == 1:
        _pause(think)  # a crash here leaves a counter without TTL: see incr_expire_multi_allow
        client.expire(key, window)
    return count <= limit


def incr_expire_multi_allow(client: Any, key: str, limit: int, window: int, think: Think = None) -> bool:
    """Return True if INCR (sent with EXPIRE NX in one MULTI/EXEC) returns a value within limit."""
    _check_limits(limit, window)
    pipe = client.pipeline(transaction=True)
    pipe.incr(key)
    pipe.expire(key, window, nx=True)  # NX: TTL only if none, so the window stays fixed
    count, _ = pipe.execute()
    if count < 1:  # as in incr_first_allow
        raise LimiterStateError(f"invalid-counter: INCR returned {count}")
    return count <= limit


def ifeq_cas_allow(client: Any, key: str, limit: int, window: int, think: Think = None,
                   max_attempts: int = 50, backoff_s: float = 0.0002, backoff_cap_s: float = 0.005,
                   on_retry: OnRetry = None, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Return True if admitted, by compare-and-set with Redis 8.4 ``SET ... IFEQ`` (bounded retries).

    The read and the write are separate commands; the write succeeds only if the counter still
    holds what was read (``IFEQ``), or, for a first hit, does not exist yet (``NX``).
    """
    _check_limits(limit, window)
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    for attempt in range(1, max_attempts + 1):
        current = client.get(key)
        count = _as_int(current)
        if count >= limit:
            return False
        _pause(think)
        if current is None:
            written = client.set(key, 1, nx=True, ex=window)
        else:
            # Raw command: redis-py's set(ifeq=...) works too, but wraps every call in an
            # "experimental argument" warning check that costs more than the round trip saves.
            written = client.execute_command("SET", key, count + 1, "IFEQ", current, "KEEPTTL")
        if written:
            return True
        if on_retry is not None:
            on_retry()
        if attempt < max_attempts:
            sleep(backoff_delay(attempt, backoff_s, backoff_cap_s))
    raise TooMuchContention(max_attempts)


def admitted_over_limit(allowed: int, limit: int) -> int:
    """Return how many admitted requests exceed the limit (0 when the limiter held)."""
    return max(0, allowed - limit)


# --- the same strategies as schedule programs (one step per Redis command) ----------------

def naive_program(key: str, limit: int, window: int) -> Program:
    """Return a schedule program: GET, compare, INCR (+ EXPIRE on the first hit); "allowed"/"rejected"."""
    def program():
        count = _as_int((yield cmd("GET", key)))
        if count >= limit:
            return "rejected"
        if (yield cmd("INCR", key)) == 1:
            yield cmd("EXPIRE", key, window)
        return "allowed"
    return program


def lost_update_program(key: str) -> Program:
    """Return a schedule program: GET, then SET value+1; its result is the value it wrote."""
    def program():
        value = _as_int((yield cmd("GET", key))) + 1
        yield cmd("SET", key, value)
        return value
    return program


def lua_program(key: str, limit: int | str, window: int | str) -> Program:
    """Return a schedule program: the Lua limiter as one step; result "allowed"/"rejected"/the status-2 reason."""
    def run(client: Any) -> list:
        status, value = lua_limit(load_script(client, LUA_SCRIPT), key, limit, window)
        return [status, value]

    def program():
        status, value = yield call(f"EVALSHA {LUA_SCRIPT} {limit} {window}", run)
        return {ALLOWED: "allowed", REJECTED: "rejected"}.get(status, value)
    return program


def watch_program(key: str, limit: int, window: int, max_attempts: int = 2) -> Program:
    """Return a schedule program: WATCH, GET, then MULTI/INCR/EXEC as one step (as a pipeline sends them), retried; "gave-up" after."""
    def transaction(first_hit: bool) -> Callable[[Any], Any]:
        def run(client: Any) -> Any:  # raw commands: the same connection as the WATCH
            client.execute_command("MULTI")
            client.execute_command("INCR", key)
            if first_hit:
                client.execute_command("EXPIRE", key, window, "NX")
            return client.execute_command("EXEC")
        return run

    def program():
        for _ in range(max_attempts):
            yield cmd("WATCH", key)
            count = _as_int((yield cmd("GET", key)))
            if count >= limit:
                yield cmd("UNWATCH")
                return "rejected"
            label = "MULTI, INCR, EXPIRE NX, EXEC" if count == 0 else "MULTI, INCR, EXEC"
            if (yield call(label, transaction(count == 0))) is not None:  # nil: the key changed, nothing ran
                return "allowed"
        return "gave-up"
    return program


def incr_first_program(key: str, limit: int, window: int) -> Program:
    """Return a schedule program: INCR (+ EXPIRE on the first hit), then compare the reply."""
    def program():
        count = yield cmd("INCR", key)
        if count == 1:
            yield cmd("EXPIRE", key, window)
        return "allowed" if count <= limit else "rejected"
    return program


def multi_program(key: str, limit: int, window: int) -> Program:
    """Return a schedule program: MULTI INCR, EXPIRE NX, EXEC as one step, then compare."""
    def run(client: Any) -> list:
        pipe = client.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, window, nx=True)
        return pipe.execute()

    def program():
        count, _ = yield call(f"MULTI INCR, EXPIRE {window} NX, EXEC", run)
        return "allowed" if count <= limit else "rejected"
    return program


def ifeq_program(key: str, limit: int, window: int, max_attempts: int = 2) -> Program:
    """Return a schedule program: GET, then SET n+1 IFEQ n KEEPTTL (or SET 1 NX EX), retried; "gave-up" after."""
    def program():
        for _ in range(max_attempts):
            current = yield cmd("GET", key)
            count = _as_int(current)
            if count >= limit:
                return "rejected"
            if current is None:
                written = yield cmd("SET", key, 1, "NX", "EX", window)
            else:
                written = yield cmd("SET", key, count + 1, "IFEQ", current, "KEEPTTL")
            if written:
                return "allowed"
        return "gave-up"
    return program


def admits_at_most(slots: int) -> Callable[[Any, dict[str, Any]], bool]:
    """Return an explorer invariant: no more than slots clients got "allowed"."""
    def invariant(_client: Any, results: dict[str, Any]) -> bool:
        return sum(1 for r in results.values() if r == "allowed") <= slots
    return invariant


# --- the strategies as client functions for helpers.race.run_clients ----------------------

STRATEGIES = ("naive", "lua", "watch", "incr-first", "multi", "ifeq")
CONTENDED_MAX_ATTEMPTS = 500


def _cached_script(ctx: Any) -> Any:
    """Return this client's Script for the Lua limiter, made once per client (ctx.local)."""
    script = ctx.local.get(LUA_SCRIPT)
    if script is None:
        script = ctx.local[LUA_SCRIPT] = load_script(ctx.client, LUA_SCRIPT)
    return script


def client_functions(key: str, limit: int, window: int, names: tuple[str, ...] = STRATEGIES,
                     think: bool = True) -> dict[str, Callable[[Any], bool]]:
    """Return {strategy name: client_fn(ctx) -> allowed?} for run_clients, retries reported to ctx.

    With think=True the limiters call ctx.think() between their read and their write (the race
    window, widened on purpose); with think=False they run flat out (for measurements). The
    optimistic ones get CONTENDED_MAX_ATTEMPTS: every client of a run hammers one key, and one
    unlucky request has been seen to need 26 attempts among 8 clients on a real server.
    """
    _check_limits(limit, window)

    def pause(ctx: Any) -> Think:
        return ctx.think if think else None

    table: dict[str, Callable[[Any], bool]] = {
        "naive": lambda ctx: naive_allow(ctx.client, key, limit, window, think=pause(ctx)),
        "lua": lambda ctx: lua_allow(_cached_script(ctx), key, limit, window),
        "watch": lambda ctx: watch_allow(ctx.client, key, limit, window, think=pause(ctx), on_retry=ctx.retry,
                                         max_attempts=CONTENDED_MAX_ATTEMPTS),
        "incr-first": lambda ctx: incr_first_allow(ctx.client, key, limit, window, think=pause(ctx)),
        "multi": lambda ctx: incr_expire_multi_allow(ctx.client, key, limit, window),
        "ifeq": lambda ctx: ifeq_cas_allow(ctx.client, key, limit, window, think=pause(ctx), on_retry=ctx.retry,
                                           max_attempts=CONTENDED_MAX_ATTEMPTS),
    }
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    return {n: table[n] for n in names}


def compare_strategies(lab: Any, key: str, fns: dict[str, Callable[[Any], Any]], client_counts: tuple[int, ...],
                       requests: int, repeats: int, warmup: int = 1) -> dict[str, dict[int, list[Any]]]:
    """Return {strategy: {clients: [RunResult per timed run]}}, strategies interleaved run by run.

    For each client count, every repetition runs every strategy once (key deleted before each
    run, `requests` split over the clients), so a load spike on a shared machine hits all
    strategies alike instead of whichever happened to be measured then. The first `warmup`
    repetitions are not kept.
    """
    if repeats < 1 or warmup < 0 or requests < 1 or not client_counts or min(client_counts) < 1:
        raise ValueError("need repeats >= 1, warmup >= 0, requests >= 1 and client counts >= 1")
    results: dict[str, dict[int, list[Any]]] = {name: {n: [] for n in client_counts} for name in fns}
    observer = lab.client()
    try:
        for clients in client_counts:
            for rep in range(warmup + repeats):
                for name, fn in fns.items():
                    observer.delete(key)
                    result = run_clients(lab, fn, clients=clients, iterations=max(1, requests // clients))
                    if rep >= warmup:
                        results[name][clients].append(result)
    finally:
        lab.release(observer)
    return results


# --- the stress check for the sliding-window exercise ------------------------------------

SLIDING_SCRIPT = "rate_limit_sliding_window"


def _sliding(script: Any, key: str, limit: int, window_ms: int, now_ms: int, request_id: str) -> list:
    """Return a sliding-window script's reply as [status, value]."""
    reply = script(keys=[key], args=[limit, window_ms, now_ms, request_id])
    return [int(reply[0]), reply[1]]


def check_sliding_window(lab: Any, stem: str = SLIDING_SCRIPT, clients: int = 16, each: int = 10) -> str:
    """Return a summary if lua/<stem>.lua is a correct sliding-window limiter; raise AssertionError naming the first failure.

    The script must follow the contract of lua/rate_limit_sliding_window.lua: KEYS[1] the log,
    ARGV limit, window (ms), now (ms), request id; replies {1, count} / {0, count} / {2, reason}.
    """
    probe = lab.client()
    try:
        script = load_script(probe, stem)
        key = lab.key(f"check:{stem}:slide")
        probe.delete(key)
        # 1. The window slides: limit 3 per 1000 ms, requests at these times (ms).
        times = [0, 400, 800, 900, 1000, 1100, 1401, 1799, 1801]
        want = [1, 1, 1, 0, 1, 0, 1, 0, 1]
        got = [_sliding(script, key, 3, 1000, t, f"r{t}")[0] for t in times]
        assert got == want, f"sliding window: at times {times} ms expected statuses {want}, got {got}"
        assert probe.pttl(key) > 0, "the log must carry a TTL so an idle limiter's key disappears"
        # 2. Bad input is refused before any write.
        fresh = lab.key(f"check:{stem}:bad")
        for args in ([0, 1000, 5, "a"], ["1.5", 1000, 5, "a"], [3, "-1", 5, "a"], [3, 1000, "1e3", "a"],
                     [3, 1000, 5, ""], [3, 1000]):
            reply = script(keys=[fresh], args=args)
            assert int(reply[0]) == INVALID, f"arguments {args} must get status 2, got {reply}"
        assert probe.exists(fresh) == 0, "a refused request must write nothing"
        # 3. No overshoot under concurrency: every request at the same instant.
        crowd = lab.key(f"check:{stem}:crowd")
        probe.delete(crowd)
        limit = clients * each // 4
        result = run_clients(lab, lambda ctx: _sliding(ctx.local.setdefault("s", load_script(ctx.client, stem)),
                                                       crowd, limit, 60_000, 5_000,
                                                       f"c{ctx.client_id}-{ctx.iteration}")[0],
                             clients=clients, iterations=each)
        admitted = result.count(ALLOWED)
        assert admitted == limit, f"{clients} clients x {each} requests, limit {limit}: {admitted} admitted"
        assert result.count(REJECTED) == clients * each - limit, f"unexpected replies: {result.counts()}"
        probe.delete(key, crowd)
        return (f"{stem}: window slides as expected, bad input refused, "
                f"{admitted} of {clients * each} concurrent requests admitted (limit {limit})")
    finally:
        lab.release(probe)
