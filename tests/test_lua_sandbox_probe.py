"""lua/sandbox_probe.lua: Lua 5.1; a real server hides io/require/loadfile and keeps only os.clock."""

from __future__ import annotations

from helpers import Lab

NAMES = ["io", "require", "loadfile", "dofile", "string", "math", "redis"]


def test_every_backend_runs_lua_5_1_and_has_the_script_api(lab: Lab) -> None:
    version, present, _ = lab.script("sandbox_probe")(args=NAMES)
    assert version == "Lua 5.1"
    assert present[-3:] == ["yes", "yes", "yes"]


def test_a_real_server_is_sandboxed_and_the_embedded_backend_is_not(lab: Lab) -> None:
    _, present, os_members = lab.script("sandbox_probe")(args=NAMES)
    if lab.kind == "embedded":
        assert present[:4] == ["yes", "yes", "yes", "yes"]
        assert "execute" in os_members
    else:
        assert present[:4] == ["no", "no", "no", "no"]
        assert os_members == ["clock"]


def test_the_probe_writes_nothing(lab: Lab) -> None:
    c = lab.client()
    lab.script("sandbox_probe", c)(args=["os"])
    assert lab.ns.keys(c) == []
