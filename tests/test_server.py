"""Throwaway servers: they start on loopback with no persistence, and leave nothing behind."""

import subprocess

import pytest
import redis

from helpers.backend.server import RedisServer, ServerNotFound, find_binary, parse_version


def test_parse_version():
    assert parse_version("8.6.3") == (8, 6, 3)
    assert parse_version("7.0.15\n") == (7, 0, 15)


def test_find_binary_refuses_too_old_versions():
    with pytest.raises(ServerNotFound, match="no redis-server >= 99"):
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
