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
    with pytest.raises(redis.ResponseError, match="invalid-points"):
        lab.script("anatomy_add_points", c)(keys=[key], args=[points])
    assert c.exists(key) == 0


@pytest.mark.parametrize("stored", ["abc", "007", "+1", "1.5", "", "12345678901234567890"])
def test_a_non_integer_score_is_refused_and_left_unchanged(lab: Lab, stored: str) -> None:
    c, key = lab.client(), lab.key("score")
    c.set(key, stored)
    with pytest.raises(redis.ResponseError, match="invalid-score"):
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
    with pytest.raises(redis.ResponseError, match="invalid-arguments"):
        add(keys=[lab.key("a"), lab.key("b")], args=[1])
    with pytest.raises(redis.ResponseError, match="invalid-arguments"):
        add(keys=[lab.key("a")], args=[])
    assert lab.ns.keys(c) == []
