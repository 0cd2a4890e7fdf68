"""The search core: which step each replay takes at each depth, and what is left to try.

Stateless model checking (CHESS): every replay starts from the same state, follows a prefix an
earlier replay chose, then makes new choices; ``Search.next_prefix`` backtracks to the deepest
depth with a choice left. With ``reduce`` it runs one schedule per class of equivalent schedules:
source-set DPOR (Abdulla, Aronis, Jonsson and Sagonas, POPL 2014) with sleep sets (Godefroid
1996). ``preemptions=N`` keeps to CHESS's bound instead.

Nothing here knows Redis. A replay is anything with the small ``Replay`` interface: which steps
can run, what each would touch (a ``Footprint``), and running one. ``helpers.instruments.explore``
drives it with real clients; tests/dpor_model.py drives it with an in-memory model, so that the
reduction can be checked against exhaustive search on thousands of generated programs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from helpers.errors import RaceLabError
from helpers.instruments import faults as fault_steps
from helpers.instruments.footprint import EVERYTHING, Footprint


class TooManySchedules(RaceLabError, RuntimeError):
    """The actors have more interleavings than max_schedules allows."""


class NotDeterministic(RaceLabError, RuntimeError):
    """Replaying the same prefix of a schedule let other actors run: the actors are not deterministic."""


class Replay(Protocol):
    """One replay, as the search sees it: the steps that can run, and running one."""

    @property
    def names(self) -> Sequence[str]:
        """Return the steps run so far, in order."""
        ...

    def options(self) -> list[str]:
        """Return the steps that can run next, in the race's order (empty: the replay is over)."""
        ...

    def nexts(self, options: list[str]) -> dict[str, Footprint]:
        """Return what each option's next step (and each waiting actor's call) would touch."""
        ...

    def step(self, name: str) -> Footprint:
        """Run name's next step; return what it touched."""
        ...

    def waiting(self) -> dict[str, Footprint]:
        """Return the calls still waiting when the replay is over, and what they would touch."""
        ...


@dataclass
class Node:
    """One state of the search: who could run, what each would touch, what was and will be tried."""

    options: list[str]  # the unfinished actors, in the order they were given
    nexts: dict[str, Footprint]  # what each one's next step reads and writes
    sleep: frozenset[str]  # actors whose next step is covered by a sibling already explored
    chosen: str = ""
    actor: str = ""  # whose step chosen is (fault_steps.actor_of(chosen), asked once)
    fault: bool = False  # chosen is a fault step
    tried: list[str] = field(default_factory=list)  # chosen here so far, in order
    backtrack: set[str] = field(default_factory=set)  # still to try here (reduce=True)
    footprint: Footprint = EVERYTHING  # of the step chosen here, once it ran
    before: int = 0  # bit j set: step j happens before this node's step (itself included)
    preemptions: int = 0  # preemptions up to and including this node's step
    child_sleep: frozenset[str] = frozenset()


