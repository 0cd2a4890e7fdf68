"""The schedules one class stands for: every order of its steps that keeps each conflict.

Two schedules are equivalent when one becomes the other by swapping neighbouring steps of
different actors that commute (``Footprint.conflicts`` is False). So a class is fixed by one of
its schedules and the conflicts between its steps: step j must come before step i when j comes
first and they belong to the same actor (program order) or conflict. The class's schedules are
the orders of the steps that respect those "must come before" pairs (the linear extensions of
the partial order, one Mazurkiewicz trace). ``orders_in_class`` counts them and ``each_order``
lists them, in the order an exhaustive search would run them; ``explore(..., reduce=True)`` runs
one schedule per class and uses both to report the schedules the classes stand for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from helpers.instruments.footprint import Footprint


def must_precede(
    names: Sequence[str], steps: Sequence[Footprint], actor_of: Callable[[str], str]
) -> list[int]:
    """Return, for each step i, a bitmask of the earlier steps j that must stay before it."""
    if len(names) != len(steps):
        raise ValueError(f"{len(names)} step names but {len(steps)} footprints")
    # A schedule has few distinct footprints (GET k, SET k): each is compared with each once,
    # and each step adds its bit to the masks of the footprints it conflicts with.
    kinds: dict[Footprint, int] = {}
    for step in steps:
        kinds.setdefault(step, len(kinds))
    distinct = list(kinds)
    clash = [[k for k, other in enumerate(distinct) if f.conflicts(other)] for f in distinct]
    by_kind = [0] * len(distinct)  # steps so far that conflict with a step of each footprint
    by_actor: dict[str, int] = {}  # steps so far of each actor
    before = []
    for i, (name, step) in enumerate(zip(names, steps)):
        actor, kind = actor_of(name), kinds[step]
        before.append(by_actor.get(actor, 0) | by_kind[kind])
        by_actor[actor] = by_actor.get(actor, 0) | 1 << i
        for k in clash[kind]:
            by_kind[k] |= 1 << i
    return before


def orders_in_class(
    names: Sequence[str], steps: Sequence[Footprint], actor_of: Callable[[str], str]
) -> int:
    """Return how many schedules are equivalent to this one (itself included): at least 1."""
    return orders_of(must_precede(names, steps, actor_of), [actor_of(n) for n in names])


def orders_of(before: Sequence[int], actors: Sequence[str] | None = None) -> int:
    """Return how many orders of steps keep ``must_precede``'s pairs (before[i]: step i's).

    actors, if given (each step's actor, whose steps keep their order), makes it faster: only
    each actor's next step can be the next one run.
    """
    if actors is None:
        return _orders_of_any(before)
    lines: dict[str, list[int]] = {}
    for i, actor in enumerate(actors):
        lines.setdefault(actor, []).append(i)
    chains = [(line, len(line)) for line in lines.values()]
    # A set of steps already run (bitmask): how far each actor is in it, and the orders to it.
    ways: dict[int, tuple[tuple[int, ...], int]] = {0: ((0,) * len(chains), 1)}
    for _ in range(len(before)):
        nxt: dict[int, tuple[tuple[int, ...], int]] = {}
        for done, (at, count) in ways.items():
            for a, (line, length) in enumerate(chains):
                if at[a] < length:
                    i = line[at[a]]
                    if before[i] & done == before[i]:
                        reached = done | 1 << i
                        if reached in nxt:
                            nxt[reached] = (nxt[reached][0], nxt[reached][1] + count)
                        else:
                            nxt[reached] = (at[:a] + (at[a] + 1,) + at[a + 1 :], count)
        ways = nxt
    return sum(count for _, count in ways.values())


def _orders_of_any(before: Sequence[int]) -> int:
    """orders_of without the actors: every step not yet run is tried after each set of steps."""
    ways = {0: 1}  # a set of steps already run (bitmask): orders that reach it
    for _ in range(len(before)):
        nxt: dict[int, int] = {}
        for done, count in ways.items():
            for i, needs in enumerate(before):
                if not done >> i & 1 and needs & done == needs:
                    nxt[done | 1 << i] = nxt.get(done | 1 << i, 0) + count
        ways = nxt
    return sum(ways.values())


def each_order(
    names: Sequence[str],
    steps: Sequence[Footprint],
    actor_of: Callable[[str], str],
    rank: Callable[[str], tuple[int, str]],
) -> Iterator[list[int]]:
    """Yield every schedule equivalent to this one as step indices, smallest first by rank."""
    before = must_precede(names, steps, actor_of)
    full = (1 << len(names)) - 1

    def extend(done: int, picked: list[int]) -> Iterator[list[int]]:
        if done == full:
            yield list(picked)
            return
        ready = [
            i for i in range(len(names)) if not done >> i & 1 and before[i] & done == before[i]
        ]
        for i in sorted(ready, key=lambda i: rank(names[i])):
            picked.append(i)
            yield from extend(done | 1 << i, picked)
            picked.pop()

    yield from extend(0, [])
