"""connect(): backend selection, shared data between clients, which server answers and what it
can do (a refusal is not a missing command), timeouts on every client, quiet 8.4 calls."""

import subprocess
import sys
import threading

import pytest
import redis

from helpers import Lab, connect
from helpers.backend import capabilities as capabilities_module
from helpers.backend.capabilities import _probe, argument_tokens
from helpers.backend.identity import ServerIdentity, identify
from helpers.backend.lab import BACKENDS, CONNECT_TIMEOUT_S, RECONNECT_RETRIES, REPLY_TIMEOUT_S
from helpers.backend.namespace import Namespace
from helpers.backend.server import RedisServer
from helpers.backend.urls import redacted


def test_default_backend_is_embedded(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("RACELAB_BACKEND", raising=False)
    lab = connect("t")
    assert lab.kind == "embedded"
    assert lab.version == "8.4.0"
    assert lab.owns_server
    lab.close()


def test_redis_url_wins_over_backend_variable(monkeypatch, real_url):
    monkeypatch.setenv("REDIS_URL", real_url)
    monkeypatch.setenv("RACELAB_BACKEND", "embedded")
    lab = connect("t")
    assert lab.kind == "real"
    lab.close()


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend 'mongo'"):
        connect("t", backend="mongo")
    assert BACKENDS == ("embedded", "real", "cluster")


def test_clients_are_independent_but_share_data(lab):
    a, b = lab.client(), lab.client()
    a.set(lab.key("shared"), "from-a")
    assert b.get(lab.key("shared")) == "from-a"
    assert a.client_id() != b.client_id()


def test_clients_in_threads_see_every_increment(lab):
    def work():
        c = lab.client()
        for _ in range(200):
            c.incr(lab.key("n"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert lab.client().get(lab.key("n")) == "800"


def test_capabilities_on_each_backend(lab):
    caps = lab.caps
    assert caps.lua and caps.functions and caps.delex and caps.digest
    assert not caps.cluster
    if lab.kind == "real":
        assert caps.set_ifeq and caps.eval_ro and caps.script_kill
    else:
        assert not caps.eval_ro and not caps.script_kill  # fakeredis lacks both (see divergences)


def test_capability_probe_leaves_no_key(lab):
    assert lab.ns.keys(lab.client()) == []


def test_cluster_backend_reports_cluster(cluster_lab):
    assert cluster_lab.kind == "cluster"
    assert cluster_lab.caps.cluster
    assert "capabilities" in cluster_lab.describe()


def test_84_commands_print_no_experimental_warning_in_a_fresh_interpreter():
    # pytest resets warning filters per test, so check in a new interpreter with every
    # warning turned into an error: only redis-py's experimental notices are filtered.
    code = """
import warnings
from helpers import connect
lab = connect("t", backend="embedded")
c = lab.client()
k = lab.key("k")
c.set(k, "v")
assert c.digest(k)
assert c.delex(k, ifeq="v") == 1
try:
    warnings.warn("some other warning", UserWarning)
except UserWarning:
    print("other warnings still raise")
"""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "other warnings still raise"


def test_describe_names_backend_version_and_prefix(lab):
    text = lab.describe()
    assert f"backend: {lab.kind}" in text
    assert lab.version in text
    assert lab.ns.prefix in text


def test_lab_context_manager_cleans_up(real_url):
    with connect("t", url=real_url, owned=False) as lab:
        lab.client().set(lab.key("a"), 1)
    with connect("t", url=real_url, owned=False) as other:
        assert other.client().exists(lab.key("a")) == 0


# --- which server answers, and what it can do --------------------------------------------------

REDIS_86_INFO = {"redis_version": "8.6.3", "redis_mode": "standalone", "process_id": 7}
VALKEY_INFO = {
    "redis_version": "7.2.4",
    "server_name": "valkey",
    "valkey_version": "9.1.2",
    "server_mode": "standalone",
}


def test_the_server_is_identified_by_info_fields_not_by_redis_version():
    assert identify(REDIS_86_INFO) == ServerIdentity("redis", "8.6.3", "8.6.3")
    valkey = identify(VALKEY_INFO)
    assert (valkey.name, valkey.version, valkey.redis_version) == ("valkey", "9.1.2", "7.2.4")
    assert valkey.label() == "Valkey 9.1.2"
    # A Valkey build whose INFO has valkey_version but no server_name is still Valkey.
    no_name = {k: v for k, v in VALKEY_INFO.items() if k != "server_name"}
    assert identify(no_name).label() == "Valkey 9.1.2"


def test_describe_names_the_server_and_what_its_info_claims():
    lab = Lab(
        kind="real",
        ns=Namespace("t", "0" * 8),
        owns_server=False,
        url="redis://x:1/0",
        version="9.1.2",
        server=identify(VALKEY_INFO),
    )
    text = lab.describe()
    assert "server: Valkey 9.1.2 (INFO redis_version 7.2.4)" in text
    assert "redis-server" not in text


def test_embedded_backend_says_it_is_fakeredis(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    lab = connect("t", backend="embedded")
    try:
        assert lab.server == ServerIdentity("fakeredis", "8.4.0")
        assert "server: fakeredis (as Redis 8.4.0)" in lab.describe()
    finally:
        lab.close()


def test_real_server_identity_comes_from_info(lab):
    if lab.kind == "embedded":
        pytest.skip("fakeredis answers no INFO; the embedded backend reports its pinned version")
    info = lab.client().info("server")
    assert lab.server.name == "redis" and lab.version == info["redis_version"] == lab.server.version


def _raising(exc: Exception):
    def call():
        raise exc

    return call


@pytest.mark.parametrize(
    "error, known, usable",
    [
        (
            redis.exceptions.OutOfMemoryError(
                "command not allowed when used memory > 'maxmemory'."
            ),
            True,
            True,
        ),
        (
            redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
            True,
            True,
        ),
        (redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"), None, True),
        (redis.ResponseError("BUSY Redis is busy running a script."), True, True),
        (redis.ResponseError("MISCONF Errors writing to the AOF file"), None, True),
        (
            redis.exceptions.OutOfMemoryError("command not allowed ..."),
            False,
            False,
        ),  # and not listed
        (redis.ResponseError("unknown command 'DELEX', with args beginning with: "), None, False),
        (redis.ResponseError("ERR syntax error"), True, False),
        (
            redis.exceptions.NoPermissionError(
                "User racelab has no permissions to run the 'delex' command"
            ),
            True,
            False,
        ),
        (redis.RedisError("DELEX command doesn't exist in Redis commands"), None, False),
    ],
)
def test_a_refusal_is_not_a_missing_command(error, known, usable):
    ok, note = _probe(_raising(error), known, "DELEX command", "Redis 7.0.15")
    assert ok is usable
    assert note  # every refusal or absence says why
    if isinstance(error, redis.exceptions.NoPermissionError):
        assert "may not use DELEX command" in note


def test_a_dead_server_during_a_probe_is_not_read_as_a_missing_command():
    with pytest.raises(redis.ConnectionError):
        _probe(_raising(redis.ConnectionError("Connection refused")), True, "DELEX command", "x")


def test_option_tokens_are_read_from_command_docs_in_both_protocols(monkeypatch):
    resp3 = {
        b"set": {
            b"arguments": [
                {b"name": b"key"},
                {
                    b"name": b"condition",
                    b"arguments": [
                        {b"name": b"nx", b"token": b"NX"},
                        {b"name": b"ifeq-value", b"token": b"IFEQ"},
                    ],
                },
            ]
        }
    }
    resp2 = [
        "set",
        [
            "summary",
            "...",
            "arguments",
            [["name", "key"], ["name", "condition", "arguments", [["name", "xx", "token", "XX"]]]],
        ],
    ]
    for reply, expected in [(resp3, {"NX", "IFEQ"}), (resp2, {"XX"}), ([], None)]:
        monkeypatch.setattr(
            capabilities_module, "raw_command", lambda client, *args, reply=reply: reply
        )
        assert argument_tokens(None, "set") == expected


def test_missing_capabilities_say_why(lab):
    for name in lab.caps.names():
        if not getattr(lab.caps, name) and name != "cluster":
            assert lab.caps.why(name), f"{name} is missing and nothing says why"
            assert f"({lab.caps.why(name)})" in lab.caps.table()


def test_an_out_of_memory_server_keeps_its_84_commands(owned_server):
    # SET ... IFEQ on a full server answers OOM; the old probe read that as "no SET IFEQ".
    with owned_server.client() as admin:
        admin.config_set("maxmemory", 1)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            admin.execute_command("SET", "racelab:probe-check", "v", "IFEQ", "x")
    lab = connect("t", url=owned_server.url, owned=False)
    try:
        assert lab.caps.set_ifeq and lab.caps.delex and lab.caps.digest and lab.caps.lua
    finally:
        lab.close()


def test_a_read_only_replica_keeps_its_84_commands(owned_server):
    with RedisServer(extra_args=["--replicaof", "127.0.0.1", str(owned_server.port)]) as replica:
        with replica.client() as c:
            with pytest.raises(redis.exceptions.ReadOnlyError):
                c.execute_command("DELEX", "racelab:probe-check")
        lab = connect("t", url=replica.url, owned=False)
        try:
            assert lab.caps.set_ifeq and lab.caps.delex and lab.caps.digest
            assert "read only replica" in lab.caps.why("delex")
        finally:
            lab.close()


# --- every client has timeouts ----------------------------------------------------------------


def test_real_clients_get_timeouts_and_no_silent_retry_unless_told_otherwise(lab):
    if lab.kind == "embedded":
        pytest.skip("the embedded backend has no socket")
    plain = lab.client()
    options = plain.connection_pool.connection_kwargs
    assert options["socket_connect_timeout"] == CONNECT_TIMEOUT_S
    assert options["socket_timeout"] == REPLY_TIMEOUT_S
    assert options["retry"].get_retries() == RECONNECT_RETRIES == 0
    # A blocking command may ask for a longer wait; the caller's value wins.
    assert lab.client(socket_timeout=30).connection_pool.connection_kwargs["socket_timeout"] == 30


def test_cluster_clients_get_timeouts(cluster_lab):
    c = cluster_lab.client()
    node = c.get_default_node().redis_connection
    assert node.connection_pool.connection_kwargs["socket_timeout"] == REPLY_TIMEOUT_S


def test_passwords_are_not_printed():
    assert (
        redacted("redis://racelab:s3cret@127.0.0.1:6379/0")
        == "redis://racelab:***@127.0.0.1:6379/0"
    )
    assert redacted("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