class Search:
    """The stateless search: which choice each replay makes at each depth, and what is left."""

    def __init__(
        self, order: list[str], reduce: bool, preemptions: int | None, forced: Sequence[str] = ()
    ) -> None:
        self.order, self.reduce, self.bound = order, reduce, preemptions
        self.forced = list(forced)  # a worker's subtree: these choices first, never backtracked
        self.nodes: list[Node] = []
        self.bounded = False  # some schedule was left out by the preemption bound
        self.stopped = False  # the search ran out of its time budget

    def _cost(self, depth: int, options: list[str], choice: str) -> int:
        """Return the preemptions after choosing choice at depth (a switch away from a runnable actor)."""
        if depth == 0:
            return 0
        previous = self.nodes[depth - 1]
        if previous.fault or fault_steps.kind_of(choice):
            return previous.preemptions  # a fault, or the switch it forced: not a preemption
        switch = choice != previous.chosen and previous.chosen in options
        return previous.preemptions + int(switch)

    def _allowed(self, depth: int, options: list[str], choice: str) -> bool:
        if self.bound is None or self._cost(depth, options, choice) <= self.bound:
            return True
        self.bounded = True
        return False

    def choose(self, depth: int, options: list[str], nexts: dict[str, Footprint]) -> str | None:
        """Return the choice at a new depth (first allowed actor not asleep); None: all asleep."""
        self._learn(options)
        sleep = self.nodes[depth - 1].child_sleep if depth else frozenset()
        node = Node(options, nexts, sleep)
        if self.reduce:
            self._find_races(depth, node)
        if depth < len(self.forced):
            return self._force(depth, node, self.forced[depth])
        for name in options:
            if name not in sleep and self._allowed(depth, options, name):
                self._take(depth, node, name)
                self.nodes.append(node)
                return name
        return None

    def _force(self, depth: int, node: Node, name: str) -> str:
        """Take name at a depth of the forced prefix, as a search that tries every option there
        in order would: the options before it count as tried (for the child's sleep set)."""
        if name not in node.options:
            raise NotDeterministic(
                f"actors are not deterministic: the subtree {_text(self.forced)!r} was split off "
                f"where {name} could run, but at step {depth + 1} the runnable ones are "
                f"{node.options}"
            )
        node.tried = [n for n in self.order[: self.order.index(name)] if n in node.options]
        self._take(depth, node, name)
        self.nodes.append(node)
        return name

    def splits(self, depth: int, options: list[str]) -> list[str]:
        """Return every choice a search that tries each option would take at depth, in order."""
        self._learn(options)
        sleep = self.nodes[depth - 1].child_sleep if depth else frozenset()
        return [
            n
            for n in self.order
            if n in options and n not in sleep and self._allowed(depth, options, n)
        ]

    def _learn(self, options: list[str]) -> None:
        """Put steps first seen now (an actor's sub-actors, "A1") at the end of the order."""
        for name in options:
            if name not in self.order:
                self.order.append(name)

    def _take(self, depth: int, node: Node, name: str) -> None:
        """Choose name at node: the child's sleep set keeps the tried steps name commutes with."""
        if self.reduce:
            asleep = node.sleep | frozenset(node.tried)
            mine, actor = node.nexts[name], fault_steps.actor_of(name)
            node.child_sleep = frozenset(  # A's fault and A's step never commute: program order
                r
                for r in asleep
                if r in node.nexts  # a fault no longer offered (the bound is spent) wakes up
                and fault_steps.actor_of(r) != actor
                and not node.nexts[r].conflicts(mine)
            )
        node.chosen = name
        node.fault = fault_steps.kind_of(name) is not None
        node.actor = fault_steps.actor_of(name) if node.fault else name
        node.tried.append(name)
        node.backtrack.add(name)
        node.preemptions = self._cost(depth, node.options, name)

    def ran(self, depth: int, footprint: Footprint) -> None:
        """Record what the step chosen at depth touched, and which earlier steps happen before it."""
        node = self.nodes[depth]
        node.footprint = footprint
        if not self.reduce:
            return  # only the reduction reads which steps happen before which
        before = 1 << depth
        actor = node.actor  # a fault step is in its actor's program order
        for j in range(depth):
            other = self.nodes[j]
            if other.actor == actor or other.footprint.conflicts(footprint):
                before |= other.before
        node.before = before

    def _find_races(self, depth: int, node: Node) -> None:
        """Source-set DPOR: reverse every race of each actor's next step with the prefix.

        A race is a step j of another actor that conflicts with the next step and happens
        before it directly (through no later step). Reversing it means running, at j, one of
        the *initials* of v: the steps after j that do not happen after j, then the next step
        (Abdulla et al., POPL 2014). Adding the racing actor itself, as Flanagan and Godefroid
        do, loses schedules when that actor is asleep at j but another step (a clock, say) must
        run first: tests/test_explorer_regressions.py keeps the case. Waiting actors count too
        (their call is a step once answerable): where no initial could run at j, every step
        that could is tried there instead.
        """
        for name, step in node.nexts.items():
            actor = fault_steps.actor_of(name)
            after = 0  # bit k: step k happens before the next step (program order or conflict)
            for k in range(depth):
                other = self.nodes[k]
                if other.actor == actor or other.footprint.conflicts(step):
                    after |= other.before
            covered = 0  # steps that happen before a later step that happens before this one
            for j in range(depth - 1, -1, -1):
                if not after >> j & 1:
                    continue
                other = self.nodes[j]
                if (
                    other.actor != actor
                    and other.footprint.conflicts(step)
                    and not covered >> j & 1
                ):
                    self._reverse(depth, j, name, after)
                covered |= other.before

    def _reverse(self, depth: int, j: int, name: str, after: int) -> None:
        """Make node j try an initial of the steps that do not happen after j, then name."""
        node = self.nodes[j]
        rest = [k for k in range(j + 1, depth) if not self.nodes[k].before >> j & 1]
        initials = [
            self.nodes[k].chosen
            for i, k in enumerate(rest)
            if not any(self.nodes[k].before >> e & 1 for e in rest[:i])
        ]
        if not any(after >> k & 1 for k in rest):
            initials.append(name)
        if any(n in node.backtrack or n in node.sleep for n in initials):
            return  # already tried here, or asleep: an equivalent schedule was run
        runnable = [n for n in self.order if n in initials and n in node.options]
        if runnable:
            node.backtrack.add(runnable[0])
        else:
            node.backtrack |= set(node.options)

    def blocked(self, depth: int, options: list[str], nexts: dict[str, Footprint]) -> None:
        """Record a replay cut short at depth because every runnable actor was asleep."""
        if self.reduce:
            self._find_races(depth, Node(options, nexts, frozenset()))

    def done(self) -> float:
        """Return the share of the search already run, from the tries left at each depth.

        Each depth splits what is left below it evenly among the choices it has tried or will
        try (Knuth's estimate of a tree's size, read off the current path): early on, and when
        backtrack sets grow later, it is a guess, which is why refusals say "about".
        """
        share, scale = 0.0, 1.0
        for node in self.nodes[len(self.forced) :]:  # a forced prefix is one subtree: all of it
            wanted = (node.backtrack if self.reduce else set(node.options)) - node.sleep
            width = max(len(wanted | set(node.tried)), 1)
            share += scale * (len(node.tried) - 1) / width
            scale /= width
        return share + scale

    def next_prefix(self) -> int | None:
        """Make the deepest untried choice; return its depth (replay nodes[:depth+1]), None: done."""
        for depth in range(len(self.nodes) - 1, len(self.forced) - 1, -1):
            node = self.nodes[depth]
            wanted = node.backtrack if self.reduce else node.options
            if self.reduce:  # a fault may never happen, so every place it can is tried
                wanted = set(wanted) | {n for n in node.options if fault_steps.kind_of(n)}
            for name in self.order:
                if name not in node.options:
                    continue
                if name in wanted and name not in node.tried and name not in node.sleep:
                    if self._allowed(depth, node.options, name):
                        del self.nodes[depth + 1 :]
                        self._take(depth, node, name)
                        return depth
        return None


