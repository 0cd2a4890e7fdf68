"""Self-check for notebook 07 (fencing and failover): your own fenced write.

The check runs the learner's ``my_fenced_write(client, resource, fence_key, fence, value)`` on
fresh keys of its own (one hash tag, so it works on a cluster too): on its own, through every
interleaving of two writers with different fences, and in the notebook's report writers
explored with a pause (a late writer must be refused).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from exercises import Wrong, exercise
from exercises.judge import aborted_exec, as_bool, raise_if_fault, row_text, story
from helpers.backend.lab import Lab
from helpers.instruments.explore import Exploration, explore
from helpers.instruments.schedule import Trace
from races import locks

LEASE_MS = 10_000
TEXT_ORDER = '''
FENCED = """
local seen = redis.call("GET", KEYS[2])
if seen and ARGV[1] < seen then
    return 0
end
redis.call("SET", KEYS[1], ARGV[2])
redis.call("SET", KEYS[2], ARGV[1])
return 1
"""
def my_fenced_write(client, resource, fence_key, fence, value):
    return client.eval(FENCED, 2, resource, fence_key, fence, value) == 1
'''  # one step, but compares fences as text: "10" < "9"
Write = Callable[[Any, str, str, int, str], Any]


def _said(result: Any) -> bool:
    """Return what a write answered, as a bool (True/False, or 1/0 as a script returns them)."""
    return as_bool(result, "my_fenced_write's return value")


def _direct_problems(client: Any, write: Write, resource: str, fence_key: str) -> None:
    """Raise Wrong if write mishandles a fresh resource, an older, an equal or a newer fence."""
    client.delete(resource, fence_key)
    if not _said(write(client, resource, fence_key, 2, "two")) or client.get(resource) != "two":
        raise Wrong("the first write (fence 2, nothing written before) must write and return True")
    if _said(write(client, resource, fence_key, 1, "one")) or client.get(resource) != "two":
        raise Wrong(
            "after fence 2 had written, a write with fence 1 got through (or said so): "
            "the resource must remember the highest fence and refuse older ones"
        )
    if not _said(write(client, resource, fence_key, 2, "two again")):
        raise Wrong(
            "the holder of fence 2 could not write a second time: an equal fence is the "
            "same holder, refuse only smaller ones"
        )
    if not _said(write(client, resource, fence_key, 3, "three")) or client.get(resource) != "three":
        raise Wrong("a newer fence (3) was refused")
    _multi_digit_fences(client, write, resource, fence_key)


def _multi_digit_fences(client: Any, write: Write, resource: str, fence_key: str) -> None:
    """Raise Wrong if fence 10 is refused after fence 9, or 9 accepted after 10 (text order)."""
    client.delete(resource, fence_key)
    write(client, resource, fence_key, 9, "nine")
    if not _said(write(client, resource, fence_key, 10, "ten")) or client.get(resource) != "ten":
        raise Wrong(
            f"after fence 9 had written, the write with fence 10 was refused (the resource "
            f"holds {client.get(resource)!r}, fence_key {client.get(fence_key)!r}): is 10 "
            "smaller than 9?",
            detail="as text, '10' sorts before '9': compare numbers (tonumber() in Lua, "
            "int() in Python)",
        )
    if _said(write(client, resource, fence_key, 9, "nine again")) or client.get(resource) != "ten":
        raise Wrong(
            f"after fence 10 had written, a write with fence 9 got through (the resource "
            f"holds {client.get(resource)!r}): is 9 larger than 10?",
            detail="as text, '9' sorts after '10': compare numbers (tonumber() in Lua, "
            "int() in Python)",
        )


def _report_writer(client: Any, token: str, write: Write, keys: dict[str, str]) -> Any:
    """Take the job lock with a fence, write the report with write, release; return the fence."""
    fence = locks.acquire_fenced(client, keys["lock"], keys["fence"], token, LEASE_MS)
    if fence is None:
        return "busy"
    wrote = write(client, keys["report"], keys["report_fence"], fence, f"{token}'s report")
    locks.release_lua(client, keys["lock"], token)
    return fence if wrote else "refused"


def _newest_report_stands(report: str) -> Callable[[Any, dict[str, Any]], bool]:
    """Return the notebook's invariant: the report is the one written under the newest grant."""

    def invariant(client: Any, results: dict[str, Any]) -> bool:
        wrote = {name: r for name, r in results.items() if isinstance(r, int)}
        newest = max(wrote, key=lambda name: wrote[name], default=None)
        return newest is None or client.get(report) == f"tok-{newest}'s report"

    return invariant


