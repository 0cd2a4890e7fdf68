"""lua/return_conversions.lua: how each Lua value becomes a Redis reply (RESP2, as redis-py decodes it)."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import lua_source

EXPECTED = {
    "nil": None,
    "false": None,
    "true": 1,
    "integer": 42,
    "float": 3,
    "negative_float": -3,
    "numeric_string": "3.99",
    "array": [1, 2, 3],
    "array_with_hole": [1, 2],
    "nested": [1, ["two", None], "three"],
    "named_fields": [],
    "status": "QUEUED-FOR-REVIEW",
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_case_converts_as_documented(lab: Lab, case: str) -> None:
    assert lab.script("return_conversions")(args=[case]) == EXPECTED[case]


def test_status_reply_arrives_as_a_simple_string(lab: Lab) -> None:
    c = lab.client(decode_responses=False)
    assert (
        c.register_script(lua_source("return_conversions"))(args=["status"]) == b"QUEUED-FOR-REVIEW"
    )


def test_error_case_raises_its_error_text(lab: Lab) -> None:
    with pytest.raises(redis.ResponseError, match="^ERR_DEMO this is an error reply"):
        lab.script("return_conversions")(args=["error"])


@pytest.mark.parametrize("args", [["nope"], ["NIL"], [""]])
def test_unknown_case_is_an_error(lab: Lab, args: list[str]) -> None:
    with pytest.raises(redis.ResponseError, match="return_conversions: unknown-case: "):
        lab.script("return_conversions")(args=args)


@pytest.mark.parametrize(
    ("keys", "args"), [([], []), ([], ["integer", "extra"]), (["k"], ["integer"])]
)
def test_extra_or_missing_keys_and_arguments_are_refused(
    lab: Lab, keys: list[str], args: list[str]
) -> None:
    # Regression: extra keys and arguments were ignored, so a caller's mistake went unnoticed.
    keys = [lab.key(k) for k in keys]
    with pytest.raises(
        redis.ResponseError, match="return_conversions: invalid-arguments: expected no key"
    ):
        lab.script("return_conversions")(keys=keys, args=args)
