"""Case files (notebook 08): the locks and rate limiters people install, called as their READMEs do.

The subject first. Each lock is two functions, ``take_<library>(client, name)`` (non-blocking:
the held lock, or None when somebody else holds it) and ``release_<library>(lock)`` (what the
release said). An asyncio lock's two are ``async def`` (pottery's ``AIORedlock``): its stories'
actors are then async too, and the race steps their round trips as it steps sync ones. Each
limiter is one function ``hit_<library>(client, name)`` that returns True when the request is
admitted. A library that builds its own client (from a URL or a pool) is called that way too:
inside a race, every client an actor makes speaks through that actor's gated client on the lab's
server, so ``URL`` below is never dialled there.

Then the case file: ``LOCKS`` and ``LIMITERS`` name each library's functions, its distribution
and the keys it writes; ``lock_race(lab, library, story)`` is one of the notebook's three races
(``"exclusion"``, ``"release"``, ``"lease"``), ``limiter_race(lab, library)`` three requests at
once, ``window_race(lab, library)`` four requests while the time moves on twice (its one more
library: ``WINDOW_LIMITERS``), and ``verdict(race)`` its explored verdict, or the reason there is
none (``MORE_LOCKS`` and ``MORE_LIMITERS``: the notebook's optional
part's libraries). The notebook lists every function it runs (``show``). Versions are pinned
in pyproject.toml's ``cases`` extra: a verdict about a library names the version it was checked
against.

Left out: aioredlock, the asyncio Redlock the course material names. aioredlock 0.7.3 (its last
release) pins ``aioredis<2.0.0``; in a scratch venv on Python 3.11.7 it installs with aioredis
1.3.1 and async-timeout 5.0.1, imports, and takes and releases a lock on redis-server 8.6.3. Its
pins do not conflict with the suite's (aioredis is a distribution of its own), but its round trips
do not go through redis-py: aioredis 1.x opens its own socket (``asyncio.open_connection``, then
``loop.create_connection``), which an actor's event loop refuses. Run as a case file, every story
ends in ``ActorRefused`` (``Refusal.ASYNCIO``, "actor A's event loop was asked to open a
connection to localhost:6379"), so an extra for it would add a second Redis client library to the
learner's environment to print "refused". pottery's ``AIORedlock`` (redis.asyncio) is the
asyncio lock explored here, and aiocache's ``RedLock`` (redis.asyncio) the asyncio stampede guard.

Also left out, each for a reason read in its 2026 release:

- huey 3.5.4 (a task queue): its queue key is ``huey.redis.<name>`` with every character but
  letters, digits and ``_`` stripped from the name (``RedisStorage.clean_name``), so no name can
  put it under the suite's prefix, which the client-side guard and the workshop's ACL require.
- rq 2.12.0 (a job queue): every queue is registered in one global set, ``rq:queues``, a key
  outside any run's prefix.
- arq 0.28.0 and saq 0.26.4 (asyncio job queues) pin ``redis<6`` and (their ``redis`` extra)
  ``redis<8``; sherlock 0.4.1 (locks) pins ``redis<5``. The suite's redis-py is 8.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version
from typing import Any

import aiocache
import aiocache.lock
import greenlet  # type: ignore[import-untyped]  # greenlet ships no type information
import limits
import portalocker
import pottery
import pyrate_limiter
import redis
import redis.asyncio
import redis_limiters
import redis_lock
import redis_rate_limit
import redlock
import walrus

from helpers import EPOCH, ActorRefused, Invariant, Lab, NoVerdict, Race, Refusal

LEASE_S = 10  # every lock's lease (forced schedules: a clock step ends it, not time)
URL = "redis://localhost:6379/0"  # what the READMEs write; a race sends it to the lab's server
LIMIT = 2  # requests each limiter admits (per minute)
WINDOW_S = 60  # the limiters' window: a minute
STEP_S = 40  # how far each clock step of the window story moves the time (off any boundary)
CAPACITY = 2  # holders each semaphore admits at once
JOBS = ("job-1", "job-2")  # what the queue's producer puts
CLIENT_IP = "192.168.0.10"  # python-redis-rate-limit counts per client, as its README shows


# --- locks: take(client, name) -> the held lock or None; release(lock) -> what it said ---------


def take_redis_py(client: redis.Redis, name: str) -> Any:
    """Return redis-py's Lock on name if SET NX PX got it, else None."""
    lock = client.lock(name, timeout=LEASE_S)
    return lock if lock.acquire(blocking=False) else None


