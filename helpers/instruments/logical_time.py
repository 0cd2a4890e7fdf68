"""The race's own clock: inside an actor, time is the run's, not the wall's.

While an actor runs in a forced schedule, an exploration or the stepper (``ScheduleRun``), the
clock it reads is a *logical* clock of that run (``LogicalClock``), seen by each actor through a
view of its own (``ActorClock``):

* ``time.time``, ``time.time_ns``, ``datetime.datetime.now`` and ``utcnow``,
  ``datetime.date.today``, and ``time.gmtime``, ``localtime``, ``strftime`` and
  ``clock_gettime(CLOCK_REALTIME)`` without a time given: ``EPOCH`` (2100-01-01 00:00:00 UTC)
  plus how far the actor's clock has moved;
* ``time.monotonic``, ``time.perf_counter`` and their ``_ns`` forms: 1,000 s
  (``MONOTONIC_START_NS``) plus the same;
* ``time.sleep(s)`` returns at once and moves the actor's clock by s (``helpers.instruments.
  adopt``, which also counts sleeps against the spin bound).

Every run starts at the same instant, and a round trip takes no time. An actor's sleep moves its
own clock at once, and the run's clock (what the others read) when the sleeper's next step
begins: its next round trip comes after its sleep ended, while the others' steps before it ran
during the sleep, as a real server would allow. An actor reads the later of the two. So the
same schedule reads the same times in every run, and a library that stamps its requests or
keeps a time window explores to the same counts every time. The instant is far ahead so that an
absolute expiry an actor computes from it (``SET ... EXAT``, ``PEXPIREAT``) lies in the server's
future: like a relative one, it ends only when a step says so.

The clock is shared state, so the explorer's reduction counts it as a key
(``helpers.instruments.footprint.CLOCK``): every step of a client may read it (an actor's code
after a reply reads the time, or does not, which is known only once it ran), and a step that
brings the run's clock up to a sleep, or a clock step that moves it, writes it. Without that, a
reduced search took "B reads the time, then A's sleep shows" and "A's sleep shows, then B reads"
for one schedule (tests/test_logical_time.py keeps the case; tests/fuzz_explorer.py draws sleeps
and time reads).

A clock step is a step of its own in the schedule. ``lease_expires`` (or a pause, ``"A~"``) ends
a TTL on the server and leaves the actors' clock where it is; ``time_passes(s, keys)`` moves the
run's clock by s and runs the TTLs of keys down by as much. An actor's code between two round
trips runs as part of the step before (the one whose reply it reads), and all of it before the
first round trip runs when the run starts, except in a race with a ``time_passes`` step: there
each client starts at its first step (``ScheduleRun``), so a limiter that reads the time, then
sends, reads the time of the step that sends. Otherwise a time an actor reads before its next
round trip is read before every clock step that comes ahead of that round trip: as if the actor
had stalled between reading its clock and sending, never as if it had started late. redlock-py's
``lock()`` reads the time, sends SET NX, reads it again and backs off when more than its lease
has passed: were ``lease_expires`` to move the clock, a taker could never get in after a lease
ran out, and notebook 08's lease story would find no overlap (0 of 144 schedules, where there
are 48 of 216). With the clock left alone, no time passes between an actor's reads and its
round trips: the case in which such a check lets the overlap through, which is the bug to find.

Who calls decides. The same functions give wall time to everything else: other threads (the
suite's watchdog, a kernel's), the scheduler, threaded load (``run_clients``), and, even inside
an actor, code of the standard library (threading's and queue's timeouts, asyncio's loop), of
the embedded server (fakeredis expires keys by the wall clock, as a real server does) and of
``helpers`` (the instruments). A caller is known by the module of the function that reads the
clock (``WALL_PACKAGES``); ``datetime.now()`` is read for whoever called it.

How: the wall-clock functions (``time.time``, the datetime ones) are patched at the C level by
time-machine (its C patch, answered by a traveller of ours), so a ``from time import time`` done
long before is covered too; the patch is in only while a run is open (``LogicalClock.open``).
``monotonic``, ``perf_counter`` and ``sleep`` are replaced on the ``time`` module, and where a
module did ``from time import monotonic`` the name is rebound in that module, checked each time
a run opens (``replace``). Not covered:
``clock_gettime`` of other clocks, CPU time (``process_time``, ``thread_time``), threads an
actor starts (they read wall time), and entropy (``random``, ``uuid4``); what they change
between two replays is found after a search (``helpers.instruments.determinism``).
"""

