"""lua/anatomy_add_points.lua: strict points 1..1000, integer score, errors write nothing."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab

BAD_POINTS = ["0", "1001", "abc", "1e3", "0x10", " 7", "7 ", "2.5", "-3", "+3", "007", "", "99999"]


def test_points_are_added_and_the_new_score_returned(lab: Lab) -> None:
    c, key = lab.client(), lab.key("score")
    add = lab.script("anatomy_add_points", c)
    assert add(keys=[key], args=[5]) == 5
    assert add(keys=[key], args=["1000"]) == 1005
    assert c.get(key) == "1005"


@pytest.mark.parametrize("points", BAD_POINTS)
def test_bad_points_are_refused_and_nothing_is_written(lab: Lab, points: str) -> None:
    c, key = lab.client(), lab.key("score")
    with pytest.raises(redis.ResponseError, match="anatomy_add_points: invalid-points: "):
        lab.script("anatomy_add_points", c)(keys=[key], args=[points])
    assert c.exists(key) == 0


@pytest.mark.parametrize("stored", ["abc", "007", "+1", "1.5", "", "12345678901234567890"])
def test_a_non_integer_score_is_refused_and_left_unchanged(lab: Lab, stored: str) -> None:
    c, key = lab.client(), lab.key("score")
    c.set(key, stored)
    with pytest.raises(redis.ResponseError, match="anatomy_add_points: invalid-score: "):
        lab.script("anatomy_add_points", c)(keys=[key], args=[1])
    assert c.get(key) == stored


def test_negative_and_zero_scores_are_integers(lab: Lab) -> None:
    c, key = lab.client(), lab.key("score")
    c.set(key, "-4")
    assert lab.script("anatomy_add_points", c)(keys=[key], args=[4]) == 0
    assert lab.script("anatomy_add_points", c)(keys=[key], args=[1]) == 1


def test_a_hash_under_the_score_key_raises_wrongtype(lab: Lab) -> None:
    c, key = lab.client(), lab.key("score")
    c.hset(key, "f", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        lab.script("anatomy_add_points", c)(keys=[key], args=[1])
    assert c.hgetall(key) == {"f": "v"}


def test_wrong_number_of_keys_or_arguments_is_refused(lab: Lab) -> None:
    c = lab.client()
    add = lab.script("anatomy_add_points", c)
    with pytest.raises(redis.ResponseError, match="anatomy_add_points: invalid-arguments: "):
        add(keys=[lab.key("a"), lab.key("b")], args=[1])
    with pytest.raises(redis.ResponseError, match="anatomy_add_points: invalid-arguments: "):
        add(keys=[lab.key("a")], args=[])
    assert lab.ns.keys(c) == []


@pytest.mark.parametrize(
    "stored",
    [
        "9999999999999999999",
        "9223372036854775807",
        "-9223372036854775808",
        "9007199254740992",
        "-9007199254740992",
        "99999999999999999",
    ],
)
def test_a_score_outside_53_bit_integers_is_refused_and_left_unchanged(
    lab: Lab, stored: str
) -> None:
    # Regression: "9999999999999999999" (19 digits, past 2^63-1) reached INCRBY and got the
    # undocumented "value is not an integer or out of range".
    c, key = lab.client(), lab.key("score")
    c.set(key, stored)
    with pytest.raises(redis.ResponseError, match="anatomy_add_points: invalid-score: "):
        lab.script("anatomy_add_points", c)(keys=[key], args=[1])
    assert c.get(key) == stored


@pytest.mark.parametrize("stored, points", [("9007199254740991", 1), ("9007199254740000", 1000)])
def test_a_new_score_past_2_53_is_refused_because_the_reply_would_be_inexact(
    lab: Lab, stored: str, points: int
) -> None:
    # Regression: 9223372036854775800 + 7 was written as 9223372036854775807 but the script
    # replied -9223372036854775808 on Redis (+9223372036854775808 on the embedded backend).
    c, key = lab.client(), lab.key("score")
    c.set(key, stored)
    with pytest.raises(redis.ResponseError, match="anatomy_add_points: score-overflow: "):
        lab.script("anatomy_add_points", c)(keys=[key], args=[points])
    assert c.get(key) == stored


@pytest.mark.parametrize(
    "stored, points", [("9007199254739991", 1000), ("-9007199254740991", 1000)]
)
def test_the_reply_is_exact_at_the_edges_of_53_bit_integers(
    lab: Lab, stored: str, points: int
) -> None:
    c, key = lab.client(), lab.key("score")
    c.set(key, stored)
    new = int(stored) + points
    assert lab.script("anatomy_add_points", c)(keys=[key], args=[points]) == new
    assert c.get(key) == str(new)


def test_the_header_lists_every_error_code() -> None:
    from helpers.backend.scripts import script_header

    header = script_header("anatomy_add_points")
    for code in (
        "invalid-arguments",
        "invalid-points",
        "invalid-score",
        "score-overflow",
        "WRONGTYPE",
    ):
        assert code in header
    assert "would overflow" not in header
