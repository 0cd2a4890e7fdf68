"""A lock on one Redis key: acquire, every way to release it (broken and safe), extend, fencing.

The lock is the pattern of the Redis ``SET`` docs: ``SET key token NX PX ttl`` with a token of
20 random bytes, so only the client that wrote the token can recognise the lock as its own.
Every release function takes ``(client, key, token)`` and returns True if *this call* deleted the
key. Two of them are broken on purpose, because the blind-DEL notebook reproduces their races:

* ``release_blind``: ``DEL key``. Deletes whoever's lock is there now.
* ``release_check_then_del``: ``GET``, compare in Python, ``DEL``. The key can expire and be
  taken by another client between the GET and the DEL.

The safe ones make the comparison and the delete one step on the server:
``release_lua`` (lua/lock_release.lua), ``release_lua_checked`` (lua/lock_release_checked.lua,
which says *why* it did not release), ``release_watch`` (WATCH, GET, MULTI/DEL/EXEC),
``release_delex`` (Redis >= 8.4 ``DELEX key IFEQ token``) and ``release_digest``
(``DELEX key IFDEQ digest``, the token's XXH3-64 instead of the token itself).

Even a safe release cannot stop a holder that paused past its lease from acting as if it still
held the lock; for that the resource itself must refuse stale holders: ``acquire_fenced`` hands
out a fencing token (INCR) with each grant and ``write_fenced`` (lua/fenced_write.lua) rejects
writes whose token is older than one already seen.

``lease_spans`` turns a recorded history into "certainly held" intervals and ``violations``
counts overlapping ones, i.e. two clients holding a valid lease on the same lock at once.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import xxhash
from redis.commands.core import Script

from helpers.scripts import load_script

TOKEN_BYTES = 20
# How much earlier than acquire-start + ttl a lease may end on the server: Redis and fakeredis
# keep expiry times in whole milliseconds, so a key can expire up to 1 ms "early" measured
# against the client's nanosecond clock. lease_spans ends a lease this much earlier.
EXPIRY_SLACK_NS = 2_000_000
MAX_WATCH_ATTEMPTS = 100

Release = Callable[[Any, str, Any], bool]


class LockContention(RuntimeError):
    """A WATCH-based release saw its key change on every attempt and gave up."""


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"a token is str or bytes, got {type(value).__name__}")


def _check_token(token: Any) -> None:
    if not _as_bytes(token):
        raise ValueError("the token must not be empty")


def _check_ttl(ttl_ms: int) -> None:
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 1:
        raise ValueError(f"ttl_ms must be a positive int (milliseconds), got {ttl_ms!r}")


def same_token(stored: Any, token: Any) -> bool:
    """Return True if a stored value (str, bytes or None) equals token byte for byte."""
    return stored is not None and _as_bytes(stored) == _as_bytes(token)


def new_token(nbytes: int = TOKEN_BYTES) -> str:
    """Return a fresh random token: nbytes random bytes as hex (20 bytes -> 40 characters)."""
    if nbytes < 16:
        raise ValueError(f"a lock token needs at least 16 random bytes to be unguessable, got {nbytes}")
    return secrets.token_hex(nbytes)


def token_digest(token: Any) -> str:
    """Return the XXH3-64 of token as 16 lowercase hex digits, the same text DIGEST returns."""
    return xxhash.xxh3_64_hexdigest(_as_bytes(token))


def server_digest(client: Any, key: str) -> str | None:
    """Return DIGEST key (the value's XXH3-64 as hex) or None if the key is missing."""
    value = client.execute_command("DIGEST", key)
    return value.decode() if isinstance(value, bytes) else value


# ------------------------------------------------------------------ acquire

def acquire(client: Any, key: str, token: Any, ttl_ms: int) -> bool:
    """Return True if SET key token NX PX ttl_ms took the lock (False: somebody holds it)."""
    _check_token(token)
    _check_ttl(ttl_ms)
    return bool(client.set(key, token, nx=True, px=ttl_ms))


def acquire_fenced(client: Any, key: str, fence_key: str, token: Any, ttl_ms: int) -> int | None:
    """Return the fencing token (INCR fence_key) if the lock was taken, else None.

    SET NX PX and INCR run in one MULTI/EXEC, so every grant gets a number larger than every
    earlier grant's. A failed attempt also consumes a number; the sequence stays increasing,
    which is all fencing needs. key and fence_key must share a hash tag on a cluster.
    """
    _check_token(token)
    _check_ttl(ttl_ms)
    with client.pipeline(transaction=True) as pipe:
        pipe.set(key, token, nx=True, px=ttl_ms)
        pipe.incr(fence_key)
        taken, fence = pipe.execute()
    return int(fence) if taken else None


# ------------------------------------------------------------------ release: broken on purpose

def release_blind(client: Any, key: str, token: Any = None) -> bool:
    """Return True if DEL key deleted something. BROKEN: it ignores token, deleting anyone's lock."""
    return client.delete(key) == 1


def release_check_then_del(client: Any, key: str, token: Any) -> bool:
    """Return True if GET matched token and the DEL that followed deleted the key.

    BROKEN: between the GET and the DEL the lease can expire and another client take the lock;
    the DEL then deletes that client's lock.
    """
    _check_token(token)
    if not same_token(client.get(key), token):
        return False
    return client.delete(key) == 1


# ------------------------------------------------------------------ release: safe

def release_lua(client: Any, key: str, token: Any, script: Script | None = None) -> bool:
    """Return True if lua/lock_release.lua deleted the key (it held token), else False.

    Pass script (lab.script("lock_release")) to skip loading the file on every call.
    """
    _check_token(token)
    script = script or load_script(client, "lock_release")
    return script(keys=[key], args=[token], client=client) == 1


RELEASED, EXPIRED, STOLEN = "released", "expired", "stolen"


def release_lua_checked(client: Any, key: str, token: Any, script: Script | None = None) -> str:
    """Return "released", "expired" (key missing) or "stolen" (another token) from lua/lock_release_checked.lua."""
    _check_token(token)
    script = script or load_script(client, "lock_release_checked")
    reply = script(keys=[key], args=[token], client=client)
    if reply == 1:
        return RELEASED
    if reply is None:
        return EXPIRED
    if reply == -1:
        return STOLEN
    raise ValueError(f"lock_release_checked.lua returned {reply!r}, which its contract does not list")


def release_watch(client: Any, key: str, token: Any, max_attempts: int = MAX_WATCH_ATTEMPTS) -> bool:
    """Return True if WATCH key, GET == token, MULTI DEL EXEC deleted the key.

    If the key changes between WATCH and EXEC, EXEC aborts (nothing deleted) and the check is
    repeated; after max_attempts aborted tries LockContention is raised.
    """
    _check_token(token)
    with client.pipeline(transaction=True) as pipe:
        for _ in range(max_attempts):
            try:
                pipe.watch(key)
                if not same_token(pipe.get(key), token):
                    pipe.unwatch()
                    return False
                pipe.multi()
                pipe.delete(key)
                return pipe.execute()[0] == 1
            except redis.WatchError:
                continue
    raise LockContention(f"{key}: changed during each of {max_attempts} WATCH attempts")


def release_delex(client: Any, key: str, token: Any) -> bool:
    """Return True if DELEX key IFEQ token (Redis >= 8.4) deleted the key."""
    _check_token(token)
    return client.execute_command("DELEX", key, "IFEQ", token) == 1


def release_digest(client: Any, key: str, token: Any) -> bool:
    """Return True if DELEX key IFDEQ <XXH3-64 of token> (Redis >= 8.4) deleted the key.

    Sends 16 hex digits instead of the token: useful when the lock value is large.
    """
    _check_token(token)
    return client.execute_command("DELEX", key, "IFDEQ", token_digest(token)) == 1


# ------------------------------------------------------------------ extend

def extend_ifeq(client: Any, key: str, token: Any, ttl_ms: int) -> bool:
    """Return True if SET key token IFEQ token PX ttl_ms (Redis >= 8.4) reset the lease to ttl_ms."""
    _check_token(token)
    _check_ttl(ttl_ms)
    return bool(client.execute_command("SET", key, token, "IFEQ", token, "PX", ttl_ms))


def extend_lua(client: Any, key: str, token: Any, ttl_ms: int, script: Script | None = None) -> bool:
    """Return True if lua/lock_extend.lua reset the lease to ttl_ms (the key held token)."""
    _check_token(token)
    _check_ttl(ttl_ms)
    script = script or load_script(client, "lock_extend")
    return script(keys=[key], args=[token, ttl_ms], client=client) == 1


# ------------------------------------------------------------------ fenced resource

def write_unfenced(client: Any, resource: str, value: Any) -> bool:
    """Return True after SET resource value: a resource that trusts whoever calls it."""
    return bool(client.set(resource, value))


def write_fenced(client: Any, resource: str, fence_seen: str, fence: int, value: Any,
                 script: Script | None = None) -> bool:
    """Return True if lua/fenced_write.lua accepted the write (fence >= highest seen), False if refused as stale."""
    if isinstance(fence, bool) or not isinstance(fence, int) or fence < 1:
        raise ValueError(f"a fencing token is a positive int, got {fence!r}")
    script = script or load_script(client, "fenced_write")
    return script(keys=[resource, fence_seen], args=[fence, value], client=client) == 1


# ------------------------------------------------------------------ histories

@dataclass(frozen=True)
class LeaseSpan:
    """An interval (monotonic ns) during which client_id certainly held a valid lease."""

    client_id: Any
    start_ns: int
    end_ns: int


def lease_span(client_id: Any, acquire_start_ns: int, acquire_end_ns: int, release_start_ns: int,
               ttl_ms: int, slack_ns: int = EXPIRY_SLACK_NS) -> LeaseSpan | None:
    """Return the span a holder certainly held its lease, or None if it may have held it not at all.

    It starts when SET NX returned (the key held the token by then) and ends at the earlier of:
    the start of its release, and acquire start + ttl - slack (the lease surely ended no
    earlier, since SET ran after the acquire started). With a correct release, two such spans
    of the same lock can never overlap; an overlap means a release deleted a lock it did not own.
    """
    end = min(release_start_ns, acquire_start_ns + ttl_ms * 1_000_000 - slack_ns)
    return LeaseSpan(client_id, acquire_end_ns, end) if end > acquire_end_ns else None


def violations(spans: Iterable[LeaseSpan]) -> list[tuple[LeaseSpan, LeaseSpan]]:
    """Return every pair of spans of different clients that overlap in time (mutual-exclusion violations)."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    pairs: list[tuple[LeaseSpan, LeaseSpan]] = []
    active: list[LeaseSpan] = []
    for span in ordered:
        active = [a for a in active if a.end_ns > span.start_ns]
        pairs.extend((a, span) for a in active if a.client_id != span.client_id)
        active.append(span)
    return pairs


def lease_spans(history: Sequence[Any], ttl_ms: int, acquire_label: str = "acquire",
                release_label: str = "release") -> list[LeaseSpan]:
    """Return the certainly-held spans of a race history (Ops with client_id, label, start_ns, end_ns, result).

    Pairs each client's successful acquire (an Op whose result is truthy) with that client's next
    release Op; a holder with no release yet holds until its lease runs out.
    """
    by_client: dict[Any, list[Any]] = {}
    for op in sorted(history, key=lambda o: o.start_ns):
        by_client.setdefault(op.client_id, []).append(op)
    spans: list[LeaseSpan] = []
    for client_id, ops in by_client.items():
        held: Any = None
        for op in ops:
            if op.label == acquire_label and op.result:
                held = op
            elif op.label == release_label and held is not None:
                span = lease_span(client_id, held.start_ns, held.end_ns, op.start_ns, ttl_ms)
                spans.extend([span] if span else [])
                held = None
        if held is not None:
            span = lease_span(client_id, held.start_ns, held.end_ns, 2 ** 63, ttl_ms)
            spans.extend([span] if span else [])
    return spans
