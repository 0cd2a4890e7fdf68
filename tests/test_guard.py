"""The guard: destructive commands are refused on a server the suite does not own."""

import pytest

from helpers import connect
from helpers.guard import UnsafeCommandError, check_command


@pytest.mark.parametrize("args", [
    ("FLUSHALL",), ("flushdb", "ASYNC"), ("FUNCTION", "FLUSH"), ("function", "flush", "SYNC"),
    ("SCRIPT", "FLUSH"), ("SCRIPT FLUSH",), ("FUNCTION FLUSH", "SYNC"), ("FUNCTION DELETE", "userlib"),
    ("SCRIPT", "KILL"), ("SHUTDOWN", "NOSAVE"), ("CONFIG", "SET", "maxmemory", "1"),
    ("DEBUG", "SLEEP", "0"), ("SWAPDB", 0, 1), (b"FLUSHALL",), ("FUNCTION", "DELETE", "userlib"),
    ("FUNCTION", "LOAD", "REPLACE", "#!lua name=userlib\nredis.register_function('f', function() end)"),
])
def test_destructive_commands_are_refused_when_not_owned(args):
    with pytest.raises(UnsafeCommandError, match="not started by the suite"):
        check_command(args, owned=False)


@pytest.mark.parametrize("args", [
    ("GET", "k"), ("SET", "k", "v"), ("EVALSHA", "abc", 0), ("SCRIPT", "LOAD", "return 1"),
    ("FUNCTION", "DELETE", "racelab_dict"), ("FUNCTION DELETE", "racelab_dict"), ("FUNCTION", "LIST"), ("CONFIG", "GET", "maxmemory"),
    ("FUNCTION", "LOAD", "REPLACE", "#!lua name=racelab_demo\nredis.register_function('f', function() end)"),
])
def test_ordinary_commands_pass(args):
    check_command(args, owned=False)


def test_everything_passes_on_an_owned_server():
    check_command(("FLUSHALL",), owned=True)


def test_guard_covers_client_pipeline_and_transaction(lab):
    if lab.owns_server:
        pytest.skip("the embedded backend is owned by the suite; the guard is off there by design")
    c = lab.client()
    c.set(lab.key("x"), 1)
    with pytest.raises(UnsafeCommandError):
        c.flushall()
    with pytest.raises(UnsafeCommandError):
        c.execute_command("FLUSHDB")
    pipe = c.pipeline(transaction=True)
    pipe.set(lab.key("y"), 1)
    with pytest.raises(UnsafeCommandError):
        pipe.flushdb()
    pipe.reset()
    with pytest.raises(UnsafeCommandError):
        c.script_flush()
    with pytest.raises(UnsafeCommandError):
        c.function_flush()
    with pytest.raises(UnsafeCommandError):
        c.function_delete("someone_elses_lib")
    assert c.get(lab.key("x")) == "1"
    assert c.get(lab.key("y")) is None  # the queued SET never ran


def test_guard_on_cluster_client(cluster_lab):
    c = cluster_lab.client()
    with pytest.raises(UnsafeCommandError):
        c.flushall()
    with pytest.raises(UnsafeCommandError):
        c.pipeline().execute_command("FLUSHDB")


def test_owned_throwaway_server_allows_flush(owned_server):
    lab = connect("guard", url=owned_server.url)
    assert lab.owns_server
    c = lab.client()
    c.set(lab.key("x"), 1)
    assert c.flushall()
    lab.close()
