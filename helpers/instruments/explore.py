"""Every interleaving: run all schedules of a few actors and check an invariant after each.

``explore(lab, actors, invariant, setup=..., watch=...)`` enumerates every order in which the
actors' round trips can run (one step = one round trip: a command, a pipeline or MULTI/EXEC
block, a script call; see ``helpers.instruments.schedule``). The actors are the same functions
that threads run and benchmarks time. They may branch (a rejected request stops after its GET), so
step counts are discovered while running: each replay follows a known prefix, then always picks
the first unfinished client, and records which other clients could have run at each position.
The next replay backtracks to the deepest position with an untried choice (stateless model
checking, as in CHESS). Every replay starts from reset keys (``watch``/``reset``, then ``setup``)
on the same gated clients (an actor stopped mid-way has its connections closed), so there is exactly one
replay per complete schedule. Replays do not read the watched keys after each step (that is what
makes 1,680 schedules take seconds); ``Exploration.trace("ABAB")`` replays one schedule with
``run_schedule`` to print it.

Two clients of 2 steps have 6 schedules; 2 of 4 steps have 70; 3 of 3 steps have 1680.
After each complete schedule, ``invariant(client, results)`` is called with a client of the same
server (to read the keys) and ``{name: return value}``; it returns True when all is well.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers.instruments.schedule import (
    Actor,
    Connections,
    ScheduleRun,
    Trace,
    format_value,
    run_schedule,
    schedule_text,
)

DEFAULT_MAX_SCHEDULES = 20_000
DEFAULT_MAX_STEPS = 10_000  # per replay: an actor that never finishes must not hang the explorer
Invariant = Callable[[Any, dict[str, Any]], bool]


class TooManySchedules(RuntimeError):
    """The actors have more interleavings than max_schedules allows."""


@dataclass(frozen=True)
class Outcome:
    """One complete schedule: its order, whether the invariant held, and each client's result."""

    schedule: str
    ok: bool
    results: dict[str, Any]
    result_text: str


@dataclass
class Exploration:
    """Every schedule that was run, which ones broke the invariant, and their traces."""

    outcomes: list[Outcome]
    traces: dict[str, Trace] = field(default_factory=dict)
    clients: list[str] = field(default_factory=list)
    actors: dict[str, Actor] = field(default_factory=dict, repr=False)
    replay: Callable[[str], Trace] | None = field(default=None, repr=False)

    def trace(self, schedule: str) -> Trace:
        """Return the printable Trace of one explored schedule (replayed with state on first use)."""
        if schedule not in self.traces:
            if schedule not in {o.schedule for o in self.outcomes}:
                raise KeyError(f"{schedule!r} is not one of the explored schedules")
            if self.replay is None:
                raise KeyError(f"no trace kept for {schedule!r} (explore(..., keep_traces=False))")
            self.traces[schedule] = self.replay(schedule)
        return self.traces[schedule]

    @property
    def total(self) -> int:
        """Return the number of complete schedules run."""
        return len(self.outcomes)

    @property
    def bad(self) -> list[str]:
        """Return the schedules that broke the invariant, in exploration order."""
        return [o.schedule for o in self.outcomes if not o.ok]

    @property
    def bad_count(self) -> int:
        """Return how many schedules broke the invariant."""
        return len(self.bad)

    @property
    def good(self) -> list[str]:
        """Return the schedules after which the invariant held."""
        return [o.schedule for o in self.outcomes if o.ok]

    def first_bad(self) -> Trace | None:
        """Return the trace of the first schedule that broke the invariant, or None."""
        return self.trace(self.bad[0]) if self.bad else None

    def summary(self) -> str:
        """Return 'N of M schedules break the invariant'."""
        return f"{self.bad_count} of {self.total} schedules break the invariant"

    def picture(self, width: int = 88) -> str:
        """Return every schedule on a few lines, bad ones in [brackets], then the summary."""
        cells = [f"[{o.schedule}]" if not o.ok else f" {o.schedule} " for o in self.outcomes]
        body = textwrap.fill(
            " ".join(cells), width=width, break_on_hyphens=False, break_long_words=False
        )
        return f"{body}\n[...] = invariant broken; {self.summary()}"

    def table(self) -> str:
        """Return one line per schedule: order, ok/BAD, and each client's result."""
        width = max([len("schedule")] + [len(o.schedule) for o in self.outcomes])
        lines = [f"{'schedule':<{width}}  invariant  results"]
        lines += [
            f"{o.schedule:<{width}}  {'ok' if o.ok else 'BROKEN':<9}  {o.result_text}"
            for o in self.outcomes
        ]
        lines.append(self.summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.picture()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.picture())

    def plot(self, title: str = "Every interleaving", ax: Any = None) -> Any:
        """Return a Figure: one column per schedule, one colour per client, broken ones marked."""
        from helpers.instruments.plots import (
            schedule_grid,  # matplotlib is imported only when plotting
        )

        return schedule_grid(self, title=title, ax=ax)


