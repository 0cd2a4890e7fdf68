"""check() tells a server that did not answer from a wrong answer (issue 28 item 6).

Real faults where they are cheap: a throwaway redis-server that is stopped mid-session, one busy
running a script (BUSY), one at its memory limit (OOM). The rest (a timeout, LOADING, TRYAGAIN,
an explorer that recorded the failure as an actor's result) are raised by a stand-in check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import exercises
from exercises import FAULT, WRONG, ServerDidNotAnswer, Verdict, Wrong, check, exercise
from exercises.judge import raise_if_fault
from helpers.backend.connection import NoReply
from helpers.backend.lab import Lab, connect
from helpers.backend.scripts import lua_source
from helpers.backend.server import RedisServer
from helpers.instruments.load import ConnectionLost, RunTimeout
from helpers.luakit import run_in_background, server_available, wait_for_busy

needs_server = pytest.mark.skipif(not server_available(), reason="no redis-server >= 8.4")


def assert_fault(verdict: Verdict, error: str) -> None:
    """Assert verdict is the fault status, printed and raised as the server's failure."""
    assert verdict.status == FAULT, repr(verdict)
    line = repr(verdict)
    assert f"the server did not answer ({error}" in line and "not your answer" in line, line
    assert "\n" not in line
    with pytest.raises(ServerDidNotAnswer, match="not your answer"):
        assert verdict  # what a solution cell does: a clear error, not a bare AssertionError


@pytest.fixture
def throwaway(request: pytest.FixtureRequest) -> Iterator[tuple[RedisServer, Lab]]:
    """Yield a throwaway redis-server (extra args from the test's param) and a Lab on it."""
    server = RedisServer(extra_args=list(getattr(request, "param", ()))).start()
    lab = connect("check_faults", url=server.url, owned=True)
    try:
        yield server, lab
    finally:
        lab.close()
        server.stop()


@needs_server
def test_a_stopped_server_is_no_verdict(throwaway: tuple[RedisServer, Lab]) -> None:
    server, lab = throwaway
    assert check(lab, "00.aabb", 12)  # the server answers: the right answer is right
    server.stop()
    assert_fault(check(lab, "00.aabb", 12), "ServerUnavailable")
    assert_fault(check(lab, "00.aabb", 11), "ServerUnavailable")  # nor is a wrong one "wrong"


@needs_server
@pytest.mark.parametrize("throwaway", [("--busy-reply-threshold", "50")], indirect=True)
def test_a_server_busy_with_a_script_is_no_verdict(throwaway: tuple[RedisServer, Lab]) -> None:
    server, lab = throwaway
    runner, other = server.client(), server.client()
    spin = runner.register_script(lua_source("runaway_spin"))
    marker = lab.key("spin-marker")
    running = run_in_background(lambda: spin(keys=[marker], args=[10**12, "read"]))
    try:
        wait_for_busy(other, marker)
        assert_fault(check(lab, "00.aabb", 12), "ResponseError: BUSY")
    finally:
        other.script_kill()
        running.join()
    assert check(lab, "00.aabb", 12)


@needs_server
@pytest.mark.parametrize("throwaway", [("--maxmemory-policy", "noeviction")], indirect=True)
def test_a_server_out_of_memory_is_no_verdict(throwaway: tuple[RedisServer, Lab]) -> None:
    server, lab = throwaway
    admin = server.client()
    admin.config_set("maxmemory", 1)
    try:
        assert_fault(check(lab, "00.aabb", 12), "OutOfMemoryError")
    finally:
        admin.config_set("maxmemory", 0)
    assert check(lab, "00.aabb", 12)


@pytest.fixture
def stand_in() -> Iterator[Callable[[BaseException], Verdict]]:
    """Yield a function that runs a registered stand-in check raising the given exception."""
    raised: list[BaseException] = []

    @exercise("test.fault", answer="x", wrong=["x = 0"])
    def failing(lab: Lab, answer: Any) -> str:
        raise raised[-1]

    def run(exc: BaseException) -> Verdict:
        raised.append(exc)
        return check(None, "test.fault", 1)  # type: ignore[arg-type]

    try:
        yield run
    finally:
        exercises.EXERCISES.pop("test.fault", None)
        exercises.WRONG_TRIES.pop("test.fault", None)


@pytest.mark.parametrize(
    "exc,error",
    [
        (NoReply("no reply from 127.0.0.1:1 within 5.0 s"), "NoReply"),
        (redis.TimeoutError("Timeout reading from socket"), "TimeoutError"),
        (redis.exceptions.BusyLoadingError("Redis is loading the dataset"), "BusyLoadingError"),
        (redis.ResponseError("LOADING Redis is loading the dataset in memory"), "ResponseError"),
        (redis.exceptions.TryAgainError("TRYAGAIN multiple keys"), "TryAgainError"),
        (redis.exceptions.OutOfMemoryError("OOM command not allowed"), "OutOfMemoryError"),
        (ConnectionResetError("Connection reset by peer"), "ConnectionResetError"),
        (ConnectionLost("client 3's connection broke and redis-py reconnected"), "ConnectionLost"),
    ],
)
def test_each_kind_of_server_failure_is_no_verdict(
    stand_in: Callable[[BaseException], Verdict], exc: BaseException, error: str
) -> None:
    assert_fault(stand_in(exc), error)


def test_a_failure_behind_another_error_or_in_an_actors_result_is_no_verdict(
    stand_in: Callable[[BaseException], Verdict],
) -> None:
    try:
        try:
            raise redis.ConnectionError("Connection refused")
        except redis.ConnectionError as inner:
            raise RuntimeError("cleanup failed") from inner
    except RuntimeError as outer:
        assert_fault(stand_in(outer), "ConnectionError")
    try:
        raise_if_fault(["ok", redis.ConnectionError("Error 111 connecting")])
    except redis.ConnectionError as recorded:
        assert_fault(stand_in(recorded), "ConnectionError")


def test_the_answers_own_errors_stay_wrong_answers(
    stand_in: Callable[[BaseException], Verdict],
) -> None:
    for exc in (
        redis.ResponseError("ERR Error compiling script"),
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ZeroDivisionError("division by zero"),
        RunTimeout("8 clients did not finish within 120 s"),
        Wrong("off by one"),
    ):
        verdict = stand_in(exc)
        assert verdict.status == WRONG and not verdict, repr(verdict)
