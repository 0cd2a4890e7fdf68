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
from exercises.judge import as_bool, raise_if_fault, row_text, story, writes
from helpers.backend.lab import Lab
from helpers.instruments.invariant import Invariant
from helpers.instruments.scenario import Exploration, Race
from helpers.instruments.schedule import Trace, lease_expires, run_schedule
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
    hint="the lock must stay whoever's it is now: what can change between reading it and "
    "deleting it, and how do you leave no room for that?",
)
def my_release(lab: Lab, release: Any) -> str:
    """Run the learner's release on its own, in ATBAC and through every schedule."""
    if not callable(release):
        raise Wrong("my_release must be a function my_release(client, key, token) -> bool")
    key = lab.key("ex02:lock")
    admin = lab.client()
    try:
        admin.set(key, B, px=LEASE_MS)
        said = release(admin, key, A)
        if admin.get(key) != B:
            raise Wrong(
                f"the key held tok-B and the caller's token was tok-A: after your release it "
                f"holds {admin.get(key)!r}, so it deleted another client's lock",
                detail="compare the lock's value with the token before deleting, and make the "
                "compare and the DEL one atomic step, so nothing runs between them",
            )
        if as_bool(said, "my_release's return value (another client's lock)"):
            raise Wrong("it kept another client's lock but returned True: return False")
        admin.set(key, A, px=LEASE_MS)
        said = release(admin, key, A)
        if admin.exists(key):
            raise Wrong(f"the key held tok-A, the caller's token: it is still there ({said=})")
        if not as_bool(said, "my_release's return value (its own lock)"):
            raise Wrong(f"it released its own lock but returned {said!r}: return True")
        trace = run_schedule(
            lab, _story(key, release, takers="BC"), "ATBAC", watch=[key], finish=True
        )
        if trace.results["C"] is True:
            raise Wrong(
                f"in the schedule ATBAC, C got the lock while B held it: {_who_removed(trace)}",
                detail=f"{story(trace)}: {_advice(trace)}",
            )
        every = _every_schedule(lab, key, release)
        for outcome in every.outcomes:
            raise_if_fault(outcome.results.values())
        if every.bad:
            bad = every.trace(every.bad[0])
            raise Wrong(
                f"{every.summary()}, e.g. {bad.schedule}: {_who_removed(bad)}",
                detail=f"{story(bad)}: {_advice(bad)}",
            )
    finally:
        admin.delete(key)
        admin.close()
    return (
        f"B keeps its lock in ATBAC and in every schedule ({every.summary()}), and your "
        "release deletes its own lock and nobody else's"
    )


def _who_removed(trace: Trace) -> str:
    """Return which step removed B's lock after B took it, from the trace."""
    taken = next((r for r in trace.rows if r.client == "B" and r.reply == "'OK'"), None)
    if taken is None:
        return f"B never took the lock ({story(trace)})"
    removed = next(
        (r for r in writes(trace) if r.step > taken.step and r.client not in ("B", "T")), None
    )
    if removed is None:
        return f"B took the lock at step {taken.step} ({story(trace)})"
    checks = [r for r in trace.rows if r.client == removed.client and r.step < removed.step]
    seen = f", after {row_text(checks[-1])}" if checks else ""
    return f"B took the lock at step {taken.step}, and {row_text(removed)} removed it{seen}"


def _advice(trace: Trace) -> str:
    """Return what to change, judged from the failing trace: read after WATCH, or name the check
    and the delete that must be one atomic step."""
    watched = next((r for r in trace.rows if r.client == "A" and "WATCH" in r.command), None)
    if watched is not None:
        gets = [r for r in trace.rows if r.client == "A" and r.command.startswith("GET")]
        if gets and all(r.step < watched.step for r in gets):
            return (
                f"{row_text(gets[-1])} ran before {row_text(watched)}: WATCH only notices "
                "changes made after it, so read the lock after WATCH"
            )
    release = [r.step for r in trace.rows if r.client == "A"][1:]  # after A's SET NX PX
    removed = next((r for r in writes(trace) if r.step in release), None)
    if removed is not None:
        checks = [r for r in trace.rows if r.step in release and r.step < removed.step]
        if checks:
            return (
                f"{row_text(checks[-1])} and {row_text(removed)} must be one atomic step "
                "(one script, one command, or a transaction that reads after WATCH): nothing "
                "may run between the check and the delete"
            )
    return (
        "comparing the lock with the token and deleting it must be one atomic step (one script, "
        "one command, or a transaction that reads after WATCH): nothing may run between them"
    )


def _why_harmless(trace: Trace) -> str:
    """Return what, in a harmless schedule's trace, kept B's lock."""
    b_set = next(r for r in trace.rows if r.client == "B")
    if b_set.reply != "'OK'":
        return f"B never took the lock: {row_text(b_set)}"
    gets = [r for r in trace.rows if r.client == "A" and r.command.startswith("GET")]
    if gets and gets[-1].step > b_set.step:
        return f"{row_text(gets[-1])}, so A did not delete"
    return f"B took the lock at step {b_set.step}, after every step of A's"


def _schedule_names(answer: Any) -> set[str]:
    """Return the answer as a set of schedule strings, or raise Wrong saying what shape it needs."""
    if isinstance(answer, str) or not isinstance(answer, Iterable):
        raise Wrong("give a set of schedule strings, e.g. {'ATBA', 'ABTA'}")
    if isinstance(answer, dict):
        raise Wrong("give a set of schedule strings, e.g. {'ATBA', 'ABTA'}, not a dict")
    try:
        names = {"".join(s.split()).upper() if isinstance(s, str) else s for s in answer}
    except TypeError:
        raise Wrong("give a set of schedule strings, e.g. {'ATBA', 'ABTA'}") from None
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
            f"{harmless[0]} keeps B's lock: {_why_harmless(every.trace(harmless[0]))}"
            + (f" ({len(harmless) - 1} more of yours keep it too)" if len(harmless) > 1 else "")
        )
    missing = broken - predicted
    if missing:
        raise Wrong(
            f"{len(missing)} more schedule(s) break the invariant: which step must fall "
            "between A's GET and its DEL?",
            detail=f"the explorer found {', '.join(sorted(missing))} too",
        )
    return (
        f"{every.summary()}: only {', '.join(sorted(broken))}. A's GET must run before "
        "its lease ends, and B's SET after that and before A's DEL"
    )
