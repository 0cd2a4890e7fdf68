"""Nothing outside the lab is ever contacted: a client a library builds inside an actor, for any
URL or host, is adopted (its commands go to the lab's server) or refused before its first socket
opens. A plain socket listens on a free loopback port, each client is built for that port, and
the listener must have accepted nothing. Each refusal says why in ActorRefused.reason.
"""

from __future__ import annotations

import asyncio
import pickle
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from helpers import Lab, explore, run_schedule
from helpers.instruments.adopt import ActorRefused, Refusal


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket listening on a free loopback port, never accepting (connections wait in line)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock
    finally:
        sock.close()


def connections_made(sock: socket.socket) -> int:
    """Return how many connections reached the listener (each waits to be accepted)."""
    sock.setblocking(False)
    made = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return made
        conn.close()
        made += 1


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()
    return f"redis://{host}:{port}/0"


def test_the_listener_counts_what_redis_py_would_open_outside_a_race(
    listener: socket.socket,
) -> None:
    """The control: outside an actor, a client for the port does connect (and gets no reply)."""
    with pytest.raises(redis.TimeoutError):
        redis.Redis.from_url(url_of(listener), socket_timeout=0.2).ping()
    assert connections_made(listener) == 1


# A library builds its own client from what its caller gives it, every way redis-py allows.
BUILDS: dict[str, Callable[[str], redis.Redis]] = {
    "Redis.from_url": lambda url: redis.Redis.from_url(url, decode_responses=True),
    "Redis(host, port)": lambda url: redis.Redis(
        host="127.0.0.1", port=int(url.rsplit(":", 1)[1].split("/")[0]), decode_responses=True
    ),
    "StrictRedis.from_url": lambda url: redis.StrictRedis.from_url(url, decode_responses=True),
    "a ConnectionPool": lambda url: redis.Redis(
        connection_pool=redis.ConnectionPool.from_url(url, decode_responses=True)
    ),
    "a BlockingConnectionPool": lambda url: redis.Redis(
        connection_pool=redis.BlockingConnectionPool.from_url(url, decode_responses=True)
    ),
}


@pytest.mark.parametrize("build", BUILDS, ids=list(BUILDS))
def test_a_client_built_inside_an_actor_is_adopted_and_never_dials_its_url(
    lab: Lab, listener: socket.socket, build: str
) -> None:
    key, url = lab.key("n"), url_of(listener)

    def library(client):
        own = BUILDS[build](url)
        value = int(own.get(key) or 0)
        own.set(key, value + 1)
        with own.pipeline() as pipe:
            pipe.incr(key).get(key)
            return pipe.execute()[1]

    found = explore(lab, {"A": library, "B": library}, lambda c, r: True, watch=[key])
    assert found.total == 20  # three steps each, on the lab's server
    assert {o.results["A"] for o in found.outcomes} <= {"2", "3", "4"}
    assert connections_made(listener) == 0


def test_a_client_built_before_the_race_is_adopted_too(lab: Lab, listener: socket.socket) -> None:
    key, own = lab.key("n"), redis.Redis.from_url(url_of(listener))
    trace = run_schedule(lab, {"A": lambda client: own.incr(key)}, "A", watch=[key])
    assert trace.results == {"A": 1}
    assert connections_made(listener) == 0


@pytest.mark.parametrize(
    "open_own",
    [
        lambda url: redis.Redis.from_url(url, single_connection_client=True),
        lambda url: redis.Redis.from_url(url).monitor().__enter__(),
        lambda url: redis.Redis.from_url(url).connection_pool.get_connection(),
    ],
    ids=["single_connection_client", "monitor", "a connection taken from the pool"],
)
def test_a_connection_adoption_cannot_reach_is_refused_before_it_opens(
    lab: Lab, listener: socket.socket, open_own: Callable[[str], Any]
) -> None:
    key, url = lab.key("n"), url_of(listener)

    def library(client):
        client.incr(key)
        try:
            open_own(url)
        except Exception:  # noqa: BLE001 - a library that hides the error: the race does not
            return "busy"
        return "connected"

    with pytest.raises(ActorRefused, match="that the race cannot adopt") as refused:
        run_schedule(lab, {"A": library}, "A", watch=[key])
    assert refused.value.reason is Refusal.UNADOPTABLE
    assert url.split("//")[1].split("/")[0] in str(refused.value)  # says where it would go
    assert connections_made(listener) == 0


# --- asyncio: adopted, or refused where adoption cannot reach ----------------------------------


def asyncio_library(url: str, key: str, prebuilt: Any = None) -> Callable[[Any], Any]:
    """Return an actor that calls an asyncio library as its README shows (asyncio.run)."""

    async def hit() -> Any:
        own = prebuilt or redis.asyncio.Redis.from_url(url)
        try:
            return await own.incr(key)
        finally:
            await own.aclose()

    return lambda client: asyncio.run(hit())


