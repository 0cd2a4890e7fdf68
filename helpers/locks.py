"""A lock on one Redis key: acquire, every way to release it (broken and safe), extend, fencing.

The lock is the pattern of the Redis ``SET`` docs: ``SET key token NX PX ttl`` with a token of
20 random bytes, so only the client that wrote the token can recognise the lock as its own.
Every release function takes ``(client, key, token)`` and returns True if *this call* deleted the
key (``release_lua_checked`` returns "released", "expired" or "stolen" instead). Two of them are
broken on purpose, because the blind-DEL notebook reproduces their races:

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

For the notebook's experiments: ``lock_cycle`` / ``extend_cycle`` build ``run_clients`` client
functions for a ``LockLoad`` (lease, work, which cycles pause past the lease);
``lease_spans`` turns a recorded history into "certainly held" intervals and ``violations``
counts overlapping ones, i.e. two clients holding a valid lease on the same lock at once;
``holder_program`` and friends are forced-schedule programs (``helpers.instruments.schedule``) with the
lease's end as an explicit clock step (``lease_runs_out``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import xxhash
from redis.commands.core import Script

from helpers.instruments.schedule import Step, cmd
from helpers.backend.scripts import load_script

TOKEN_BYTES = 20
# How much earlier than acquire-start + ttl a lease may end on the server: Redis and fakeredis
# keep expiry times in whole milliseconds, so a key can expire up to 1 ms "early" measured
# against the client's nanosecond clock. lease_spans ends a lease this much earlier.
EXPIRY_SLACK_NS = 2_000_000
MAX_WATCH_ATTEMPTS = 100

class LockContention(RuntimeError):
    """A WATCH-based release saw its key change on every attempt and gave up."""


class LockWaitTimeout(TimeoutError):
    """A client of a threaded lock load waited longer than its limit for the lock."""


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
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
    which is all fencing needs. key and fence_key must share a hash tag on a cluster. If the
    INCR fails (fence_key holds a non-integer or another type), the lock just taken is released
    again before the error is raised: the caller never holds a lock it was told it did not get.
    """
    _check_token(token)
    _check_ttl(ttl_ms)
    with client.pipeline(transaction=True) as pipe:
        pipe.set(key, token, nx=True, px=ttl_ms)
        pipe.incr(fence_key)
        taken, fence = pipe.execute(raise_on_error=False)
    if isinstance(taken, Exception):
        raise taken
    if isinstance(fence, Exception):
        if taken:
            release_lua(client, key, token)
        raise fence
    return int(fence) if taken else None


# ------------------------------------------------------------------ release: broken on purpose

def release_blind(client: Any, key: str, token: Any = None) -> bool:
    """Return True if DEL key deleted something. BROKEN: it ignores token, deleting anyone's lock."""
    return client.delete(key) == 1


def release_check_then_del(client: Any, key: str, token: Any,
                           between: Callable[[], Any] | None = None) -> bool:
    """Return True if GET matched token and the DEL that followed deleted the key.

    BROKEN: between the GET and the DEL the lease can expire and another client take the lock;
    the DEL then deletes that client's lock. between(), if given, runs in that window (a demo's
    stand-in for a GC pause landing exactly there).
    """
    _check_token(token)
    if not same_token(client.get(key), token):
        return False
    if between is not None:
        between()
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
    """An interval (monotonic ns) during which client certainly held a valid lease.

    Its fields match ``helpers.timeline.Span``, so plot_timeline draws it and its overlaps.
    """

    client: Any
    start_ns: int
    end_ns: int
    label: str = "valid lease"


def lease_span(client: Any, acquire_start_ns: int, acquire_end_ns: int, release_start_ns: int,
               ttl_ms: int, slack_ns: int = EXPIRY_SLACK_NS) -> LeaseSpan | None:
    """Return the span a holder certainly held its lease, or None if it may have held it not at all.

    It starts when SET NX returned (the key held the token by then) and ends at the earlier of:
    the start of its release, and acquire start + ttl - slack (the lease surely ended no
    earlier, since SET ran after the acquire started). With a correct release, two such spans
    of the same lock can never overlap; an overlap means a release deleted a lock it did not own.
    """
    end = min(release_start_ns, acquire_start_ns + ttl_ms * 1_000_000 - slack_ns)
    return LeaseSpan(client, acquire_end_ns, end) if end > acquire_end_ns else None


