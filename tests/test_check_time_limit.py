"""check() stops an answer that runs past its limit: too slow, not wrong (issue 37 item 4).

The limit is patched down from 10 s to 1 s; the promise scales with it (returns within limit + 2 s,
12 s at the default). Answers that sleep, spin in pure Python, or spin only inside a forced
schedule's actor thread are all stopped, and no thread of theirs is left spinning.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exercises
from exercises import SLOW, check
from helpers.backend.lab import Lab, connect
from helpers.instruments import adopt
from helpers.instruments.deadline import TimeLimitReached, time_limit

LIMIT_S = 1.0


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """Yield an embedded lab, with check()'s limit patched down to LIMIT_S."""
    monkeypatch.setattr(exercises, "TIME_LIMIT_S", LIMIT_S)
    the_lab = connect("time_limit", backend="embedded")
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        the_lab.close()


def sleeping(client: Any, key: str, token: str) -> bool:
    time.sleep(60)
    return True


def spinning(client: Any, key: str, token: str) -> bool:
    while True:
        pass


def spinning_in_a_schedule(client: Any, key: str, token: str) -> bool:
    """A right release when called directly; as an actor of a forced schedule, it spins."""
    if adopt.current() is not None:
        while True:
            pass
    return (
        client.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
            "return 0",
            1,
            key,
            token,
        )
        == 1
    )


@pytest.mark.parametrize("answer", [sleeping, spinning, spinning_in_a_schedule])
def test_an_answer_past_the_limit_is_too_slow_not_wrong(
    lab: Lab, answer: Callable[..., bool]
) -> None:
    started = time.monotonic()
    verdict = check(lab, "02.my_release", answer)
    seconds = time.monotonic() - started
    assert verdict.status == SLOW and not verdict, repr(verdict)
    assert repr(verdict) == (
        f"02.my_release: ✗ too slow: your `my_release` ran past {LIMIT_S:g} s and was stopped: "
        "that is too slow, not wrong (does it sleep, wait for something, or loop without end?)"
    )
    assert seconds < LIMIT_S + 2.0, f"took {seconds:.1f} s"
    time.sleep(0.2)  # a stopped thread ends at its next instruction
    left = [t.name for t in threading.enumerate() if t.name.startswith("racelab-actor-")]
    assert left == [] or answer is sleeping, left  # a sleeping one ends when its sleep does


def test_a_quick_answer_is_judged_as_before(lab: Lab) -> None:
    assert check(lab, "00.aabb", 12) and check(lab, "00.aabb", 11).status == "wrong"


def test_the_limit_cannot_be_swallowed_and_leaves_no_timer() -> None:
    def stubborn() -> None:
        while True:
            try:
                time.sleep(10)
            except Exception:  # a learner's catch-all misses a BaseException
                pass

    started = time.monotonic()
    with pytest.raises(TimeLimitReached), time_limit(0.3):
        stubborn()
    assert time.monotonic() - started < 2.0
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)


def test_an_actor_spinning_outside_redis_is_named_and_stopped(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import run_schedule
    from helpers.instruments import actors
    from helpers.instruments.actors import ScheduleError

    monkeypatch.setattr(actors, "STEP_TIMEOUT_S", 0.5)

    def spins(client: Any) -> None:
        client.ping()
        while True:  # no round trip, no sleep: only an interruption ends it
            pass

    started = time.monotonic()
    with pytest.raises(ScheduleError, match="actor A did not reach its next round trip"):
        run_schedule(lab, {"A": spins}, "AA")
    assert time.monotonic() - started < 3.0
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if t.name == "racelab-actor-A"]
