"""explore(..., workers=N): the search split across forked processes gives the one-process answer.

An exhaustive or bounded search runs the same schedules in the same order; a reduced one the same
classes, counts, verdicts and results (a class may be run as another of its orders). Checked on
a few named races and on races tests/fuzz_explorer.py generates (crashes, pauses, clocks,
scripts, transactions, blocking calls). Speed is measured by benchmarks/explorer.py, not here.
"""

from __future__ import annotations

import threading
import uuid
from functools import partial
from types import SimpleNamespace
from typing import Any

import pytest
from fuzz_explorer import Program, races
from hypothesis import HealthCheck, given, settings
from programs import naive_limiter, random_token_locker

from helpers import Lab, connect
from helpers.instruments import actors as actor_side
from helpers.instruments.explore import (
    Exploration,
    NoVerdict,
    _groups,
    counter_at_most,
    explore,
)
from helpers.instruments.schedule import ScheduleError
from helpers.instruments.spec import ExploreOptions
from helpers.instruments.workers import WorkersUnavailable, refuse_unless_possible


@pytest.fixture
def embedded() -> Any:
    with connect(f"workers_{uuid.uuid4().hex[:8]}", backend="embedded") as lab:
        yield lab


def answer(found: Exploration) -> dict[str, Any]:
    """Return everything an Exploration answers, as a value to compare."""
    schedules = {o.schedule: (o.ok, o.result_text) for o in found.schedules}
    shown = {
        "summary": found.summary(),
        "counts": (found.total, found.bad_count, found.spin_cut, found.complete),
        "bad": found.bad,
        "good": found.good,
        "schedules": schedules,
        "returned": found.returned(),
    }
    if found.reduced:
        shown |= {"runs": found.runs, "classes": found.classes, "bad": found.bad_classes}
    else:  # every schedule run, in the order one process runs them
        shown["order"] = [o.schedule for o in found.outcomes]
    return shown


def both(run: Any) -> tuple[Any, Any]:
    """Return (answer with workers=1, answer with workers=2), or the refusals' types."""
    found = []
    for workers in (1, 2):
        try:
            found.append(answer(run(workers)))
        except NoVerdict as exc:
            found.append(answer(exc.exploration))
        except Exception as exc:  # noqa: BLE001 - both must refuse alike
            found.append(type(exc).__name__)
    return found[0], found[1]


@pytest.mark.parametrize(
    "options",
    [{"reduce": False}, {"reduce": True}, {"preemptions": 1}, {"crashes": 1}],
    ids=["exhaustive", "reduced", "bounded", "crashes"],
)
def test_two_workers_answer_as_one_on_a_limiter(embedded: Lab, options: dict[str, Any]) -> None:
    key = embedded.key("hits")
    actors = {n: lambda c: naive_limiter(c, key, limit=2) for n in "ABC"}
    one, two = both(
        lambda workers: explore(
            embedded, actors, counter_at_most(key, 2), watch=[key], workers=workers, **options
        )
    )
    assert one == two
    assert one["counts"][1] > 0  # the limiter overshoots in some schedules


def test_a_script_an_actor_loads_mid_search_restarts_the_split_search(embedded: Lab) -> None:
    key = embedded.key("n")

    def race(workers: int) -> Exploration:
        body = f"return redis.call('INCR', KEYS[1]) -- {uuid.uuid4().hex}"  # new to the server

        def incr(client: Any) -> int:  # the script comes after the steps the split replays
            for _ in range(3):
                client.incr(key)
            return int(client.register_script(body)(keys=[key]))

        actors = {"A": lambda c: [int(c.incr(key)) for _ in range(3)][-1], "B": incr}
        return explore(embedded, actors, counter_at_most(key, 7), watch=[key], workers=workers)

    one, two = both(race)
    assert one == two and one["counts"][:2] == (35, 0)


@settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(races(frozenset({"lua", "set_ifeq", "delex"}), 120))
def test_two_workers_answer_as_one_on_generated_races(program: Program) -> None:
    with connect(f"workers_{uuid.uuid4().hex[:8]}", backend="embedded") as lab:
        race = program.race(lab)
        for reduce in (True, False):
            one, two = both(
                lambda workers: race.explore(reduce=reduce, workers=workers, **program.options)
            )
            assert one == two, program.source


def test_workers_are_refused_where_each_cannot_have_a_server_of_its_own() -> None:
    with pytest.raises(WorkersUnavailable, match="embedded backend"):
        refuse_unless_possible(SimpleNamespace(kind="real"), 2)
    refuse_unless_possible(SimpleNamespace(kind="real"), 1)  # one process: any backend


@pytest.mark.parametrize("workers", [0, -1, True, 1.5])
def test_workers_must_be_a_count(workers: Any) -> None:
    with pytest.raises(ValueError, match="workers"):
        ExploreOptions(workers=workers)


def test_an_actor_stuck_in_a_worker_is_stopped_there_with_its_name(
    embedded: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each forked worker runs a watchdog thread of its own (the parent's is not forked).
    monkeypatch.setattr(actor_side, "STEP_TIMEOUT_S", 0.5)
    key, never = embedded.key("n"), threading.Event()

    def waits(client: Any) -> str:  # stuck only after the steps the split replays here
        for _ in range(4):
            client.get(key)
        never.wait(60)  # nobody sets it (the bound only keeps a broken watchdog from hanging)
        return "done"

    actors = {"A": lambda c: [c.incr(key) for _ in range(4)][-1], "B": waits}
    with pytest.raises(ScheduleError, match="actor B did not reach its next round trip"):
        explore(embedded, actors, lambda c, r: True, watch=[key], workers=2)


def test_prefixes_are_grouped_by_the_steps_each_actor_takes_largest_group_first() -> None:
    prefixes = [list(p) for p in ("AA", "AB", "BA", "BB", "AC")]
    assert _groups(prefixes) == [[["A", "B"], ["B", "A"]], [["A", "A"]], [["B", "B"]], [["A", "C"]]]


def test_a_worker_walks_the_subtrees_of_its_group_through_the_states_it_met(
    embedded: Lab,
) -> None:
    # Two readers: every order of their four reads reaches one state, and each complete
    # schedule is a prefix of the split. All six are one group, run by one worker in turn: the
    # first runs live and the other five are walked through that worker's graph.
    key = embedded.key("n")

    def reader(client: Any) -> list[Any]:
        return [client.get(key), client.get(key)]

    found = explore(
        embedded, {"A": reader, "B": reader}, lambda client, results: True, reduce=False, workers=2
    )
    assert found.total == 6 and found.walked == 5


@pytest.mark.parametrize("reduce", [False, True], ids=["exhaustive", "reduced"])
def test_two_workers_answer_as_one_where_actors_send_random_tokens(
    embedded: Lab, reduce: bool
) -> None:
    # Each replay sends other values, so sharing (and the graph) ends in every subtree, and a
    # worker keeps no state from one subtree for the next.
    key = embedded.key("lock")
    locker = partial(random_token_locker, key=key)
    one, two = both(
        lambda workers: explore(
            embedded,
            {"A": locker, "B": locker},
            lambda client, results: True,
            watch=[key],
            workers=workers,
            reduce=reduce,
        )
    )
    assert one == two and one["counts"][0] == 12
