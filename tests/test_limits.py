"""Bounded buffers and memory (issue 37, item 2): the recommended settings, and the suite's own bounds.

* the settings: ``client-output-buffer-limit normal`` and ``maxmemory-clients`` keep a server
  within ``maxmemory`` plus ``maxmemory-clients`` under the issue's attack (unread replies of a
  16 MB value on many connections), on a real server set up with them;
* the suite, on a server it does not own: ``run_clients``, ``Race.load`` and ``explore`` refuse
  more connections than a learner's share of ``maxclients``, and a Lab client refuses an argument
  over ``proto-max-bulk-len`` before sending it; each with one line naming the limit.
"""

from __future__ import annotations

import socket
import time
import types
from typing import Any

import pytest
from conftest import need_server_binary

from helpers import Race, connect, explore, run_clients
from helpers.backend.lab import Lab
from helpers.backend.limits import (
    CONNECTIONS_PER_LEARNER,
    MAX_BULK_BYTES,
    TooManyConnections,
    ValueTooLarge,
    check_bulk,
    check_connections,
)
from helpers.backend.server import RedisServer
from helpers.tools import acl

TOO_MANY = CONNECTIONS_PER_LEARNER + 1


def incr(client: Any) -> int:
    """A strategy that must never run: every call below is refused before it."""
    raise AssertionError("the flood was not refused")


def _foreign_lab(real_url: str) -> Lab:
    return connect("limits", url=real_url, owned=False)  # as on a shared server: the guard is on


def test_the_recommended_settings_bound_every_clients_buffers() -> None:
    settings = {name: value for name, value, _why in acl.server_settings(30)}
    assert settings["client-output-buffer-limit"] == "normal 32mb 8mb 10"
    assert settings["maxmemory-clients"] == "125mb" and acl.clients_memory_mb(1) == 67
    printed = acl.explain_learners({"ann": "pw"})
    assert 'CONFIG SET client-output-buffer-limit "normal 32mb 8mb 10"' in printed
    assert f"share of maxclients: {CONNECTIONS_PER_LEARNER} connections" in printed


def test_a_call_may_open_a_learners_share_and_no_more() -> None:
    shared = types.SimpleNamespace(kind="real", owns_server=False)
    check_connections(shared, CONNECTIONS_PER_LEARNER, "run_clients")
    with pytest.raises(TooManyConnections, match=r"at most 64, a learner's share of maxclients"):
        check_connections(shared, TOO_MANY, "run_clients")
    for unbounded in ("embedded", "real"):  # embedded, or a server the suite started
        check_connections(types.SimpleNamespace(kind=unbounded, owns_server=True), 10**4, "x")
    check_connections(types.SimpleNamespace(kind="embedded", owns_server=False), 10**4, "x")


def test_run_clients_load_and_explore_refuse_a_flood_before_opening_anything(
    real_url: str,
) -> None:
    lab = _foreign_lab(real_url)
    try:
        opened = len(lab._clients)
        with pytest.raises(
            TooManyConnections, match=r"run_clients\(clients=65\) would open 65"
        ) as e:
            run_clients(lab, incr, clients=TOO_MANY, iterations=1)
        assert "\n" not in str(e.value)  # one line
        with pytest.raises(TooManyConnections, match="would open 65 connections"):
            Race(lab, {"A": incr}).load(clients=TOO_MANY, iterations=1, fresh=False)
        actors = {f"A{i}": incr for i in range(TOO_MANY)}
        with pytest.raises(TooManyConnections, match="explore with 65 actors"):
            explore(lab, actors, lambda client, results: True)
        assert len(lab._clients) == opened  # refused before any client was made
    finally:
        lab.close()


def test_a_value_over_proto_max_bulk_len_is_refused_before_it_is_sent(real_url: str) -> None:
    check_bulk([b"SET", b"k", b"x" * MAX_BULK_BYTES])  # exactly the limit passes
    lab = _foreign_lab(real_url)
    try:
        c, key = lab.client(), lab.key("huge")
        with pytest.raises(ValueTooLarge, match=r"over proto-max-bulk-len \(16mb") as caught:
            c.set(key, b"x" * (MAX_BULK_BYTES + 1))
        assert "\n" not in str(caught.value)
        pipe = c.pipeline()
        pipe.set(key, "y" * (MAX_BULK_BYTES + 1))
        with pytest.raises(ValueTooLarge):
            pipe.execute()
        assert c.set(key, "small") and c.get(key) == "small"  # the connection was never reset
    finally:
        lab.cleanup()
        lab.close()


def test_the_embedded_backend_keeps_no_such_bound() -> None:
    lab = connect("limits", backend="embedded")
    try:
        c = lab.client()
        assert c.set(lab.key("big"), b"x" * (MAX_BULK_BYTES + 1))
    finally:
        lab.cleanup()
        lab.close()


def _unread(port: int, command: bytes, times: int) -> socket.socket:
    """Return a socket that sent command `times` times and will read nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(command * times)
    return sock


def test_unread_replies_stay_within_maxmemory_plus_maxmemory_clients() -> None:
    """The issue's attack, scaled: 16 MB replies never read, on one connection and on twenty."""
    need_server_binary()
    settings = {name: value for name, value, _why in acl.server_settings(1)}
    settings["maxmemory"] = "32mb"
    args = [a for name, value in settings.items() for a in (f"--{name}", value)]
    margin = acl.clients_memory_mb(1) * 2**20
    with RedisServer(extra_args=args) as server, server.client() as admin:
        admin.set("racelab:limits:big", b"x" * (MAX_BULK_BYTES - 64))
        command = b"GETRANGE racelab:limits:big 0 -1\r\n"
        socks = [_unread(server.port, command, 100)] + [
            _unread(server.port, command, 1) for _ in range(20)
        ]
        try:
            peak = 0
            for _ in range(30):
                peak = max(peak, int(admin.info("memory")["used_memory"]))
                time.sleep(0.05)
            stats = admin.info("stats")
        finally:
            for sock in socks:
                sock.close()
        assert peak <= 32 * 2**20 + margin, f"used_memory {peak / 2**20:.1f} MiB"
        assert stats["client_output_buffer_limit_disconnections"] >= 1  # the 100 replies
        assert stats["evicted_clients"] >= 1  # the twenty together
