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


def test_the_loader_imports_without_helpers_and_races_locks_needs_nothing_more():
    import subprocess
    import sys

    code = (
        "import sys, luaload, races.locks, races.ratelimit\n"
        "assert luaload.lua('lock_release').sha\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'helpers'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_show_gives_the_file_as_written_and_assembled_what_redis_runs():
    from helpers import show
    from luaload import lua_file, lua_source

    written, run = str(show("lock_release")), str(show("lock_release", assembled=True))
    assert written == lua_file("lock_release").rstrip("\n")
    assert run == lua_source("lock_release").rstrip("\n")
    assert "-- uses: read_lock" in written and "local function read_lock" not in written
    assert "local function read_lock" in run and len(run.splitlines()) > len(written.splitlines())


def test_a_script_edited_after_loading_is_assembled_again(tmp_path, monkeypatch):
    import os

    import luaload

    monkeypatch.setattr(luaload, "LUA_DIR", tmp_path)
    (tmp_path / "_shared.lua").write_text(
        "-- BEGIN shared: one\nlocal function one() return 1 end\n-- END shared: one\n"
    )
    script = tmp_path / "s.lua"
    script.write_text("-- s.lua: s\n-- uses: one\n\nreturn one()\n")
    first = luaload.lua("s")
    assert "local function one() return 1 end" in first.script.decode()
    (tmp_path / "_shared.lua").write_text(
        "-- BEGIN shared: one\nlocal function one() return 2 end\n-- END shared: one\n"
    )
    stat = (tmp_path / "_shared.lua").stat()
    os.utime(tmp_path / "_shared.lua", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    second = luaload.lua("s")
    assert b"return 2" in second.script and second.sha != first.sha
    assert luaload.script_name(second.sha) == "s"


def test_a_script_used_by_another_file_must_end_with_its_entry_point(tmp_path, monkeypatch):
    import luaload

    monkeypatch.setattr(luaload, "LUA_DIR", tmp_path)
    (tmp_path / "_shared.lua").write_text("")
    (tmp_path / "body.lua").write_text("-- body.lua: b\n\nreturn 1\n")
    (tmp_path / "lib.lua").write_text("#!lua name=lib\n-- lib.lua: l\n-- uses: body\n\nx()\n")
    with pytest.raises(ValueError, match=r"return <function>\(KEYS, ARGV\)"):
        luaload.lua_source("lib")


def test_the_guard_knows_the_libraries_by_their_assembled_code():
    from helpers.backend.guard import is_suite_code, suite_libraries
    from luaload import lua_file, lua_source

    code = lua_source("dict_library").encode()
    assert suite_libraries()["racelab_dict"] == code
    assert is_suite_code("racelab_dict", code)
    assert not is_suite_code("racelab_dict", lua_file("dict_library").encode())  # not what loads
