"""Sizes and budgets: a reduced search that cannot fit is refused early; budget_s stops one cleanly."""

from __future__ import annotations

import time
import uuid
from functools import partial
from typing import Any

import pytest

from benchmarks.explorer import read_modify_write  # the actor the benchmark times
from helpers import Lab
from helpers.instruments.explore import TooManySchedules, explore


def _three(lab: Lab, steps: int) -> tuple[dict[str, partial[str]], str]:
    key = lab.key("k")
    actor = partial(read_modify_write, key=key, steps=steps)
    return {"A": actor, "B": actor, "C": actor}, key


def test_a_reduced_search_that_cannot_fit_is_refused_after_its_first_replays(lab: Lab) -> None:
    actors, key = _three(lab, 6)  # 3 x 6 on one key: far more than 50,000 classes
    started = time.monotonic()
    with pytest.raises(TooManySchedules, match=r"about [\d,]+ replays \(estimated after [\d,]+,"):
        explore(lab, actors, lambda client, results: True, watch=[key])
    assert time.monotonic() - started < 60  # a few hundred replays, not 20,000


def test_a_budget_stops_the_search_with_a_partial_clearly_marked_result(lab: Lab) -> None:
    actors, key = _three(lab, 6)
    found = explore(lab, actors, lambda client, results: True, watch=[key], budget_s=1.0)
    assert not found.complete and found.budget_s == 1.0
    assert 0 < found.runs < 20_000 and found.total >= found.runs
    assert "PARTIAL: stopped at its budget of 1 s" in found.summary()


def test_a_budget_that_is_not_reached_changes_nothing(lab: Lab) -> None:
    actors, key = _three(lab, 2)
    every = explore(lab, actors, lambda client, results: True, watch=[key])
    budgeted = explore(lab, actors, lambda client, results: True, watch=[key], budget_s=600)
    assert budgeted.complete and budgeted.budget_s is None
    assert budgeted.summary() == every.summary() and budgeted.total == every.total == 90


@pytest.mark.parametrize("budget", [0, -1, True, "5"])
def test_a_budget_must_be_seconds(lab: Lab, budget: object) -> None:
    actors, key = _three(lab, 1)
    with pytest.raises((ValueError, TypeError), match="budget_s"):
        explore(lab, actors, lambda client, results: True, watch=[key], budget_s=budget)  # type: ignore[arg-type]


@pytest.mark.parametrize("share", [True, False])
def test_the_default_limit_is_set_by_what_a_replay_costs(lab: Lab, share: bool) -> None:
    """A search that shares prefixes and walks states met before may run 50,000 replays by
    default; one whose every replay runs live (a real server, or share_prefixes=False), 20,000;
    a limit that is given is kept."""
    actors, key = _three(lab, 6)
    shared = share and lab.kind == "embedded"
    limit = "50,000" if shared else "20,000"
    with pytest.raises(TooManySchedules, match=rf"over max_schedules={limit}: refused"):
        explore(lab, actors, lambda client, results: True, watch=[key], share_prefixes=share)
    with pytest.raises(TooManySchedules, match=r"over max_schedules=30,000: refused"):
        explore(
            lab,
            actors,
            lambda client, results: True,
            watch=[key],
            share_prefixes=share,
            max_schedules=30_000,
        )


def test_a_search_that_stops_sharing_keeps_to_the_live_limit(lab: Lab) -> None:
    """An actor that writes a fresh random value on each replay cannot be answered from the
    record: from then on every replay runs live, and so the limit is the live one."""
    key = lab.key("k")

    def writer(client: Any) -> None:
        for _ in range(6):
            client.get(key)
            client.set(key, uuid.uuid4().hex)

    actors = {"A": writer, "B": writer, "C": writer}
    with pytest.raises(TooManySchedules, match=r"over max_schedules=20,000: refused"):
        explore(lab, actors, lambda client, results: True, watch=[key])
