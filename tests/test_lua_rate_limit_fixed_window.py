"""lua/rate_limit_fixed_window.lua: every status, every bad-input class, the fixed window, no overshoot."""

from __future__ import annotations

import re

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import Lab, lua
from helpers.instruments.load import run_clients

STEM = "rate_limit_fixed_window"
MAX_LIMIT, MAX_WINDOW, MAX_COUNTER = 1_000_000_000, 31_536_000, 2**53 - 1
BAD_NUMBERS = [
    "1.5",
    "1e3",
    "-1",
    "0",
    "abc",
    "",
    " 1",
    "1 ",
    "+1",
    "007",
    "0x10",
    "1\n",
    "99999999999999999999999",
    "nan",
    "inf",
    b"\xff\xfe",
]
BAD_COUNTERS = [
    "abc",
    "-1",
    "1.5",
    "1e3",
    "007",
    "",
    " 1",
    "+1",
    "9007199254740992",
    "99999999999999999999999",
    b"\xff",
]


def call(lab: Lab, key: str, *args: object, keys: list[str] | None = None) -> list:
    """Run the script once on a fresh client and return its raw reply."""
    return lab.script(STEM)(keys=[key] if keys is None else keys, args=list(args))


def test_first_hit_is_allowed_with_count_one_and_sets_the_window_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert call(lab, key, 5, 60) == [1, 1]
    assert c.get(key) == "1"
    assert 59_000 < c.pttl(key) <= 60_000


def test_counts_up_to_the_limit_then_rejects_with_the_count_and_writes_nothing(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert [call(lab, key, 3, 60) for _ in range(3)] == [[1, 1], [1, 2], [1, 3]]
    c.pexpire(key, 30_000)
    assert call(lab, key, 3, 60) == [0, 3]
    assert call(lab, key, 3, 60) == [0, 3]
    assert c.get(key) == "3"
    assert 29_000 < c.pttl(key) <= 30_000


def test_ttl_is_set_only_on_the_first_hit_so_the_window_does_not_slide(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert call(lab, key, 10, 100) == [1, 1]
    c.expire(key, 7)  # stands for "93 seconds of the window have passed"
    assert call(lab, key, 10, 100) == [1, 2]
    assert call(lab, key, 10, 100) == [1, 3]
    assert 6_000 < c.pttl(key) <= 7_000


def test_counter_above_the_limit_is_rejected_with_its_value(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, 7, ex=60)
    assert call(lab, key, 5, 60) == [0, 7]
    assert c.get(key) == "7"


def test_zero_counter_with_ttl_is_valid_and_keeps_its_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, 0, ex=40)
    assert call(lab, key, 5, 100) == [1, 1]
    assert 39_000 < c.pttl(key) <= 40_000


def test_largest_stated_limit_and_window_are_accepted(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    assert call(lab, key, MAX_LIMIT, MAX_WINDOW) == [1, 1]
    assert c.ttl(key) > MAX_WINDOW - 5


@pytest.mark.parametrize("bad", BAD_NUMBERS + [str(MAX_LIMIT + 1)], ids=repr)
def test_bad_limit_is_invalid_arguments_and_writes_nothing(lab: Lab, bad: object) -> None:
    c, key = lab.client(), lab.key("w")
    assert call(lab, key, bad, 60) == [2, "invalid-arguments"]
    assert c.exists(key) == 0


@pytest.mark.parametrize("bad", BAD_NUMBERS + [str(MAX_WINDOW + 1)], ids=repr)
def test_bad_window_is_invalid_arguments_and_leaves_an_existing_counter_alone(
    lab: Lab, bad: object
) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, 2, ex=50)
    assert call(lab, key, 5, bad) == [2, "invalid-arguments"]
    assert c.get(key) == "2"
    assert 49_000 < c.pttl(key) <= 50_000


@pytest.mark.parametrize("args", [(), (5,), (5, 60, 1)], ids=["no-args", "one-arg", "three-args"])
def test_wrong_number_of_arguments_is_invalid_arguments(lab: Lab, args: tuple) -> None:
    c, key = lab.client(), lab.key("w")
    assert call(lab, key, *args) == [2, "invalid-arguments"]
    assert c.exists(key) == 0


def test_wrong_number_of_keys_is_invalid_arguments(lab: Lab) -> None:
    c = lab.client()
    a, b = lab.ns.tagged("rl", "a"), lab.ns.tagged("rl", "b")
    assert call(lab, a, 5, 60, keys=[]) == [2, "invalid-arguments"]
    assert call(lab, a, 5, 60, keys=[a, b]) == [2, "invalid-arguments"]
    assert c.exists(a, b) == 0


@pytest.mark.parametrize("stored", BAD_COUNTERS, ids=repr)
def test_stored_value_that_is_not_a_counter_is_invalid_counter_and_kept(
    lab: Lab, stored: object
) -> None:
    c, key = lab.client(decode_responses=False), lab.key("w")
    c.set(key, stored, ex=50)
    assert call(lab, key, 5, 60) == [2, "invalid-counter"]
    assert c.get(key) == (stored if isinstance(stored, bytes) else stored.encode())
    assert 49_000 < c.pttl(key) <= 50_000


def test_largest_stated_counter_is_valid(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, MAX_COUNTER, ex=50)
    assert call(lab, key, 5, 60) == [0, MAX_COUNTER]


def test_counter_without_ttl_is_missing_ttl_and_gets_no_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, 2)
    assert call(lab, key, 5, 60) == [2, "missing-ttl"]
    assert c.get(key) == "2"
    assert c.ttl(key) == -1


