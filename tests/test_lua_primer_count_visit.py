"""lua/primer_count_visit.lua: count a visit under a cap in one step; bad input writes nothing."""

from __future__ import annotations

from functools import partial

import pytest
import redis

from helpers import Lab, run_schedule
from helpers.backend.scripts import lua

HOSTILE_CAPS = [
    "0",
    "-1",
    "+5",
    "05",
    "1.5",
    "1e3",
    "0x10",
    " 5",
    "5\n",
    "",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "1000001",
    "99999999999999999999",
]
BAD_COUNTERS = ["abc", "-1", "1.5", "1e3", "007", "", " 1", "+1", "nan", "inf", "9999999999999999"]


def count_visit(client: redis.Redis, key: str, cap: int) -> list[int]:
    """Return the script's reply for one visit to key under cap."""
    return lua("primer_count_visit")(keys=[key], args=[cap], client=client)


def test_counts_until_the_cap_then_refuses_without_writing(lab: Lab) -> None:
    c, key = lab.client(), lab.key("visits")
    assert [count_visit(c, key, 2) for _ in range(3)] == [[1, 1], [1, 2], [0, 2]]
    assert c.get(key) == "2"


def test_two_clients_in_any_order_count_both_visits(lab: Lab) -> None:
    key = lab.key("visits")
    actor = partial(count_visit, key=key, cap=100)
    for schedule in ("AB", "BA"):
        trace = run_schedule(
            lab, {"A": actor, "B": actor}, schedule, setup=lambda c: c.set(key, 10), watch=[key]
        )
        assert trace.final_state == "visits=12"


@pytest.mark.parametrize("cap", HOSTILE_CAPS)
def test_a_cap_that_is_not_a_decimal_integer_in_range_is_refused(lab: Lab, cap: str) -> None:
    c, key = lab.client(), lab.key("visits")
    with pytest.raises(redis.ResponseError, match="primer_count_visit: invalid-arguments"):
        count_visit(c, key, cap)  # type: ignore[arg-type]
    assert c.exists(key) == 0


@pytest.mark.parametrize("stored", BAD_COUNTERS)
def test_a_counter_that_is_not_a_canonical_integer_is_refused(lab: Lab, stored: str) -> None:
    c, key = lab.client(), lab.key("visits")
    c.set(key, stored)
    with pytest.raises(redis.ResponseError, match="primer_count_visit: invalid-counter"):
        count_visit(c, key, 5)
    assert c.get(key) == stored


def test_wrong_number_of_keys_or_arguments_is_refused(lab: Lab) -> None:
    c = lab.client()
    script = lua("primer_count_visit")
    with pytest.raises(redis.ResponseError, match="invalid-arguments"):
        script(keys=[], args=[5], client=c)
    with pytest.raises(redis.ResponseError, match="invalid-arguments"):
        script(keys=[lab.key("visits")], args=[5, 6], client=c)


def test_a_key_of_another_type_raises_wrongtype(lab: Lab) -> None:
    c, key = lab.client(), lab.key("visits")
    c.hset(key, "a", "1")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        count_visit(c, key, 5)
