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

Fewer schedules, same answers:

* ``reduce=True`` (the default unless ``preemptions`` is given): two schedules are *equivalent*
  when one becomes the other by swapping neighbouring steps of different actors that touch no
  key in common, or only read it (see ``helpers.instruments.footprint``); they end in the same
  state with the same results, so the invariant gives both the same verdict. The search then
  runs one schedule per class of equivalent schedules: source-set dynamic partial-order
  reduction (Abdulla et al., POPL 2014) with sleep sets (Godefroid 1996), in
  ``helpers.instruments.dpor``. A replay that can only repeat a class already run stops early
  (``Exploration.pruned``). The reduction is checked against exhaustive search on generated
  races (tests/test_dpor_model.py, tests/test_fuzz_explorer.py). The answer still counts
  schedules: each class run stands for every order of its steps that keeps each conflict
  (``helpers.instruments.classes``), so ``total``, ``bad_count``, ``bad`` and ``good`` are those
  of an exhaustive search, ``runs`` is how many were run and ``classes`` how many classes.
  ``Exploration.class_of(schedule)`` names a class by its first equivalent order.
  ``reduce=False`` runs every schedule.
* ``preemptions=N``: only the schedules in which an actor is switched away from, while it could
  go on, at most N times (CHESS's bound, Musuvathi and Qadeer, PLDI 2007). The result says
  ``complete=False`` when the bound left schedules out. The two do not combine (ValueError).

No verdict without evidence: a search in which every client raised, or did not finish, in
every schedule raises ``NoVerdict`` (with what each returned) instead of "0 of N break". The
actors read the run's own clock (``helpers.instruments.logical_time``), and after a search a few
schedules are replayed twice to catch actors that read what the explorer does not control
(``helpers.instruments.determinism``). ``budget_s`` bounds a search's time; without it a reduced
search that will not fit ``max_schedules`` is refused after its first few hundred replays
(50,000 by default where prefixes are shared, 20,000 where every replay runs live).

Several servers: the actors' own clients may dial several addresses (Redlock's masters); each
further one is a server of its own (``helpers.instruments.servers``), emptied before every
replay, and "crash" offers its crash. A server first dialed during a search restarts it, as a
new script does.

