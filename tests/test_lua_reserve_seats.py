"""lua/reserve_seats.lua: business outcomes as statuses, faults as errors, both-or-nothing writes, idempotent retries."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from helpers import Lab, lua
from helpers.instruments.load import run_clients

STEM = "reserve_seats"


def show_keys(lab: Lab, show: str = "show:1") -> list[str]:
    """Return [seats left, bookings] of one show (sharing a hash tag)."""
    return [lab.ns.tagged(show, "seats_left"), lab.ns.tagged(show, "bookings")]


def test_reserved_decrements_the_seats_and_records_the_booking(lab: Lab) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], 5)
    assert lab.script(STEM, c)(keys=keys, args=["alice", 2]) == ["RESERVED", 3]
    assert c.get(keys[0]) == "3"
    assert c.hgetall(keys[1]) == {"alice": "2"}


def test_sold_out_returns_the_seats_left_and_writes_nothing(lab: Lab) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], 1)
    assert lab.script(STEM, c)(keys=keys, args=["bob", 2]) == ["SOLD_OUT", 1]
    assert c.get(keys[0]) == "1"
    assert c.exists(keys[1]) == 0


def test_a_retry_with_the_same_booking_id_is_already_booked_not_a_second_reservation(
    lab: Lab,
) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], 5)
    reserve = lab.script(STEM, c)
    assert reserve(keys=keys, args=["alice", 2]) == ["RESERVED", 3]
    assert reserve(keys=keys, args=["alice", 4]) == ["ALREADY_BOOKED", 2]
    assert c.get(keys[0]) == "3"


def test_a_show_without_inventory_is_not_on_sale(lab: Lab) -> None:
    c, keys = lab.client(), show_keys(lab)
    assert lab.script(STEM, c)(keys=keys, args=["alice", 1]) == ["NOT_ON_SALE", 0]
    assert lab.ns.keys(c) == []


@pytest.mark.parametrize("booking", ["", "a" * 65, "al ice", "al:ice", "é", "a\n"])
def test_bad_booking_ids_are_errors_and_write_nothing(lab: Lab, booking: str) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], 5)
    with pytest.raises(redis.ResponseError, match="reserve_seats: invalid-booking-id: "):
        lab.script(STEM, c)(keys=keys, args=[booking, 1])
    assert c.get(keys[0]) == "5" and c.exists(keys[1]) == 0


@pytest.mark.parametrize("seats", ["0", "11", "-1", "1.5", "1e1", "01", " 1", "", "x"])
def test_bad_seat_counts_are_errors_and_write_nothing(lab: Lab, seats: str) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], 5)
    with pytest.raises(redis.ResponseError, match="reserve_seats: invalid-seats: "):
        lab.script(STEM, c)(keys=keys, args=["alice", seats])
    assert c.get(keys[0]) == "5" and c.exists(keys[1]) == 0


def test_keys_without_a_shared_hash_tag_are_refused(lab: Lab) -> None:
    c = lab.client()
    keys = [lab.ns.tagged("show:1", "seats_left"), lab.ns.tagged("show:2", "bookings")]
    c.set(keys[0], 5)
    with pytest.raises(redis.ResponseError, match="reserve_seats: invalid-arguments: "):
        lab.script(STEM, c)(keys=keys, args=["alice", 1])
    with pytest.raises(redis.ResponseError, match="reserve_seats: invalid-arguments: "):
        lab.script(STEM, c)(keys=[keys[0], keys[0]], args=["alice", 1])
    assert c.get(keys[0]) == "5"


@pytest.mark.parametrize("stored", ["-1", "abc", "1.5", "007", ""])
def test_corrupt_inventory_is_an_error_not_sold_out(lab: Lab, stored: str) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], stored)
    with pytest.raises(redis.ResponseError, match="reserve_seats: corrupt-inventory: "):
        lab.script(STEM, c)(keys=keys, args=["alice", 1])
    assert c.get(keys[0]) == stored and c.exists(keys[1]) == 0


def test_foreign_types_raise_wrongtype_before_any_write(lab: Lab) -> None:
    c, keys = lab.client(), show_keys(lab)
    c.set(keys[0], 5)
    c.set(keys[1], "not a hash")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        lab.script(STEM, c)(keys=keys, args=["alice", 1])
    assert c.get(keys[0]) == "5"


def test_concurrent_bookings_never_oversell(lab: Lab) -> None:
    keys = show_keys(lab)
    lab.client().set(keys[0], 10)

    reserve = lua(STEM)

    def customer(client: Any, booking: str) -> str:
        return reserve(keys=keys, args=[booking, 3], client=client)[0]

    result = run_clients(
        lab, customer, inputs=[[f"c{i}"] for i in range(8)]
    )  # 8 clients, 1 booking each
    outcomes = [reply for _client, _iteration, reply in result.outcomes]
    c = lab.client()
    assert outcomes.count("RESERVED") == 3 and outcomes.count("SOLD_OUT") == 5
    assert c.get(keys[0]) == "1"
    assert sum(int(v) for v in c.hvals(keys[1])) == 9