def test_invalid_counter_is_reported_before_missing_ttl(lab: Lab) -> None:
    c, key = lab.client(), lab.key("w")
    c.set(key, "abc")
    assert call(lab, key, 5, 60) == [2, "invalid-counter"]


@pytest.mark.parametrize("kind", ["hash", "list", "set"])
def test_key_of_another_type_raises_wrongtype_and_is_untouched(lab: Lab, kind: str) -> None:
    c, key = lab.client(), lab.key("w")
    {
        "hash": lambda: c.hset(key, "f", "v"),
        "list": lambda: c.rpush(key, "v"),
        "set": lambda: c.sadd(key, "v"),
    }[kind]()
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        call(lab, key, 5, 60)
    assert c.type(key) == kind
    assert c.ttl(key) == -1


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.one_of(
        st.text(alphabet="0123456789+-.e x", max_size=12),
        st.integers(min_value=-5, max_value=2 * MAX_LIMIT).map(str),
    )
)
def test_limit_is_accepted_exactly_when_it_is_a_canonical_decimal_in_range(
    lab: Lab, text: str
) -> None:
    key = lab.key("prop")
    lab.client().delete(key)
    valid = re.fullmatch(r"[1-9][0-9]*", text) is not None and int(text) <= MAX_LIMIT
    assert call(lab, key, text, 60) == ([1, 1] if valid else [2, "invalid-arguments"])


def test_32_concurrent_clients_never_admit_more_than_the_limit(lab: Lab) -> None:
    key, limit, clients, each = lab.key("w"), 100, 32, 10

    limiter = lua(STEM)

    def request(client) -> tuple[int, int]:
        status, count = limiter(keys=[key], args=[limit, 60], client=client)
        return status, count

    result = run_clients(lab, request, clients=clients, iterations=each)
    replies = [value for _, _, value in result.outcomes]
    assert [status for status, _ in replies].count(1) == limit
    assert [status for status, _ in replies].count(0) == clients * each - limit
    assert sorted(count for status, count in replies if status == 1) == list(range(1, limit + 1))
    assert lab.client().get(key) == str(limit)


def test_works_on_a_cluster(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("rl", "w")
    assert [call(cluster_lab, key, 2, 60) for _ in range(3)] == [[1, 1], [1, 2], [0, 2]]
