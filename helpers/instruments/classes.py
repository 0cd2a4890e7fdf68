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
    actors = [actor_of(n) for n in names]
    return [
        sum(1 << j for j in range(i) if actors[j] == actors[i] or steps[j].conflicts(steps[i]))
        for i in range(len(names))
    ]


def orders_in_class(
    names: Sequence[str], steps: Sequence[Footprint], actor_of: Callable[[str], str]
) -> int:
    """Return how many schedules are equivalent to this one (itself included): at least 1."""
    return orders_of(must_precede(names, steps, actor_of))


def orders_of(before: Sequence[int]) -> int:
    """Return how many orders of steps keep ``must_precede``'s pairs (before[i]: step i's)."""
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
