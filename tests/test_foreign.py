"""Namespace safety on a shared server: other people's data survives a run, no suite key remains."""

import pytest

from helpers import UnsafeCommandError, connect
from helpers.tools import foreign


@pytest.fixture
def shared_server(owned_server):
    """A throwaway server that looks shared: full of foreign keys and a foreign library."""
    admin = owned_server.client()
    foreign.fill_foreign(admin)
    yield owned_server, admin, foreign.snapshot(admin)
    admin.close()


def test_a_full_lab_session_leaves_foreign_data_intact(shared_server):
    server, admin, before = shared_server
    lab = connect("safety", url=server.url, owned=False)  # as if REDIS_URL pointed at it
    c = lab.client()
    c.set(lab.key("s"), "v", px=60000)
    c.hset(lab.key("h"), mapping={"a": 1})
    c.rpush(lab.key("l"), 1, 2)
    c.incr(lab.ns.tagged("t", "n"))
    c.function_load("#!lua name=racelab_safety_test\n"
                    "redis.register_function('racelab_f', function() return 1 end)", replace=True)
    for destructive in (c.flushall, c.flushdb, c.function_flush, c.script_flush):
        with pytest.raises(UnsafeCommandError):
            destructive()
    with pytest.raises(UnsafeCommandError):
        c.function_delete(foreign.FOREIGN_LIBRARY)
    c.function_delete("racelab_safety_test")
    assert lab.cleanup() == 4
    lab.close()
    assert foreign.compare(before, foreign.snapshot(admin)) == []
    assert foreign.suite_leftovers(admin) == []
    assert admin.get(foreign.LOOKALIKE_KEY) == b"7"


def test_compare_reports_a_deleted_or_changed_foreign_key(shared_server):
    _server, admin, before = shared_server
    admin.delete("app:config")
    admin.hset("app:user:1", "role", "guest")
    admin.persist("app:session:42")
    problems = foreign.compare(before, foreign.snapshot(admin))
    assert "foreign key b'app:config' was deleted" in problems
    assert "foreign key b'app:user:1' was modified" in problems
    assert "foreign key b'app:session:42' had its TTL changed" in problems


def test_compare_reports_a_deleted_library(shared_server):
    _server, admin, before = shared_server
    admin.function_delete(foreign.FOREIGN_LIBRARY)
    assert foreign.compare(before, foreign.snapshot(admin)) == [
        f"function library {foreign.FOREIGN_LIBRARY!r} was deleted"]


def test_suite_leftovers_sees_our_keys_but_not_the_lookalike(shared_server):
    _server, admin, _before = shared_server
    lab = connect("safety", url=_server.url, owned=False)
    lab.client().set(lab.key("left"), 1)
    assert foreign.suite_leftovers(admin) == [lab.key("left")]
    lab.cleanup()
    lab.close()


def test_suite_leftovers_sees_a_suite_library_left_loaded(shared_server):
    _server, admin, _before = shared_server
    admin.function_load("#!lua name=racelab_leftover\n"
                        "redis.register_function('racelab_leftover_f', function() return 1 end)")
    try:
        assert foreign.suite_leftovers(admin) == ["function library 'racelab_leftover'"]
    finally:
        admin.function_delete("racelab_leftover")
    assert foreign.suite_leftovers(admin) == []