def release_redis_py(lock: Any) -> str:
    """Release redis-py's Lock; say whether its token-checked script refused."""
    try:
        lock.release()
    except redis.exceptions.LockNotOwnedError:
        return "refused (LockNotOwnedError)"
    return "released"


def take_python_redis_lock(client: redis.Redis, name: str) -> Any:
    """Return python-redis-lock's Lock on name (key lock:<name>) if it got it, else None."""
    lock = redis_lock.Lock(client, name, expire=LEASE_S)
    return lock if lock.acquire(blocking=False) else None


def release_python_redis_lock(lock: Any) -> str:
    """Release python-redis-lock's Lock; say whether its token-checked script refused."""
    try:
        lock.release()
    except redis_lock.NotAcquired:
        return "refused (NotAcquired)"
    return "released"


def take_pottery(client: redis.Redis, name: str) -> Any:
    """Return pottery's Redlock on name (key redlock:<name>), one master, if it got it."""
    lock = pottery.Redlock(key=name, masters={client}, auto_release_time=LEASE_S)
    return lock if lock.acquire(blocking=False) else None


def release_pottery(lock: Any) -> str:
    """Release pottery's Redlock; say whether it refused (the lock was not ours)."""
    try:
        lock.release()
    except pottery.ReleaseUnlockedLock:
        return "refused (ReleaseUnlockedLock)"
    return "released"


async def take_pottery_aio(client: redis.asyncio.Redis, name: str) -> Any:
    """Return pottery's AIORedlock on name (key redlock:<name>), one master (URL), if it got it."""
    aioredis = redis.asyncio.Redis.from_url(URL)
    lock = pottery.AIORedlock(key=name, masters={aioredis}, auto_release_time=LEASE_S)
    return lock if await lock.acquire(blocking=False) else None


async def release_pottery_aio(lock: Any) -> str:
    """Release pottery's AIORedlock; say whether it refused (the lock was not ours)."""
    try:
        await lock.release()
    except pottery.ReleaseUnlockedLock:
        return "refused (ReleaseUnlockedLock)"
    return "released"


def take_redlock_py(client: redis.Redis, name: str) -> Any:
    """Return (manager, lock) from redlock-py if it got name in one try, else None."""
    dlm = redlock.Redlock([{"host": "localhost", "port": 6379, "db": 0}], retry_count=1)
    my_lock = dlm.lock(name, LEASE_S * 1000)
    return (dlm, my_lock) if my_lock else None


def release_redlock_py(held: Any) -> str:
    """Unlock with redlock-py; its unlock() says nothing, whether it deleted the lock or not."""
    dlm, my_lock = held
    dlm.unlock(my_lock)
    return "unlock() returned"


def release_blind(lock: Any) -> str:
    """Delete redis-py's lock key without checking the token (notebook 02's blind DEL)."""
    return f"DEL -> {lock.redis.delete(lock.name)}"


async def take_aiocache(client: redis.asyncio.Redis, name: str) -> Any:
    """Enter aiocache's RedLock on name (key <name>-lock) as its docstring's ``async with`` does.

    It never says "busy": a second taker waits for the holder's release (an asyncio.Event in the
    taker's own process) at most the lease, then goes in anyway. Its docstring says so: "do NOT
    use this if you need real resource exclusion". A stampede guard, not a mutex.
    """
    lock = aiocache.lock.RedLock(aiocache.Cache(aiocache.Cache.REDIS), name, lease=LEASE_S)
    await lock.__aenter__()
    return lock


async def release_aiocache(lock: Any) -> str:
    """Leave aiocache's RedLock (its __aexit__: a token-checked delete script, then wake waiters)."""
    await lock.__aexit__(None, None, None)
    return "exited"


def take_portalocker(client: redis.Redis, name: str) -> Any:
    """Return portalocker's RedisLock on the channel name (a pub/sub subscription) if it got it."""
    lock = portalocker.RedisLock(name)
    return lock.acquire(fail_when_locked=True)


# --- limiters: hit(client, name) -> True if admitted (LIMIT requests a minute) ----------------


