"""The embedded backend: fakeredis in this process, pinned to Redis 8.4.

One ``FakeServer`` holds the data; every client made by ``new_client`` talks to it, so
separate clients (one per thread) really share keys, as they would on a real server.
Clients speak Redis 8.4's ``SET ... IFEQ/IFNE/IFDEQ/IFDNE`` through ``helpers.backend.fake84``.
"""

from __future__ import annotations

import fakeredis

from helpers.backend.fake84 import Redis84Connection

EMBEDDED_VERSION = (8, 4, 0)


def new_server() -> fakeredis.FakeServer:
    """Return a fresh in-process server that reports Redis 8.4."""
    return fakeredis.FakeServer(version=EMBEDDED_VERSION)


def connection_class() -> type:
    """Return the connection class of the embedded backend's clients (fakeredis with SET IF*)."""
    return Redis84Connection


def new_client(server: fakeredis.FakeServer, **kwargs) -> fakeredis.FakeRedis:
    """Return a new client (its own connection) of the given in-process server."""
    kwargs.setdefault("connection_class", Redis84Connection)
    return fakeredis.FakeRedis(server=server, **kwargs)