def _late_writer_refused(lab: Lab, write: Write, keys: dict[str, str]) -> Exploration:
    """Raise Wrong if, with a pause, a late writer's report replaces a newer grant's; return it."""
    writers = {n: partial(_report_writer, token=f"tok-{n}", write=write, keys=keys) for n in "AB"}
    paused = explore(
        lab,
        writers,
        _newest_report_stands(keys["report"]),
        watch=[keys["lock"], keys["report"]],
        reset=list(keys.values()),
        faults=("pause",),
    )
    for outcome in paused.outcomes:
        raise_if_fault(outcome.results.values())
    if paused.bad:
        bad = paused.trace(paused.bad[0])
        raise Wrong(
            f"the notebook's report writers with a pause: {paused.summary()}, e.g. {story(bad)}; "
            f"it ends with {bad.final_state}: a late write with an older fence must be refused "
            "after a newer one wrote",
            detail=_advice(bad, keys["report"], keys["report_fence"]),
        )
    return paused


def _advice(bad: Trace, resource: str, fence_key: str) -> str:
    """Return what to change, judged from the failing trace: retry after WatchError, make the
    check and the write one step, or (already one step) fix what that step compares and stores."""
    aborted = aborted_exec(bad)
    if aborted is not None:
        return (
            f"{aborted}: a WatchError says the fence changed while you looked, not that your "
            "fence is older; read the fence again and try again, and refuse only an older fence"
        )
    touching: dict[str, list[Any]] = {}
    for row in bad.rows:
        if resource in row.command or fence_key in row.command:
            touching.setdefault(row.client, []).append(row)
    if touching and all(len(rows) == 1 for rows in touching.values()):
        steps = "; ".join(row_text(rows[0]) for rows in touching.values())
        return (
            f"each write already ran as one step ({steps}), so nothing came between its check "
            f"and its write; look at what that step does: after it the resource and the fence "
            f"key must hold the newest fence's value and that fence ({bad.final_state})"
        )
    return "the comparison and the write must be one step (one script)"


def _newest_wins(resource: str, fence_key: str) -> Callable[[Any, dict[str, Any]], bool]:
    """Return the invariant: after both writes, the resource holds the newer fence's value."""

    def invariant(client: Any, results: dict[str, Any]) -> bool:
        return client.get(resource) == "new" and client.get(fence_key) == "2"

    return invariant


@exercise(
    "07.fenced_write",
    answer="my_fenced_write",
    wrong=[
        "def my_fenced_write(client, resource, fence_key, fence, value):\n"
        "    return bool(client.set(resource, value))",
        "def my_fenced_write(client, resource, fence_key, fence, value):\n"
        "    if int(client.get(fence_key) or 0) >= fence:\n        return False\n"
        "    client.mset({resource: value, fence_key: fence})\n    return True",
        "def my_fenced_write(client, resource, fence_key, fence, value):\n"
        "    if int(client.get(fence_key) or 0) > fence:\n        return False\n"
        "    client.mset({resource: value, fence_key: fence})\n    return True",
        "def my_fenced_write(client, resource, fence_key, fence, value):\n"
        "    if int(client.get(fence_key) or 0) > fence:\n        return False\n"
        "    return bool(client.set(resource, value))",
        TEXT_ORDER,
    ],
)
def fenced_write(lab: Lab, write: Any) -> str:
    """Run the learner's fenced write alone, raced, and in the report writers with a pause."""
    if not callable(write):
        raise Wrong(
            "my_fenced_write must be a function (client, resource, fence_key, fence, value) -> bool"
        )
    keys = {
        name: lab.ns.tagged("ex07", name) for name in ("lock", "fence", "report", "report_fence")
    }
    resource, fence_key = keys["report"], keys["report_fence"]
    admin = lab.client()
    try:
        _direct_problems(admin, write, resource, fence_key)
        writers = {
            "A": partial(write, resource=resource, fence_key=fence_key, fence=1, value="old"),
            "B": partial(write, resource=resource, fence_key=fence_key, fence=2, value="new"),
        }
        every = explore(
            lab,
            writers,
            _newest_wins(resource, fence_key),
            watch=[resource],
            reset=[resource, fence_key],
        )
        for outcome in every.outcomes:
            raise_if_fault(outcome.results.values())
        if every.bad:
            bad = every.trace(every.bad[0])
            raise Wrong(
                f"two writers, fences 1 and 2: {every.summary()}, e.g. {story(bad)}; it ends "
                f"with {bad.final_state}",
                detail=_advice(bad, resource, fence_key),
            )
        paused = _late_writer_refused(lab, write, keys)
    finally:
        admin.delete(*keys.values())
        admin.close()
    return (
        f"older fences are refused, equal and newer ones write; two concurrent writers: "
        f"{every.summary()}; the report writers with a pause: {paused.summary()}"
    )
