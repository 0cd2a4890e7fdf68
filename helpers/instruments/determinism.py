"""Nondeterminism, found after a search: a schedule replayed must end as it did before.

The explorer's counts are the actors' only if the same schedule always ends the same way. An
actor can break that by reading what no schedule controls: entropy (``random``, ``uuid4``,
``os.urandom``), a clock the race's own does not cover (``helpers.instruments.logical_time``
says which; the server's clock too, in an ``XADD *`` id or a ``TIME`` reply), or state kept from
one replay to the next (a global counter, a cache). Then a second run of the same search could
give other counts, and nothing would say so.

So after a search, ``first_change`` replays every schedule that broke the invariant (at most
``MAX_BREAKING``, spread over the search) and a sample of the ones that held (``PASSING_SAMPLE``,
spread the same way), each twice, on the search's own clients, and compares each actor's result
and the invariant's verdict with what the search saw. ``check_replays`` raises the first
difference as ``NotDeterministic``: "nondeterministic: actor B's outcome changed between two
replays of ABAB (...)". A search stopped by its time budget is not replayed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from helpers.instruments import faults
from helpers.instruments.dpor import NotDeterministic
from helpers.instruments.schedule import (
    Connections,
    ScheduleError,
    ScheduleRun,
    schedule_names,
)
from helpers.instruments.spec import RaceSpec

MAX_BREAKING = 32  # breaking schedules replayed, at most (spread over the search when more)
PASSING_SAMPLE = 8  # schedules that held, replayed
REPLAYS = 2  # times each chosen schedule is replayed
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
HINT = (
    "does an actor read entropy (random, uuid4, os.urandom), a clock the race does not control "
    "(the server's too: an XADD * id, TIME), state kept from one replay to the next, or a "
    "Python object two actors share (the explorer takes the server as their only shared state)?"
)


class Seen(Protocol):
    """What the search saw of one schedule (``explore.Outcome``)."""

    @property
    def schedule(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def texts(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class Ending:
    """How one run of a schedule ended: the invariant's verdict and each actor's result, shown."""

    ok: bool
    texts: dict[str, str]


@dataclass
class Replayer:
    """Replays schedules of one search on its own clients (greenlets, no state read per step)."""

    spec: RaceSpec
    connections: Connections
    server: Any = None  # the search's ServerFaults (restart, failover), if any

    def ending(self, names: Sequence[str]) -> Ending:
        """Run the steps names in order; return how the schedule ended."""
        spec = self.spec
        assert spec.invariant is not None  # explore checked it
        with ScheduleRun(
            spec, self.connections, observe=False, footprints=True, runner="greenlet"
        ) as run:
            if self.server is not None:
                self.server.begin(run)
            try:
                for name in names:
                    if not faults.apply(run, name, self.server):
                        run.advance(name)
                if run.runnable:
                    raise ScheduleError(f"{', '.join(run.runnable)} had steps left at its end")
                ok = spec.invariant(run.observer, dict(run.results))
                return Ending(bool(ok), run.result_texts())
            finally:
                if self.server is not None:
                    self.server.end()


def spread(items: Sequence[Seen], most: int) -> list[Seen]:
    """Return at most most of items, evenly spaced, the first always among them."""
    if len(items) <= most:
        return list(items)
    return [items[i * len(items) // most] for i in range(most)]


def _same(one: str | None, other: str | None) -> bool:
    """Return True if two results, as shown, are alike but for where an object lives in memory."""
    if one is None or other is None:
        return one is other
    return _ADDRESS.sub(" at 0x", one) == _ADDRESS.sub(" at 0x", other)


def difference(schedule: str, before: Ending, now: Ending) -> str | None:
    """Return how two endings of one schedule differ, as NotDeterministic says it; None if alike.

    A result shown by its repr with an address (``<Lock object at 0x7f...>``) is compared
    without it: a new object in every replay is no change of outcome.
    """
    for name, text in before.texts.items():
        if not _same(now.texts.get(name), text):
            return (
                f"nondeterministic: actor {name}'s outcome changed between two replays of "
                f"{schedule} ({text} in one, {now.texts.get(name)} in the other): {HINT}"
            )
    if before.ok != now.ok:
        return (
            f"nondeterministic: the invariant held in one replay of {schedule} and broke in "
            f"another, with the same results: {HINT}"
        )
    return None


def first_change(outcomes: Sequence[Seen], order: Sequence[str], replayer: Replayer) -> str | None:
    """Replay the breaking schedules and a sample of the rest twice; return the first change.

    order holds the search's step names (to read "A B A!" back); None when every replay ended
    as the search saw it.
    """
    chosen = spread([o for o in outcomes if not o.ok], MAX_BREAKING)
    chosen += spread([o for o in outcomes if o.ok], PASSING_SAMPLE)
    for seen in chosen:
        before = Ending(seen.ok, dict(seen.texts))
        for _ in range(REPLAYS):
            try:
                now = replayer.ending(schedule_names(seen.schedule, order))
            except ScheduleError as exc:
                return (
                    f"nondeterministic: a replay of {seen.schedule} could not take the same "
                    f"steps again ({exc}): {HINT}"
                )
            changed = difference(seen.schedule, before, now)
            if changed is not None:
                return changed
            before = now
    return None


def check_replays(outcomes: Sequence[Seen], order: Sequence[str], replayer: Replayer) -> None:
    """Raise NotDeterministic at the first change ``first_change`` finds; return if none."""
    changed = first_change(outcomes, order, replayer)
    if changed is not None:
        raise NotDeterministic(changed)


__all__ = [
    "MAX_BREAKING",
    "PASSING_SAMPLE",
    "Ending",
    "Replayer",
    "check_replays",
    "difference",
    "first_change",
    "spread",
]
