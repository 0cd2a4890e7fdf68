"""An in-memory model of actors and keys that drives the search core (helpers.instruments.dpor).

No Redis: each actor is a short program over a dict of keys, one instruction a step, whose
later steps can depend on what earlier ones read (it may stop, or wait until a key is set, as a
blocking pop does). Because every step's footprint is exact here, the model checks the search
alone: a reduced search must answer for exactly the schedules, and outcomes, that an exhaustive
one runs (tests/test_dpor_model.py, on programs hypothesis generates).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from helpers.instruments import dpor
from helpers.instruments.classes import each_order
from helpers.instruments.footprint import Footprint

# op: what one step does to key (arg: a value); then, if stop says so, the actor ends there
#   get: read            set: write arg             incr: read, write +1
#   setnx: write arg if the key is unset (reads it)  del: write None
#   take: wait until the key is set, then unset it (a blocking pop: waiting is not a step)
OPS = ("get", "set", "incr", "setnx", "del", "take")
STOPS = ("never", "if_none", "if_not_none")


@dataclass(frozen=True)
class Op:
    """One instruction: op on key (with arg), then stop when what it saw matches stop."""

    op: str
    key: str
    arg: int = 1
    stop: str = "never"

    def footprint(self) -> Footprint:
        """Return what the step touches: reads for get, writes (and reads) for the rest."""
        key = frozenset({self.key.encode()})
        return Footprint(reads=key) if self.op == "get" else Footprint(reads=key, writes=key)


Program = tuple[Op, ...]


@dataclass
class ModelReplay:
    """One replay of the programs from empty keys: the ``dpor.Replay`` interface."""

    programs: dict[str, Program]
    names: list[str] = field(default_factory=list)
    keys: dict[str, int | None] = field(default_factory=dict)
    at: dict[str, int] = field(default_factory=dict)  # each actor's next instruction
    seen: dict[str, list[int | None]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def _next(self, name: str) -> Op | None:
        if name in self.done or self.at.get(name, 0) >= len(self.programs[name]):
            return None
        return self.programs[name][self.at.get(name, 0)]

    def _can_run(self, op: Op) -> bool:
        return op.op != "take" or self.keys.get(op.key) is not None

    def options(self) -> list[str]:
        """Return the actors whose next step can run (a take on an unset key waits)."""
        return [n for n in self.programs if (op := self._next(n)) and self._can_run(op)]

    def nexts(self, options: list[str]) -> dict[str, Footprint]:
        """Return the footprint of every unfinished actor's next step, waiting ones too."""
        return {n: op.footprint() for n in self.programs if (op := self._next(n))}

    def step(self, name: str) -> Footprint:
        """Run name's next instruction; return its footprint."""
        op = self._next(name)
        assert op is not None and self._can_run(op), f"{name} cannot run"
        old = self.keys.get(op.key)
        new = {
            "get": old,
            "set": op.arg,
            "incr": (old or 0) + 1,
            "setnx": op.arg if old is None else old,
            "del": None,
            "take": None,
        }[op.op]
        self.keys[op.key] = new
        self.seen.setdefault(name, []).append(old)
        self.names.append(name)
        self.at[name] = self.at.get(name, 0) + 1
        if (op.stop == "if_none" and old is None) or (op.stop == "if_not_none" and old is not None):
            self.done.add(name)
        return op.footprint()

    def waiting(self) -> dict[str, Footprint]:
        """Return the actors left waiting (a take on a key nobody sets), with their footprints."""
        return self.nexts([])

    def outcome(self) -> tuple[object, ...]:
        """Return the final keys and what each actor saw (waiting ones marked)."""
        waiting = tuple(sorted(self.waiting()))
        seen = tuple((n, tuple(self.seen.get(n, []))) for n in self.programs)
        return tuple(sorted(self.keys.items())), seen, waiting


def _actor_of(name: str) -> str:
    return name


def search(programs: dict[str, Program], reduce: bool) -> Iterator[tuple[str, ...]]:
    """Yield (schedule, outcome) pairs: every schedule run, or stood for by a class run."""
    order = list(programs)
    core = dpor.Search(order, reduce, None)
    while True:
        run = ModelReplay(programs)
        if dpor.replay(core, run, max_steps=100):
            names, outcome = list(run.names), run.outcome()
            if not reduce:
                yield tuple(names), outcome
            else:
                steps = [programs[n][i] for n, i in _indices(names)]
                rank = lambda n: (order.index(n), n)  # noqa: E731
                for picked in each_order(names, [s.footprint() for s in steps], _actor_of, rank):
                    yield tuple(names[i] for i in picked), outcome
        if core.next_prefix() is None:
            return


def _indices(names: Sequence[str]) -> Iterator[tuple[str, int]]:
    count: dict[str, int] = {}
    for n in names:
        yield n, count.get(n, 0)
        count[n] = count.get(n, 0) + 1


def answers(programs: dict[str, Program], reduce: bool) -> dict[tuple[str, ...], object]:
    """Return {schedule: outcome} for a search; a schedule stood for twice is an error."""
    found: dict[tuple[str, ...], object] = {}
    for schedule, outcome in search(programs, reduce):
        assert schedule not in found, f"{''.join(schedule)} is stood for by two runs"
        found[schedule] = outcome
    return found
