"""``Race``: one race's parts given once, then asked questions (run, explore, step, load).

A race is its actors (ordinary functions of a redis-py client, plus clock actors), the setup that
puts the keys in their starting state, the keys it watches (and deletes before every run) and
the invariant that must hold. Name it once::

    race = Race(lab, actors={"A": naive, "B": naive}, setup=one_slot_left, watch=[demo],
                invariant=at_most_one_admitted)
    race.run("ABAB")          # a Trace: this order, step by step
    race.explore()            # an Exploration: every order, which break the invariant
    race.stepper()            # a Stepper: the learner picks the order, one round trip at a time
    race.load(clients=8)      # a RunResult: the same function under real threads (lockstep)
    race.with_actors({"A": lua, "B": lua})   # the same race with a fix swapped in

Each method is a thin call of an instrument: ``run_schedule``, ``explore``, ``Stepper`` and
``run_clients``, with the parts checked here once. Clock actors come from ``Race.clock(fn,
label, key)`` (time passing: one step however many commands it sends),
``Race.lease_expires(key)`` (a TTL runs out now) and ``Race.time_passes(seconds, keys)`` (the
actors' clock moves on, and the keys' TTLs with it). The invariant is an ``Invariant`` or a
plain function whose docstring says what must hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from helpers.errors import RaceLabError
from helpers.instruments import explore as explore_module
from helpers.instruments.invariant import Check, Invariant
from helpers.instruments.load import RunResult, run_clients
from helpers.instruments.schedule import (
    Actor,
    Clock,
    Trace,
    lease_expires,
    run_schedule,
    time_passes,
)
from helpers.instruments.spec import RaceDefinitionError, RaceSpec
from helpers.instruments.stepper import Stepper

if TYPE_CHECKING:
    from helpers.backend.lab import Lab


@dataclass
class Exploration(explore_module.Exploration):
    """Every schedule of a race, with the invariant's sentence in its summary."""

    says: str = ""

    def summary(self) -> str:
        """Return 'N of M schedules break the invariant (its sentence)'."""
        base = super().summary()
        return f"{base} ({self.says})" if self.says else base


def _strategy_name(fn: Callable[..., Any]) -> str:
    """Return the name of the function behind fn (through functools.partial)."""
    while hasattr(fn, "func"):
        fn = fn.func
    return getattr(fn, "__name__", repr(fn))


