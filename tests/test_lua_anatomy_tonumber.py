"""lua/anatomy_tonumber.lua: tonumber accepts exponents, hex, fractions, signs and spaces; nil for non-numbers."""

from __future__ import annotations

from helpers import Lab


def test_tonumber_is_far_more_permissive_than_a_positive_integer(lab: Lab) -> None:
    inputs = ["5", "abc", "1e3", "0x10", " 7 ", "2.5", "-3", ""]
    assert lab.script("anatomy_tonumber")(args=inputs) == [
        "5",
        "nil",
        "1000",
        "16",
        "7",
        "2.5",
        "-3",
        "nil",
    ]


def test_no_arguments_give_an_empty_array(lab: Lab) -> None:
    assert lab.script("anatomy_tonumber")() == []
