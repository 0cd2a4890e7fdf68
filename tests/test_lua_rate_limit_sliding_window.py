"""lua/rate_limit_sliding_window.lua: the window slides, every status, bad input, no overshoot."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab, run_clients

STEM = "rate_limit_sliding_window"


def call(lab: Lab, key: str, *args: object, client: object = None) -> list:
    """Run the script once (on client, default a new client) and return its raw reply."""
    return lab.script(STEM, client)(keys=[key], args=list(args))


def test_concurrent_requests_at_one_instant_admit_exactly_the_limit(lab: Lab) -> None:
    # Lockstep rounds: every client's call reaches the server in the same round as the others'.
    key, ids = lab.key("crowd"), iter(range(10**6))
    result = run_clients(
        lab,
        lambda c: call(lab, key, 40, 60_000, 5_000, f"r{next(ids)}", client=c)[0],
        clients=16,
        iterations=10,
        mode="lockstep",
    )
    assert (result.count(1), result.count(0)) == (40, 120)


def test_counts_only_requests_newer_than_now_minus_window(lab: Lab) -> None:
    # A window of 100 s: its TTL (one window, in the server's own time) outlives the test
    # however busy the machine; a window of 1 s expired the log between two calls under load.
    key, window = lab.key("log"), 100_000
    assert call(lab, key, 2, window, 0, "a") == [1, 1]
    assert call(lab, key, 2, window, window - 1, "b") == [1, 2]
    assert call(lab, key, 2, window, window - 1, "c") == [0, 2]
    assert call(lab, key, 2, window, window, "d") == [1, 2]  # "a" at 0 is one window old: gone
    assert lab.client().zrange(key, 0, -1) == ["b", "d"]


def test_admit_sets_a_ttl_of_one_window(lab: Lab) -> None:
    c, key = lab.client(), lab.key("log")
    call(lab, key, 2, 50_000, 7, "a")
    assert 49_000 < c.pttl(key) <= 50_000


def test_duplicate_request_id_is_refused_and_not_counted(lab: Lab) -> None:
    c, key = lab.client(), lab.key("log")
    call(lab, key, 5, 1000, 10, "same")
    assert call(lab, key, 5, 1000, 20, "same") == [2, "duplicate-request"]
    assert c.zscore(key, "same") == 10


@pytest.mark.parametrize(
    "args",
    [
        ("0", 1000, 5, "r"),
        ("1.5", 1000, 5, "r"),
        ("100001", 1000, 5, "r"),
        ("abc", 1000, 5, "r"),
        (3, "0", 5, "r"),
        (3, "1e3", 5, "r"),
        (3, "86400001", 5, "r"),
        (3, "-5", 5, "r"),
        (3, 1000, "-1", "r"),
        (3, 1000, "5.5", "r"),
        (3, 1000, "9007199254740992", "r"),
        (3, 1000, "007", "r"),
        (3, 1000, 5, ""),
        (3, 1000, 5, "x" * 129),
        (3, 1000, 5),
        (3, 1000, 5, "r", "extra"),
    ],
    ids=repr,
)
def test_bad_arguments_are_invalid_arguments_and_write_nothing(lab: Lab, args: tuple) -> None:
    key = lab.key("log")
    assert call(lab, key, *args) == [2, "invalid-arguments"]
    assert lab.client().exists(key) == 0


def test_time_zero_and_the_largest_time_are_valid(lab: Lab) -> None:
    assert call(lab, lab.key("a"), 1, 1000, "0", "r") == [1, 1]
    assert call(lab, lab.key("b"), 1, 1000, str(2**53 - 1), "r") == [1, 1]


def test_key_of_another_type_raises_wrongtype_and_is_untouched(lab: Lab) -> None:
    c, key = lab.client(), lab.key("log")
    c.set(key, "not a log")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        call(lab, key, 3, 1000, 5, "r")
    assert c.get(key) == "not a log"


def test_a_request_arriving_out_of_time_order_counts_the_later_entries(lab: Lab) -> None:
    # Pins the header: entries stamped after `now` count, so no window (here (4200, 5200]) ever
    # holds more than `limit` requests, whatever order the requests reach the server in.
    key = lab.key("log")
    assert call(lab, key, 1, 1000, 5000, "late-clock") == [1, 1]
    assert call(lab, key, 1, 1000, 4500, "early-clock") == [0, 1]
    assert call(lab, key, 1, 1000, 5200, "next") == [0, 1]
    assert call(lab, key, 1, 1000, 6000, "after") == [1, 1]
    assert lab.client().zrange(key, 0, -1) == ["after"]
