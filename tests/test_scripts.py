"""Lua files: every one has a contract header, and loads by name through EVALSHA."""

import pytest

from helpers.backend.scripts import HEADER_FIELDS, LUA_DIR, load_script, lua_path, script_header

LUA_FILES = sorted(LUA_DIR.glob("*.lua"))


def test_lua_directory_has_scripts():
    assert LUA_FILES, f"no Lua files in {LUA_DIR}"


@pytest.mark.parametrize("path", LUA_FILES, ids=lambda p: p.name)
def test_every_lua_file_starts_with_a_contract_header(path):
    header = script_header(path.stem)
    assert header.startswith(f"{path.name}:"), (
        f"{path.name}: header must start with '{path.name}: <purpose>'"
    )
    for field in HEADER_FIELDS:
        assert field in header, f"{path.name}: header lacks {field}"
    assert len(header.splitlines()) >= 4


def test_unknown_script_name_lists_the_known_ones():
    with pytest.raises(FileNotFoundError, match="known:"):
        lua_path("no_such_script")


def test_script_reloads_itself_after_noscript(owned_server, tmp_path, monkeypatch):
    (tmp_path / "echo_arg.lua").write_text(
        "-- echo_arg.lua: test\n-- KEYS none\n-- ARGV[1]\n-- Returns: ARGV[1]\nreturn ARGV[1]\n"
    )
    monkeypatch.setattr("luaload.LUA_DIR", tmp_path)
    c = owned_server.client(decode_responses=True)
    script = load_script(c, "echo_arg")
    assert script(args=["hi"]) == "hi"
    c.script_flush()
    assert script(args=["again"]) == "again"  # EVALSHA got NOSCRIPT, redis-py loaded and retried


def test_load_library_returns_the_name_on_a_cluster_too(cluster_lab):
    from helpers.backend.scripts import delete_library, load_library

    client = cluster_lab.client()
    try:
        assert load_library(client, "demo_library") == "racelab_demo"
        key = cluster_lab.key("hits")
        assert client.fcall("racelab_demo_hit", 1, key, 2) == 2
    finally:
        assert delete_library(client, "demo_library") is True


def test_fcall_reloading_survives_another_run_deleting_the_library(lab):
    import redis

    from helpers.backend.scripts import delete_library, fcall_reloading, load_library

    client, other_run, hits = lab.client(), lab.client(), lab.key("hits")
    load_library(client, "demo_library")
    try:
        assert fcall_reloading(client, "demo_library", "racelab_demo_hit", [hits], [2]) == 2
        assert delete_library(other_run, "demo_library") is True  # the other run's cleanup
        assert fcall_reloading(client, "demo_library", "racelab_demo_hit", [hits], [3]) == 5
        client.hset(lab.key("hash"), "f", "v")
        with pytest.raises(
            redis.ResponseError, match="(?i)wrong|hash|number|integer"
        ):  # other errors propagate
            fcall_reloading(client, "demo_library", "racelab_demo_hit", [lab.key("hash")], [1])
    finally:
        delete_library(client, "demo_library")
