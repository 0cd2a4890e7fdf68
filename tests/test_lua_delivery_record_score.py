"""lua/delivery_record_score.lua: records a validated score; SCRIPT LOAD's SHA1 is the file's SHA1."""

from __future__ import annotations

import hashlib

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import lua_source

STEM = "delivery_record_score"


def test_the_score_is_recorded(lab: Lab) -> None:
    c, key = lab.client(), lab.key("score")
    assert lab.script(STEM, c)(keys=[key], args=[42]) == "OK"
    assert lab.script(STEM, c)(keys=[key], args=["0"]) == "OK"
    assert c.get(key) == "0"


def test_extra_arguments_are_ignored(lab: Lab) -> None:
    c, key = lab.client(), lab.key("score")
    assert lab.script(STEM, c)(keys=[key], args=[7, "extra"]) == "OK"
    assert c.get(key) == "7"


@pytest.mark.parametrize("score", ["", "-1", "1.5", "1e3", "007", "1000000000", "abc", " 1"])
def test_bad_scores_are_refused_and_nothing_written(lab: Lab, score: str) -> None:
    c, key = lab.client(), lab.key("score")
    with pytest.raises(redis.ResponseError, match="delivery_record_score: invalid-arguments: "):
        lab.script(STEM, c)(keys=[key], args=[score])
    with pytest.raises(redis.ResponseError, match="delivery_record_score: invalid-arguments: "):
        lab.script(STEM, c)(keys=[key], args=[])
    assert c.exists(key) == 0


def test_script_load_returns_the_sha1_of_the_exact_text(lab: Lab) -> None:
    source = lua_source(STEM)
    assert lab.client().script_load(source) == hashlib.sha1(source.encode()).hexdigest()


def test_a_spliced_value_makes_a_different_script_that_still_records(lab: Lab) -> None:
    c, key = lab.client(), lab.key("score")
    spliced = lua_source(STEM).replace("ARGV[1]", '"17"')
    assert (
        hashlib.sha1(spliced.encode()).hexdigest()
        != hashlib.sha1(lua_source(STEM).encode()).hexdigest()
    )
    assert c.eval(spliced, 1, key) == "OK"
    assert c.get(key) == "17"
