"""The reduced search (DPOR, the explorer's default) answers exactly as every schedule does.

Generated races (tests/fuzz_explorer.py): 200 on the embedded backend, 20 on a real Redis
(``RACELAB_FUZZ_RACES`` sets the first), with a fixed seed, so CI runs the same races each time.
A disagreement fails with the shrunk race printed as runnable Python; make it a named test in
tests/test_explorer_regressions.py. ``make fuzz-explorer`` runs 2,000 with a seed of your choice.
Without Redis: a class stands for exactly the orders that swapping neighbouring commuting steps
reaches (helpers.instruments.classes against its definition, on generated footprints).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import fuzz_explorer
from fuzz_explorer import (
    CALLS,
    Call,
    Program,
    Step,
    async_disagreements,
    capabilities,
    check_async,
    disagreements,
    fuzz,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Lab
from helpers.instruments.classes import each_order, orders_in_class
from helpers.instruments.explore import normal_form
from helpers.instruments.footprint import Footprint

SEED = 20261206
RACES = {"embedded": int(os.environ.get("RACELAB_FUZZ_RACES", "200")), "real": 20}
ASYNC_RACES = {"embedded": 30, "real": 10}


def test_reduced_search_equals_every_schedule_on_generated_races(lab: Lab) -> None:
    wanted = RACES[lab.kind]
    checked = fuzz(lab, wanted, SEED, cap=150 if lab.kind == "embedded" else 100)
    assert len(checked) >= wanted
    if lab.kind == "embedded":  # the races drawn use every part the generator has
        assert _parts(checked) >= _all_parts(lab), sorted(_all_parts(lab) - _parts(checked))


def test_async_twins_explore_as_the_sync_races_on_every_schedule(lab: Lab) -> None:
    """Each generated race again with async def actors of a redis.asyncio client: its reduced
    search gives the sync race's every-schedule answer (schedules, verdicts, results)."""
    wanted = ASYNC_RACES[lab.kind]
    checked = fuzz(lab, wanted, SEED + 1, cap=100, checker=check_async, threads=False)
    assert len(checked) >= wanted
    if lab.kind == "embedded":  # pipelines, WATCH transactions and scripts of the asyncio client
        assert {"multi", "watch", "cas_del", "crash"} <= _parts(checked)


def test_an_async_twin_that_answers_otherwise_is_a_disagreement(lab: Lab, monkeypatch) -> None:
    program = Program(
        keys=1,
        actors=((Step("call", (Call("set", 0, v="1"),)),), (Step("call", (Call("get", 0),)),)),
        invariant=("not_value", 0, "2"),
    )
    assert async_disagreements(lab, program) == []
    assert "async def A(client):" in program.async_source
    render = fuzz_explorer.render  # the async twin writes "2" where the sync one writes "1"
    monkeypatch.setattr(
        fuzz_explorer,
        "render",
        lambda p, aio=False: render(p, aio).replace("'1'", "'2'") if aio else render(p),
    )
    found = async_disagreements(lab, program)
    assert found and found[0].startswith("async: 2 of 2 schedules break")


def _all_parts(lab: Lab) -> set[str]:
    usable = {n for n, (_, cap) in CALLS.items() if not cap or cap in capabilities(lab)}
    parts = {"if", "stop", "multi", "watch", "pool", "crash", "pause", "clock", "3 actors"}
    parts |= {"sleep", "now", "time passes"}
    return usable | parts


def _parts(programs: list[Program]) -> set[str]:
    found: set[str] = set()
    for p in programs:
        steps: list[Step] = [s for actor in p.actors for s in actor]
        found |= {c.name for s in steps for c in s.calls} | {s.kind for s in steps}
        found |= set(p.faults) | ({"clock"} if p.clock else set())
        found |= {"time passes"} if p.passes else set()
        found |= {"3 actors"} if len(p.actors) == 3 else set()
    return found


# ------------------------------------------------------------------ the comparison can fail


@dataclass
class _Outcome:
    schedule: str
    ok: bool
    result_text: str


@dataclass
class _Found:
    outcomes: list[_Outcome]

    @property
    def schedules(self) -> list[_Outcome]:
        return self.outcomes

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def bad(self) -> list[str]:
        return [o.schedule for o in self.outcomes if not o.ok]

    @property
    def bad_count(self) -> int:
        return len(self.bad)

    def summary(self) -> str:
        return f"{self.bad_count} of {self.total} schedules break the invariant"


class _Answers:
    """A stand-in race whose two searches answer what the test says."""

    def __init__(self, reduced: list[_Outcome], every: list[_Outcome]) -> None:
        self.answers = {True: _Found(reduced), False: _Found(every)}

    def explore(self, **options: Any) -> _Found:
        return self.answers[options.get("reduce", True)]


def test_a_schedule_the_reduced_search_misses_is_a_disagreement() -> None:
    every = [_Outcome("AB", True, "A=1  B=2"), _Outcome("BA", False, "A=2  B=1")]
    assert disagreements(_Answers(every, every), {}) == []  # type: ignore[arg-type]
    found = disagreements(_Answers(every[:1], every), {})  # type: ignore[arg-type]
    assert found[:2] == [
        "reduced:    0 of 1 schedules break the invariant",
        "exhaustive: 1 of 2 schedules break the invariant",
    ]
    assert "  BA: BROKEN  A=2  B=1" in found


def test_a_schedule_judged_differently_is_a_disagreement() -> None:
    every = [_Outcome("AB", True, "A=1  B=2")]
    reduced = [_Outcome("AB", True, "A=1  B=3")]
    found = disagreements(_Answers(reduced, every), {})  # type: ignore[arg-type]
    assert "  AB: ok  A=1  B=3 | ok  A=1  B=2" in found


# ------------------------------------------------------------------ counting back, without Redis


def _swaps(names: tuple[str, ...], steps: tuple[Footprint, ...]) -> set[tuple[int, ...]]:
    """Return every order reached by swapping neighbouring commuting steps (the definition)."""
    start = tuple(range(len(names)))
    seen, todo = {start}, [start]
    while todo:
        order = todo.pop()
        for p in range(len(order) - 1):
            i, j = order[p], order[p + 1]
            if names[i] != names[j] and not steps[i].conflicts(steps[j]):
                swapped = (*order[:p], j, i, *order[p + 2 :])
                if swapped not in seen:
                    seen.add(swapped)
                    todo.append(swapped)
    return seen


_FOOTPRINTS = st.builds(
    Footprint,
    st.frozensets(st.sampled_from([b"x", b"y"])),
    st.frozensets(st.sampled_from([b"x", b"y"])),
    st.sampled_from([False] * 7 + [True]),  # now and then a step whose keys are unknown
)


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from("ABC"), _FOOTPRINTS), min_size=1, max_size=7))
def test_a_class_stands_for_exactly_the_orders_neighbour_swaps_reach(
    drawn: list[tuple[str, Footprint]],
) -> None:
    names, steps = tuple(n for n, _ in drawn), tuple(s for _, s in drawn)
    reached = _swaps(names, steps)
    listed = [tuple(o) for o in each_order(names, steps, str, lambda n: ("ABC".index(n), n))]
    assert orders_in_class(names, steps, str) == len(reached)
    assert sorted(listed) == sorted(reached) and len(set(listed)) == len(listed)
    assert listed == sorted(listed, key=lambda o: ["ABC".index(names[i]) for i in o])
    first = min(reached, key=lambda o: [names[i] for i in o])
    assert normal_form(names, steps, "ABC") == "".join(names[i] for i in first)
