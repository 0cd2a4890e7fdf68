"""Throwaway servers: they start on loopback with no persistence, and leave nothing behind, not
even when the process that started them is killed with SIGKILL."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from helpers.backend.server import (
    _WATCHDOG,
    BINARY_VARIABLE,
    LOCAL_BIN,
    RedisServer,
    ServerNotFound,
    find_binary,
    parse_version,
    server_description,
)


def test_parse_version():
    assert parse_version("8.6.3") == (8, 6, 3)
    assert parse_version("7.0.15\n") == (7, 0, 15)


def test_find_binary_refuses_too_old_versions():
    _need_binary()
    with pytest.raises(ServerNotFound, match=r"no redis-server >= 99\.0\.0 \(found: 8\."):
        find_binary(min_version=(99, 0, 0))


def test_server_starts_without_persistence_and_stops(owned_server):
    c = owned_server.client(decode_responses=True)
    assert c.ping()
    assert c.config_get("save")["save"] == ""
    assert c.config_get("appendonly")["appendonly"] == "no"
    assert c.config_get("bind")["bind"] == "127.0.0.1"
    c.close()
    pid = owned_server.process.pid
    owned_server.stop()
    assert not owned_server.is_running()
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    owned_server.stop()  # a second stop is harmless


def test_server_on_a_taken_port_fails_clearly(owned_server):
    with pytest.raises(RuntimeError, match="did not answer PING"):
        RedisServer(port=owned_server.port, startup_timeout=1).start()
    assert owned_server.client().ping()


def test_cluster_has_three_primaries_covering_all_slots(cluster_url):
    c = redis.RedisCluster.from_url(cluster_url)
    try:
        primaries = c.get_primaries()
        assert len(primaries) == 3
        assert int(c.cluster_info()["cluster_slots_assigned"]) == 16384
    finally:
        c.close()


# A "kernel": a process that starts throwaway servers the way a notebook does, prints their
# pids and ports, then waits to be killed.
_KERNEL = """
import os, sys, time
from helpers.backend.server import RedisClusterServer, RedisServer
if os.environ.get("RACELAB_TEST_NO_WATCHDOG"):  # shows that the test fails without the watchdog
    RedisServer._start_watchdog = lambda self: None
server = (RedisClusterServer() if sys.argv[1] == "cluster" else RedisServer()).start()
nodes = server.servers if sys.argv[1] == "cluster" else [server]
print(" ".join(f"{s.process.pid}:{s.port}" for s in nodes), flush=True)
time.sleep(120)
"""


def _need_binary() -> None:
    try:
        find_binary()
    except ServerNotFound as exc:
        if os.environ.get("RACELAB_REQUIRE_REAL") == "1":
            pytest.fail(f"RACELAB_REQUIRE_REAL=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))


def _alive(pid: int) -> bool:
    """Return True while pid is a running (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _answers(port: int) -> bool:
    with redis.Redis(port=port, socket_connect_timeout=1, socket_timeout=1, retry=None) as c:
        try:
            return bool(c.ping())
        except redis.ConnectionError:
            return False


@pytest.mark.parametrize("shape", ["server", "cluster"])
def test_no_server_outlives_a_kernel_killed_with_sigkill(shape):
    _need_binary()
    kernel = subprocess.Popen(
        [sys.executable, "-c", _KERNEL, shape], stdout=subprocess.PIPE, text=True
    )
    try:
        nodes = [tuple(map(int, n.split(":"))) for n in kernel.stdout.readline().split()]
        assert len(nodes) == (3 if shape == "cluster" else 1)
        assert all(_alive(pid) and _answers(port) for pid, port in nodes)
    finally:
        kernel.kill()  # SIGKILL: no atexit, no finally, no context manager runs in the kernel
        kernel.wait()
        kernel.stdout.close()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid, _ in nodes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid, _ in nodes if _alive(pid)] == []
    assert [port for _, port in nodes if _answers(port)] == []


def test_server_started_in_a_thread_outlives_the_thread(owned_server):
    # PR_SET_PDEATHSIG would kill it when the starting thread ends: the watchdog must not.
    started = []
    thread = threading.Thread(target=lambda: started.append(RedisServer().start()))
    thread.start()
    thread.join()
    server = started[0]
    try:
        time.sleep(0.2)
        assert server.is_running() and server.client().ping()
    finally:
        server.stop()


