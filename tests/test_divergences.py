"""The divergence register (helpers.tools.divergences), each entry pinned on both backends.

Every entry of ``DIVERGENCES`` has a test named ``test_<id>`` here that asserts today's behaviour of
the embedded backend AND of the real server (the ``lab`` fixture runs each on both). When fakeredis
or Redis changes, the test fails: update the register, docs/divergences.md and the notebooks that
mention it. The register is also checked against docs/divergences.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from helpers import Lab, connect
from helpers.backend.server import RedisServer
from helpers.tools.divergences import DIVERGENCES, by_id, markdown_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "divergences.md"


def _error(call: Any) -> str:
    """Return the message of the redis.ResponseError that call raises (fails if it does not)."""
    with pytest.raises(redis.ResponseError) as info:
        call()
    return str(info.value)


# ---- the register itself -------------------------------------------------------------------------


def test_every_register_entry_has_a_pinning_test() -> None:
    module = sys.modules[__name__]
    missing = [d.id for d in DIVERGENCES if not callable(getattr(module, f"test_{d.id}", None))]
    assert missing == []


def test_register_ids_are_unique_and_by_id_finds_them() -> None:
    ids = [d.id for d in DIVERGENCES]
    assert len(ids) == len(set(ids))
    assert by_id(ids[0]) is DIVERGENCES[0]
    with pytest.raises(KeyError):
        by_id("no_such_divergence")


def test_docs_page_contains_the_register_table() -> None:
    assert markdown_table() in DOC.read_text()


# ---- expiry --------------------------------------------------------------------------------------


def test_psetex_setex_getex_round_expiry(lab: Lab) -> None:
    c = lab.client()
    p, s, g, ref = (lab.key(n) for n in ("psetex", "setex", "getex", "set_px"))
    c.psetex(p, 100_500, "v")
    c.execute_command("SETEX", s, 100, "v")
    c.set(g, "v")
    c.getex(g, px=100_500)
    c.set(ref, "v", px=100_500)
    remainders = [c.pexpiretime(k) % 1000 for k in (p, s, g)]
    if lab.kind == "embedded":
        assert remainders == [0, 0, 0]  # the absolute expiry is truncated to a whole second
    else:
        assert remainders != [
            0,
            0,
            0,
        ]  # milliseconds kept (all three whole: a 1-in-10^9 coincidence)
    # SET ... PX (what the suite uses) keeps the milliseconds on both.
    assert abs(c.pexpiretime(ref) - c.pexpiretime(p)) < 1_500


def test_expiry_kept_as_float_seconds(lab: Lab) -> None:
    c, k = lab.client(), lab.key("far")
    c.set(k, "v", pxat=2**63 - 1)
    off_by = abs(c.pexpiretime(k) - (2**63 - 1))
    if lab.kind == "embedded":
        assert off_by > 0
    else:
        assert off_by == 0


# ---- Lua -----------------------------------------------------------------------------------------


def test_lua_not_sandboxed(lab: Lab) -> None:
    c = lab.client()
    probe = (
        "return {type(os), type(os.execute), type(rawget(_G, 'io')), type(rawget(_G, 'require'))}"
    )
    if lab.kind == "embedded":
        assert c.eval(probe, 0) == ["table", "function", "table", "function"]
    else:
        assert c.eval(probe, 0) == ["table", "nil", "nil", "nil"]
        assert "nonexistent global variable 'io'" in _error(lambda: c.eval("return type(io)", 0))


def test_lua_global_write_error_wording(lab: Lab) -> None:
    message = _error(lambda: lab.client().eval("x = 1; return 1", 0))
    if lab.kind == "embedded":
        assert message == "Script attempted to set global variables: x"
    else:
        assert "Attempt to modify a readonly table" in message


def test_lua_multiple_returns_crash(lab: Lab) -> None:
    c = lab.client()
    if lab.kind == "embedded":
        with pytest.raises(AssertionError, match="Invalid response type"):
            c.eval("return 1, 2", 0)
        assert c.ping() is True
    else:
        assert c.eval("return 1, 2", 0) == 1


def test_lua_error_messages(lab: Lab) -> None:
    c = lab.client()
    raised = _error(lambda: c.eval("error('boom')", 0))
    table = _error(lambda: c.eval("error({err='MYERR boom'})", 0))
    if lab.kind == "embedded":
        assert raised.startswith("Error running script (call to f_") and "boom" in raised
        assert "MYERR" not in table
    else:
        assert raised.startswith("user_script:1: boom script: ")
        assert table.startswith("MYERR boom")
    # redis.error_reply, which the suite's scripts use, reads the same on both.
    assert _error(lambda: c.eval("return redis.error_reply('MYERR boom')", 0)) == "MYERR boom"


def test_lua_redis_call_error_location(lab: Lab) -> None:
    c, k = lab.client(), lab.key("text")
    c.set(k, "not a number")
    message = _error(lambda: c.eval("return redis.call('INCR', KEYS[1])", 1, k))
    if lab.kind == "embedded":
        assert message == "value is not an integer or out of range"
    else:
        assert message.startswith("value is not an integer or out of range script: ")
        assert message.endswith(", on @user_script:1.")


def test_lua_missing_libraries(lab: Lab) -> None:
    found = lab.client().eval("return {type(bit), type(cjson), type(struct), type(cmsgpack)}", 0)
    if lab.kind == "embedded":
        assert found == ["nil", "table", "nil", "nil"]
    else:
        assert found == ["table", "table", "table", "table"]


def test_no_script_kill_no_busy(lab: Lab) -> None:
    # Never send SCRIPT KILL to a server the suite does not own; the capability probe is enough.
    assert lab.caps.script_kill is (lab.kind != "embedded")
    if lab.kind == "embedded":
        assert "unknown command" in _error(lambda: lab.client().execute_command("SCRIPT", "KILL"))


def test_no_script_kill_answers_notbusy_on_a_real_server_we_own(owned_server: RedisServer) -> None:
    with redis.Redis.from_url(owned_server.url) as c:
        assert _error(c.script_kill).startswith("NOTBUSY")


def test_no_eval_ro(lab: Lab) -> None:
    c = lab.client()
    assert lab.caps.eval_ro is (lab.kind != "embedded")
    if lab.kind == "embedded":
        assert "unknown command 'eval_ro'" in _error(lambda: c.eval_ro("return 1", 0))
    else:
        assert c.eval_ro("return 1", 0) == 1


def test_no_wait(lab: Lab) -> None:
    c = lab.client()
    if lab.kind == "embedded":
        assert "unknown command 'wait'" in _error(lambda: c.wait(0, 0))
    else:
        assert c.wait(0, 0) == 0  # no replica asked for: answered at once


def test_no_info_config_object_debug(lab: Lab) -> None:
    c = lab.client()
    k = lab.key("s")
    c.set(k, "v")
    if lab.kind == "embedded":
        for call in (
            lambda: c.info("server"),
            lambda: c.config_get("maxmemory"),
            lambda: c.object("encoding", k),
        ):
            assert "unknown command" in _error(call)
    else:
        assert c.info("server")["redis_version"] == lab.version
        assert "maxmemory" in c.config_get("maxmemory")
        assert c.object("encoding", k) in ("embstr", "raw")


# ---- other commands ------------------------------------------------------------------------------


def test_expire_option_error_wording(lab: Lab) -> None:
    c, k = lab.client(), lab.key("k")
    c.set(k, "v")
    both = _error(lambda: c.execute_command("EXPIRE", k, 100, "GT", "LT"))
    order = _error(lambda: c.execute_command("EXPIRE", k, "abc", "FOO"))
    if lab.kind == "embedded":
        assert both == "NX and XX, GT or LT options at the same time are not compatible"
        assert order == "value is not an integer or out of range"
    else:
        assert both == "GT and LT options at the same time are not compatible"
        assert order == "Unsupported option FOO"


def test_argument_checked_before_type(lab: Lab) -> None:
    c, k = lab.client(), lab.key("text")
    c.set(k, "v")
    hincrby = _error(lambda: c.execute_command("HINCRBY", k, "f", "x"))
    zadd = _error(lambda: c.execute_command("ZADD", k, "x", "a"))
    if lab.kind == "embedded":
        assert hincrby.startswith("WRONGTYPE") and zadd.startswith("WRONGTYPE")
    else:
        assert hincrby == "value is not an integer or out of range"
        assert zadd == "value is not a valid float"
    # With a valid argument both say WRONGTYPE.
    assert _error(lambda: c.execute_command("HINCRBY", k, "f", "1")).startswith("WRONGTYPE")


# ---- the real server's defect --------------------------------------------------------------------


def _raw_replies(client: redis.Redis, *args: Any) -> list[Any]:
    """Return every reply to one command, read up to an ECHO sentinel on a connection then dropped."""
    conn = client.connection_pool.get_connection()
    replies: list[Any] = []
    try:
        conn.send_command(*args)
        conn.send_command("ECHO", "sentinel-3f1c")
        while True:
            try:
                reply = conn.read_response()
            except redis.ResponseError as exc:
                reply = exc
            if reply == b"sentinel-3f1c":
                return replies
            replies.append(reply)
    finally:
        conn.disconnect()  # never hand a connection that may be off by one back to the pool
        client.connection_pool.release(conn)


def test_set_ifdeq_bad_digest_get_double_reply(lab: Lab) -> None:
    c, k = lab.client(decode_responses=False), lab.key("k")
    c.set(k, "v")
    replies = _raw_replies(c, "SET", k, "w", "IFDEQ", "abc", "GET")
    if lab.kind == "embedded":
        assert len(replies) == 1 and isinstance(replies[0], redis.ResponseError)
    else:
        assert (
            replies[0] == b"v" and isinstance(replies[1], redis.ResponseError) and len(replies) == 2
        )
    assert "must be exactly 16 hexadecimal characters" in str(replies[-1])
    assert c.get(k) == b"v"
    # Missing key: the GET reply is nil and the digest is never checked: one reply on both.
    assert _raw_replies(c, "SET", lab.key("missing"), "w", "IFDEQ", "abc", "GET") == [None]


def test_set_ifdeq_bad_digest_get_desynchronises_a_real_connection(
    owned_server: RedisServer,
) -> None:
    with redis.Redis.from_url(owned_server.url, decode_responses=True) as c:
        c.response_callbacks.clear()  # replies as sent (redis-py maps SET's reply to a bool)
        c.set("k", "v")
        assert c.execute_command("SET", "k", "w", "IFDNE", "abc", "GET") == "v"
        with pytest.raises(redis.ResponseError, match="16 hexadecimal"):
            c.ping()  # the PING reads the SET's second reply...
        assert c.get("k") == "PONG"  # ...and GET reads PING's reply
        c.connection_pool.disconnect()
        assert c.get("k") == "v"  # a new connection is in step again


def test_set_ifdeq_bad_digest_get_inside_a_script_returns_the_old_value(lab: Lab) -> None:
    c, k = lab.client(), lab.key("k")
    c.set(k, "v")
    script = "return redis.pcall('SET', KEYS[1], 'w', 'IFDEQ', 'abc', 'GET')"
    if lab.kind == "embedded":
        assert "16 hexadecimal" in _error(lambda: c.eval(script, 1, k))
    else:
        assert c.eval(script, 1, k) == "v"  # the error is lost
    assert c.ping() is True and c.get(k) == "v"


def test_the_embedded_backend_and_a_real_server_agree_outside_the_register() -> None:
    # A guard against a register that silently absorbs everything: plain commands agree.
    with connect("divergences_sanity", backend="embedded") as lab:
        c = lab.client()
        c.set(lab.key("n"), 41)
        assert c.incr(lab.key("n")) == 42
