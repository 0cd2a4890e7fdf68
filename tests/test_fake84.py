"""helpers.backend.fake84's pure parts: SET option parsing and expiry arithmetic (rules measured on Redis 8.6.3).

The behaviour on a server is tested against a real Redis in tests/test_embedded.py and
tests/test_differential.py; these pin the parser's table directly.
"""

from __future__ import annotations

import pytest
from fakeredis._helpers import SimpleError

from helpers.backend.fake84 import expiry_ms, parse_set_options


def test_parse_returns_flags_expiry_and_condition() -> None:
    flags, expiry, condition = parse_set_options((b"get", b"IFEQ", b"v", b"px", b"100"))
    assert flags == {b"get", b"ifeq", b"px"}
    assert expiry == (b"px", b"100")
    assert condition == (b"ifeq", b"v")


def test_the_operand_of_a_condition_is_taken_verbatim_even_if_it_looks_like_an_option() -> None:
    assert parse_set_options((b"IFEQ", b"NX"))[2] == (b"ifeq", b"NX")


def test_the_last_of_repeated_same_kind_options_wins() -> None:
    _, expiry, condition = parse_set_options((b"EX", b"1", b"EX", b"2", b"IFNE", b"a", b"IFNE", b"b"))
    assert expiry == (b"ex", b"2") and condition == (b"ifne", b"b")


@pytest.mark.parametrize("args", [
    (b"NX", b"IFEQ", b"v"), (b"XX", b"IFDNE", b"d"), (b"IFEQ", b"v", b"IFNE", b"v"), (b"IFEQ",),
    (b"NX", b"XX"), (b"PX", b"1", b"EXAT", b"1"), (b"KEEPTTL", b"PX", b"1"), (b"PX", b"1", b"KEEPTTL"),
    (b"NOPE",), (b"",),
])
def test_conflicting_dangling_or_unknown_options_raise_syntax_error(args: tuple[bytes, ...]) -> None:
    with pytest.raises(SimpleError, match="syntax error"):
        parse_set_options(args)


def test_nx_after_a_condition_is_accepted() -> None:
    assert parse_set_options((b"IFEQ", b"v", b"NX"))[0] == {b"ifeq", b"nx"}


def test_conditions_are_a_syntax_error_when_not_allowed() -> None:
    with pytest.raises(SimpleError, match="syntax error"):
        parse_set_options((b"IFEQ", b"v"), conditions_allowed=False)


def test_relative_expiry_adds_now_and_absolute_does_not() -> None:
    assert expiry_ms(b"ex", b"10", now_ms=1_000) == 11_000
    assert expiry_ms(b"px", b"10", now_ms=1_000) == 1_010
    assert expiry_ms(b"exat", b"10", now_ms=1_000) == 10_000
    assert expiry_ms(b"pxat", b"10", now_ms=1_000) == 10


@pytest.mark.parametrize("option,raw", [(b"ex", b"0"), (b"px", b"-1"), (b"ex", b"9223372036854776"),
                                        (b"px", b"9223372036854775807"), (b"exat", b"9223372036854776")])
def test_out_of_range_expiry_is_invalid_expire_time(option: bytes, raw: bytes) -> None:
    with pytest.raises(SimpleError, match="invalid expire time in 'set' command"):
        expiry_ms(option, raw, now_ms=1_700_000_000_000)


def test_non_canonical_integer_expiry_is_not_an_integer() -> None:
    with pytest.raises(SimpleError, match="not an integer"):
        expiry_ms(b"px", b"01", now_ms=0)
