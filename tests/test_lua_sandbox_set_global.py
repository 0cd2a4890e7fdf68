"""lua/sandbox_set_global.lua: creating a global variable is refused on every backend."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab


def test_setting_a_global_is_an_error(lab: Lab) -> None:
    with pytest.raises(redis.ResponseError, match="readonly table|set global"):
        lab.script("sandbox_set_global")()


def test_no_global_leaks_into_the_next_script(lab: Lab) -> None:
    c = lab.client()
    with pytest.raises(redis.ResponseError):
        lab.script("sandbox_set_global", c)()
    assert c.eval("return tostring(rawget(_G, 'leaked_counter'))", 0) == "nil"