from __future__ import annotations

import contextvars
import datetime as dt
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import _time_machine  # type: ignore[import-not-found]  # time-machine's C half: patch, unpatch
import time_machine

EPOCH = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)  # where every run's clock starts
EPOCH_NS = int(EPOCH.timestamp()) * 1_000_000_000
MONOTONIC_START_NS = 1_000 * 1_000_000_000  # time.monotonic() at the start of every run
# Callers whose top-level package is one of these read wall time even inside an actor.
WALL_PACKAGES = frozenset(sys.stdlib_module_names) | {"fakeredis", "lupa", "helpers"}
_NS = 1_000_000_000


class LogicalClock:
    """One run's clock: how far it has moved since the run began, in nanoseconds."""

    def __init__(self) -> None:
        self.elapsed_ns = 0
        self._open = False

    def time_ns(self) -> int:
        """Return the run's wall-clock instant (what time.time_ns() reads in its actors)."""
        return EPOCH_NS + self.elapsed_ns

    def monotonic_ns(self) -> int:
        """Return what time.monotonic_ns() and time.perf_counter_ns() read in its actors."""
        return MONOTONIC_START_NS + self.elapsed_ns

    def advance(self, seconds: float) -> None:
        """Move the clock forward by seconds (a negative or zero amount moves nothing)."""
        if seconds > 0:
            self.elapsed_ns += round(seconds * _NS)

    def open(self) -> LogicalClock:
        """Put the patches in (while any clock is open) and return this clock; see close."""
        if not self._open:
            _acquire()
            self._open = True
        return self

    def close(self) -> None:
        """Take the C-level patch out when no other clock is open (idempotent)."""
        if self._open:
            self._open = False
            _release()

    def __repr__(self) -> str:
        return f"LogicalClock(+{self.elapsed_ns / _NS:g} s)"


class ActorClock:
    """One actor's view of its run's clock: what it sleeps is its own until its next round trip.

    An actor reads the later of the run's clock and its own (``time_ns``); a sleep moves its own
    (``advance``); its next round trip, which comes after the sleep ended, brings the run's clock
    up to its own (``settle``, called as that step starts). So the other actors see a sleep only
    from the sleeper's next step on, a step the schedule places: the step whose footprint says it
    moves the clock (``moves``), as the explorer's reduction needs. Meanwhile they run as if
    during the sleep, which a real server would allow as well.
    """

    def __init__(self, run: LogicalClock, since: ActorClock | None = None) -> None:
        self.run = run
        self.own_ns = 0  # how far this actor's clock has moved since the run began
        self.moves = False  # it slept since its last step: its next step moves the run's clock
        if since is not None:  # a thread starts after what its starter slept
            self.catch_up(since)

    def catch_up(self, other: ActorClock) -> None:
        """Bring this clock up to other's: what happens here now comes after other's sleeps."""
        if other._elapsed_ns() > self._elapsed_ns():
            self.own_ns = other._elapsed_ns()
            self.moves = True

    def _elapsed_ns(self) -> int:
        return max(self.run.elapsed_ns, self.own_ns)

    def time_ns(self) -> int:
        """Return the actor's wall-clock instant (what time.time_ns() reads in it)."""
        return EPOCH_NS + self._elapsed_ns()

    def monotonic_ns(self) -> int:
        """Return what time.monotonic_ns() and time.perf_counter_ns() read in the actor."""
        return MONOTONIC_START_NS + self._elapsed_ns()

    def advance(self, seconds: float) -> None:
        """Move the actor's own clock forward by seconds (a sleep)."""
        if seconds > 0:
            self.own_ns = self._elapsed_ns() + round(seconds * _NS)
            self.moves = True

    def settle(self) -> None:
        """Bring the run's clock up to the actor's own (its next step has begun)."""
        if self.moves:
            self.run.elapsed_ns = self._elapsed_ns()
            self.moves = False

    def __repr__(self) -> str:
        return f"ActorClock(+{self._elapsed_ns() / _NS:g} s)"


