"""A time limit on a learner's code: past it, the code is stopped where it is, sleeping or spinning.

``time_limit(seconds)`` is a context manager for the main thread (a notebook cell, a test). Past
the limit a timer signal (SIGALRM) raises ``TimeLimitReached`` in the main thread, wherever it is:
inside ``time.sleep``, a pure-Python busy loop, an explorer's greenlet actor, or a wait for an
actor thread. The actor and client threads started meanwhile (``racelab-actor-*``,
``racelab-client-*``) get the same exception at their next Python instruction, so a spinning one
ends too. The signal repeats every ``GRACE_S`` until the block is left, so a cleanup that waits for
a stuck thread is cut as well (at most ``MAX_SIGNALS`` times). Off the main thread, or without SIGALRM, there is no limit.

``TimeLimitReached`` is a BaseException, like ``KeyboardInterrupt``: a learner's
``except Exception`` cannot swallow it.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

GRACE_S = 0.5  # after the limit, the signal repeats this often until the block is left
MAX_SIGNALS = 8  # the timer stops itself after this many, even if the block is never left
STOPPED_THREADS = ("racelab-actor-", "racelab-client-")  # names of the threads a run starts


class TimeLimitReached(BaseException):
    """Raised in code that ran past its time limit (a BaseException: except Exception misses it)."""


def raise_in(thread: threading.Thread, error: type[BaseException] = TimeLimitReached) -> None:
    """Raise error (a class) in thread at its next Python instruction (after a C call returns)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(error)
        )


def _started_since(before: set[threading.Thread]) -> list[threading.Thread]:
    """Return the live run threads (actors, clients) that were not there before."""
    return [
        t
        for t in threading.enumerate()
        if t not in before and t.name.startswith(STOPPED_THREADS) and t.is_alive()
    ]


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Run the block with a limit of seconds; past it, TimeLimitReached (see the module)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "SIGALRM")
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0  # somebody else's timer: leave it
    ):
        yield
        return
    before = set(threading.enumerate())
    fired = [0]

    def expired(signum: int, frame: FrameType | None) -> None:
        fired[0] += 1
        if fired[0] >= MAX_SIGNALS:  # never an endless alarm, whatever happens to the block
            signal.setitimer(signal.ITIMER_REAL, 0)
        for thread in _started_since(before):
            raise_in(thread)
        raise TimeLimitReached(f"ran past its limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, GRACE_S)
    try:
        yield
    finally:
        _disarm(previous)


def _disarm(previous: Any) -> None:
    """Stop the timer and put SIGALRM's handler back, even if the timer fires meanwhile."""
    while True:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            return
        except TimeLimitReached:
            continue
