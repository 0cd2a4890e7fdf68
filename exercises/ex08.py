"""Self-check for notebook 08 (case files): a case file on a lock of the learner's choice.

The learner gives ``my_case = (my_take, my_release)``: ``my_take(client, name)`` takes the lock
without waiting and returns the held lock or None, ``my_release(lock)`` releases it. The check
runs them only inside races (so a library that builds its own client reaches the lab's server):
one take, to find the keys it writes for a fresh name; a take while another holder has the lock
(it must say busy, not wait); a take and a release (the lock must be free after); then the
notebook's three stories: mutual exclusion, the token-checked release, and the lease that runs
out (reported, not judged: no lease without fencing passes it).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import greenlet  # type: ignore[import-untyped]  # greenlet ships no type information

from exercises import Wrong, exercise
from exercises.judge import raise_if_fault, row_text, story
from helpers.backend.lab import Lab
from helpers.instruments.adopt import SPUN, ActorRefused
from helpers.instruments.explore import Exploration, explore
from helpers.instruments.schedule import lease_expires, run_schedule

Take = Callable[[Any, str], Any]
Release = Callable[[Any], Any]

IGNORES_BUSY = """
def my_take(client, name):
    lock = client.lock(name, timeout=10)
    lock.acquire(blocking=False)
    return lock


def my_release(lock):
    lock.release()
    return "released"


