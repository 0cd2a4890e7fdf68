"""Self-checks for notebook 02 (the blind DEL): your own release, and the schedules that break GET-compare-DEL.

Each check builds the notebook's story itself (A takes the lock and releases it with the
release under test, the clock T ends A's lease, B and C take the lock with SET NX PX) on keys
of its own under the lab's prefix, and runs it through the forced schedule and the explorer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from exercises import Wrong, exercise
from helpers.backend.lab import Lab
from helpers.instruments.invariant import Invariant
from helpers.instruments.scenario import Exploration, Race
from helpers.instruments.schedule import lease_expires, run_schedule
from races import locks

LEASE_MS = 10_000
A, B = "tok-A", "tok-B"
Release = Callable[[Any, str, str], Any]


def _holder(client: Any, key: str, release: Release) -> Any:
    """Take the lock with A's token, then release it with release; 'busy' if it was taken."""
    if not locks.acquire(client, key, A, LEASE_MS):
        return "busy"
    return release(client, key, A)


def _story(key: str, release: Release, takers: str = "B") -> dict[str, Any]:
    """Return the actors: A holds and releases, T ends A's lease, each taker tries SET NX PX."""
    actors = {"A": partial(_holder, key=key, release=release), "T": lease_expires(key, value=A)}
    return actors | {
        name: partial(locks.acquire, key=key, token=f"tok-{name}", ttl_ms=LEASE_MS)
        for name in takers
    }


def _b_keeps_its_lock(key: str) -> Invariant:
    """Return the invariant: if B took the lock, the lock still holds B's token."""
    return Invariant(
        "B keeps its lock",
        "if B took the lock, nobody else removed it",
        lambda client, results: results.get("B") is not True or client.get(key) == B,
    )


def _every_schedule(lab: Lab, key: str, release: Release) -> Exploration:
    """Return the exploration of every order of A (with release), the clock T and B."""
    return Race(lab, _story(key, release), watch=[key], invariant=_b_keeps_its_lock(key)).explore()


@exercise(
    "02.my_release",
    answer="my_release",
    wrong=[
        "def my_release(client, key, token):\n    return client.delete(key) == 1",
        "def my_release(client, key, token):\n"
        "    if client.get(key) == token:\n        return client.delete(key) == 1\n    return False",
        "def my_release(client, key, token):\n    return False",
        "def my_release(client, key, token):\n"
        "    client.eval(\"if redis.call('GET', KEYS[1]) == ARGV[1] then \"\n"
        "                \"return redis.call('DEL', KEYS[1]) end return 0\", 1, key, token)\n"
        "    return True",
    ],
)
def my_release(lab: Lab, release: Any) -> str:
    """Run the learner's release on its own, in ATBAC and through every schedule."""
    if not callable(release):
        raise Wrong("my_release must be a function my_release(client, key, token) -> bool")
    key = lab.key("ex02:lock")
    admin = lab.client()
    try:
        admin.set(key, B, px=LEASE_MS)
        if release(admin, key, A) or admin.get(key) != B:
            raise Wrong(
                "it deleted (or said it deleted) another client's lock: the key held tok-B "
                "and the caller's token was tok-A"
            )
        admin.set(key, A, px=LEASE_MS)
        if release(admin, key, A) is not True or admin.exists(key):
            raise Wrong("it did not release its own lock, or did not return True when it did")
        trace = run_schedule(
            lab, _story(key, release, takers="BC"), "ATBAC", watch=[key], finish=True
        )
        if trace.results["C"] is True:
            raise Wrong(
                "in the schedule ATBAC, C got the lock while B held it: "
                "lock_stepper(my_release).play('ATBAC') shows how"
            )
        every = _every_schedule(lab, key, release)
        if every.bad:
            raise Wrong(
                f"{every.summary()}, e.g. {every.bad[0]}: its check and its delete are "
                "two round trips, and the lease can run out between them"
            )
    finally:
        admin.delete(key)
        admin.close()
    return (
        f"B keeps its lock in ATBAC and in every schedule ({every.summary()}), and your "
        "release deletes its own lock and nobody else's"
    )


def _schedule_names(answer: Any) -> set[str]:
    """Return the answer as a set of schedule strings, or raise Wrong saying what shape it needs."""
    if isinstance(answer, str) or not isinstance(answer, Iterable):
        raise Wrong("give a set of schedule strings, e.g. {'ATBA', 'TABA'}")
    names = set(answer)
    if not all(isinstance(s, str) and s and set(s) <= set("ATB") for s in names):
        raise Wrong("each schedule is a string of the letters A, T and B, one per round trip")
    return names


@exercise(
    "02.schedules",
    answer="my_prediction",
    wrong=[
        "my_prediction = set()",
        "my_prediction = {'ATBA'}",
        "my_prediction = {'AATBA', 'ATBA'}",
        "my_prediction = {'AATBA', 'AATAB'}",
    ],
)
def schedules(lab: Lab, answer: Any) -> str:
    """Compare the learner's set with the schedules the explorer finds broken for GET-compare-DEL."""
    predicted = _schedule_names(answer)
    key = lab.key("ex02:ctd-lock")
    try:
        every = _every_schedule(lab, key, locks.release_check_then_del)
    finally:
        lab.client().delete(key)
    possible, broken = {o.schedule for o in every.outcomes}, set(every.bad)
    impossible = sorted(predicted - possible)
    if impossible:
        raise Wrong(
            f"{', '.join(impossible)}: not a possible order of these round trips (A sends "
            "SET NX PX, GET and, only if the GET returned its token, DEL; T and B one each)"
        )
    if not predicted:
        raise Wrong("no schedule at all? At least one order lets B's lock be deleted")
    harmless = sorted(predicted - broken)
    if harmless:
        raise Wrong(
            f"{', '.join(harmless)} keep{'s' if len(harmless) == 1 else ''} B's lock: "
            "play it on a stepper and look at what A's GET returns"
        )
    missing = broken - predicted
    if missing:
        raise Wrong(
            f"{len(missing)} more schedule(s) break the invariant: which step must fall "
            "between A's GET and its DEL?"
        )
    return (
        f"{every.summary()}: only {', '.join(sorted(broken))}. A's GET must run before "
        "its lease ends, and B's SET after that and before A's DEL"
    )
