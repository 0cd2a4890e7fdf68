"""Case files (notebook 08): the locks and rate limiters people install, called as their READMEs do.

The subject first. Each lock is two functions, ``take_<library>(client, name)`` (non-blocking:
the held lock, or None when somebody else holds it) and ``release_<library>(lock)`` (what the
release said). Each limiter is one function ``hit_<library>(client, name)`` that returns True
when the request is admitted. A library that builds its own client (from a URL or a pool) is
called that way too: inside a race, every client an actor makes speaks through that actor's gated
client on the lab's server, so ``URL`` below is never dialled there.

Then the case file: ``LOCKS`` and ``LIMITERS`` name each library's functions, its distribution
and the keys it writes; ``lock_race(lab, library, story)`` is one of the notebook's three races
(``"exclusion"``, ``"release"``, ``"lease"``) and ``verdict(race)`` its explored verdict, or the
reason there is none. The notebook lists every function it runs (``show``). Versions are pinned
in pyproject.toml's ``cases`` extra: a verdict about a library names the version it was checked
against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import version
from typing import Any

import greenlet  # type: ignore[import-untyped]  # greenlet ships no type information
import limits
import portalocker
import pottery
import redis
import redis_lock
import redis_rate_limit
import redlock

from helpers import ActorRefused, Invariant, Lab, NoVerdict, Race, Refusal

LEASE_S = 10  # every lock's lease (forced schedules: a clock step ends it, not time)
URL = "redis://localhost:6379/0"  # what the READMEs write; a race sends it to the lab's server
LIMIT = 2  # requests each limiter admits (per minute)
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


def hit_python_redis_rate_limit(client: redis.Redis, name: str) -> bool:
    """Return whether python-redis-rate-limit's RateLimit (its default pool) admits a request."""
    try:
        with redis_rate_limit.RateLimit(
            resource=name, client=CLIENT_IP, max_requests=LIMIT, expire=60
        ):
            return True
    except redis_rate_limit.TooManyRequests:
        return False


# --- the case file: which keys each library writes, the three races, their verdicts ------------

Take = Callable[[Any, str], Any]
Release = Callable[[Any], str]


@dataclass(frozen=True)
class LockCase:
    """A lock library: its distribution, take and release, the keys it writes ({name} filled)."""

    distribution: str
    take: Take
    release: Release
    keys: tuple[str, ...]


@dataclass(frozen=True)
class LimiterCase:
    """A rate limiter: its distribution, hit, and the key it counts in ({name} filled)."""

    distribution: str
    hit: Callable[..., bool]  # (client, name)
    key: str


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
}
LIMITERS = {
    "limits": LimiterCase("limits", hit_limits, f"LIMITS:LIMITER/{{name}}/user-1/{LIMIT}/1/minute"),
    "python-redis-rate-limit": LimiterCase(
        "python-redis-rate-limit", hit_python_redis_rate_limit, f"rate_limit:{{name}}_{CLIENT_IP}"
    ),
}


def names(lab: Lab) -> tuple[str, str, str]:
    """Return the lock's name, the shared log and the limiters' name (one hash tag: one slot)."""
    return lab.ns.tagged("case", "lock"), lab.ns.tagged("case", "log"), lab.ns.tagged("case", "api")


def holder(client: Any, take: Take, release: Release, name: str, log: str, me: str) -> str:
    """Take the lock; write 'in', then 'out', to the log (the work); release it."""
    lock = take(client, name)
    if lock is None:
        return "busy"
    client.rpush(log, f"{me} in")
    client.rpush(log, f"{me} out")
    return release(lock)


def releaser(client: Any, take: Take, release: Release, name: str) -> str:
    """Take the lock and release it at once (story 2's A)."""
    lock = take(client, name)
    return "busy" if lock is None else release(lock)


def taker(client: Any, take: Take, name: str) -> bool:
    """Take the lock and keep it (story 2's B); return whether it got it."""
    return take(client, name) is not None


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


def b_keeps_its_lock(key: str) -> Invariant:
    """Return story 2's invariant: if B took the lock, its key is still there (A deleted none)."""

    def check(client: Any, results: dict[str, Any]) -> bool:
        return results.get("B") is not True or client.exists(key) == 1

    return Invariant("B keeps its lock", "if B took the lock, B still holds it", check)


def lock_race(lab: Lab, library: str, story: str, release: Release | None = None) -> Race:
    """Return story 'exclusion', 'release' or 'lease' for a lock (release: another release)."""
    case = LOCKS[library]
    name, log, _ = names(lab)
    keys = [k.format(name=name) for k in case.keys]
    release = release or case.release
    if story == "release":
        actors: dict[str, Any] = {
            "A": partial(releaser, take=case.take, release=release, name=name),
            "T": Race.lease_expires(keys[0]),
            "B": partial(taker, take=case.take, name=name),
        }
        return Race(lab, actors, watch=keys, invariant=b_keeps_its_lock(keys[0]))
    actors = {
        n: partial(holder, take=case.take, release=release, name=name, log=log, me=n) for n in "AB"
    }
    if story == "lease":
        actors["T"] = Race.lease_expires(keys[0])
    elif story != "exclusion":
        raise ValueError(f"story must be 'exclusion', 'release' or 'lease', got {story!r}")
    return Race(lab, actors, watch=[*keys, log], invariant=one_inside(log))


def limiter_race(lab: Lab, library: str, requests: str = "ABC") -> Race:
    """Return the race of one request per actor at a limiter (at most LIMIT admitted)."""
    case = LIMITERS[library]
    _, _, api = names(lab)
    actors = {n: partial(case.hit, name=api) for n in requests}
    admitted = Invariant(
        "within the limit",
        f"at most {LIMIT} of the {len(requests)} requests are admitted",
        lambda client, results: list(results.values()).count(True) <= LIMIT,
    )
    return Race(lab, actors, watch=[case.key.format(name=api)], invariant=admitted)


def portalocker_race(lab: Lab) -> Race:
    """Return two takers of portalocker's RedisLock (the explorer refuses it: it subscribes)."""
    name, _, _ = names(lab)
    actors = {n: partial(taker, take=take_portalocker, name=name) for n in "AB"}
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


def verdict(race: Race, story: str = "") -> Verdict:
    """Return the race's verdict over every schedule (story 'release': T before B's first step)."""
    try:
        every = race.explore(reduce=False)
    except ActorRefused as refused:  # its reason is one of a closed set (helpers' Refusal)
        return Verdict(reason=REFUSED[refused.reason])
    except greenlet.error:  # a round trip from a thread that is not the actor's own
        return Verdict(reason=THREADS)
    except NoVerdict as nothing:  # every take raised: a wrong setup, not mutual exclusion
        return Verdict(
            reason=f"no verdict: every actor raised ({nothing.exploration.returned_text()})"
        )
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