Reader = LogicalClock | ActorClock
_CLOCK: contextvars.ContextVar[Reader | None] = contextvars.ContextVar(
    "racelab_clock", default=None
)


@contextmanager
def reading(clock: Reader) -> Iterator[Reader]:
    """Run the block (an actor's body, a clock step) on clock: its time reads and sleeps."""
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


def use(clock: Reader) -> None:
    """Have the context running here read clock from now on (a sub-actor's copied context)."""
    _CLOCK.set(clock)


def current() -> Reader | None:
    """Return the clock the code running here reads, or None (wall time)."""
    return _CLOCK.get()


def advance(seconds: float) -> None:
    """Move the clock of the code running here by seconds; nothing outside a run."""
    clock = _CLOCK.get()
    if clock is not None:
        clock.advance(seconds)


# --- reading: who called, and what it gets ----------------------------------------------------

_WALL_MODULE: dict[str, bool] = {}  # module name -> True when its code reads wall time
_WALL_CODE: dict[Any, bool] = {}  # the same, by the calling function's code (one lookup a call)
_WALL_CODE_MAX = 4096


def _caller_clock() -> Reader | None:
    """Return the clock for whoever called the time function that called this, or None.

    Two frames up: this function, the time function (ours, or time-machine's C patch, which has
    no frame, calling _realtime_ns), then its caller.
    """
    clock = _CLOCK.get()
    if clock is None:
        return None
    frame = sys._getframe(2)
    wall = _WALL_CODE.get(frame.f_code)
    if wall is None:
        name = frame.f_globals.get("__name__", "")
        wall = _WALL_MODULE.get(name)
        if wall is None:
            wall = _WALL_MODULE[name] = str(name).partition(".")[0] in WALL_PACKAGES
        if len(_WALL_CODE) >= _WALL_CODE_MAX:  # (code made at run time, e.g. by exec, is new)
            _WALL_CODE.clear()
        _WALL_CODE[frame.f_code] = wall
    return None if wall else clock


_ORIGINAL: dict[str, Callable[..., Any]] = {}


def _monotonic() -> float:
    clock = _caller_clock()
    return _ORIGINAL["monotonic"]() if clock is None else clock.monotonic_ns() / _NS


def _monotonic_ns() -> int:
    clock = _caller_clock()
    return _ORIGINAL["monotonic_ns"]() if clock is None else clock.monotonic_ns()


def _perf_counter() -> float:
    clock = _caller_clock()
    return _ORIGINAL["perf_counter"]() if clock is None else clock.monotonic_ns() / _NS


def _perf_counter_ns() -> int:
    clock = _caller_clock()
    return _ORIGINAL["perf_counter_ns"]() if clock is None else clock.monotonic_ns()


def _realtime_ns() -> int:
    """What time-machine's C patch of time.time, datetime.now, ... asks for (see _acquire)."""
    clock = _caller_clock()
    if clock is not None:
        return clock.time_ns()
    stack = _stack()
    below = stack.index(_TRAVELLER) if _TRAVELLER in stack else 0
    if below:  # a travel of time-machine's own was under way when the run opened: its time
        return int(stack[below - 1].time_ns())
    return int(time_machine.escape_hatch.time.time_ns())


