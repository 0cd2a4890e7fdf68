"""The embedded backend: fakeredis in this process, pinned to Redis 8.4.

One ``FakeServer`` holds the data; every client made by ``new_client`` talks to it, so
separate clients (one per thread) really share keys, as they would on a real server.
Clients speak Redis 8.4's ``SET ... IFEQ/IFNE/IFDEQ/IFDNE`` through ``helpers.backend.fake84``; their
connections are Lab connections (``helpers.backend.connection.EmbeddedConnection``).
"""

from __future__ import annotations

from typing import Any

import fakeredis
import redis

from helpers.backend.connection import EmbeddedConnection, new_pool
from helpers.backend.fake84 import Redis84Connection
from helpers.backend.modes import Wiring

EMBEDDED_VERSION = (8, 4, 0)


def new_server() -> fakeredis.FakeServer:
    """Return a fresh in-process server that reports Redis 8.4."""
    return fakeredis.FakeServer(version=EMBEDDED_VERSION)


def new_client(
    server: fakeredis.FakeServer, wiring: Wiring | None = None, **kwargs: Any
) -> redis.Redis:
    """Return a new client (its own connections) of the given in-process server, wired with wiring."""
    single = kwargs.pop("single_connection_client", False)
    pool = new_pool(
        wiring if wiring is not None else Wiring(),
        connection_class=EmbeddedConnection,
        server=server,
        **kwargs,
    )
    client = redis.Redis(connection_pool=pool, single_connection_client=single)
    client.auto_close_connection_pool = True  # close() disconnects the pool made here
    return client


def plain_client(server: fakeredis.FakeServer, **kwargs: Any) -> fakeredis.FakeRedis:
    """Return a client of server without the Lab's hooks (no mode, no guard): a benchmark's baseline."""
    return fakeredis.FakeRedis(server=server, connection_class=Redis84Connection, **kwargs)
