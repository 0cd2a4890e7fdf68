"""lua/errors_call_vs_pcall.lua: redis.call raises to the client, redis.pcall hands the error to the script."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab


@pytest.mark.parametrize("mode", ["call", "pcall"])
def test_a_successful_incr_returns_ok_and_the_value(lab: Lab, mode: str) -> None:
    assert lab.script("errors_call_vs_pcall")(keys=[lab.key("n")], args=[mode]) == ["ok", 1]


def test_call_raises_the_wrongtype_error_to_the_client(lab: Lab) -> None:
    c, key = lab.client(), lab.key("h")
    c.hset(key, "f", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        lab.script("errors_call_vs_pcall", c)(keys=[key], args=["call"])


def test_pcall_returns_the_error_text_to_the_script(lab: Lab) -> None:
    c, key = lab.client(), lab.key("s")
    c.set(key, "many")
    status, message = lab.script("errors_call_vs_pcall", c)(keys=[key], args=["pcall"])
    assert status == "caught"
    assert "not an integer" in message
    assert c.get(key) == "many"


@pytest.mark.parametrize("args", [[], ["both"], ["call", "extra"]])
def test_bad_mode_is_refused(lab: Lab, args: list[str]) -> None:
    with pytest.raises(redis.ResponseError, match="errors_call_vs_pcall: invalid-arguments: "):
        lab.script("errors_call_vs_pcall")(keys=[lab.key("n")], args=args)