def violations(spans: Iterable[LeaseSpan]) -> list[tuple[LeaseSpan, LeaseSpan]]:
    """Return every pair of spans of different clients that overlap in time (mutual-exclusion violations)."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    pairs: list[tuple[LeaseSpan, LeaseSpan]] = []
    active: list[LeaseSpan] = []
    for span in ordered:
        active = [a for a in active if a.end_ns > span.start_ns]
        pairs.extend((a, span) for a in active if a.client != span.client)
        active.append(span)
    return pairs


def lease_spans(history: Sequence[Any], ttl_ms: int, acquire_label: str = "acquire",
                release_label: str = "release", extend_label: str = "extend") -> list[LeaseSpan]:
    """Return the certainly-held spans of a race history (Ops with client_id, label, start_ns, end_ns, result).

    Pairs each client's successful acquire (an Op whose result is truthy) with that client's next
    release Op; a holder with no release holds until its lease runs out. A successful extend Op
    (truthy result) moves the end of the lease to its start + ttl, as the client believes it did.
    """
    by_client: dict[Any, list[Any]] = {}
    for op in sorted(history, key=lambda o: o.start_ns):
        by_client.setdefault(op.client_id, []).append(op)
    spans: list[LeaseSpan] = []
    for client, ops in by_client.items():
        held: Any = None
        lease_from = 0
        for op in ops:
            if op.label == acquire_label and op.result:
                held, lease_from = op, op.start_ns
            elif op.label == extend_label and held is not None and op.result:
                lease_from = op.start_ns
            elif op.label == release_label and held is not None:
                spans.extend(_span_or_nothing(client, held, lease_from, op.start_ns, ttl_ms))
                held = None
        if held is not None:
            spans.extend(_span_or_nothing(client, held, lease_from, 2 ** 63, ttl_ms))
    return spans


def _span_or_nothing(client: Any, acquired: Any, lease_from_ns: int, release_start_ns: int,
                     ttl_ms: int) -> list[LeaseSpan]:
    span = lease_span(client, lease_from_ns, acquired.end_ns, release_start_ns, ttl_ms)
    return [span] if span is not None else []


# ------------------------------------------------------------------ threaded load

@dataclass(frozen=True)
class LockLoad:
    """How each client of a threaded run uses the lock: lease, work, and which cycles overrun.

    Every pause_every-th cycle of each client (staggered by client id) pauses for pause_s, in
    the critical section (pause_where="work") or, for release_check_then_del, between its GET
    and its DEL (pause_where="release"). A pause longer than the lease is an overrun.
    """

    key: str
    ttl_ms: int = 5
    work_s: float = 0.0002
    pause_s: float = 0.010
    pause_every: int = 10
    pause_where: str = "work"
    retry_s: float = 0.0002
    wait_limit_s: float = 10.0

    def __post_init__(self) -> None:
        _check_ttl(self.ttl_ms)
        if not all(0 <= v < float("inf") for v in (self.work_s, self.pause_s, self.retry_s)) or self.pause_every < 0:
            raise ValueError("work_s, pause_s, retry_s and pause_every must be finite and not negative")
        if not 0 < self.wait_limit_s < float("inf"):  # NaN fails too
            raise ValueError(f"wait_limit_s must be positive and finite, got {self.wait_limit_s!r}")
        if self.pause_where not in ("work", "release"):
            raise ValueError(f"pause_where is 'work' or 'release', got {self.pause_where!r}")

    def pauses(self, client_id: int, iteration: int) -> bool:
        """Return True if this cycle of this client pauses."""
        return self.pause_every > 0 and (iteration + client_id) % self.pause_every == 0


def _spin_until_acquired(ctx: Any, load: LockLoad, token: str) -> None:
    """Retry SET NX PX every retry_s until it succeeds; record the successful attempt as "acquire"."""
    give_up = _monotonic_ns() + int(load.wait_limit_s * 1e9)
    start = _monotonic_ns()
    while start <= give_up:  # bounded by the wait limit: no while True
        if acquire(ctx.client, load.key, token, load.ttl_ms):
            ctx.record("acquire", start, _monotonic_ns(), True)
            return
        ctx.think(load.retry_s)
        start = _monotonic_ns()
    raise LockWaitTimeout(f"client {ctx.client_id} waited more than {load.wait_limit_s} s for "
                          f"{load.key} (is a key without a TTL in the way?)")


def lock_cycle(load: LockLoad, release: Callable[..., Any]) -> Callable[[Any], Any]:
    """Return a run_clients client_fn: spin until SET NX PX succeeds, work (maybe pause), release.

    Records ops "acquire" (the successful attempt), "work" and "release" (result: what release
    returned) in the history; returns the release's result, so RunResult.counts() tallies them.
    """
    def client_fn(ctx: Any) -> Any:
        client, token = ctx.client, new_token()
        paused = load.pauses(ctx.client_id, ctx.iteration)
        _spin_until_acquired(ctx, load, token)
        overran = "overran" if load.pause_s * 1000 > load.ttl_ms else "paused"
        with ctx.op("work") as work:
            in_work = paused and load.pause_where == "work"
            ctx.think(load.pause_s if in_work else load.work_s)
            work.result = overran if in_work else "ok"

        def pause_in_release() -> None:
            with ctx.op("pause") as pause:
                ctx.think(load.pause_s)
                pause.result = overran

        with ctx.op("release") as rel:
            if paused and load.pause_where == "release":
                rel.result = release(client, load.key, token, between=pause_in_release)
            else:
                rel.result = release(client, load.key, token)
        return rel.result

    return client_fn


def overrun_releases(history: Sequence[Any]) -> list[Any]:
    """Return the results of the releases of lock cycles that overran their lease (an op with result "overran").

    A cycle is one client's ops from a successful "acquire" to the next; its release is the op
    labelled "release" (a pause between GET and DEL lies inside it).
    """
    results: list[Any] = []
    by_client: dict[Any, list[Any]] = {}
    for op in sorted(history, key=lambda o: o.start_ns):
        by_client.setdefault(op.client_id, []).append(op)
    for ops in by_client.values():
        cycles: list[list[Any]] = []
        for op in ops:
            if op.label == "acquire" and op.result:
                cycles.append([])
            if cycles:
                cycles[-1].append(op)
        for cycle in cycles:
            if any(op.result == "overran" for op in cycle):
                results.extend(op.result for op in cycle if op.label == "release")
    return results


def extend_cycle(load: LockLoad, extend: Callable[[Any, str, Any, int], bool], release: Callable[..., Any],
                 chunks: int = 3) -> Callable[[Any], Any]:
    """Return a run_clients client_fn whose holder renews its lease before each of `chunks` work chunks.

    A pausing cycle pauses in its first chunk, so its next extend comes after the lease ran
    out; a correct extend then refuses and the holder stops ("lost lease") without working on.
    Records "acquire", "extend" (result: what extend returned), "work" and "release" ops.
    """
    def client_fn(ctx: Any) -> Any:
        client, token = ctx.client, new_token()
        paused = load.pauses(ctx.client_id, ctx.iteration)
        _spin_until_acquired(ctx, load, token)
        for chunk in range(chunks):
            if chunk:
                with ctx.op("extend") as ext:
                    ext.result = bool(extend(client, load.key, token, load.ttl_ms))
                if not ext.result:
                    return "lost lease"
            with ctx.op("work"):
                ctx.think(load.pause_s if paused and chunk == 0 else load.work_s)
        with ctx.op("release") as rel:
            rel.result = release(client, load.key, token)
        return "done"

    return client_fn


def _monotonic_ns() -> int:
    return time.monotonic_ns()


# ------------------------------------------------------------------ forced schedules

def take_program(key: str, token: str, ttl_ms: int) -> Any:
    """Return a schedule program that tries SET key token NX PX once: "holding" or "busy"."""
    def program() -> Generator[Step, Any, str]:
        taken = yield cmd("SET", key, token, "NX", "PX", ttl_ms)
        return "holding" if taken else "busy"
    return program


def lease_runs_out(key: str, token: str) -> Any:
    """Return a one-step clock program: if key holds token, its lease runs out now (PEXPIREAT key 1)."""
    def expire_if_held(client: Any) -> str:
        if not same_token(client.get(key), token):
            return "lease not held: nothing expires"
        client.execute_command("PEXPIREAT", key, 1)
        return "lease ran out: key expired"

    def program() -> Generator[Step, Any, str]:
        return (yield Step("", expire_if_held, ("(clock)", token, "lease on", key, "runs out")))
    return program


def release_steps(method: str, key: str, token: str) -> Generator[Step, Any, Any]:
    """Yield the steps of one release method in a schedule program; return what it reports.

    Methods: blind, check_then_del, lua, lua_checked, watch, delex, digest.
    """
    if method == "blind":
        return (yield cmd("DEL", key)) == 1
    if method == "check_then_del":
        if not same_token((yield cmd("GET", key)), token):
            return False
        return (yield cmd("DEL", key)) == 1
    if method in ("lua", "lua_checked"):
        stem = "lock_release" if method == "lua" else "lock_release_checked"
        run = lambda c: load_script(c, stem)(keys=[key], args=[token])  # noqa: E731
        reply = yield Step("EVALSHA", run, ("EVALSHA", f"{stem}.lua", key, token))
        return reply == 1 if method == "lua" else {1: RELEASED, None: EXPIRED, -1: STOLEN}[reply]
    if method == "watch":
        yield cmd("WATCH", key)
        if not same_token((yield cmd("GET", key)), token):
            yield cmd("UNWATCH")
            return False
        yield cmd("MULTI")
        yield cmd("DEL", key)
        return (yield cmd("EXEC")) == [1]
    if method == "delex":
        return (yield cmd("DELEX", key, "IFEQ", token)) == 1
    if method == "digest":
        return (yield cmd("DELEX", key, "IFDEQ", token_digest(token))) == 1
    raise ValueError(f"unknown release method {method!r}")


RELEASE_METHODS = ("blind", "check_then_del", "lua", "lua_checked", "watch", "delex", "digest")


def holder_program(key: str, token: str, ttl_ms: int, method: str) -> Any:
    """Return a schedule program: SET key token NX PX ttl_ms, then release by method.

    Returns "busy" if the lock was held, else "released" / "not released" (or the
    lua_checked status: released / expired / stolen).
    """
    if method not in RELEASE_METHODS:
        raise ValueError(f"method must be one of {', '.join(RELEASE_METHODS)}, got {method!r}")

    def program() -> Generator[Step, Any, Any]:
        if not (yield cmd("SET", key, token, "NX", "PX", ttl_ms)):
            return "busy"
        outcome = yield from release_steps(method, key, token)
        if isinstance(outcome, str):
            return outcome
        return "released" if outcome else "not released"
    return program


def fenced_holder_program(lock: str, fence_key: str, resource: str, seen: str, token: str, ttl_ms: int,
                          value: str, fenced: bool) -> Any:
    """Return a schedule program: fenced acquire, write value to resource (fenced or not), Lua release.

    Returns "busy", or "wrote" / "write refused" followed by the release outcome.
    """
    def acquire_step(client: Any) -> Any:
        return acquire_fenced(client, lock, fence_key, token, ttl_ms)

    def write_step(fence: int) -> Step:
        if fenced:
            return Step("EVALSHA", lambda c: write_fenced(c, resource, seen, fence, value),
                        ("EVALSHA", "fenced_write.lua", resource, seen, fence, value))
        return cmd("SET", resource, value)

    def program() -> Generator[Step, Any, str]:
        fence = yield Step("MULTI", acquire_step, ("MULTI SET", lock, token, "NX PX", ttl_ms, "+ INCR", fence_key, "EXEC"))
        if fence is None:
            return "busy"
        wrote = yield write_step(fence)
        released = yield from release_steps("lua", lock, token)
        return f"{'wrote' if wrote else 'write refused'}, {'released' if released else 'not released'}"
    return program


def extend_stress_check(lab: Any, extend: Callable[[Any, str, Any, int], bool], release: Callable[..., Any],
                        clients: int = 4, cycles: int = 50) -> list[str]:
    """Return what is wrong with extend(client, key, token, ttl_ms) -> bool (an empty list: it passed).

    Checks an owner can extend, a foreign lock is left alone, a missing lock is not brought
    back, then runs extend_cycle under threaded load with overrunning holders and counts
    mutual-exclusion violations; it also requires some paused holders to have lost their lease.
    """
    from helpers.instruments.race import run_clients  # local: the threaded part only

    admin, key, problems = lab.client(), lab.key("extend-check"), []
    try:
        admin.set(key, "mine", px=1_000)
        if not extend(admin, key, "mine", 60_000) or admin.pttl(key) <= 1_000:
            problems.append("the owner could not extend its own lease")
        admin.set(key, "theirs", px=1_000)
        if extend(admin, key, "mine", 60_000) or admin.get(key) != "theirs" or admin.pttl(key) > 1_000:
            problems.append("it extended (or overwrote) another client's lock")
        admin.delete(key)
        if extend(admin, key, "mine", 60_000) or admin.exists(key):
            problems.append("it reported success on, or re-created, an expired lock")
        load = LockLoad(key=lab.key("extend-load"), ttl_ms=5, work_s=0.0, pause_s=0.010, pause_every=5,
                        retry_s=0.0005)
        run = run_clients(lab, extend_cycle(load, extend, release), clients=clients, iterations=cycles)
        found = violations(lease_spans(run.history, load.ttl_ms))
        if found:
            problems.append(f"{len(found)} mutual-exclusion violations under load")
        if run.count("lost lease") == 0:
            problems.append("no paused holder ever lost its lease: the extend never refused")
    finally:
        admin.delete(key, lab.key("extend-load"))
        lab.release(admin)
    return problems