class _Traveller:
    """What time-machine's C patch asks for the time: ``traveller_stack[-1].time_ns()``."""

    time_ns = staticmethod(_realtime_ns)  # called with no frame of its own between


_TRAVELLER = _Traveller()


_PATCHED = {
    "monotonic": _monotonic,
    "monotonic_ns": _monotonic_ns,
    "perf_counter": _perf_counter,
    "perf_counter_ns": _perf_counter_ns,
}

# --- installing: the time module, names imported from it, the C-level patch ---------------------

_LOCK = threading.Lock()
_REPLACED: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, replacement)
_SCANNED: set[str] = set()  # modules whose names imported from time were rebound
_SEEN: tuple[int, str | None] = (0, None)  # sys.modules' size and last name at the last pass
_SKIPPED = {"time", __name__}  # never rebound: the originals themselves
_open_clocks = 0


def install() -> None:
    """Replace time.monotonic and time.perf_counter (and _ns) once; wall time outside runs."""
    with _LOCK:
        if _ORIGINAL:
            return
        for name, ours in _PATCHED.items():
            _ORIGINAL[name] = getattr(time, name)
            _REPLACED[id(_ORIGINAL[name])] = (_ORIGINAL[name], ours)
            setattr(time, name, ours)


def replace(original: Any, replacement: Any) -> None:
    """Have every module that bound original (``from time import sleep``) call replacement.

    Every module is checked now, and each module imported later when a run opens; the time
    module's own attribute is the caller's to set.
    """
    global _SEEN
    with _LOCK:
        _REPLACED[id(original)] = (original, replacement)
        _SCANNED.clear()  # every module again: a new name to look for
        _SEEN = (0, None)
    rebind_imported()


def rebind_imported() -> None:
    """Rebind, in each module not checked yet, names bound to a replaced time function."""
    global _SEEN
    with _LOCK:
        # No module imported since: sys.modules keeps its size and its last entry (a dict keeps
        # insertion order). Each replay opens a clock, so this is O(1), not a pass over modules.
        seen = (len(sys.modules), next(reversed(sys.modules), None))
        if seen == _SEEN:
            return
        _SEEN = seen
        for module_name, module in list(sys.modules.items()):
            if module_name in _SCANNED:
                continue
            _SCANNED.add(module_name)
            namespace = getattr(module, "__dict__", None)
            if module_name in _SKIPPED or not isinstance(namespace, dict):
                continue
            for name, value in list(namespace.items()):
                found = _REPLACED.get(id(value))
                if found is not None and found[0] is value:
                    namespace[name] = found[1]


def _stack() -> list[Any]:
    """Return time-machine's travellers (ours, a duck, among them while a run is open)."""
    return time_machine.traveller_stack


def _acquire() -> None:
    """Open one more clock: on the first, patch time.time and datetime at the C level.

    time-machine's C patch asks ``time_machine.traveller_stack[-1].time_ns()`` on every call
    (time-machine 3.x) and calls the original function while the stack is empty: our traveller,
    pushed whole (``travel().start()`` would show its own, fixed time to other threads for a
    moment), answers for each caller. tests/test_logical_time.py checks both answers.
    """
    global _open_clocks
    install()
    rebind_imported()
    with _LOCK:
        _open_clocks += 1
        if _open_clocks == 1:
            _time_machine.patch()  # idempotent; the original functions while nobody travels
            _stack().append(_TRAVELLER)


def _release() -> None:
    global _open_clocks
    with _LOCK:
        _open_clocks -= 1
        if _open_clocks == 0:
            _stack().remove(_TRAVELLER)
            if not _stack():
                _time_machine.unpatch()


__all__ = [
    "EPOCH",
    "ActorClock",
    "Reader",
    "MONOTONIC_START_NS",
    "WALL_PACKAGES",
    "LogicalClock",
    "advance",
    "current",
    "install",
    "reading",
    "use",
    "rebind_imported",
    "replace",
]