def hit_limits(client: redis.Redis, name: str) -> bool:
    """Return whether limits' moving window (LIMIT a minute, its README's storage) admits one."""
    backend = limits.storage.RedisStorage(URL)
    moving_window = limits.strategies.MovingWindowRateLimiter(backend)
    return moving_window.hit(limits.parse(f"{LIMIT}/minute"), name, "user-1")


def hit_limits_fixed(client: redis.Redis, name: str) -> bool:
    """Return whether limits' fixed window (LIMIT a minute, its README's storage) admits one.

    A counter whose window starts at its first request and lasts a minute (INCRBY, then EXPIRE
    if it is new). Its README: "Burst traffic that bypasses the rate limit may occur at window
    boundaries."
    """
    backend = limits.storage.RedisStorage(URL)
    fixed_window = limits.strategies.FixedWindowRateLimiter(backend)
    return fixed_window.hit(limits.parse(f"{LIMIT}/minute"), name, "user-1")


def hit_python_redis_rate_limit(client: redis.Redis, name: str) -> bool:
    """Return whether python-redis-rate-limit's RateLimit (its default pool) admits a request."""
    try:
        with redis_rate_limit.RateLimit(
            resource=name, client=CLIENT_IP, max_requests=LIMIT, expire=60
        ):
            return True
    except redis_rate_limit.TooManyRequests:
        return False


def hit_walrus(client: redis.Redis, name: str) -> bool:
    """Return whether walrus's RateLimit (LIMIT a minute) admits a request for user-1.

    Its limit() counts the list of past requests (LLEN), decides in Python, then pushes the time
    of this one (LPUSH): a read, then a write, in two round trips. Its key is <name>:user-1.
    """
    limiter = walrus.Database.from_url(URL).rate_limit(name, limit=LIMIT, per=60)
    return not limiter.limit("user-1")  # limit() returns True when the request is limited


def hit_walrus_lua(client: redis.Redis, name: str) -> bool:
    """Return whether walrus's RateLimitLua (the same limiter in one script) admits a request."""
    limiter = walrus.Database.from_url(URL).rate_limit_lua(name, limit=LIMIT, per=60)
    return not limiter.limit("user-1")


def walrus_two_clients(pool: Any, name: str) -> dict[str, bool]:
    """Return whether walrus's RateLimit (1 a minute) admitted A and B, B sent inside A's request.

    No explorer: two clients on pool, each with its own connection. A's client hands A its
    count (LLEN) only after B's whole request has run, as a slow network or a paused process
    would. Both read a count of 0, so both push, and the limit of 1 admits two.
    """
    b = walrus.Database(connection_pool=pool).rate_limit(name, limit=1, per=60)
    admitted: dict[str, bool] = {}

    class CountThenB(walrus.Database):
        def llen(self, key: str) -> int:
            count = super().llen(key)
            if "B" not in admitted:  # B's request runs between A's count and A's push
                admitted["B"] = not b.limit("user-1")
            return count

    admitted["A"] = not CountThenB(connection_pool=pool).rate_limit(name, 1, 60).limit("user-1")
    return dict(sorted(admitted.items()))


