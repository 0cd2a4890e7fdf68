"""A race's parts as one value (``RaceSpec``) and the explorer's options as another (``ExploreOptions``).

Every instrument asks the same questions of a race: which actors, what setup, which keys to
delete before a run, what must hold. ``RaceSpec`` holds those parts, checked once, here, with
one exception type (``RaceDefinitionError``), so that ``Race``, ``explore`` and the forced
schedules cannot disagree about what a valid race is. ``ExploreOptions`` holds how to search
(reduction, preemption bound, faults, limits, time budget), checked once too; ``explore`` and
``Race.explore`` take its fields as keywords.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from helpers.errors import RaceLabError
from helpers.instruments import faults as fault_steps

Actor = Callable[[Any], Any]
# max_schedules's default, by what a replay costs (measured on a 2-core machine): a search that
# walks states met before (embedded, prefixes shared) runs about 1,600 replays a second of 2
# actors x 10 round trips; one whose every replay runs live, about 200 on a loopback server.
MAX_SCHEDULES_SHARED = 50_000
MAX_SCHEDULES_LIVE = 20_000
DEFAULT_MAX_STEPS = 10_000  # per replay: an actor that never finishes must not hang the explorer


class RaceDefinitionError(RaceLabError, ValueError, TypeError):
    """A race was given parts it cannot run: no actors, a foreign key, a non-function, ..."""


def _actors(actors: Mapping[str, Actor], what: str = "actors") -> dict[str, Actor]:
    """Return actors as a dict, refusing what a schedule cannot name or run."""
    if not isinstance(actors, Mapping) or not actors:
        raise RaceDefinitionError(
            f'{what} must map a name to a function of a client, e.g. {{"A": fn, "B": fn}}'
        )
    for name, fn in actors.items():
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise RaceDefinitionError(
                f"actor name {name!r} must be a non-empty string without spaces"
            )
        if not callable(fn):
            raise RaceDefinitionError(f"actor {name!r} is not a function of a client: {fn!r}")
    return dict(actors)


def _keys(lab: Any, keys: Sequence[str], what: str, owned: bool = True) -> tuple[str, ...]:
    """Return keys as a tuple; with owned, refuse any outside the lab's prefix (deleted keys)."""
    if isinstance(keys, (str, bytes)):
        raise RaceDefinitionError(f"{what} must be a list of keys, got the string {keys!r}")
    found = tuple(keys)
    foreign = [k for k in found if owned and (not isinstance(k, str) or not lab.ns.owns(k))]
    if foreign:
        raise RaceDefinitionError(
            f"{what} key {foreign[0]!r} is not under this lab's prefix {lab.ns.prefix!r} "
            f"(keys are deleted before each run: use lab.key)"
        )
    return found


