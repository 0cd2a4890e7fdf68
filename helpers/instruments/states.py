"""States met before: a search answers a replay from what earlier replays saw after the same state.

A replay of real client code costs a round trip through redis-py for every step, and a search
replays the same states again and again: in 2 actors of 8 GET/SET steps, 205,920 steps reach
3,437 distinct states. Two paths that reach the same *state* go on alike: each later choice
finds the same actors able to run, each step touches the same keys and moves to the same next
state, and each complete schedule ends with the same results and verdict. So a search keeps a
graph of the states its live replays reached (``StateGraph``): for each, who could run, what
each one's next step would touch, and, for each choice taken, the step's footprint and the
state after it; at the end of a schedule, its results and verdict.

A replay is first walked through the graph (``Simulated``), which answers the search core
(``helpers.instruments.dpor``) exactly as the live replay did; no actor runs. Where it leaves
what is known (a choice never taken from that state), the search runs it live (``Recording``,
which adds what it sees), and a live replay that reaches a state already in the graph hands the
rest back to the graph. The search core cannot tell the difference: it makes the same choices,
finds the same races and counts the same schedules (tests/test_states_met_before.py, and the
fuzzer against live replays).

What a state is: at a point where nothing but the keyspace and the actors' own code carry the
past (``PrefixSharing.state``: no WATCH or MULTI open, no wait or thread, no connection or server
state changed), it is the keyspace, each actor's round trips and replies so far (an actor's code
is deterministic, so they decide where it stands and what it holds), the run's clock during each
of its steps (what its code read as the time) and the clocks now. At any other
point it is the last such state and the choices made since. This takes the server as the
actors' only shared state, as the reduction does: actors that share a Python object must replay
live (``share_prefixes=False``), and the replays after a search (``helpers.instruments.
determinism``) say so when they meet one. Only a search that shares prefixes keeps a graph, and
one that stops sharing (a random token) drops it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers.errors import RaceLabError
from helpers.instruments.footprint import Footprint

ROOT: Hashable = ("root",)  # the state every replay starts from (reset keys, then setup)


class Unknown(RaceLabError):
    """A simulated replay left what the graph knows: the search runs it live."""


class Known(RaceLabError):
    """A live replay reached a state in the graph: the search walks the rest through it."""


@dataclass
class End:
    """How a complete schedule ended: the invariant's verdict and each actor's result."""

    ok: bool
    results: dict[str, Any]
    text: str
    texts: dict[str, str]


@dataclass
class State:
    """What a live replay saw at one state, and where each choice taken from it led."""

    options: list[str]  # the steps that could run
    nexts: dict[str, Footprint] | None = None  # what each would touch (when the search asked)
    edges: dict[str, tuple[Footprint, Hashable]] = field(
        default_factory=dict
    )  # name: (touched, next)
    waiting: dict[str, Footprint] | None = None  # at the end: actors still waiting (when asked)
    end: End | None = None  # at the end of a complete schedule


class StateGraph:
    """The states a search's live replays reached (see the module docstring)."""

    def __init__(self) -> None:
        self.states: dict[Hashable, State] = {}


def _after(key: Hashable, name: str) -> Hashable:
    """Return the state after step name from state key, where no state can be told by its parts."""
    if isinstance(key, tuple) and key and key[0] == "after":
        return "after", key[1], (*key[2], name)
    return "after", key, (name,)


class Simulated:
    """A replay walked through the graph (a ``dpor.Replay``): raises Unknown where it leaves it."""

    def __init__(self, graph: StateGraph) -> None:
        self.graph = graph
        self.names: list[str] = []
        self.footprints: list[Footprint] = []
        self.key: Hashable = ROOT
        self._state: State | None = None

    def options(self) -> list[str]:
        state = self.graph.states.get(self.key)
        if state is None or (not state.options and state.end is None):
            raise Unknown
        self._state = state
        return list(state.options)

    def nexts(self, options: list[str]) -> dict[str, Footprint]:
        assert self._state is not None
        if self._state.nexts is None:
            raise Unknown
        return self._state.nexts

    def step(self, name: str) -> Footprint:
        assert self._state is not None
        edge = self._state.edges.get(name)
        if edge is None:
            raise Unknown
        touched, self.key = edge
        self.names.append(name)
        self.footprints.append(touched)
        return touched

    def waiting(self) -> dict[str, Footprint]:
        assert self._state is not None
        if self._state.waiting is None:
            raise Unknown
        return self._state.waiting

    @property
    def end(self) -> End:
        """Return how the schedule walked ended (only after a complete one)."""
        assert self._state is not None and self._state.end is not None
        return self._state.end


class Recording:
    """A live replay (a ``dpor.Replay``) that adds what it sees to the graph.

    Past depth ``live_from`` (where the walk before it left the graph), a step into a state the
    graph holds raises Known before the next step: the search walks the rest instead.
    """

    def __init__(self, live: Any, graph: StateGraph, sharing: Any, live_from: int) -> None:
        self.live, self.graph, self.sharing, self.live_from = live, graph, sharing, live_from
        self.key: Hashable = ROOT
        self._met = False  # the last step led to a state the graph holds
        self._times: list[int] = []  # the run's clock after each step (what its actor read)

    @property
    def names(self) -> Sequence[str]:
        return self.live.names

    def options(self) -> list[str]:
        options: list[str] = self.live.options()
        if self.sharing.diverged:
            return options  # (a replay the search throws away, and the graph with it)
        if self._met and len(self.live.names) > self.live_from:
            raise Known
        if self.key not in self.graph.states:
            self.graph.states[self.key] = State(list(options))
        return options

    def nexts(self, options: list[str]) -> dict[str, Footprint]:
        nexts: dict[str, Footprint] = self.live.nexts(options)
        self.graph.states[self.key].nexts = nexts
        return nexts

    def step(self, name: str) -> Footprint:
        state = self.graph.states[self.key]
        touched: Footprint = self.live.step(name)
        run = self.live.run
        self._times.append(run.clock.elapsed_ns)
        edge = state.edges.get(name)
        if edge is None:
            told = self.sharing.state(run, self._times)
            edge = touched, told if told is not None else _after(self.key, name)
            state.edges[name] = edge
        self.key = edge[1]
        self._met = self.key in self.graph.states
        return touched

    def waiting(self) -> dict[str, Footprint]:
        waiting: dict[str, Footprint] = self.live.waiting()
        self.graph.states[self.key].waiting = waiting
        return waiting

    def ended(self, end: End) -> None:
        """Record how the schedule this replay ran ended."""
        self.graph.states[self.key].end = end