def _next_guide(choices: list[tuple[list[str], str]]) -> list[str] | None:
    """Return the prefix of the next schedule to try (deepest untried choice), or None when done."""
    for depth in range(len(choices) - 1, -1, -1):
        options, chosen = choices[depth]
        position = options.index(chosen)
        if position + 1 < len(options):
            return [c for _opts, c in choices[:depth]] + [options[position + 1]]
    return None


def explore(
    lab: Any,
    actors: Mapping[str, Actor],
    invariant: Callable[[Any, dict[str, Any]], bool],
    setup: Callable[[Any], Any] | None = None,
    watch: Sequence[str] = (),
    reset: Sequence[str] | None = None,
    max_schedules: int = DEFAULT_MAX_SCHEDULES,
    keep_traces: bool = True,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Exploration:
    """Run every interleaving of the actors' round trips; return which schedules break invariant.

    Replays reuse one gated client per actor (state reset between replays) and do not read the
    watched keys after each step; ``Exploration.trace(schedule)`` (and ``first_bad()``) replays
    one schedule with ``run_schedule`` to print it, which gives the same trace because actors
    must be deterministic. keep_traces=False drops that ability (no reference to lab is kept).
    A replay longer than max_steps steps (an actor that never finishes) raises TooManySchedules.
    """
    if len(actors) < 1:
        raise ValueError("explore needs at least one actor")
    outcomes: list[Outcome] = []
    guide: list[str] | None = []
    previous: list[tuple[list[str], str]] = []
    with Connections(lab, actors, [*(reset if reset is not None else ()), *watch]) as connections:
        while guide is not None:
            if len(outcomes) >= max_schedules:
                raise TooManySchedules(
                    f"more than {max_schedules} schedules; shorten the actors "
                    f"or raise max_schedules"
                )
            choices: list[tuple[list[str], str]] = []
            with ScheduleRun(
                lab, actors, setup, watch, reset, connections=connections, observe=False
            ) as run:
                while run.unfinished:
                    options = run.unfinished
                    depth = len(choices)
                    if depth >= max_steps:
                        raise TooManySchedules(
                            f"a schedule ran more than {max_steps} steps; does every "
                            f"actor finish? (or raise max_steps)"
                        )
                    chosen = guide[depth] if depth < len(guide) else options[0]
                    if depth < len(guide) and options != previous[depth][0]:
                        # Same prefix as the previous replay, so the same clients must be runnable.
                        raise RuntimeError(
                            f"actors are not deterministic: replaying "
                            f"{schedule_text(guide[:depth])!r}, runnable clients were "
                            f"{previous[depth][0]} before and {options} now"
                        )
                    choices.append((options, chosen))
                    run.step(chosen)
                ok = invariant(run.observer, dict(run.results))
                results = dict(run.results)
                order = schedule_text(run.names)
            if not isinstance(ok, bool):
                raise TypeError(f"invariant must return a bool, got {ok!r}")
            text = "  ".join(f"{n}={format_value(results[n], run.short)}" for n in actors)
            outcomes.append(Outcome(order, ok, results, text))
            guide, previous = _next_guide(choices), choices

    def replay(schedule: str) -> Trace:
        names = schedule.split() if " " in schedule else list(schedule)  # inverse of schedule_text
        return run_schedule(lab, actors, names, setup=setup, watch=watch, reset=reset)

    return Exploration(outcomes, {}, list(actors), dict(actors), replay if keep_traces else None)


def count_interleavings(*steps: int) -> int:
    """Return the number of interleavings of clients with these fixed step counts (multinomial)."""
    from math import factorial

    if any(s < 0 for s in steps):
        raise ValueError("step counts must be >= 0")
    total = factorial(sum(steps))
    for s in steps:
        total //= factorial(s)
    return total


# ---------------------------------------------------------------- common invariants


def _int_of(client: Any, key: str) -> int:
    value = client.get(key)
    return int(value) if value is not None else 0


def counter_at_most(key: str, limit: int) -> Invariant:
    """Return an invariant: the integer at key (missing = 0) is at most limit (no overshoot)."""
    return lambda client, results: _int_of(client, key) <= limit


def counter_equals(key: str, expected: int) -> Invariant:
    """Return an invariant: the integer at key (missing = 0) equals expected (no lost update)."""
    return lambda client, results: _int_of(client, key) == expected


def results_at_most(value: Any, count: int) -> Invariant:
    """Return an invariant: at most count clients returned value (e.g. 'allowed', 'acquired')."""
    return lambda client, results: sum(1 for r in results.values() if r == value) <= count


def all_hold(*invariants: Invariant) -> Invariant:
    """Return an invariant that holds when every given invariant holds."""
    return lambda client, results: all(inv(client, results) for inv in invariants)