Server-global state: the script cache and Function libraries survive a reset (a shared server's
cannot be flushed). When an actor loads a script or library for the first time during a search
(``SCRIPT LOAD``, ``EVAL``, ``FUNCTION LOAD``, as redis-py's ``Script`` does after ``NOSCRIPT``),
the search starts again with it loaded, so every replay it keeps sees the same server (at most
MAX_RESTARTS times). The suite's own scripts are loaded before the first replay.

``workers=N`` splits a search into subtrees at its first steps and runs them in N processes
(``_search_in_workers``); ``workers=1``, the default, is the plain search it is tested against.
Each worker keeps its own graph of states met before (below) across the subtrees it runs, and
is handed subtrees in groups that often reach the same states.

Shared prefixes: each replay repeats the steps before the depth the search backtracked to. On
the embedded backend those round trips are answered from the record of the replay before, and
the keyspace is put back where the replay leaves it (``helpers.instruments.sharing``; the
actors' code still runs, through redis-py). ``share_prefixes=False`` replays every step live,
the plain search the fuzzer checks it against; ``Exploration.sharing_off`` says why a search
ran live.

States met before: where prefixes are shared, the search also keeps a graph of the states its
live replays reached (``helpers.instruments.states``): a state is the keyspace, what each actor
has seen so far (its round trips, their replies, the clock during its steps) and the clocks.
Each replay is first walked through that graph, which answers the search exactly as a live
replay would (the same actors able to run, the same footprints, the same ending); only where
it leaves the graph does the replay run live, and a live replay that reaches a known state
hands the rest back. ``Exploration.walked`` counts the replays that ended in the graph. In 2
actors of 8 GET/SET steps, 12,337 of the 12,870 replays of the exhaustive search and 2,801 of
the 3,334 of the reduced one end there. Like the reduction, this takes the server as the
actors' only shared state: actors that also share a Python object must replay live
(``share_prefixes=False``), and the replays after the search say so when they meet one.
"""

from __future__ import annotations

import gc
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from helpers.backend.limits import check_connections
from helpers.errors import RaceLabError
from helpers.instruments import dpor
from helpers.instruments import faults as fault_steps
from helpers.instruments.adopt import SPUN
from helpers.instruments.classes import each_order, must_precede, orders_of
from helpers.instruments.determinism import Replayer, check_replays
from helpers.instruments.dpor import NotDeterministic, TooManySchedules
from helpers.instruments.footprint import Footprint
from helpers.instruments.progress import progress, tick
from helpers.instruments.schedule import (
    CRASHED,
    Actor,
    Clock,
    Connections,
    ScheduleRun,
    Trace,
    describe_round_trip,
    format_value,
    run_schedule,
    schedule_names,
    schedule_text,
)
from helpers.instruments.sharing import PrefixSharing, SharingStats, why_not
from helpers.instruments.spec import ExploreOptions, RaceDefinitionError, RaceSpec
from helpers.instruments.states import End, Known, Recording, Simulated, StateGraph, Unknown
from helpers.instruments.workers import map_in_workers, refuse_unless_possible

RUNNER = "greenlet"  # replays run actors as greenlets: a step is a switch (see ScheduleRun)
MAX_RESTARTS = 10  # searches restarted because an actor loaded a new script (see _search)
COLLECT_EVERY = 256  # replays between two garbage collections (see _collect_between_replays)
ESTIMATE_AFTER = 200  # a reduced search estimates its size after this many replays (and 2x, 4x...)
SPLIT_TASKS = 8  # workers=N: the search is split into about N times this many subtrees
SPLIT_DEPTH = 12  # ... at its first this many steps at most
Invariant = Callable[[Any, dict[str, Any]], bool]


class NoVerdict(RaceLabError, RuntimeError):
    """No schedule gave evidence: every actor raised or did not finish in every one of them.

    ``exploration`` holds what was run (each actor's results in ``returned_text()``), so a
    caller can show it; its counts say nothing about the invariant.
    """

    def __init__(self, message: str, exploration: Exploration) -> None:
        super().__init__(message)
        self.exploration = exploration


@dataclass(frozen=True)
class Outcome:
    """One complete schedule: its order, whether the invariant held, and each client's result."""

    schedule: str
    ok: bool
    results: dict[str, Any]
    result_text: str
    steps: tuple[Footprint, ...] = field(default=(), repr=False)  # what each step touched
    texts: dict[str, str] = field(default_factory=dict, repr=False)  # each actor's result, shown


@dataclass
class Exploration:
    """Every schedule that was run, which ones broke the invariant, and their traces."""

    outcomes: list[Outcome]
    traces: dict[str, Trace] = field(default_factory=dict)
    clients: list[str] = field(default_factory=list)
    actors: dict[str, Actor] = field(default_factory=dict, repr=False)
    replay: Callable[[str], Trace] | None = field(default=None, repr=False)
    reduced: bool = False  # one schedule per class (reduce=True), not every schedule
    preemptions: int | None = None  # the preemption bound the search kept to (None: none)
    complete: bool = True  # False: the bound left schedules out
    pruned: int = 0  # replays cut short because an equivalent schedule had been run
    budget_s: float | None = None  # set when the search stopped at its time budget, unfinished
    order: list[str] = field(
        default_factory=list, repr=False
    )  # step names, as the search tries them
    judged: list[str] = field(default_factory=list, repr=False)  # the clients (not clocks)
    # Prefix sharing (helpers.instruments.sharing): steps answered from an earlier replay's
    # record and steps run live, in every replay; or why every replay ran live.
    shared_steps: int = field(default=0, repr=False)
    live_steps: int = field(default=0, repr=False)
    sharing_off: str = field(default="", repr=False)
    # Replays that ended in the graph of states met before (helpers.instruments.states): no
    # actor ran past the point where they met a known state. Included in runs and pruned.
    walked: int = field(default=0, repr=False)
    _classes: dict[str, str] = field(default_factory=dict, repr=False)
    _named: int = field(default=0, repr=False)  # outcomes[:_named] have their class in _classes
    _weights: dict[str, int] | None = field(default=None, repr=False)  # class rep: its orders
    _sizes: dict[str, int] = field(default_factory=dict, repr=False)  # reduced: each run's orders
    _expanded: dict[bool, list[Outcome]] = field(default_factory=dict, repr=False)

    def class_of(self, schedule: str) -> str:
        """Return the class of an explored schedule: its first equivalent order, by actor order."""
        if self._named < len(self.outcomes):  # name each run's class once, not on every call
            for o in self.outcomes[self._named :]:
                names = self.names_of(o.schedule)
                before = must_precede(names, o.steps, fault_steps.actor_of)
                self._classes[o.schedule] = normal_form(names, o.steps, self.clients, before)
                if self.reduced:  # how many orders it stands for (_representatives): same pairs
                    self._sizes[o.schedule] = orders_of(
                        before, [fault_steps.actor_of(n) for n in names]
                    )
            self._named = len(self.outcomes)
        if schedule not in self._classes and self.reduced:
            for ok in (False, True):  # an order a run stands for: named by expanding the classes
                self._orders(ok)
        if schedule not in self._classes:
            raise KeyError(f"{schedule!r} is not one of the explored schedules")
        return self._classes[schedule]

    # --- the schedules the runs stand for (reduce=True: every order of each class run) -------------

    def _rank(self, name: str) -> tuple[int, str]:
        order = self.order or self.clients
        return (order.index(name) if name in order else len(order), name)

    def _representatives(self) -> dict[str, int]:
        """Return {schedule run: how many schedules its class holds}, one run per class."""
        if self._weights is None:
            weights: dict[str, int] = {}
            seen: set[str] = set()
            for o in self.outcomes:
                if not self.reduced:
                    weights[o.schedule] = 1
                    continue
                cls = self.class_of(o.schedule)
                if cls not in seen:
                    seen.add(cls)
                    weights[o.schedule] = self._sizes[o.schedule]
            self._weights = weights
        return self._weights

    def orders(self, schedule: str) -> int:
        """Return how many schedules the run of schedule stands for (1 unless reduce=True)."""
        return self._representatives().get(schedule, 0)

    def _orders(self, ok: bool) -> list[Outcome]:
        """Return every schedule with this verdict that the runs stand for, in search order."""
        if ok not in self._expanded:
            reps = self._representatives()
            found: list[Outcome] = []
            for o in self.outcomes:
                if o.ok != ok or o.schedule not in reps:
                    continue
                if not self.reduced:
                    found.append(o)
                    continue
                names, cls = self.names_of(o.schedule), self.class_of(o.schedule)
                for picked in each_order(names, o.steps, fault_steps.actor_of, self._rank):
                    text = schedule_text([names[i] for i in picked])
                    self._classes.setdefault(text, cls)
                    steps = tuple(o.steps[i] for i in picked)
                    found.append(Outcome(text, o.ok, o.results, o.result_text, steps, o.texts))
            if self.reduced:
                found.sort(key=lambda o: [self._rank(n) for n in self.names_of(o.schedule)])
            self._expanded[ok] = found
        return self._expanded[ok]

    @property
    def schedules(self) -> list[Outcome]:
        """Return every schedule the search answers for, in search order (runs, or their classes)."""
        if not self.reduced:
            return self.outcomes
        return sorted(
            self._orders(False) + self._orders(True),
            key=lambda o: [self._rank(n) for n in self.names_of(o.schedule)],
        )

    @property
    def runs(self) -> int:
        """Return how many complete schedules were run (one per class when reduce=True), those
        walked through states met before included (``walked``)."""
        return len(self.outcomes)

    def names_of(self, schedule: str) -> list[str]:
        """Return the step names of one of this search's schedules ("A B A!" -> A, B, A!)."""
        return schedule_names(schedule, self.order or self.clients)

    @property
    def classes(self) -> int | None:
        """Return how many classes of equivalent schedules were run (None: steps not recorded)."""
        if any(not o.steps and self.names_of(o.schedule) for o in self.outcomes):
            return None
        return len({self.class_of(o.schedule) for o in self.outcomes})

    @property
    def bad_classes(self) -> list[str]:
        """Return the classes (as their normal form) of the schedules that broke the invariant."""
        return sorted({self.class_of(o.schedule) for o in self.outcomes if not o.ok})

    def trace(self, schedule: str) -> Trace:
        """Return the printable Trace of one explored schedule (replayed with state on first use)."""
        if schedule not in self.traces:
            if schedule not in {o.schedule for o in self.schedules}:
                raise KeyError(f"{schedule!r} is not one of the explored schedules")
            if self.replay is None:
                raise KeyError(f"no trace kept for {schedule!r} (explore(..., keep_traces=False))")
            self.traces[schedule] = self.replay(schedule)
        return self.traces[schedule]

    @property
    def total(self) -> int:
        """Return the number of complete schedules (run, or stood for by the classes run)."""
        return sum(self._representatives().values())

    @property
    def bad(self) -> list[str]:
        """Return the schedules that broke the invariant, in exploration order."""
        return [o.schedule for o in self._orders(False)]

    @property
    def bad_count(self) -> int:
        """Return how many schedules broke the invariant."""
        return sum(self.orders(o.schedule) for o in self.outcomes if not o.ok)

    @property
    def good(self) -> list[str]:
        """Return the schedules after which the invariant held."""
        return [o.schedule for o in self._orders(True)]

    def first_bad(self) -> Trace | None:
        """Return the trace of the first schedule that broke the invariant, or None."""
        return self.trace(self.bad[0]) if self.bad else None

    @property
    def spin_cut(self) -> int:
        """Return how many schedules ended with an actor stopped by its spin bound (SPUN)."""
        return sum(
            n
            for o in self.outcomes
            if (n := self.orders(o.schedule)) and any(r is SPUN for r in o.results.values())
        )

    def summary(self) -> str:
        """Return 'N of M schedules break the invariant' (and in how many classes; bounds if any)."""
        text = f"{self.bad_count} of {self.total} schedules break the invariant"
        if self.reduced:
            text += f", in {len(self.bad_classes)} of {self.classes} classes"
        if self.preemptions is not None:
            text += f" (at most {self.preemptions} preemptions"
            text += ")" if self.complete else ": not every schedule)"
        if self.budget_s is not None:
            text += (
                f" (PARTIAL: stopped at its budget of {self.budget_s:g} s after {self.runs} "
                f"runs; only the schedules those runs stand for are counted)"
            )
        if self.spin_cut:
            text += f"; in {self.spin_cut} an actor's retry loop was cut by its spin bound"
        return text

    def returned(self) -> dict[str, dict[str, int]]:
        """Return {client: {its result as shown: in how many schedules}}, clocks left out."""
        tally: dict[str, dict[str, int]] = {n: {} for n in self.judged}
        for o in self.outcomes:
            weight = self.orders(o.schedule)
            for name, counts in tally.items():
                text = o.texts.get(name, CRASHED)
                counts[text] = counts.get(text, 0) + weight
        return tally

    def returned_text(self, most: int = 3) -> str:
        """Return what each client returned, e.g. "A: True in 4, 'busy' in 2; B: True in 6"."""
        parts = []
        for name, counts in self.returned().items():
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
            shown = [f"{text} in {n}" for text, n in ranked[:most]]
            if len(ranked) > most:
                shown.append(
                    f"{len(ranked) - most} other results in {sum(n for _, n in ranked[most:])}"
                )
            parts.append(f"{name}: {', '.join(shown)}")
        return "; ".join(parts)

    def evidence(self) -> bool:
        """Return True if some client finished its call without raising in some schedule."""
        return any(
            name in o.results and not isinstance(o.results[name], BaseException)
            for o in self.outcomes
            for name in self.judged
        )

    def picture(self, width: int = 88) -> str:
        """Return every schedule on a few lines, bad ones in [brackets], the summary and results."""
        cells = [f"[{o.schedule}]" if not o.ok else f" {o.schedule} " for o in self.schedules]
        body = textwrap.fill(
            " ".join(cells), width=width, break_on_hyphens=False, break_long_words=False
        )
        return (
            f"{body}\n[...] = invariant broken; {self.summary()}\nreturned: {self.returned_text()}"
        )

    def table(self) -> str:
        """Return one line per schedule: order, ok/BAD, and each client's result."""
        width = max([len("schedule")] + [len(o.schedule) for o in self.schedules])
        lines = [f"{'schedule':<{width}}  invariant  results"]
        lines += [
            f"{o.schedule:<{width}}  {'ok' if o.ok else 'BROKEN':<9}  {o.result_text}"
            for o in self.schedules
        ]
        lines.append(self.summary())
        lines.append(f"returned: {self.returned_text()}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.picture()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.picture())

    def plot(self, title: str = "Every interleaving", ax: Any = None) -> Any:
        """Return a Figure: one column per schedule, one colour per client, broken ones marked."""
        from helpers.instruments.plots import schedule_grid  # matplotlib loads at the first plot

        return schedule_grid(self, title=title, ax=ax)


def explore(
    lab: Any,
    actors: Mapping[str, Actor],
    invariant: Callable[[Any, dict[str, Any]], bool],
    setup: Callable[[Any], Any] | None = None,
    watch: Sequence[str] = (),
    reset: Sequence[str] | None = None,
    **options: Any,
) -> Exploration:
    """Run every interleaving of the actors' round trips; return which schedules break invariant.

    The first six arguments are the race (checked once, as a ``RaceSpec``); options are the
    fields of ``ExploreOptions`` (also checked once), or ``options=ExploreOptions(...)``.
    Replays reuse one gated client per actor (state reset between replays) and do not read the
    watched keys after each step; ``Exploration.trace(schedule)`` (and ``first_bad()``) replays
    one schedule with ``run_schedule`` to print it, which gives the same trace because actors
    must be deterministic. keep_traces=False drops that ability (no reference to lab is kept).
    A replay longer than max_steps steps (an actor that never finishes) raises TooManySchedules.
    reduce (on unless preemptions is given) runs one schedule per class of equivalent schedules
    (DPOR with sleep sets) and counts every schedule each class stands for; reduce=False runs
    every schedule; preemptions=N runs only those with at most N preemptions (not complete).
    classes=True records what each step touches in an exhaustive search too, so that
    ``Exploration.classes`` and ``class_of`` work there (reduce=True always records it).
    faults=("crash", "pause", "restart", "failover") also explores those fault steps, at most
    max_faults (default 1) per schedule: "A!" kills A's client between two round trips (its
    result is then "(crashed)"), "A~" pauses A until its leases run out, "restart" and
    "failover" hit a throwaway server (see ``helpers.instruments.faults``, which also says
    where each one can run). When the actors' own clients dial several servers (Redlock's
    masters: ``helpers.instruments.servers``), "crash" and "pause" also offer "crash(<server>)"
    (it restarts without persistence) and "pause(<server>)" (its TTLs run out) for each server
    beyond the lab's own. crashes=N is faults=("crash",), max_faults=N.
    budget_s=S stops the search after about S seconds with a partial result (``complete`` is
    False, the summary says PARTIAL). Without it, a reduced search estimates its size after
    ESTIMATE_AFTER replays and refuses at once one that will not fit max_schedules (by default
    50,000 where prefixes are shared, 20,000 where every replay runs live: ``ExploreOptions``).
    workers=N (default 1) splits the search across N forked processes, each on its own copy of
    the embedded server, and merges their outcomes: the same schedules, classes and counts
    (``helpers.instruments.workers``; refused on a real server).
    share_prefixes (on by default) answers the round trips a replay shares with the one before
    from that replay's record, on the embedded backend, where the race allows it
    (``helpers.instruments.sharing``; ``Exploration.shared_steps``, ``live_steps`` and
    ``sharing_off`` say which ran how).
    An exploration in which every client raised or did not finish, in every schedule, raises
    NoVerdict: the invariant judged nothing.
    """
    spec = RaceSpec(
        lab, dict(actors), setup, tuple(watch), None if reset is None else tuple(reset), invariant
    )
    return explore_spec(spec, options_of(options))


def options_of(keywords: dict[str, Any]) -> ExploreOptions:
    """Return the ExploreOptions that explore's keywords give (options= and overrides, or fields)."""
    given = keywords.pop("options", None)
    if given is None:
        return ExploreOptions.of(**keywords)
    if not isinstance(given, ExploreOptions):
        raise TypeError(f"options= must be an ExploreOptions, got {given!r}")
    return replace(given, **keywords)


def explore_spec(spec: RaceSpec, options: ExploreOptions) -> Exploration:
    """Search spec's schedules as options say; return the Exploration (see ``explore``)."""
    if spec.invariant is None:
        raise RaceDefinitionError("explore needs the race's invariant")
    lab, actors, kinds, bound = spec.lab, spec.actors, options.faults, options.max_faults or 0
    refuse_unless_possible(lab, options.workers)
    clients = [n for n, fn in actors.items() if not isinstance(fn, Clock)]
    check_connections(lab, len(clients), f"explore with {len(clients)} actors")
    budget_s = options.budget_s
    with (
        _collect_between_replays(),
        fault_steps.ServerFaults(lab, kinds if bound else ()) as server,
        Connections(lab, actors, [*(spec.reset or ()), *spec.watch]) as connections,
        progress("exploring schedules", unit="replays"),
    ):
        for _attempt in range(MAX_RESTARTS + 1):
            servers = connections.servers.names
            order = [*actors, *fault_steps.all_names(clients, kinds, servers)]
            search = dpor.Search(order, bool(options.reduce), options.preemptions)
            deadline = None if budget_s is None else time.monotonic() + budget_s
            steps = _Faults(kinds, bound, server)
            sharing = SharingStats()
            if options.workers > 1:
                outcomes, pruned = _search_in_workers(
                    spec, options, connections, search, steps, deadline, sharing
                )
            else:
                outcomes, pruned = _search(
                    spec, options, connections, search, steps, deadline, None, sharing
                )
            if outcomes is not None:
                break
        else:
            raise NotDeterministic(
                f"the actors kept loading new scripts or libraries after {MAX_RESTARTS} restarts"
            )
        if not search.stopped:  # helpers.instruments.determinism (a spent budget: no replays)
            check_replays(outcomes, order, Replayer(spec, connections, server))

    def replay(schedule: str) -> Trace:
        names = schedule_names(schedule, order)  # inverse of schedule_text
        return run_schedule(lab, actors, names, spec.setup, spec.watch, spec.reset)

    found = Exploration(
        outcomes,
        {},
        list(actors),
        dict(actors),
        replay if options.keep_traces else None,
        reduced=bool(options.reduce),
        preemptions=options.preemptions,
        complete=not search.bounded and not search.stopped,
        pruned=pruned,
        order=order,
        judged=clients,
        budget_s=budget_s if search.stopped else None,
        shared_steps=sharing.shared_steps,
        live_steps=sharing.live_steps,
        sharing_off=sharing.off,
        walked=sharing.walked,
    )
    if outcomes and clients and not found.evidence():
        raise NoVerdict(
            f"no verdict: in every one of the {found.total} schedules every actor raised or did "
            f"not finish, so the invariant judged nothing ({found.returned_text()})",
            found,
        )
    return found


@dataclass
class _Faults:
    """The fault steps a search may take: their kinds, how many per schedule, the server's side."""

    kinds: tuple[str, ...] = ()
    bound: int = 0
    server: fault_steps.ServerFaults | None = None

    def options(self, run: ScheduleRun) -> list[str]:
        """Return the fault steps the run may take next."""
        return fault_steps.options(run, self.kinds, self.bound) if self.bound else []


# An actor that sends the same round trip and gets the same reply this many times in a row, no
# other step between, makes no progress: the server is deterministic, so it would go on so
# forever, waiting for what only another actor can do, and the search runs another actor only
# when this one finishes or blocks. Such a replay would run to max_steps (minutes at the steps'
# cost), so the search stops it here, naming the actor. (A loop that sleeps meets the spin bound.)
REPEAT_LIMIT = 500


@dataclass
class _RunReplay:
    """A ScheduleRun as the search core sees it (``dpor.Replay``): actors' steps and faults."""

    run: ScheduleRun
    faults: _Faults
    repeated: tuple[tuple[Any, ...], int] = ((), 0)
    sharing: PrefixSharing | None = None

    @property
    def names(self) -> list[str]:
        """Return the steps run so far."""
        return self.run.names

    def options(self) -> list[str]:
        """Return the actors that can send now (a waiting one cannot), then the fault steps."""
        if self.sharing is not None and self.sharing.diverged:
            return []  # the replay left its record: it stops here, to be run again live
        runnable = self.run.runnable
        return runnable + self.faults.options(self.run) if runnable else []

    def nexts(self, options: list[str]) -> dict[str, Footprint]:
        """Return what each actor's next round trip, and each fault step pending, would touch."""
        run, faults = self.run, self.faults
        pending = fault_steps.pending(run, faults.kinds, faults.bound) if faults.bound else []
        return run.next_footprints() | {
            n: fault_steps.footprint(run, n) for n in [*options, *pending] if n not in run.actors
        }

    def step(self, name: str) -> Footprint:
        """Run actor name's next round trip, or a fault step ("A!", ...); return its footprint."""
        if self.sharing is not None:
            self.sharing.before_step(len(self.run.names), self.run.share_point)
        if fault_steps.apply(self.run, name, self.faults.server):
            self.repeated = ((), 0)
        else:
            sent = tuple(self.run.actors[name].pending)
            self._no_progress(name, sent, self.run.advance(name))
        return self.run.footprints[-1]

    def _no_progress(self, name: str, sent: tuple[Any, ...], reply: Any) -> None:
        """TooManySchedules naming the actor if its last REPEAT_LIMIT round trips were identical."""
        same = (name, sent, reply)
        last, count = self.repeated
        self.repeated = (same, count + 1 if same == last else 1)
        if self.repeated[1] >= REPEAT_LIMIT:
            short = self.run.short
            raise TooManySchedules(
                f"actor {name} makes no progress: it sent {describe_round_trip(list(sent), short)} and "
                f"got {format_value(reply, short)} {REPEAT_LIMIT} times in a row, nothing else "
                "between. It waits for what only another actor does, and the explorer runs another "
                "actor only when this one finishes or blocks: bound its retries, or make it block "
                "(e.g. BLPOP)"
            )

    def waiting(self) -> dict[str, Footprint]:
        """Return the actors still waiting at the end, and what their calls would touch."""
        if self.sharing is not None and self.sharing.diverged:
            return {}
        return self.run.next_footprints() if self.run.blocked else {}


@contextmanager
def _collect_between_replays() -> Iterator[None]:
    """Hold cyclic garbage collection during a search; ``_search`` collects between replays.

    Objects older than the search are frozen meanwhile (``gc.freeze``), and so is what survives
    each collection (the search's own tree and outcomes), so that each collection traverses only
    what the replays made since the last: a long search's collections do not grow with it. A redis-py Pipeline that an actor left WATCHing when
    a replay stopped it sends UNWATCH from ``__del__``. A collection that ran inside a fakeredis
    command (its server lock held, e.g. the DEL that resets the keys) would wait on that lock
    forever: the fuzzer hung twice so.
    """
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()  # what exists now is not traversed by the collections between replays
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
        gc.collect()


def _sharing(
    spec: RaceSpec,
    options: ExploreOptions,
    connections: Connections,
    faults: _Faults,
    stats: SharingStats,
) -> PrefixSharing | None:
    """Return a PrefixSharing for this search, or None (the reason in stats.off)."""
    if not options.share_prefixes:
        stats.off = "share_prefixes=False"
        return None
    stats.off = why_not(spec.lab, dict(spec.actors), faults.bound, connections.servers.names)
    return None if stats.off else PrefixSharing(spec.lab.fake_server, stats)


def _search(
    spec: RaceSpec,
    options: ExploreOptions,
    connections: Connections,
    search: dpor.Search,
    faults: _Faults,
    deadline: float | None = None,
    loaded_by: list[str] | None = None,
    stats: SharingStats | None = None,
    graph: StateGraph | None = None,
) -> tuple[list[Outcome] | None, int]:
    """Replay until the search is done; return (outcomes, replays cut short), or None to restart.

    graph, if given, is the graph of states met before to walk and grow (a worker keeps one
    across its subtrees); otherwise the search starts its own where prefixes are shared.

    A replay in which an actor loads a script or Function library for the first time (server
    state no reset restores) ends the search: it restarts with that script loaded, so that every
    replay it keeps sees the same server (loaded_by, if given, gets that replay's steps).
    """
    invariant = spec.invariant
    max_steps = options.max_steps
    footprints = search.reduce or options.classes or "pause" in faults.kinds
    assert invariant is not None  # explore_spec refuses a race without one
    outcomes: list[Outcome] = []
    pruned = 0
    stats = stats if stats is not None else SharingStats()
    sharing = _sharing(spec, options, connections, faults, stats)
    graph = (graph if graph is not None else StateGraph()) if sharing is not None else None
    lived: list[str] = []  # the steps of the last live replay (what sharing's record holds)
    live_from = 0  # the walk through the graph left it after this many steps
    ran = 0  # replays run, kept or not
    while True:
        replays = len(outcomes) + pruned
        max_schedules = options.limit(live=sharing is None)  # (live once sharing turned off)
        ran += 1
        if ran % COLLECT_EVERY == 0:
            gc.collect()  # between two replays: no server call is under way
            gc.freeze()  # what survived (the search so far) is not traversed again
        if deadline is not None and outcomes and time.monotonic() > deadline:
            search.stopped = True
            return outcomes, pruned
        if search.reduce and replays >= ESTIMATE_AFTER and replays & (replays - 1) == 0:
            _refuse_if_estimate_over(search, replays, max_schedules, deadline is not None)
        else:
            tick(replays)
        if replays >= max_schedules:
            raise _too_many(search.reduce, max_schedules)
        if graph is not None:  # walk it through the states met before, if it stays in them
            walk = Simulated(graph)
            try:
                complete = dpor.replay(search, walk, max_steps)
            except Unknown:
                live_from = len(walk.names)
            else:
                stats.walked += 1
                if complete:
                    end = walk.end
                    outcomes.append(
                        Outcome(
                            schedule_text(walk.names),
                            end.ok,
                            dict(end.results),
                            end.text,
                            tuple(walk.footprints) if footprints else (),
                            dict(end.texts),
                        )
                    )
                else:
                    pruned += 1
                if search.next_prefix() is None:
                    return outcomes, pruned
                continue
        if sharing is not None:  # before the run opens: it resets no key when it restores
            sharing.begin(_common(lived, search.nodes))
        with ScheduleRun(
            spec,
            connections=connections,
            observe=False,
            footprints=footprints,
            runner=RUNNER,
            sharing=sharing,
        ) as run:
            if faults.server is not None:
                faults.server.begin(run)
            replay: Any = _RunReplay(run, faults, sharing=sharing)
            if graph is not None:
                replay = Recording(replay, graph, sharing, live_from)
            try:
                complete = dpor.replay(search, replay, max_steps)
            except Known:  # the rest is known: walk it (the search's nodes are as they were)
                lived = list(run.names)
                continue
            except Exception:
                if sharing is None or not sharing.diverged:
                    raise
            finally:
                if sharing is not None:
                    sharing.end()
            lived = list(run.names)
            if sharing is not None and sharing.diverged:  # run it again live, and the rest too
                stats.off = (
                    "an actor sent other values in a replayed prefix (a random token, say): "
                    "every replay after it ran live"
                )
                sharing = graph = None  # (never on with fault steps: no faults.server to end)
                live_from = 0
                continue
            # A script loaded for the first time, or a server first dialed (its faults are new
            # steps), is state no reset restores: the search starts again with it.
            if connections.servers.new_found() or run.new_global_state:
                if faults.server is not None:
                    faults.server.end()
                if loaded_by is not None:
                    loaded_by[:] = run.names
                return None, pruned
            # The estimate counts interleavings of free actors: one that waited has fewer.
            free = not run.waited
            if (
                free
                and not outcomes
                and not pruned
                and not (search.reduce or search.bound is not None)
            ):
                _refuse_if_too_many(run.names, faults.bound, max_schedules)
            if complete:
                ok = invariant(run.observer, dict(run.results))
                if not isinstance(ok, bool):
                    raise TypeError(f"invariant must return a bool, got {ok!r}")
                results, texts = dict(run.results), run.result_texts()
                text = "  ".join(f"{n}={t}" for n, t in texts.items())
                outcomes.append(
                    Outcome(
                        schedule_text(run.names),
                        ok,
                        results,
                        text,
                        tuple(run.footprints) if footprints else (),
                        texts,
                    )
                )
                if isinstance(replay, Recording):
                    replay.ended(End(ok, dict(results), text, dict(texts)))
            else:
                pruned += 1
            if faults.server is not None:
                faults.server.end()
        if search.next_prefix() is None:
            return outcomes, pruned


def _common(lived: list[str], nodes: Sequence[dpor.Node]) -> int:
    """Return how many first steps the last live replay shares with the search's current path."""
    shared = 0
    for name, node in zip(lived, nodes):
        if name != node.chosen:
            break
        shared += 1
    return shared


def _too_many(reduce: bool, max_schedules: int) -> TooManySchedules:
    """Return the refusal of a search that needs more than max_schedules replays."""
    if reduce:
        what, instead = "replays (classes and pruned ones)", "preemptions=N instead"
    else:
        what, instead = "schedules", "reduce=True or preemptions=N"
    return TooManySchedules(
        f"more than {max_schedules:,} {what}; shorten the actors, pass {instead}, "
        f"or raise max_schedules"
    )


def _search_in_workers(
    spec: RaceSpec,
    options: ExploreOptions,
    connections: Connections,
    search: dpor.Search,
    faults: _Faults,
    deadline: float | None,
    stats: SharingStats,
) -> tuple[list[Outcome] | None, int]:
    """Search as ``_search`` does, split into subtrees run in options.workers processes.

    The search is split at its first steps into prefixes (``_split``), at each of which every
    choice is tried, as a search that tries all of them would; each worker runs whole subtrees
    with ``_search`` (``helpers.instruments.workers``: forked, on its own copy of the embedded
    server) and the outcomes are merged in prefix order. A worker keeps its graph of states met
    before across its subtrees, and is handed them in groups (``_groups``) whose prefixes often
    reach the same states, so that it walks much of a group's later subtrees. An exhaustive or
    bounded search runs exactly the schedules, in the order, one process would. A reduced one
    runs one schedule per class, as one process does, though a class may be stood for by another
    of its orders (sleep sets never run two orders of one class); its counts, classes and
    verdicts are the same.
    Returns None to restart, with the script an actor loaded now loaded here too.
    """
    footprints = search.reduce or options.classes or "pause" in faults.kinds
    prefixes = _split(spec, connections, search, faults, footprints, options.workers)
    if prefixes is None:
        return None, 0

    kept: list[StateGraph] = []  # (empty when forked) a worker's graph, kept across its subtrees

    def work(
        prefix: list[str],
    ) -> tuple[list[Outcome] | None, int, bool, bool, list[str], SharingStats]:
        part = dpor.Search(search.order, search.reduce, search.bound, forced=prefix)
        loaded_by: list[str] = []
        shared = SharingStats()
        if not kept:
            kept.append(StateGraph())
        found, pruned = _search(
            spec, options, connections, part, faults, deadline, loaded_by, shared, kept[0]
        )
        if shared.off:  # it ran live (an actor sent other values, say): trust no state it kept
            kept.clear()
        return found, pruned, part.bounded, part.stopped, loaded_by, shared

    def work_on(group: list[list[str]]) -> list[Any]:
        return [work(prefix) for prefix in group]

    outcomes: list[Outcome] = []
    pruned = 0
    replays = [0]

    def done(results: list[Any]) -> None:
        replays[0] += sum(len(found or ()) + cut for found, cut, *_ in results)
        tick(replays[0])  # the workers' own progress is silent

    groups = _groups(prefixes)
    found_by = map_in_workers(work_on, groups, options.workers, done)
    result_of = {
        tuple(prefix): result
        for group, results in zip(groups, found_by)
        for prefix, result in zip(group, results)
    }
    found_in = [result_of[tuple(prefix)] for prefix in prefixes]
    for found, cut, bounded, stopped, loaded_by, shared in found_in:
        if found is None:  # replay here what loaded it, so that this server has it too
            _probe(spec, connections, search, faults, footprints, loaded_by)
            return None, 0
        outcomes += found
        pruned += cut
        search.bounded |= bounded
        search.stopped |= stopped
        stats.shared_steps += shared.shared_steps
        stats.live_steps += shared.live_steps
        stats.walked += shared.walked
        stats.off = stats.off or shared.off  # (a worker that ran live says why)
    limit = options.limit(live=bool(stats.off))
    if len(outcomes) + pruned > limit:
        raise _too_many(search.reduce, limit)
    return outcomes, pruned


def _split(
    spec: RaceSpec,
    connections: Connections,
    search: dpor.Search,
    faults: _Faults,
    footprints: bool,
    workers: int,
) -> list[list[str]] | None:
    """Return prefixes whose subtrees together make the search: about workers * SPLIT_TASKS.

    Each round replays every prefix that is not a complete schedule to its end and puts in its
    place one prefix per choice that follows it. None: an actor loaded a script (restart).
    """
    prefixes: list[tuple[list[str], bool]] = [([], False)]  # (prefix, a complete schedule)
    for _round in range(SPLIT_DEPTH):
        if len(prefixes) >= workers * SPLIT_TASKS or all(done for _, done in prefixes):
            break
        grown: list[tuple[list[str], bool]] = []
        for prefix, done in prefixes:
            nexts = None if done else _probe(spec, connections, search, faults, footprints, prefix)
            if nexts is not None and not isinstance(nexts, list):
                return None
            if nexts is None:
                grown.append((prefix, True))
            else:
                grown += [([*prefix, n], False) for n in nexts]
        prefixes = grown
    return [p for p, _ in prefixes]


def _groups(prefixes: list[list[str]]) -> list[list[list[str]]]:
    """Return prefixes grouped by the steps each actor takes in them, the largest group first.

    Prefixes that take the same steps in other orders often reach one state (two reads, say), and
    a worker that runs them in turn walks the later ones through the graph of states met before.
    The largest groups go first, so that the pool ends its workers at about the same time.
    """
    groups: dict[tuple[tuple[str, int], ...], list[list[str]]] = {}
    for prefix in prefixes:
        groups.setdefault(tuple(sorted(Counter(prefix).items())), []).append(prefix)
    return sorted(groups.values(), key=len, reverse=True)


def _probe(
    spec: RaceSpec,
    connections: Connections,
    search: dpor.Search,
    faults: _Faults,
    footprints: bool,
    prefix: list[str],
) -> list[str] | None | bool:
    """Replay prefix; return the choices after it (None: it is a complete schedule).

    False: an actor loaded a script or dialed a server for the first time (now known here:
    restart).
    """
    probe = dpor.Search(search.order, search.reduce, search.bound, forced=prefix)
    with ScheduleRun(
        spec, connections=connections, observe=False, footprints=footprints, runner=RUNNER
    ) as run:
        if faults.server is not None:
            faults.server.begin(run)
        try:
            nexts = dpor.split(probe, _RunReplay(run, faults))
        finally:
            if faults.server is not None:
                faults.server.end()
        if connections.servers.new_found() or run.new_global_state:
            return False
    search.bounded |= probe.bounded
    return nexts


def _refuse_if_too_many(names: Sequence[str], faults: int, max_schedules: int) -> None:
    """Raise TooManySchedules at once if the first replay's step counts give more than the limit.

    The first replay runs each actor in turn to its end, so its steps per actor are what a
    schedule of these actors takes; their interleavings (``count_interleavings``) estimate the
    search before it runs for minutes. Actors that branch can take fewer steps in other orders,
    so the refusal says "about".
    """
    if faults:
        return  # a fault shortens or reorders its actor's steps: the count says little
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    estimate = count_interleavings(*counts.values())
    if estimate > max_schedules:
        per_actor = ", ".join(f"{n} {c}" for n, c in counts.items())
        raise TooManySchedules(
            f"about {estimate:,} schedules ({per_actor} steps), over max_schedules="
            f"{max_schedules:,}: refused before running them; pass reduce=True or "
            f"preemptions=N, shorten the actors, or raise max_schedules"
        )


def _refuse_if_estimate_over(
    search: dpor.Search, replays: int, max_schedules: int, budgeted: bool
) -> None:
    """Show the reduced search's estimated size; refuse it at once if even that is over the limit.

    The estimate (``_Search.done``) tends to run low while backtrack sets still grow, so a
    search refused here would not have fitted; a budgeted search is never refused.
    """
    estimate = round(replays / search.done())
    tick(replays, total=max(estimate, replays))
    if estimate > max_schedules and not budgeted:
        raise TooManySchedules(
            f"about {estimate:,} replays (estimated after {replays:,}, from the choices left "
            f"on the current path), over max_schedules={max_schedules:,}: refused before "
            f"running them; pass budget_s=S for a partial answer, preemptions=N, shorten the "
            f"actors, or raise max_schedules"
        )


def normal_form(
    names: Sequence[str],
    steps: Sequence[Footprint],
    order: Sequence[str],
    before: Sequence[int] | None = None,
) -> str:
    """Return the first order, by actor order, of a schedule's steps that keeps every conflict
    (before: ``must_precede`` of the steps, when the caller has it already)."""
    rank = {n: i for i, n in enumerate(order)}
    if before is None:
        before = must_precede(names, steps, fault_steps.actor_of)
    lines: dict[str, list[int]] = {}  # each actor's steps, in its program order
    for i, name in enumerate(names):
        lines.setdefault(fault_steps.actor_of(name), []).append(i)
    chains = list(lines.items())
    at = [0] * len(chains)
    done = 0
    picked: list[str] = []
    while len(picked) < len(names):  # the first actor whose next step waits for no other one
        first = None
        for a, (actor, line) in enumerate(chains):
            if at[a] < len(line) and before[line[at[a]]] & done == before[line[at[a]]]:
                i = line[at[a]]
                key = (rank.get(actor, len(rank)), names[i])
                if first is None or key < first[0]:
                    first = (key, a, i)
        assert first is not None  # before holds earlier steps only: one is always ready
        _, a, i = first
        at[a] += 1
        done |= 1 << i
        picked.append(names[i])
    return schedule_text(picked)


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