@dataclass(frozen=True)
class RaceSpec:
    """One race's parts: lab, actors, setup, the keys it watches and resets, invariant, fixes."""

    lab: Any
    actors: dict[str, Actor]
    setup: Callable[[Any], Any] | None = None
    watch: tuple[str, ...] = ()
    reset: tuple[str, ...] | None = None
    invariant: Callable[[Any, dict[str, Any]], bool] | None = None
    fixes: dict[str, dict[str, Actor]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lab = self.lab
        if not hasattr(lab, "ns") or not hasattr(lab, "client"):
            raise RaceDefinitionError(f"a race needs a Lab (from connect()), got {lab!r}")
        set_ = object.__setattr__  # normalise once, in the frozen value
        set_(self, "actors", _actors(self.actors))
        if self.setup is not None and not callable(self.setup):
            raise RaceDefinitionError(f"setup must be a function of a client, got {self.setup!r}")
        # Only the keys deleted before each run must be the lab's: reset if given, else watch.
        set_(self, "watch", _keys(lab, self.watch, "watch", owned=self.reset is None))
        if self.reset is not None:
            set_(self, "reset", _keys(lab, self.reset, "reset"))
        if self.invariant is not None and not callable(self.invariant):
            raise RaceDefinitionError(
                f"invariant must be a function (client, results) -> bool, got {self.invariant!r}"
            )
        fixes = {label: _actors(swap, f"fix {label!r}") for label, swap in self.fixes.items()}
        for label, swap in fixes.items():
            if set(swap) - set(self.actors):
                raise RaceDefinitionError(
                    f"fix {label!r} must replace some of the actors {', '.join(self.actors)}, "
                    f"got {', '.join(swap)}"
                )
        set_(self, "fixes", fixes)

    @property
    def keys(self) -> tuple[str, ...]:
        """Return the keys deleted before every run: reset if given, else watch."""
        return self.reset if self.reset is not None else self.watch

    def with_actors(self, actors: Mapping[str, Actor]) -> RaceSpec:
        """Return the same race with these actors swapped in (checked again)."""
        return replace(self, actors={**self.actors, **actors})


@dataclass(frozen=True)
class ExploreOptions:
    """How to search a race's schedules: reduction, bound, faults, limits and time budget.

    reduce (None: on unless preemptions is given) runs one schedule per class of equivalent
    schedules; preemptions=N keeps to CHESS's bound instead; faults and max_faults add fault
    steps (``helpers.instruments.faults``); budget_s stops a search with a partial answer;
    classes=True records footprints in an exhaustive search too; keep_traces=False keeps no
    way to replay a schedule for its trace; share_prefixes=False runs every replay live (see
    ``helpers.instruments.sharing``), and an exhaustive search then merges no states.
    max_schedules=None, the default, is MAX_SCHEDULES_SHARED replays where the search shares
    prefixes and MAX_SCHEDULES_LIVE where every replay runs live (``limit``; also from the
    point where a search stops sharing), a wait of about half a minute to two minutes.
    """

    reduce: bool | None = None
    preemptions: int | None = None
    faults: tuple[str, ...] = ()
    max_faults: int | None = None
    max_schedules: int | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    budget_s: float | None = None
    keep_traces: bool = True
    classes: bool = False
    workers: int = 1
    share_prefixes: bool = True

    def __post_init__(self) -> None:
        if self.preemptions is not None and (
            isinstance(self.preemptions, bool)
            or not isinstance(self.preemptions, int)
            or self.preemptions < 0
        ):
            raise ValueError(f"preemptions must be a number >= 0 or None, got {self.preemptions!r}")
        if self.reduce and self.preemptions is not None:
            raise ValueError(
                "reduce=True and preemptions=N do not combine soundly: use one of them"
            )
        if self.reduce is None:  # the default: one run per class, unless a bound is asked for
            object.__setattr__(self, "reduce", self.preemptions is None)
        kinds, bound = fault_steps.checked_kinds(self.faults, self.max_faults)
        object.__setattr__(self, "faults", kinds)
        object.__setattr__(self, "max_faults", bound)
        for name in ("max_schedules", "max_steps", "workers"):
            value = getattr(self, name)
            if name == "max_schedules" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a number >= 1, got {value!r}")
        budget = self.budget_s
        if budget is not None and (
            isinstance(budget, bool)
            or not isinstance(budget, (int, float))
            or not math.isfinite(budget)
            or budget <= 0
        ):
            raise ValueError(f"budget_s must be a number of seconds > 0 or None, got {budget!r}")

    def limit(self, live: bool) -> int:
        """Return max_schedules, or its default for a search whose replays run live (or not)."""
        if self.max_schedules is not None:
            return self.max_schedules
        return MAX_SCHEDULES_LIVE if live else MAX_SCHEDULES_SHARED

    @classmethod
    def of(cls, crashes: int = 0, **options: Any) -> ExploreOptions:
        """Return the options from keywords; crashes=N is faults=('crash',), max_faults=N."""
        if crashes:
            if options.get("faults"):
                raise ValueError("crashes=N is faults=('crash',), max_faults=N: pass one of them")
            options |= {"faults": ("crash",), "max_faults": crashes}
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise TypeError(
                f"unknown explore option {unknown[0]!r}: choose from crashes, "
                f"{', '.join(cls.__dataclass_fields__)}"
            )
        return cls(**options)