def walrus_lua_forgets(client: redis.Redis, name: str) -> dict[str, Any]:
    """Return what walrus's RateLimitLua (LIMIT a minute) leaves once a request is refused.

    No explorer, no waiting: LIMIT + 1 requests one after the other, then the TTL its script
    gave the log of past requests. The script sets ``PEXPIRE key, limit_count * 2000``: 2 s per
    allowed request, whatever the window (its Python twin, RateLimit, uses ``per * 2000``). The
    TTL is given in whole seconds, rounded up: the milliseconds that pass before PTTL reads it
    vary from run to run (4000 on a quiet machine, 3999 on a busy one).
    """
    limiter = walrus.Database(connection_pool=client.connection_pool).rate_limit_lua(
        name, limit=LIMIT, per=WINDOW_S
    )
    admitted = [not limiter.limit("user-1") for _ in range(LIMIT + 1)]
    ttl_ms = client.pttl(f"{name}:user-1")
    return {
        "admitted": admitted,
        "ttl_s": -(-ttl_ms // 1000) if ttl_ms > 0 else ttl_ms,  # -2: no key, -1: no TTL
        "window_s": WINDOW_S,
    }


async def hit_pyrate_limiter(client: redis.asyncio.Redis, name: str) -> bool:
    """Return whether pyrate-limiter's RedisBucket (asyncio client, LIMIT a minute) admits one.

    Its README's async bucket: one script counts the window (ZCOUNT) and adds this request (ZADD).
    The window's ends come from the application's clock, sent as arguments. Its key is <name>.
    """
    pool = redis.asyncio.ConnectionPool.from_url(URL)
    rates = [pyrate_limiter.Rate(LIMIT, pyrate_limiter.Duration.MINUTE)]
    bucket = await pyrate_limiter.RedisBucket.init(
        rates, redis.asyncio.Redis(connection_pool=pool), name
    )
    limiter = pyrate_limiter.Limiter(bucket)
    return await limiter.try_acquire_async("user-1", blocking=False)


# --- semaphores: enter(client, name) -> the entered semaphore, or None when it did not get in --


def enter_redis_limiters(client: redis.Redis, name: str) -> Any:
    """Enter redis-limiters' SyncSemaphore on name as its README builds one; None after max_sleep.

    Its keys are {limiter}:semaphore:<name> (a list of permits, BLPOP takes one) and
    {limiter}:semaphore:<name>-exists (set when its script made the permits).
    """
    semaphore = redis_limiters.SyncSemaphore(
        name=name, capacity=CAPACITY, expiry=LEASE_S, max_sleep=LEASE_S, connection=client
    )
    try:
        semaphore.__enter__()
    except redis_limiters.MaxSleepExceededError:
        return None
    return semaphore


# --- queues: put(client, name, job) and take(client, name) -> a job, or None when it has none --


def pottery_queue(name: str) -> Any:
    """Return pottery's RedisSimpleQueue on name (a stream) with its README's client (bytes)."""
    return pottery.RedisSimpleQueue(redis=redis.Redis.from_url(URL), key=name)


def put_pottery(client: redis.Redis, name: str, job: str) -> None:
    """Put a job on pottery's RedisSimpleQueue (XADD)."""
    pottery_queue(name).put(job)


def take_pottery_queue(client: redis.Redis, name: str) -> Any:
    """Take a job from pottery's RedisSimpleQueue without waiting (get_nowait), or None."""
    try:
        return pottery_queue(name).get_nowait()
    except pottery.QueueEmptyError:
        return None


def left_pottery(client: redis.Redis, name: str) -> int:
    """Return how many jobs pottery's queue still holds (qsize: XLEN), read with client."""
    return pottery.RedisSimpleQueue(redis=client, key=name).qsize()


# --- the case file: which keys each library writes, the three races, their verdicts ------------

Take = Callable[[Any, str], Any]  # an asyncio lock's returns an awaitable of it
Release = Callable[[Any], str]
AsyncRelease = Callable[[Any], Awaitable[str]]  # an asyncio lock's release


@dataclass(frozen=True)
class LockCase:
    """A lock library: its distribution, take and release, the keys it writes ({name} filled)."""

    distribution: str
    take: Take
    release: Release | AsyncRelease
    keys: tuple[str, ...]


@dataclass(frozen=True)
class LimiterCase:
    """A rate limiter: its distribution, hit, and the key it counts in ({name} filled)."""

    distribution: str
    hit: Callable[..., bool | Awaitable[bool]]  # (client, name); an asyncio limiter's is awaited
    key: str


@dataclass(frozen=True)
class SemaphoreCase:
    """A semaphore: its distribution, enter, and the keys it writes ({name} filled)."""

    distribution: str
    enter: Callable[[Any, str], Any]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class QueueCase:
    """A queue: its distribution, put, take and left (how many jobs it still holds)."""

    distribution: str
    put: Callable[[Any, str, str], None]
    take: Callable[[Any, str], Any]
    left: Callable[[Any, str], int]


LOCKS = {
    "redis-py Lock": LockCase("redis", take_redis_py, release_redis_py, ("{name}",)),
    "python-redis-lock": LockCase(
        "python-redis-lock",
        take_python_redis_lock,
        release_python_redis_lock,
        ("lock:{name}", "lock-signal:{name}"),
    ),
    "pottery Redlock": LockCase("pottery", take_pottery, release_pottery, ("redlock:{name}",)),
    "redlock-py": LockCase("redlock-py", take_redlock_py, release_redlock_py, ("{name}",)),
    "pottery AIORedlock": LockCase(
        "pottery", take_pottery_aio, release_pottery_aio, ("redlock:{name}",)
    ),
}
LIMITERS = {
    "limits": LimiterCase("limits", hit_limits, f"LIMITS:LIMITER/{{name}}/user-1/{LIMIT}/1/minute"),
    "python-redis-rate-limit": LimiterCase(
        "python-redis-rate-limit", hit_python_redis_rate_limit, f"rate_limit:{{name}}_{CLIENT_IP}"
    ),
}


# Notebook 08's optional part: more case files. aiocache's RedLock is a stampede guard whose
# docstring disclaims exclusion; walrus's RateLimit counts, then pushes (two round trips).
MORE_LOCKS = {
    "aiocache RedLock": LockCase("aiocache", take_aiocache, release_aiocache, ("{name}-lock",)),
}
MORE_LIMITERS = {
    "walrus RateLimit": LimiterCase("walrus", hit_walrus, "{name}:user-1"),
    "walrus RateLimitLua": LimiterCase("walrus", hit_walrus_lua, "{name}:user-1"),
    "pyrate-limiter": LimiterCase("pyrate-limiter", hit_pyrate_limiter, "{name}"),
}


# The window story's one more: limits' other strategy, the fixed window.
WINDOW_LIMITERS = {
    "limits fixed window": LimiterCase(
        "limits", hit_limits_fixed, f"LIMITS:LIMITER/{{name}}/user-1/{LIMIT}/1/minute"
    ),
}


SEMAPHORES = {
    "redis-limiters": SemaphoreCase(
        "redis-limiters",
        enter_redis_limiters,
        ("{{limiter}}:semaphore:{name}", "{{limiter}}:semaphore:{name}-exists"),
    ),
}
QUEUES = {
    "pottery queue": QueueCase("pottery", put_pottery, take_pottery_queue, left_pottery),
}


def names(lab: Lab) -> tuple[str, str, str]:
    """Return the lock's name, the shared log and the limiters' name (one hash tag: one slot)."""
    return lab.ns.tagged("case", "lock"), lab.ns.tagged("case", "log"), lab.ns.tagged("case", "api")


def more_names(lab: Lab) -> tuple[str, str]:
    """Return the semaphore's name and the queue's name (the stories past locks)."""
    return lab.ns.tagged("case", "slots"), lab.ns.tagged("case", "jobs")


def holder(client: Any, take: Take, release: Release, name: str, log: str, me: str) -> str:
    """Take the lock; write 'in', then 'out', to the log (the work); release it."""
    lock = take(client, name)
    if lock is None:
        return "busy"
    client.rpush(log, f"{me} in")
    client.rpush(log, f"{me} out")
    return release(lock)


async def async_holder(
    client: Any, take: Take, release: AsyncRelease, name: str, log: str, me: str
) -> str:
    """The holder of an asyncio lock (its take and release are awaited): the same story."""
    lock = await take(client, name)
    if lock is None:
        return "busy"
    await client.rpush(log, f"{me} in")
    await client.rpush(log, f"{me} out")
    return await release(lock)


def releaser(client: Any, take: Take, release: Release, name: str) -> str:
    """Take the lock and release it at once (story 2's A)."""
    lock = take(client, name)
    return "busy" if lock is None else release(lock)


async def async_releaser(client: Any, take: Take, release: AsyncRelease, name: str) -> str:
    """The releaser of an asyncio lock: the same story."""
    lock = await take(client, name)
    return "busy" if lock is None else await release(lock)


def taker(client: Any, take: Take, name: str, kept: list[Any]) -> bool:
    """Take the lock and keep it (story 2's B) until the story ends; return whether it got it.

    The lock object stays referenced (kept): a library that releases in its finalizer would
    otherwise release B's lock as soon as B returned, a false alarm of the release story.
    """
    lock = take(client, name)
    kept.append(lock)
    return lock is not None


async def async_taker(client: Any, take: Take, name: str, kept: list[Any]) -> bool:
    """The taker of an asyncio lock: the same story, the lock object kept as well."""
    lock = await take(client, name)
    kept.append(lock)
    return lock is not None


def one_inside(log: str) -> Invariant:
    """Return the invariant of stories 1 and 3: the log never shows two holders inside."""

    def check(client: Any, results: dict[str, Any]) -> bool:
        inside = 0
        for entry in client.lrange(log, 0, -1):
            inside += 1 if str(entry).endswith(" in") else -1
            if inside > 1:
                return False
        return True

    return Invariant("one inside", "nobody goes in while another holder is inside", check)


def enterer(client: Any, enter: Callable[[Any, str], Any], name: str, kept: list[Any]) -> bool:
    """Enter the semaphore and stay inside (the capacity stories); return whether it got in."""
    semaphore = enter(client, name)
    kept.append(semaphore)  # alive until the story ends: no finalizer runs inside it
    return semaphore is not None


def at_most_inside(capacity: int) -> Invariant:
    """Return the capacity stories' invariant: at most capacity of the enterers got in."""
    return Invariant(
        "at most N inside",
        f"at most {capacity} holders are inside at once",
        lambda client, results: list(results.values()).count(True) <= capacity,
    )


def semaphore_race(lab: Lab, library: str, story: str) -> Race:
    """Return story 'capacity' (A, B, C enter and stay) or 'lease' (its keys expire after A, B).

    Nobody leaves, so the results say who is inside: at most CAPACITY may be True. In 'lease',
    the clock T ends the TTL of the semaphore's last key (its "-exists" flag) while A and B hold
    both permits, as a holder that works longer than the library's expiry would see.
    """
    case = SEMAPHORES[library]
    name, _ = more_names(lab)
    keys = [k.format(name=name) for k in case.keys]
    kept: list[Any] = []
    actors: dict[str, Any] = {
        n: partial(enterer, enter=case.enter, name=name, kept=kept) for n in "ABC"
    }
    if story == "lease":
        actors = {"A": actors["A"], "B": actors["B"], "T": Race.lease_expires(keys[-1])}
        actors["C"] = partial(enterer, enter=case.enter, name=name, kept=kept)
    elif story != "capacity":
        raise ValueError(f"story must be 'capacity' or 'lease', got {story!r}")
    return Race(lab, actors, watch=keys, invariant=at_most_inside(CAPACITY))


def consumer(client: Any, take: Callable[[Any, str], Any], name: str) -> Any:
    """Take one job from the queue (the hand-off story's A and B); return it, or None."""
    return take(client, name)


def producer(
    client: Any, put: Callable[[Any, str, str], None], name: str, jobs: tuple[str, ...]
) -> str:
    """Put every job of jobs on the queue (the hand-off story's P)."""
    for job in jobs:
        put(client, name, job)
    return "put " + ", ".join(jobs)


def each_job_once(
    left: Callable[[Any, str], int], name: str, jobs: tuple[str, ...] = JOBS
) -> Invariant:
    """Return the hand-off story's invariant: no job is taken twice, and none is lost."""

    def check(client: Any, results: dict[str, Any]) -> bool:
        taken = [r.decode() if isinstance(r, bytes) else r for r in results.values()]
        taken = [job for job in taken if job in jobs]
        return len(set(taken)) == len(taken) and len(taken) + left(client, name) == len(jobs)

    return Invariant("each job once", "no job is taken twice and none is lost", check)


def queue_race(lab: Lab, library: str, jobs: tuple[str, ...] = JOBS) -> Race:
    """Return the hand-off story: P puts jobs while A and B each take one, without waiting."""
    case = QUEUES[library]
    _, name = more_names(lab)
    actors = {
        "P": partial(producer, put=case.put, name=name, jobs=jobs),
        "A": partial(consumer, take=case.take, name=name),
        "B": partial(consumer, take=case.take, name=name),
    }
    return Race(lab, actors, watch=[name], invariant=each_job_once(case.left, name, jobs))


def keys_named(lab: Lab, actor: Callable[[Any], Any]) -> list[str]:
    """Return the keys of this run that actor's commands name, run once alone (for watch=).

    A library derives its keys from the name it is given (lock:<name>, {limiter}:semaphore:<name>),
    so a race's watch= need not be guessed: the keys of the run that exist after the actor ran
    alone once and not before, and those its round trips sent that the lab recorded for cleanup
    (a key it wrote and deleted again), sorted, then deleted so the race starts from nothing.
    """
    client = lab.client()
    written = lab.ns.written
    before, existing = set(written), set(lab.ns.keys(client))
    written.clear()
    try:
        Race(lab, {"A": actor}).run("A", finish=True)
        found = sorted(set(written) | (set(lab.ns.keys(client)) - existing))
    finally:
        written |= before
    for key in found:  # one at a time: on a cluster they may live in different slots
        client.delete(key)
    return found


def b_keeps_its_lock(key: str) -> Invariant:
    """Return story 2's invariant: if B took the lock, its key is still there (A deleted none)."""

    def check(client: Any, results: dict[str, Any]) -> bool:
        return results.get("B") is not True or client.exists(key) == 1

    return Invariant("B keeps its lock", "if B took the lock, B still holds it", check)


def lock_race(lab: Lab, library: str, story: str, release: Release | None = None) -> Race:
    """Return story 'exclusion', 'release' or 'lease' for a lock (release: another release)."""
    case = (LOCKS | MORE_LOCKS)[library]
    name, log, _ = names(lab)
    keys = [k.format(name=name) for k in case.keys]
    ends = release or case.release
    aio = inspect.iscoroutinefunction(case.take)  # an asyncio lock: its actors are async too
    hold: Callable[..., Any] = async_holder if aio else holder
    releasing: Callable[..., Any] = async_releaser if aio else releaser
    taking: Callable[..., Any] = async_taker if aio else taker
    if story == "release":
        actors: dict[str, Any] = {
            "A": partial(releasing, take=case.take, release=ends, name=name),
            "T": Race.lease_expires(keys[0]),
            "B": partial(taking, take=case.take, name=name, kept=[]),
        }
        return Race(lab, actors, watch=keys, invariant=b_keeps_its_lock(keys[0]))
    actors = {
        n: partial(hold, take=case.take, release=ends, name=name, log=log, me=n) for n in "AB"
    }
    if story == "lease":
        actors["T"] = Race.lease_expires(keys[0])
    elif story != "exclusion":
        raise ValueError(f"story must be 'exclusion', 'release' or 'lease', got {story!r}")
    return Race(lab, actors, watch=[*keys, log], invariant=one_inside(log))


def limiter_race(lab: Lab, library: str, requests: str = "ABC") -> Race:
    """Return the race of one request per actor at a limiter (at most LIMIT admitted)."""
    case = (LIMITERS | MORE_LIMITERS)[library]
    _, _, api = names(lab)
    actors = {n: partial(case.hit, name=api) for n in requests}
    admitted = Invariant(
        "within the limit",
        f"at most {LIMIT} of the {len(requests)} requests are admitted",
        lambda client, results: list(results.values()).count(True) <= LIMIT,
    )
    return Race(lab, actors, watch=[case.key.format(name=api)], invariant=admitted)


def requester(hit: Callable[..., Any], name: str) -> Callable[[Any], Any]:
    """Return an actor that sends one request: (the second of the run it was answered, admitted).

    The second is read on the race's own clock, which the window story's clock steps move. In
    such a race each client starts at its first step, so the limiter reads the time of the step
    that sends the request. An asyncio limiter's actor is async.
    """

    def second() -> int:
        return round(time.time() - EPOCH.timestamp())

    if inspect.iscoroutinefunction(hit):

        async def one_async(client: Any) -> tuple[int, bool]:
            admitted = await hit(client, name)
            return second(), admitted

        return one_async

    def one(client: Any) -> tuple[int, bool]:
        admitted = hit(client, name)
        return second(), admitted

    return one


def in_any_window(limit: int = LIMIT, window_s: int = WINDOW_S) -> Invariant:
    """Return the invariant: at most limit requests admitted in any window_s seconds."""

    def holds(client: Any, results: dict[str, Any]) -> bool:
        admitted = sorted(r[0] for r in results.values() if isinstance(r, tuple) and r[1])
        return all(
            admitted[i + limit] - admitted[i] >= window_s for i in range(len(admitted) - limit)
        )

    return Invariant(
        "within the limit in every window",
        f"at most {limit} requests are admitted in any {window_s} s",
        holds,
    )


def window_race(lab: Lab, library: str, requests: str = "ABCD") -> Race:
    """Return the window story: one request per actor while the clock moves on twice.

    T is a clock with two steps of STEP_S seconds each (``Race.time_passes``): a request sent
    after one is sent that much later, and the TTL of the limiter's key runs down with it. The
    limiter must admit at most LIMIT requests in any WINDOW_S seconds, however the requests
    and the two clock steps interleave.
    """
    case = (LIMITERS | MORE_LIMITERS | WINDOW_LIMITERS)[library]
    _, _, api = names(lab)
    key = case.key.format(name=api)
    actors: dict[str, Any] = {n: requester(case.hit, api) for n in requests}
    actors["T"] = Race.time_passes(STEP_S, [key], times=2)
    return Race(lab, actors, watch=[key], invariant=in_any_window())


def portalocker_race(lab: Lab) -> Race:
    """Return two takers of portalocker's RedisLock (the explorer refuses it: it subscribes)."""
    name, _, _ = names(lab)
    actors = {n: partial(taker, take=take_portalocker, name=name, kept=[]) for n in "AB"}
    return Race(lab, actors, watch=[name], invariant=b_keeps_its_lock(name))


@dataclass(frozen=True)
class Verdict:
    """How many judged schedules broke the invariant, one that did, or why there is no verdict."""

    bad: int = 0
    total: int = 0
    example: str = ""
    reason: str = ""

    @property
    def explored(self) -> bool:
        """Return True if the explorer gave a verdict (False: refused or not explorable)."""
        return not self.reason

    def cell(self) -> str:
        """Return the verdict table's cell: 'bad/total', or a word for why there is none."""
        if self.explored:
            return f"{self.bad}/{self.total}"
        return "refused" if self.reason.startswith("refused") else "no verdict"

    def __str__(self) -> str:
        if not self.explored:
            return self.reason
        example = f", e.g. {self.example}" if self.example else ""
        return f"{self.bad} of {self.total} schedules break it{example}"


THREADS = "refused: its round trips come from threads of its own, which no step controls"
REFUSED = {  # the verdict table's reason for each kind of refusal (helpers' Refusal)
    Refusal.THREAD: THREADS,
    Refusal.PUBSUB: "refused: it subscribes (pub/sub), which no step controls",
    Refusal.NO_ROUND_TRIP: "refused: it sent no round trip the race could see",
    Refusal.ASYNCIO: "refused: it opens an asyncio connection of its own that the race cannot adopt",
    Refusal.UNADOPTABLE: "refused: it opens a connection of its own that the race cannot adopt",
}


def verdict(race: Race, story: str = "", reduce: bool = False) -> Verdict:
    """Return the race's verdict over every schedule (story 'release': T before B's first step).

    reduce=True runs one schedule per class of equivalent ones (three or more actors) and counts
    every schedule the classes stand for.
    """
    try:
        every = race.explore(reduce=reduce)
    except ActorRefused as refused:  # its reason is one of a closed set (helpers' Refusal)
        return Verdict(reason=REFUSED[refused.reason])
    except greenlet.error:  # a round trip from a thread that is not the actor's own
        return Verdict(reason=THREADS)
    except NoVerdict as nothing:  # every take raised: a wrong setup, not mutual exclusion
        return Verdict(
            reason=f"no verdict: every actor raised ({nothing.exploration.returned_text()})"
        )
    if reduce:
        bad_orders = every.bad
        return Verdict(every.bad_count, every.total, bad_orders[0] if bad_orders else "")
    judged = every.outcomes
    if story == "release":  # the lease that runs out must be A's, not B's
        judged = [o for o in judged if o.schedule.index("T") < o.schedule.index("B")]
    bad = [o.schedule for o in judged if not o.ok]
    return Verdict(len(bad), len(judged), bad[0] if bad else "")


def case_file(lab: Lab, library: str, story: str, release: Release | None = None) -> Verdict:
    """Return the verdict of one story ('exclusion', 'release', 'lease') for a lock library."""
    return verdict(lock_race(lab, library, story, release), story)


def table(
    stories: dict[str, dict[str, Verdict]], limiters: dict[str, Verdict], other: Verdict
) -> str:
    """Return the verdict table: a row per library with its version, a column per story."""
    lines = [f"{'library':24} {'version':8} " + "".join(f"{s:11}" for s in stories)]
    for library, case in LOCKS.items():
        cells = "".join(f"{column[library].cell():11}" for column in stories.values())
        lines.append(f"{library:24} {version(case.distribution):8} {cells}")
    for library, limiter in LIMITERS.items():
        held = limiters[library].cell()
        lines.append(f"{library:24} {version(limiter.distribution):8} {held} (its limit)")
    lines.append(f"{'portalocker':24} {version('portalocker'):8} {other.cell()} (pub/sub)")
    return "\n".join(lines)
