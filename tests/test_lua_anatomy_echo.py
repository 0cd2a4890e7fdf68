"""lua/anatomy_echo.lua: numkeys splits the words into KEYS and ARGV, both 1-based, nothing written."""

from __future__ import annotations

from helpers import Lab
from helpers.backend.scripts import lua_source


def test_numkeys_splits_words_into_keys_then_argv_in_order(lab: Lab) -> None:
    c = lab.client()
    a, b = lab.key("a"), lab.key("b")
    assert lab.script("anatomy_echo", c)(keys=[a, b], args=["x", 7]) == [2, 2, [a, b], ["x", "7"]]


def test_no_keys_and_no_args_give_empty_arrays(lab: Lab) -> None:
    assert lab.script("anatomy_echo")() == [0, 0, [], []]


def test_same_words_with_different_numkeys_move_between_keys_and_argv(lab: Lab) -> None:
    c = lab.client()
    a, b = lab.key("a"), lab.key("b")
    sha = c.script_load(lua_source("anatomy_echo"))
    assert c.evalsha(sha, 1, a, b) == [1, 1, [a], [b]]
    assert c.evalsha(sha, 0, a, b) == [0, 2, [], [a, b]]


def test_echo_writes_nothing(lab: Lab) -> None:
    c = lab.client()
    lab.script("anatomy_echo", c)(keys=[lab.key("a")], args=["v"])
    assert lab.ns.keys(c) == []
