"""The guard: destructive commands are refused on a server the suite does not own."""

import pytest

from helpers import connect
from helpers.backend.guard import UnsafeCommandError, check_command


@pytest.mark.parametrize(
    "args",
    [
        ("FLUSHALL",),
        ("flushdb", "ASYNC"),
        ("FUNCTION", "FLUSH"),
        ("function", "flush", "SYNC"),
        ("SCRIPT", "FLUSH"),
        ("SCRIPT FLUSH",),
        ("FUNCTION FLUSH", "SYNC"),
        ("FUNCTION DELETE", "userlib"),
        ("SCRIPT", "KILL"),
        ("SHUTDOWN", "NOSAVE"),
        ("CONFIG", "SET", "maxmemory", "1"),
        ("DEBUG", "SLEEP", "0"),
        ("SWAPDB", 0, 1),
        (b"FLUSHALL",),
        ("FUNCTION", "DELETE", "userlib"),
        (
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=userlib\nredis.register_function('f', function() end)",
        ),
    ],
)
def test_destructive_commands_are_refused_when_not_owned(args):
    with pytest.raises(UnsafeCommandError, match="not started by the suite"):
        check_command(args, owned=False)


@pytest.mark.parametrize(
    "args",
    [
        ("GET", "k"),
        ("SET", "k", "v"),
        ("EVALSHA", "abc", 0),
        ("SCRIPT", "LOAD", "return 1"),
        ("FUNCTION", "DELETE", "racelab_dict"),
        ("FUNCTION DELETE", "racelab_dict"),
        ("FUNCTION", "LIST"),
        ("CONFIG", "GET", "maxmemory"),
        (
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=racelab_demo\nredis.register_function('f', function() end)",
        ),
    ],
)
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


@pytest.mark.parametrize(
    "args",
    [
        ("SELECT", 1),
        ("KEYS", "*"),
        ("CONFIG", "REWRITE"),
        ("ACL", "SETUSER", "bob", "on"),
        ("ACL DELUSER", "bob"),
        ("MODULE", "LOAD", "/tmp/x.so"),
        ("SAVE",),
        ("BGSAVE",),
        ("BGREWRITEAOF",),
        ("FAILOVER",),
        ("CLUSTER", "FAILOVER"),
        ("CLUSTER", "FORGET", "abc"),
        ("CLUSTER", "SETSLOT", 1, "NODE", "abc"),
        ("SLOWLOG", "RESET"),
        ("LATENCY", "RESET"),
    ],
)
def test_server_wide_admin_commands_are_refused_when_not_owned(args):
    with pytest.raises(UnsafeCommandError, match="not started by the suite"):
        check_command(args, owned=False)


@pytest.mark.parametrize(
    "args",
    [
        ("EVAL", "return redis.call('FLUSHALL')", 0),
        ("EVAL", 'redis.call("flushdb", "async") return 1', 0),
        ("EVAL_RO", "return redis.pcall( 'SwapDB', 0, 1)", 0),
        ("EVAL", "redis.call('select', 1) return redis.call('set', KEYS[1], 'x')", 1, "k"),
        ("EVAL", "return redis.call('MOVE', KEYS[1], 1)", 1, "k"),
        ("SCRIPT", "LOAD", "return redis.call('flushall')"),
        ("SCRIPT LOAD", b"return redis.call('flushall')"),
        ("EVAL", "return redis.call 'flushall'", 0),
        ("EVAL", "return redis.call [[FLUSHDB]]", 0),
        ("EVAL", "local cmd = 'flushall' return redis['call'](cmd)", 0),
        (
            "FUNCTION",
            "LOAD",
            "#!lua name=racelab_x\nredis.register_function('f', function() "
            "return redis.call('flushall') end)",
        ),
    ],
)
def test_scripts_that_call_a_data_wiping_command_are_refused_when_not_owned(args):
    # Redis runs FLUSHALL, FLUSHDB, SWAPDB, SELECT, MOVE, MIGRATE from Lua (CONFIG SET it refuses).
    with pytest.raises(UnsafeCommandError, match="Lua script that calls"):
        check_command(args, owned=False)


@pytest.mark.parametrize(
    "args",
    [
        (
            "EVAL",
            "-- never FLUSHALL here\nreturn redis.call('SET', KEYS[1], 'flushall-report')",
            1,
            "k",
        ),
        ("EVAL", "return redis.call('moved')", 0),
        ("SCRIPT", "LOAD", "return redis.call('GET', KEYS[1])"),
    ],
)
def test_scripts_that_only_mention_such_words_pass(args):
    check_command(args, owned=False)


def test_every_suite_script_passes_the_guard():
    from helpers.backend.scripts import LUA_DIR

    for path in sorted(LUA_DIR.glob("*.lua")):
        check_command(("EVAL", path.read_text(), 0), owned=False)


def test_guard_covers_transaction_helper_raw_command_and_pipeline_script_loading(lab):
    if lab.owns_server:
        pytest.skip("the embedded backend is owned by the suite; the guard is off there by design")
    from helpers.backend.capabilities import raw_command

    c, key = lab.client(), lab.key("x")
    c.set(key, 1)
    with pytest.raises(UnsafeCommandError):
        c.transaction(lambda pipe: pipe.flushdb(), key)
    with pytest.raises(UnsafeCommandError):
        raw_command(c, "FLUSHALL")
    with pytest.raises(UnsafeCommandError):
        c.from_url(lab.url).flushall()  # a client built from the class is not owned either
    wiping = c.register_script("return redis.call('flushdb')")
    pipe = c.pipeline()
    wiping(client=pipe)
    with pytest.raises(UnsafeCommandError):
        pipe.execute()  # the pipeline's SCRIPT LOAD of the body is checked
    assert c.get(key) == "1"