@pytest.mark.parametrize("where", ["inside the actor", "before the race"])
def test_an_asyncio_client_is_adopted_and_never_opens_its_socket(
    lab: Lab, listener: socket.socket, where: str
) -> None:
    key, url = lab.key("n"), url_of(listener)
    prebuilt = redis.asyncio.Redis.from_url(url) if where == "before the race" else None
    actors = {"A": asyncio_library(url, key, prebuilt), "B": lambda client: client.incr(key)}
    found = explore(lab, actors, lambda c, r: int(c.get(key)) == 2, watch=[key])
    assert (found.total, found.bad) == (2, [])
    trace = run_schedule(lab, actors, "AB", watch=[key])
    assert trace.results == {"A": 1, "B": 2}  # A's INCR was a step on the lab's server
    assert connections_made(listener) == 0


def asyncio_monitor(url: str) -> Callable[[Any], Any]:
    """Return an actor whose asyncio library opens a connection of its own (MONITOR)."""

    async def watch() -> Any:
        own = redis.asyncio.Redis.from_url(url)
        async with own.monitor() as monitor:
            return await monitor.next_command()

    return lambda client: asyncio.run(watch())


def test_an_asyncio_connection_adoption_cannot_reach_is_refused_before_its_socket_opens(
    lab: Lab, listener: socket.socket
) -> None:
    key, url = lab.key("n"), url_of(listener)
    actors = {"A": asyncio_monitor(url), "B": lambda client: client.incr(key)}
    with pytest.raises(ActorRefused, match="opens an asyncio connection of its own") as refused:
        explore(lab, actors, lambda c, r: True, watch=[key])
    assert refused.value.reason is Refusal.ASYNCIO
    assert connections_made(listener) == 0


def test_an_asyncio_cluster_client_is_refused_though_it_wraps_the_refusal(
    lab: Lab, listener: socket.socket
) -> None:
    host, port = listener.getsockname()

    async def library(client) -> Any:
        await client.get(lab.key("n"))
        return await redis.asyncio.RedisCluster(host=host, port=port).get(lab.key("n"))

    with pytest.raises(ActorRefused, match="opens an asyncio connection of its own") as refused:
        run_schedule(lab, {"A": library}, "AA")  # RedisClusterException: no reachable node
    assert refused.value.reason is Refusal.ASYNCIO
    assert connections_made(listener) == 0


def test_an_asyncio_library_that_swallows_the_refusal_is_refused_all_the_same(
    lab: Lab, listener: socket.socket
) -> None:
    key, url = lab.key("n"), url_of(listener)
    watch = asyncio_monitor(url)

    def library(client):
        client.get(key)
        try:
            return watch(client)
        except Exception:  # noqa: BLE001 - what a library that retries later would do
            return "busy"

    with pytest.raises(ActorRefused) as refused:
        run_schedule(lab, {"A": library}, "A", watch=[key])
    assert refused.value.reason is Refusal.ASYNCIO
    assert connections_made(listener) == 0


def test_an_async_actor_s_own_socket_is_refused_before_it_opens(
    lab: Lab, listener: socket.socket
) -> None:
    host, port = listener.getsockname()

    async def dial(client) -> Any:
        await client.get(lab.key("n"))
        return await asyncio.open_connection(host, port)

    with pytest.raises(ActorRefused, match="event loop was asked to open a connection") as refused:
        run_schedule(lab, {"A": dial}, "AA")
    assert refused.value.reason is Refusal.ASYNCIO
    assert connections_made(listener) == 0


def test_outside_an_actor_an_asyncio_client_connects_as_usual(listener: socket.socket) -> None:
    async def ping() -> None:
        own = redis.asyncio.Redis.from_url(url_of(listener), socket_timeout=0.2)
        try:
            await own.ping()
        finally:
            await own.aclose()

    with pytest.raises(redis.TimeoutError):
        asyncio.run(ping())
    assert connections_made(listener) == 1


# --- every refusal carries its reason --------------------------------------------------------


def test_each_refusal_names_its_reason(lab: Lab) -> None:
    key = lab.key("n")

    def subscriber(client):
        client.get(key)
        client.pubsub().subscribe("news")

    def renew(client) -> None:
        try:
            client.pexpire(key, 1_000)
        except ActorRefused:
            pass  # what the thread is told; the race raises it too

    jobs: queue.Queue = queue.Queue()
    outside = threading.Thread(target=lambda: jobs.get()(), daemon=True)
    outside.start()  # a thread no actor's call started: it stays an OS thread of its own

    def renewer(client):
        client.set(key, "me")
        jobs.put(lambda: renew(client))  # it renews through A's client
        outside.join(5)
        return True

    cases = {
        Refusal.PUBSUB: {"A": subscriber},
        Refusal.THREAD: {"A": renewer},
        Refusal.NO_ROUND_TRIP: {"A": lambda client: 42},
    }
    for reason, actors in cases.items():
        with pytest.raises(ActorRefused) as refused:
            run_schedule(lab, actors, "A", watch=[key], finish=True)
        assert refused.value.reason is reason


def test_a_refusal_keeps_its_reason_through_pickling() -> None:
    refused = ActorRefused("actor A subscribes", reason=Refusal.PUBSUB)
    again = pickle.loads(pickle.dumps(refused))
    assert (str(again), again.reason) == ("actor A subscribes", Refusal.PUBSUB)
    assert [r.value for r in Refusal] == [
        "thread",
        "pubsub",
        "no_round_trip",
        "asyncio",
        "unadoptable",
        "unmapped",
    ]
