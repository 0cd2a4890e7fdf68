"""The shared-server check: other people's data is planted at full size, and every change to it is seen."""

import time

import pytest

from helpers import UnsafeCommandError, connect
from helpers.tools import foreign


@pytest.fixture
def shared_server(owned_server):
    """A throwaway server that looks shared: full of foreign keys, libraries and a cached script."""
    admin = owned_server.client()
    planted = foreign.fill_foreign(admin)
    yield owned_server, admin, foreign.snapshot(admin), planted
    admin.close()


def test_the_plant_is_full_size_and_of_every_type(shared_server):
    _server, admin, before, planted = shared_server
    assert planted["keys"] == len(before.keys) >= foreign.FOREIGN_KEYS
    kinds = {kind for kind, _payload, _expiry in before.keys.values()}
    assert kinds == {b"string", b"hash", b"list", b"set", b"zset", b"stream"}
    assert all(planted[k] >= 100 for k in foreign.KINDS)
    assert planted["hash with field TTLs"] >= 100
    assert (
        admin.httl(b"app:hash:600", "name")[0] > 0 and admin.httl(b"app:hash:601", "name")[0] == -1
    )
    with_ttl = [k for k, (_kind, _payload, expiry) in before.keys.items() if expiry > 0]
    assert len(with_ttl) == planted["with a TTL"] >= 300
    assert set(foreign.BINARY_KEYS) | set(foreign.LOOKALIKE_KEYS) <= before.keys.keys()
    assert set(before.libraries) == {foreign.FOREIGN_LIBRARY, foreign.LOOKALIKE_LIBRARY}
    assert before.script_cached is True
    assert before.config and before.acl


def test_a_full_lab_session_leaves_foreign_data_intact(shared_server):
    server, admin, before, _planted = shared_server
    lab = connect("safety", url=server.url, owned=False)  # as if REDIS_URL pointed at it
    c = lab.client()
    c.set(lab.key("s"), "v", px=60000)
    c.hset(lab.key("h"), mapping={"a": 1})
    c.rpush(lab.key("l"), 1, 2)
    c.incr(lab.ns.tagged("t", "n"))
    c.function_load(
        "#!lua name=racelab_safety_test\n"
        "redis.register_function('racelab_f', function() return 1 end)",
        replace=True,
    )
    for destructive in (c.flushall, c.flushdb, c.function_flush, c.script_flush):
        with pytest.raises(UnsafeCommandError):
            destructive()
    with pytest.raises(UnsafeCommandError):
        c.function_delete(foreign.FOREIGN_LIBRARY)
    with pytest.raises(UnsafeCommandError, match="racelab_someone_elses"):
        c.function_delete(foreign.LOOKALIKE_LIBRARY)  # named like ours, but not our code
    c.function_delete("racelab_safety_test")
    assert lab.cleanup() == 4
    lab.close()
    assert foreign.compare(before, foreign.snapshot(admin)) == []
    assert foreign.suite_leftovers(admin) == []


def _changed(admin, before, change) -> list[str]:
    change(admin)
    return foreign.compare(before, foreign.snapshot(admin))


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda a: a.delete(b"app:string:0"), "foreign key b'app:string:0' was deleted"),
        (lambda a: a.append(b"app:string:1", "x"), "foreign key b'app:string:1' was modified"),
        (lambda a: a.hpersist(b"app:hash:600", "name"), "foreign key b'app:hash:600' was modified"),
        (lambda a: a.persist(b"app:string:0"), "foreign key b'app:string:0' had its TTL changed"),
        (
            lambda a: a.xgroup_createconsumer(b"app:stream:1780", "readers", "them"),
            "foreign key b'app:stream:1780' was modified",
        ),
        (
            lambda a: a.set(b"app:new", 1),
            "a key outside the suite's prefix was created: b'app:new'",
        ),
        (
            lambda a: a.function_delete(foreign.FOREIGN_LIBRARY),
            f"function library '{foreign.FOREIGN_LIBRARY}' was deleted",
        ),
        (
            lambda a: a.function_load(
                foreign.LOOKALIKE_LIBRARY_CODE.replace("theirs too", "ours now"), replace=True
            ),
            f"function library '{foreign.LOOKALIKE_LIBRARY}' was replaced",
        ),
        (
            lambda a: a.script_flush(),
            f"the cached script {foreign.FOREIGN_SCRIPT_SHA} was flushed from the script cache",
        ),
        (
            lambda a: a.config_set("maxmemory-policy", "allkeys-lru"),
            "CONFIG changed: maxmemory-policy",
        ),
        (lambda a: a.acl_setuser("intruder", enabled=True), "ACL LIST changed: user intruder on"),
    ],
    ids=[
        "deleted",
        "modified",
        "hash-field TTL",
        "TTL removed",
        "stream group",
        "created",
        "library deleted",
        "library replaced",
        "script flushed",
        "config",
        "acl",
    ],
)
def test_compare_reports_every_kind_of_change(shared_server, change, expected):
    _server, admin, before, _planted = shared_server
    assert (
        admin.exists(b"app:string:0")
        and admin.exists(b"app:hash:600")
        and admin.exists(b"app:stream:1780")
    )
    problems = _changed(admin, before, change)
    assert any(p.startswith(expected) for p in problems), problems


def test_a_ttl_set_again_to_the_same_seconds_is_a_change_of_absolute_expiry(shared_server):
    _server, admin, before, _planted = shared_server
    ttl_s = admin.ttl(b"app:string:0")
    time.sleep(0.01)
    admin.pexpire(b"app:string:0", ttl_s * 1000)  # the same TTL in seconds, a later expiry
    assert foreign.compare(before, foreign.snapshot(admin)) == [
        f"foreign key b'app:string:0' had its TTL changed (expiry {before.keys[b'app:string:0'][2]} -> "
        f"{admin.pexpiretime(b'app:string:0')} ms)"
    ]


def test_suite_leftovers_sees_our_keys_but_not_the_lookalikes(shared_server):
    server, admin, _before, _planted = shared_server
    lab = connect("safety", url=server.url, owned=False)
    lab.client().set(lab.key("left"), 1)
    assert foreign.suite_leftovers(admin) == [lab.key("left")]
    lab.cleanup()
    lab.close()


def test_suite_leftovers_sees_a_suite_library_left_loaded(shared_server):
    _server, admin, before, _planted = shared_server
    admin.function_load(
        "#!lua name=racelab_leftover\n"
        "redis.register_function('racelab_leftover_f', function() return 1 end)"
    )
    try:
        assert foreign.suite_leftovers(admin) == ["function library 'racelab_leftover'"]
        assert foreign.suite_leftovers(admin, server_wide=False) == []
    finally:
        admin.function_delete("racelab_leftover")
    assert foreign.suite_leftovers(admin, before) == []