def replay(search: Search, run: Replay, max_steps: int) -> bool:
    """Run one replay: the prefix an earlier replay chose, then new choices to the end.

    Return False when it was cut short because every step that could run was asleep (an
    equivalent schedule was run already), True when it ran to the end.
    """
    while options := run.options():
        depth = len(run.names)
        if depth >= max_steps:
            raise TooManySchedules(
                f"a schedule ran more than {max_steps} steps; does every actor finish? "
                f"(or raise max_steps)"
            )
        if depth < len(search.nodes):  # the prefix an earlier replay chose
            node = search.nodes[depth]
            if options != node.options:  # same prefix, so the same steps must be able to run
                raise NotDeterministic(
                    f"actors are not deterministic: replaying {_text(run.names)!r}, "
                    f"runnable clients were {node.options} before and {options} now"
                )
            touched = run.step(node.chosen)
            if depth == len(search.nodes) - 1:  # the new choice: its step is new too
                search.ran(depth, touched)
            continue
        nexts = run.nexts(options) if search.reduce else {}
        chosen = search.choose(depth, options, nexts)
        if chosen is None:  # every step that could run is asleep: an equivalent one ran
            search.blocked(depth, options, nexts)
            return False
        search.ran(depth, run.step(chosen))
    if search.reduce and (waiting := run.waiting()):  # their calls race with steps run
        search.blocked(len(run.names), [], waiting)
    return True


def split(search: Search, run: Replay) -> list[str] | None:
    """Replay search.forced; return the choices after it that a search trying each would take.

    None: the forced prefix is a complete schedule. (``helpers.instruments.explore`` splits a
    search into subtrees this way, one per prefix, for its worker processes.)
    """
    while options := run.options():
        depth = len(run.names)
        if depth == len(search.forced):
            return search.splits(depth, options)
        chosen = search.choose(depth, options, run.nexts(options) if search.reduce else {})
        assert chosen is not None  # a forced choice is always taken
        search.ran(depth, run.step(chosen))
    return None


def _text(names: Sequence[str]) -> str:
    """Return names as a schedule is written: 'ABAB', or 'A B A!' when a name is longer."""
    return ("" if all(len(n) == 1 for n in names) else " ").join(names)