class Race:
    """One race: actors, setup, keys and invariant, given once; run, explored, stepped, loaded."""

    clock = Clock  # Race.clock(fn, label, key): an actor that is time passing, one step
    lease_expires = staticmethod(lease_expires)  # Race.lease_expires(key): a TTL runs out now
    time_passes = staticmethod(time_passes)  # Race.time_passes(seconds, keys): the clock moves

    def __init__(
        self,
        lab: Lab,
        actors: Mapping[str, Actor],
        setup: Callable[[Any], Any] | None = None,
        watch: Sequence[str] = (),
        reset: Sequence[str] | None = None,
        invariant: Invariant | Check | None = None,
        fixes: Mapping[str, Mapping[str, Actor]] | None = None,
    ) -> None:
        try:
            said = None if invariant is None else Invariant.of(invariant)
        except RaceDefinitionError:
            raise
        except RaceLabError as exc:  # a learner's invariant must say what must hold
            raise RaceDefinitionError(str(exc)) from None
        self.spec = RaceSpec(
            lab,
            actors,  # type: ignore[arg-type]  # checked and made a dict by RaceSpec
            setup,
            watch,  # type: ignore[arg-type]
            reset,  # type: ignore[arg-type]
            said,
            {label: dict(swap) for label, swap in (fixes or {}).items()},
        )
        if reset is not None:  # a learner's race shows only its own keys
            RaceSpec(lab, actors, watch=tuple(watch))  # type: ignore[arg-type]
        if reset is None and not watch and setup is not None:
            raise RaceDefinitionError(
                "a race with a setup must name its keys (watch= or reset=): they are deleted "
                "before every run, so no run sees the previous one's data"
            )

    # --- the parts, checked once (RaceSpec) -----------------------------------------------------

    @property
    def lab(self) -> Lab:
        """Return the lab the race runs in."""
        lab: Lab = self.spec.lab
        return lab

    @property
    def actors(self) -> dict[str, Actor]:
        """Return the actors by name."""
        return self.spec.actors

    @property
    def setup(self) -> Callable[[Any], Any] | None:
        """Return the function that puts the keys in their starting state, if any."""
        return self.spec.setup

    @property
    def watch(self) -> list[str]:
        """Return the keys the race shows (and deletes before each run unless reset is given)."""
        return list(self.spec.watch)

    @property
    def reset(self) -> list[str] | None:
        """Return the keys deleted before each run, when they are not the watched ones."""
        return None if self.spec.reset is None else list(self.spec.reset)

    @property
    def invariant(self) -> Invariant | None:
        """Return what must hold after a run."""
        return self.spec.invariant  # type: ignore[return-value]  # an Invariant, by __init__

    @property
    def fixes(self) -> dict[str, dict[str, Actor]]:
        """Return the fixes by label: which actors each one swaps in."""
        return self.spec.fixes

    @property
    def strategy(self) -> Callable[..., Any]:
        """Return the one function every client actor runs (what load() puts under threads)."""
        clients = [fn for fn in self.actors.values() if not isinstance(fn, Clock)]
        names = {_strategy_name(fn) for fn in clients}
        if not clients or len({id(fn) for fn in clients}) != 1:
            raise RaceDefinitionError(
                f"load() runs one function on every client, but this race's actors run "
                f"{', '.join(sorted(names)) or 'none'}: pass actor='A' to choose one"
            )
        return clients[0]

    # --- the questions --------------------------------------------------------------------------

    def run(self, schedule: str | Sequence[str], finish: bool = False) -> Trace:
        """Return the Trace of the actors' round trips in exactly this order ('ABAB')."""
        return run_schedule(
            self.lab, self.actors, schedule, self.setup, self.watch, self.reset, finish
        )

    def explore(self, **options: Any) -> Exploration:
        """Return every order of the actors' round trips and which ones break the invariant."""
        invariant = self._needs_invariant("explore")
        found = explore_module.explore_spec(self.spec, explore_module.options_of(options))
        parts = {f.name: getattr(found, f.name) for f in fields(found)}
        return Exploration(**parts, says=invariant.says)

    def stepper(self) -> Stepper:
        """Return a Stepper on this race (with its fixes as a strategy menu)."""
        return Stepper(
            self.lab,
            self.actors,
            self.setup,
            self.watch,
            self.reset,
            self.invariant,
            final_only=self.invariant.final if self.invariant is not None else False,
            fixes=self.fixes,
        )

    def load(
        self,
        clients: int = 8,
        iterations: int = 100,
        mode: str = "lockstep",
        actor: str | None = None,
        fresh: bool = True,
        **options: Any,
    ) -> RunResult:
        """Return the RunResult of the race's function on real threads (keys reset and set up first).

        options go to run_clients (think_s, inputs, timeout); with fresh=False the keys are left
        as the previous run left them.
        """
        if actor is not None and actor not in self.actors:
            raise RaceDefinitionError(f"no actor {actor!r} in this race ({', '.join(self.actors)})")
        fn = self.actors[actor] if actor is not None else self.strategy
        if fresh:
            self.prepare()
        return run_clients(self.lab, fn, clients, iterations, mode, **options)

    def prepare(self) -> None:
        """Delete the race's keys and run its setup, as before every run."""
        keys = self.reset if self.reset is not None else self.watch
        client = self.lab.client()
        try:
            if keys:
                client.delete(*keys)
            if self.setup is not None:
                self.setup(client)
        finally:
            self.lab.release(client)

    def with_actors(self, actors: Mapping[str, Actor]) -> Race:
        """Return the same race (setup, keys, invariant, fixes) with these actors swapped in."""
        return Race(
            self.lab,
            {**self.actors, **actors},
            self.setup,
            self.watch,
            self.reset,
            self.invariant,
            self.fixes,
        )

    def _needs_invariant(self, what: str) -> Invariant:
        if self.invariant is None:
            raise RaceDefinitionError(
                f"{what}() needs the race's invariant: Race(..., invariant=...)"
            )
        return self.invariant

    def __repr__(self) -> str:
        said = f"; invariant: {self.invariant.says}" if self.invariant else ""
        return f"Race({', '.join(self.actors)} on {', '.join(self.lab.ns.short(k) for k in self.watch)}{said})"