# --- issue 16: names normalised, more commands, every way a client sends -------------------------


def shown(args: tuple) -> str:
    """Return a test id for args that is the same in every process (a memoryview's repr is not)."""
    parts = (f"memoryview({bytes(a)!r})" if isinstance(a, memoryview) else repr(a) for a in args)
    return f"({', '.join(parts)})"


@pytest.mark.parametrize(
    "args",
    [
        (memoryview(b"FLUSHALL"),),
        ("SCRIPT", memoryview(b"FLUSH")),
        (memoryview(b"CONFIG"), "SET", "maxmemory", "1"),
        (bytearray(b"flushdb"),),
        ("fLuShAlL",),
        (b"script flush",),
        (memoryview(b"function flush"),),
        ("Function", bytearray(b"Restore"), b"x"),
        (" FLUSHALL ",),
        ("CONFIG\tSET", "a", "b"),
        ("COPY", "k1", "k2", "DB", 3, "REPLACE"),
        ("copy", "k1", "k2", b"db", 0),
        ("MIGRATE", "h", 6379, "k", 0, 5000),
        ("reset",),
        ("MONITOR",),
        ("CLIENT", "UNBLOCK", 7),
        ("SCRIPT", "DEBUG", "YES"),
    ],
    ids=shown,
)
def test_command_names_are_normalised_before_the_check(args):
    with pytest.raises(UnsafeCommandError, match="not started by the suite"):
        check_command(args, owned=False)


@pytest.mark.parametrize(
    "args",
    [
        ("COPY", "k1", "k2"),
        ("COPY", "k1", "k2", "REPLACE"),
        ("SET", "db", "DB"),
        (memoryview(b"GET"), "k"),
        ("HSET", "migrate", "reset", "flushall"),
    ],
    ids=shown,
)
def test_arguments_that_only_look_like_refused_names_pass(args):
    check_command(args, owned=False)


def test_hand_packed_commands_are_read_as_resp_arrays():
    from helpers.backend.guard import packed_commands

    assert packed_commands(b"*1\r\n$8\r\nFLUSHALL\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") == [
        [b"FLUSHALL"],
        [b"GET", b"k"],
    ]
    assert packed_commands([b"*2\r\n$3\r\nGET\r\n$2\r\nk", memoryview(b"1\r\n")]) == [
        [b"GET", b"k1"]
    ]
    for unreadable in (
        b"FLUSHALL\r\n",
        b"*1\r\n$8\r\nFLUSH",
        b"*1\r\n:1\r\n",
        b"*1\r\n$3\r\nGETX\r\n",
    ):
        with pytest.raises(ValueError):
            packed_commands(unreadable)


def test_every_way_a_client_sends_is_guarded_on_a_server_not_owned(lab):
    if lab.owns_server:
        pytest.skip("the embedded backend is owned by the suite; the guard is off there by design")
    c, key = lab.client(), lab.key("x")
    c.set(key, 1)
    with pytest.raises(UnsafeCommandError):
        c.pubsub().execute_command("FLUSHALL")
    with pytest.raises(UnsafeCommandError):
        with c.monitor():
            pass
    conn = c.connection_pool.get_connection()
    try:
        with pytest.raises(UnsafeCommandError):
            conn.send_command(memoryview(b"FLUSHDB"))
        with pytest.raises(UnsafeCommandError):
            conn.send_packed_command(conn.pack_command("SCRIPT", "FLUSH"))
        with pytest.raises(UnsafeCommandError):
            conn.send_packed_command([b"*1\r\n$7\r\nFLUSHDB\r\n"])
        with pytest.raises(UnsafeCommandError):
            conn.pack_commands([("GET", key), ("FLUSHALL",)])
    finally:
        c.connection_pool.release(conn)
    with pytest.raises(UnsafeCommandError):
        lab.client(single_connection_client=True).connection.send_command("FLUSHALL")
    assert c.get(key) == "1"


def test_a_url_database_is_selected_while_connecting_even_though_select_is_refused(real_url):
    lab = connect("guard_db", url=real_url.rsplit("/", 1)[0] + "/2", owned=False)
    try:
        c = lab.client()
        c.set(lab.key("x"), 1)
        assert c.connection_pool.connection_kwargs["db"] == 2
        with pytest.raises(UnsafeCommandError, match="refusing SELECT"):
            c.execute_command("SELECT", 0)
        assert c.get(lab.key("x")) == "1"
    finally:
        lab.cleanup()
        lab.close()


def test_the_guard_stays_off_on_an_owned_server(owned_server):
    lab = connect("guard", url=owned_server.url)
    assert lab.owns_server
    conn = lab.client().connection_pool.get_connection()
    conn.send_command(
        "CONFIG", "SET", "maxmemory-policy", "noeviction"
    )  # no guard in the connection
    assert conn.read_response() in (b"OK", "OK")
    lab.close()


def test_a_cluster_node_s_own_client_is_guarded(cluster_lab):
    c = cluster_lab.client()
    for node in c.get_primaries():
        with pytest.raises(UnsafeCommandError):
            c.get_redis_connection(node).flushall()
    with pytest.raises(UnsafeCommandError):
        c.pubsub().execute_command("FLUSHALL")


def test_every_refused_name_is_refused_in_every_spelling():
    from helpers.backend.guard import _WHOLE_SERVER

    for name in _WHOLE_SERVER:
        for args in (
            tuple(name.lower().split()),
            (name.title(),),
            tuple(w.encode() for w in name.split()),
            (memoryview(name.encode()),),
        ):
            with pytest.raises(UnsafeCommandError):
                check_command(args + ("x",), owned=False)