def test_stop_ends_the_watchdog_too(owned_server):
    watchdog = owned_server.watchdog
    assert watchdog is not None and watchdog.poll() is None
    owned_server.stop()
    assert watchdog.poll() is not None and owned_server.watchdog is None


def _fake_binary(tmp_path: Path, name: str, line: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{line}'\n")
    path.chmod(0o755)
    return path


def test_find_binary_says_which_version_it_found(tmp_path, monkeypatch):
    old = _fake_binary(
        tmp_path, "redis-server", "Redis server v=7.0.15 sha=00000000:0 malloc=libc bits=64"
    )
    monkeypatch.setenv(BINARY_VARIABLE, str(old))
    with pytest.raises(ServerNotFound, match=r"no redis-server >= 8\.4\.0 \(found: 7\.0\.15 at "):
        find_binary()
    assert find_binary(min_version=(7, 0)) == old


def test_the_binary_variable_is_the_only_server_considered(tmp_path, monkeypatch):
    monkeypatch.setenv(BINARY_VARIABLE, str(tmp_path / "missing-server"))
    with pytest.raises(ServerNotFound, match=r"found: none; looked in \$RACELAB_REDIS_SERVER="):
        find_binary()


def test_server_description_names_the_product(tmp_path):
    valkey = _fake_binary(
        tmp_path, "valkey-server", "Valkey server v=9.1.2 sha=00000000:1 malloc=libc"
    )
    assert server_description(valkey) == "valkey-server 9.1.2"


def test_server_description_of_the_binary_found_is_redis_8():
    _need_binary()
    assert server_description(find_binary()).startswith("redis-server 8.")


def test_none_hides_every_binary_as_on_a_machine_without_redis(tmp_path, monkeypatch):
    # .ci/run's first leg: RACELAB_REDIS_SERVER=none looks neither in .redis/bin nor on PATH.
    for name in ("redis-server", "redis-cli"):
        _fake_binary(tmp_path, name, "Redis server v=8.6.3 sha=00000000:0 malloc=libc bits=64")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(BINARY_VARIABLE, raising=False)
    assert find_binary("redis-cli") in (tmp_path / "redis-cli", LOCAL_BIN / "redis-cli")
    monkeypatch.setenv(BINARY_VARIABLE, "none")
    for name in ("redis-server", "redis-cli"):
        with pytest.raises(
            ServerNotFound, match=r"found: none; looked in \$RACELAB_REDIS_SERVER=none"
        ):
            find_binary(name)


@pytest.mark.parametrize("mark, killed", [("4242", True), ("9999", False)])
def test_the_watchdog_kills_only_a_process_that_still_shows_the_port(mark, killed):
    # A stand-in "server" whose command line holds 4242: once the watchdog's pipe closes (the
    # starting process is gone), it is killed if the mark matches, and left alone if not (the
    # pid went to another process meanwhile).
    stand_in = subprocess.Popen(["sleep", "4242"])
    read_end, write_end = os.pipe()
    watchdog = subprocess.Popen(
        ["sh", "-c", _WATCHDOG, "racelab-watchdog", str(stand_in.pid), mark], stdin=read_end
    )
    os.close(read_end)
    try:
        os.close(write_end)
        watchdog.wait(timeout=10)
        time.sleep(0.1)
        assert (stand_in.poll() == -signal.SIGKILL) is killed
    finally:
        stand_in.kill()
        stand_in.wait()


def test_a_valkey_binary_counts_as_the_redis_it_forked_from(tmp_path, monkeypatch):
    # Valkey 9.1.2 is not Redis 9: it has no DELEX or DIGEST. Its Redis is 7.2.4.
    valkey = _fake_binary(
        tmp_path, "valkey-server", "Valkey server v=9.1.2 sha=00000000:1 malloc=libc"
    )
    monkeypatch.setenv(BINARY_VARIABLE, str(valkey))
    with pytest.raises(ServerNotFound, match=r"found: Valkey 9\.1\.2 \(Redis 7\.2\.4\) at "):
        find_binary()
    assert find_binary(min_version=(7, 0)) == valkey
