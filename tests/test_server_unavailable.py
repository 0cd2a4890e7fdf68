"""A killed server is the suite's one-line ServerUnavailable in every entry point (issue 37 item 4).

Each test starts a throwaway redis-server of its own, kills it by its PID (SIGKILL: refused at
once), and asks an entry point of the suite: connect, a forced run, an exploration, a threaded
load, a check, show. Every one answers with ServerUnavailable naming the server's URL without its
password and what to do, never redis-py's raw ConnectionError.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis
from conftest import need_server_binary

from exercises import FAULT, check
from helpers import Invariant, Race, connect, explore, run_clients, run_schedule, show
from helpers.backend.connection import WHAT_TO_DO, dropped, unavailable
from helpers.backend.lab import Lab, ServerUnavailable
from helpers.backend.server import RedisServer

PASSWORD = "s3cret-never-printed"


def _counter(client: Any, key: str) -> None:
    """One read-modify-write: the shape every race notebook runs."""
    client.set(key, int(client.get(key) or 0) + 1)


@pytest.fixture
def killed() -> Iterator[tuple[Lab, RedisServer]]:
    """Yield a lab on a throwaway password-protected server that was then killed (SIGKILL)."""
    need_server_binary()
    server = RedisServer().start()
    server.client().config_set("requirepass", PASSWORD)  # its own throwaway server
    url = server.url.replace("redis://", f"redis://:{PASSWORD}@")
    lab = connect("unavailable", url=url, owned=False)
    try:
        lab.client().set(lab.key("n"), 0)
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(5)
        yield lab, server
    finally:
        lab.close()
        server.stop()


def assert_unavailable(error: BaseException | None, lab: Lab) -> None:
    """Assert error is the suite's one line: the redacted URL, the cause, what to do."""
    assert isinstance(error, ServerUnavailable), repr(error)
    text = str(error)
    port = (lab.url or "").rsplit(":", 1)[1].split("/")[0]
    assert text.startswith(f"cannot use the Redis server at redis://:***@127.0.0.1:{port}/0: "), (
        text
    )
    assert "Connection refused" in text and text.endswith(WHAT_TO_DO), text
    assert PASSWORD not in text and "\n" not in text
    assert error._render_traceback_() == [f"ServerUnavailable: {text}"]  # IPython's one line


def _raised(call: Callable[[], Any]) -> BaseException | None:
    try:
        call()
    except Exception as exc:  # the test inspects it
        return exc
    return None


def _race(lab: Lab) -> Race:
    key = lab.key("n")
    actor = partial(_counter, key=key)
    never = Invariant("nothing", "nothing must hold", lambda c, r: True)
    return Race(lab, {"A": actor, "B": actor}, watch=[key], invariant=never)


ENTRY_POINTS: dict[str, Callable[[Lab], Any]] = {
    "connect": lambda lab: connect("unavailable", url=lab.url),
    "a client's command": lambda lab: lab.client().get(lab.key("n")),
    "run": lambda lab: _race(lab).run("ABAB"),
    "run_schedule": lambda lab: run_schedule(lab, _race(lab).actors, "ABAB"),
    "explore": lambda lab: _race(lab).explore(),
    "explore()": lambda lab: explore(lab, _race(lab).actors, lambda c, r: True),
    "load": lambda lab: _race(lab).load(clients=2, iterations=3),
    "run_clients": lambda lab: run_clients(lab, _race(lab).strategy, clients=2, iterations=3),
    "cleanup": lambda lab: lab.cleanup(),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_killed_server_is_one_server_unavailable_line(
    killed: tuple[Lab, RedisServer], entry: str
) -> None:
    lab, _ = killed
    assert_unavailable(_raised(lambda: ENTRY_POINTS[entry](lab)), lab)


def test_check_on_a_killed_server_is_no_verdict_naming_it(killed: tuple[Lab, RedisServer]) -> None:
    lab, _ = killed
    verdict = check(lab, "00.aabb", 12)
    assert verdict.status == FAULT
    port = (lab.url or "").rsplit(":", 1)[1].split("/")[0]
    assert repr(verdict) == (
        "00.aabb: ✗ no verdict: the server did not answer (ServerUnavailable: cannot use the Redis "
        f"server at redis://:***@127.0.0.1:{port}/0: Error 111 connecting to 127.0.0.1:{port}. "
        "Connection refused): not your answer; run the cell again once the server is back "
        "(lab.describe() says where it is)"
    )


def test_show_needs_no_server(killed: tuple[Lab, RedisServer]) -> None:
    listing = show(_counter, "lock_release")
    assert "def _counter" in repr(listing) and "KEYS[1]" in repr(listing)


def test_a_connection_reset_mid_command_is_server_unavailable() -> None:
    need_server_binary()
    server = RedisServer().start()
    lab = connect("unavailable", url=server.url, owned=False)
    waiting = lab.client(socket_timeout=30)
    waiting.ping()
    outcome: list[BaseException | None] = []
    blocked = threading.Thread(
        target=lambda: outcome.append(_raised(lambda: waiting.blpop([lab.key("q")], 20)))
    )
    try:
        blocked.start()
        while not any(
            c.get("cmd") == "blpop" for c in server.client().client_list()
        ):  # it waits on the server
            pass
        os.kill(server.process.pid, signal.SIGKILL)
        blocked.join(10)
    finally:
        lab.close()
        server.stop()
    (error,) = outcome
    assert isinstance(error, ServerUnavailable), repr(error)
    assert f"at {server.url}: Connection closed by server; " in str(error)


def test_only_a_dropped_connection_is_unavailable() -> None:
    refused = redis.ConnectionError("Error 111 connecting to h:1. Connection refused.")
    assert dropped(refused) and dropped(redis.ConnectionError("Connection closed by server."))
    assert dropped(redis.ConnectionError("max number of clients reached"))
    assert not dropped(redis.AuthenticationError("invalid username-password pair"))
    assert not dropped(redis.exceptions.BusyLoadingError("Redis is loading the dataset"))
    assert not dropped(redis.ConnectionError("the schedule ended: A is stopped"))
    assert not dropped(unavailable("redis://h:1/0", refused))  # said once, never wrapped again
    assert str(unavailable("redis://h:1/0", refused)) == (
        f"cannot use the Redis server at redis://h:1/0: Error 111 connecting to h:1. "
        f"Connection refused; {WHAT_TO_DO}"
    )
