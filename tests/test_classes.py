"""helpers/instruments/classes.py: the orders one class of equivalent schedules stands for."""

from __future__ import annotations

from itertools import permutations
from math import comb
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.instruments.classes import each_order, must_precede, orders_in_class, orders_of
from helpers.instruments.explore import normal_form, schedule_text
from helpers.instruments.faults import actor_of
from helpers.instruments.footprint import NOTHING, Footprint

READ_K = Footprint(frozenset({b"k"}))
WRITE_K = Footprint(frozenset({b"k"}), frozenset({b"k"}))


def _rank(name: str) -> tuple[int, str]:
    return ("ABC".index(name[0]), name)


def test_program_order_and_conflicts_must_stay() -> None:
    names, steps = ["A", "B", "A"], [READ_K, WRITE_K, NOTHING]
    # A's 2nd step follows A's 1st (program order); B's write follows A's read (a conflict).
    assert must_precede(names, steps, actor_of) == [0, 0b001, 0b001]


def test_two_reads_commute_and_a_write_does_not() -> None:
    assert orders_in_class(["A", "B"], [READ_K, READ_K], actor_of) == 2
    assert orders_in_class(["A", "B"], [READ_K, WRITE_K], actor_of) == 1
    # GET, SET per actor on one key: only the two GETs at the start may swap.
    names, steps = list("ABAB"), [READ_K, READ_K, WRITE_K, WRITE_K]
    assert orders_in_class(names, steps, actor_of) == 2
    orders = [
        "".join(names[i] for i in picked) for picked in each_order(names, steps, actor_of, _rank)
    ]
    assert orders == ["ABAB", "BAAB"]  # smallest first, as an exhaustive search runs them


def test_actors_that_never_conflict_make_one_class_of_every_interleaving() -> None:
    names = list("AB" * 8)
    steps = [Footprint(frozenset({n.encode()}), frozenset({n.encode()})) for n in names]
    assert orders_in_class(names, steps, actor_of) == comb(16, 8) == 12_870
    three = list("ABC" * 2)
    every = list(each_order(three, [NOTHING] * 6, actor_of, _rank))
    assert len(every) == len({tuple(o) for o in every}) == 90  # 6! / (2! 2! 2!)


def test_a_fault_step_stays_in_its_actor_s_program_order() -> None:
    # A's crash touches nothing, yet it cannot move before A's own step.
    names, steps = ["A", "A!", "B"], [WRITE_K, NOTHING, READ_K]
    orders = [[names[i] for i in p] for p in each_order(names, steps, actor_of, _rank)]
    assert orders == [["A", "A!", "B"], ["A", "B", "A!"]]


KINDS = [READ_K, WRITE_K, NOTHING, Footprint(everything=True), Footprint(frozenset({b"j"}))]


@st.composite
def schedules(draw: Any) -> tuple[list[str], list[Footprint]]:
    """A schedule of up to 7 steps of 3 actors (with a fault step), on a few footprints."""
    names = draw(st.lists(st.sampled_from(["A", "B", "C", "A!"]), min_size=1, max_size=7))
    steps = [draw(st.sampled_from(KINDS)) for _ in names]
    return names, steps


def _key(name: str) -> tuple[int, str]:
    return ("CAB".index(actor_of(name)), name)  # an actor order that is not the names' order


@settings(max_examples=400, deadline=None)
@given(schedules())
def test_the_counts_and_the_first_order_are_those_of_every_permutation(
    schedule: tuple[list[str], list[Footprint]],
) -> None:
    """must_precede, orders_of (with and without the actors) and normal_form, against brute force."""
    names, steps = schedule
    before = must_precede(names, steps, actor_of)
    assert before == [  # the definition, pair by pair
        sum(
            1 << j
            for j in range(i)
            if actor_of(names[j]) == actor_of(names[i]) or steps[j].conflicts(steps[i])
        )
        for i in range(len(names))
    ]
    kept = [
        order
        for order in permutations(range(len(names)))
        if all(before[i] & ~sum(1 << j for j in order[:at]) == 0 for at, i in enumerate(order))
    ]
    actors = [actor_of(n) for n in names]
    assert orders_of(before, actors) == orders_of(before) == len(kept)
    first = min(kept, key=lambda order: [_key(names[i]) for i in order])
    assert normal_form(names, steps, ["C", "A", "B"], before) == schedule_text(
        [names[i] for i in first]
    )
