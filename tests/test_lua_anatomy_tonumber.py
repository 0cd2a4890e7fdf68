"""lua/anatomy_tonumber.lua: tonumber accepts exponents, hex, fractions, signs, spaces, nan and inf;
a range check written with comparisons lets nan (and 0x10, 2.5, ' 7 ') through."""

from __future__ import annotations

from helpers import Lab


def test_tonumber_is_far_more_permissive_than_a_positive_integer(lab: Lab) -> None:
    inputs = ["5", "abc", "1e3", "0x10", " 7 ", "2.5", "-3", "", "nan", "inf", "-inf", "1e400"]
    converted = [number for number, _ in lab.script("anatomy_tonumber")(args=inputs)]
    assert converted == [
        "5", "nil", "1000", "16", "7", "2.5", "-3", "nil", "nan", "inf", "-inf", "inf",
    ]  # fmt: skip


def test_the_naive_range_check_lets_nan_through_and_refuses_inf(lab: Lab) -> None:
    inputs = ["nan", "0x10", "2.5", " 7 ", "inf", "1e400", "-inf", "abc", "1001", "500"]
    verdicts = dict(zip(inputs, (v for _, v in lab.script("anatomy_tonumber")(args=inputs))))
    assert verdicts == {
        "nan": "passes", "0x10": "passes", "2.5": "passes", " 7 ": "passes", "500": "passes",
        "inf": "refused", "1e400": "refused", "-inf": "refused", "abc": "refused",
        "1001": "refused",
    }  # fmt: skip


def test_no_arguments_give_an_empty_array(lab: Lab) -> None:
    assert lab.script("anatomy_tonumber")() == []