my_case = (my_take, my_release)
"""
WAITS = IGNORES_BUSY.replace(
    "lock.acquire(blocking=False)\n    return lock", "lock.acquire()\n    return lock"
)
KEEPS_IT = IGNORES_BUSY.replace(
    "lock.acquire(blocking=False)\n    return lock",
    "return lock if lock.acquire(blocking=False) else None",
).replace("    lock.release()\n", "")
BLIND = IGNORES_BUSY.replace(
    "lock.acquire(blocking=False)\n    return lock",
    "return lock if lock.acquire(blocking=False) else None",
).replace("    lock.release()\n", "    lock.redis.delete(lock.name)\n")


def _pair(case: Any) -> tuple[Take, Release]:
    """Return (take, release) from the answer; raise Wrong if it is not two functions."""
    if not (isinstance(case, tuple) and len(case) == 2 and all(callable(f) for f in case)):
        raise Wrong("my_case must be the pair of functions (my_take, my_release)")
    return case[0], case[1]


def _clear(lab: Lab, name: str) -> list[str]:
    """Delete every key of this run whose name holds name (a library's lock:<name>, ...)."""
    admin = lab.client()
    try:
        keys = [k for k in lab.ns.keys(admin) if name in k]
        if keys:
            admin.delete(*keys)
        return keys
    finally:
        lab.release(admin)


def _keys_written(lab: Lab, take: Take, name: str) -> list[str]:
    """Return the keys one take on a free lock writes for name (inside a race); raise Wrong."""
    _clear(lab, name)
    trace = run_schedule(lab, {"A": lambda client: take(client, name)}, "A", finish=True, reset=[])
    raise_if_fault(trace.results.values())
    keys = _clear(lab, name)
    if not trace.results["A"]:
        raise Wrong(
            f"my_take returned {trace.result_text['A']} although nobody held the lock: it must "
            "return the lock it took"
        )
    if not keys:
        raise Wrong(
            f"my_take returned {trace.result_text['A']} but wrote no key with the name it was "
            "given in it: take the lock under `name`"
        )
    return sorted(keys, key=lambda k: (not k.endswith(name), k))  # the lock's own key first


def _says_busy(lab: Lab, take: Take, name: str, keys: list[str]) -> None:
    """Raise Wrong unless a take while A holds the lock returns None, without waiting."""
    actors = {n: (lambda client: bool(take(client, name))) for n in "AB"}
    trace = run_schedule(lab, actors, "AB", finish=True, watch=keys)
    raise_if_fault(trace.results.values())
    if trace.results["B"] is SPUN:
        raise Wrong(
            f"while A held the lock, B's my_take never returned: it retried "
            f"{sum(r.client == 'B' for r in trace.rows)} times, then the spin bound stopped it",
            detail="take without waiting: blocking=False, one try, or a zero timeout",
        )
    if trace.results["B"] is True:
        raise Wrong(
            "while A held the lock, B's my_take returned a lock too: "
            + "; ".join(row_text(row) for row in trace.rows),
            detail="return the lock only if acquire() says you got it, else None",
        )


def _release_frees(lab: Lab, take: Take, release: Release, name: str, keys: list[str]) -> None:
    """Raise Wrong if the lock's key is still there after a take and a release."""

    def take_and_release(client: Any) -> Any:
        lock = take(client, name)
        return release(lock) if lock else "busy"

    trace = run_schedule(lab, {"A": take_and_release}, "A", finish=True, reset=keys)
    raise_if_fault(trace.results.values())
    admin = lab.client()
    try:
        left = admin.exists(keys[0])
    finally:
        lab.release(admin)
    if left:
        raise Wrong(
            f"after my_release (which returned {trace.result_text['A']}), the lock's key "
            f"{lab.ns.short(keys[0])} is still there: nobody else can take the lock",
            detail="call the library's release, not only return a text",
        )


def _released(release: Release, lock: Any) -> Any:
    """Return what release said; an exception it raises is its refusal (NotAcquired, ...)."""
    try:
        return release(lock)
    except Exception as exc:  # noqa: BLE001 - a late release may refuse by raising
        return f"raised {type(exc).__name__}"


def _holder(client: Any, take: Take, release: Release, name: str, log: str, me: str) -> Any:
    """Take the lock, write 'in' and 'out' to log, release it (the notebook's holder)."""
    lock = take(client, name)
    if not lock:
        return "busy"
    client.rpush(log, f"{me} in")
    client.rpush(log, f"{me} out")
    return _released(release, lock)


def _stories(lab: Lab, take: Take, release: Release, name: str, keys: list[str]) -> str:
    """Run stories 1 to 3; raise Wrong on 1 or 2; return the three verdicts."""
    from cases import one_inside  # the notebook's invariant (imports the libraries: only here)

    log = lab.ns.tagged("ex08", "log")
    holders = {
        n: partial(_holder, take=take, release=release, name=name, log=log, me=n) for n in "AB"
    }
    every = explore(lab, holders, one_inside(log), watch=[*keys, log])
    _no_faults(every)
    if every.bad:
        raise Wrong(f"two holders were inside at once: {story(every.trace(every.bad[0]))}")

    def b_keeps_its_lock(client: Any, results: dict[str, Any]) -> bool:
        return results.get("B") is not True or client.exists(keys[0]) == 1

    def releaser(client: Any) -> Any:
        lock = take(client, name)
        return _released(release, lock) if lock else "busy"

    actors = {"A": releaser, "T": lease_expires(keys[0]), "B": lambda c: bool(take(c, name))}
    second = explore(lab, actors, b_keeps_its_lock, watch=keys)
    _no_faults(second)
    judged = [o for o in second.schedules if o.schedule.index("T") < o.schedule.index("B")]
    broken = [o.schedule for o in judged if not o.ok]
    if broken:
        raise Wrong(
            f"A's late release deleted B's lock in {len(broken)} of {len(judged)} schedules: "
            f"{story(second.trace(broken[0]))}",
            detail="the release must check the lock's token and delete in one step",
        )
    third = explore(
        lab, holders | {"T": lease_expires(keys[0])}, one_inside(log), watch=[*keys, log]
    )
    _no_faults(third)
    lease = f"{third.bad_count} of {third.total} schedules"
    example = f" (e.g. {third.bad[0]}: a lease without fencing)" if third.bad else ""
    return (
        f"your take says busy without waiting; mutual exclusion: {every.summary()}; the release: "
        f"0 of {len(judged)} schedules delete B's lock; the lease: {lease} let A write inside "
        f"B's section{example}"
    )


def _no_faults(every: Exploration) -> None:
    """Re-raise the first server failure an exploration recorded as an actor's result."""
    for outcome in every.outcomes:
        raise_if_fault(outcome.results.values())


@exercise("08.own_library", answer="my_case", wrong=[IGNORES_BUSY, WAITS, KEEPS_IT, BLIND])
def own_library(lab: Lab, case: Any) -> str:
    """Find the keys the learner's take writes, then run it through the notebook's stories."""
    take, release = _pair(case)
    name = lab.ns.tagged("ex08", "lock")
    try:
        keys = _keys_written(lab, take, name)
        _says_busy(lab, take, name, keys)
        _release_frees(lab, take, release, name, keys)
        return _stories(lab, take, release, name, keys)
    except (ActorRefused, greenlet.error) as exc:  # its own threads, or pub/sub
        said = str(exc) if isinstance(exc, ActorRefused) else "it talks from threads of its own"
        raise Wrong(
            f"a schedule cannot step this library, so it gets no case file ({said}): choose another"
        ) from None
    finally:
        _clear(lab, name)
        _clear(lab, lab.ns.tagged("ex08", "log"))
