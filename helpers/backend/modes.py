"""Client modes: the connection decides the timing, never the strategy's code.

Every client a ``Lab`` hands out has a mode, in its ``Wiring`` (below): each of its connections
(``helpers.backend.connection.LabConnection``) asks the mode before every round trip and reports
every reply back to it. One *round trip* is one
``send_packed_command``: a single command, or a whole pipeline or MULTI/EXEC block (which redis-py
sends in one write). WATCH, and each immediate-mode command after it on a pipeline, is one round
trip each, because redis-py sends each of them on its own and waits for its reply.

* ``Straight()``: commands go as they are. It still counts (round trips, commands, retries).
* ``Think(seconds)``: waits ``seconds`` before every round trip, standing in for the network
  between a client and Redis: the window in which other clients' commands arrive. Threaded
  demos use it to make races show.
* ``Lockstep(rendezvous)``: the clients of one run send their round trips in rounds: a client's
  k-th round trip waits until every client still running is about to send its own. Every read
  of a round is answered before any write of the next one is sent, so a read-then-write race
  shows on every run however busy the machine is: no timing is involved, only order.
* Gated: each round trip blocks until a scheduler grants it (``helpers.instruments.schedule``).

Orthogonal to the mode, a client may have a *network delay* (``Lab.client(rtt_ms=1.0)``): it
waits that long before each round trip, after the mode's own wait, standing in for the time a
request and its reply spend on a real network (0.1 ms in one data centre, 1 ms across zones).
The wait is ``time.sleep``: it never returns early, it lets other threads run (as waiting on a
network does), and on a busy machine it oversleeps, which only adds to each round trip's cost.
What was really waited is measured (``mode_of(client).delayed_ns``).

What is counted, for every mode (``client_stats(client)``):

* ``round_trips``: writes to the socket (see above);
* ``commands``: commands sent, MULTI and EXEC included;
* ``reconnects``: connections that broke (or were closed) and were opened again: after a server
  restart redis-py reconnects silently, and a run must not count on what the old connection did;
* ``retries``: conditional writes that did not apply: an EXEC that answered nil (a WATCHed key
  changed), a SET with NX, XX or IFEQ/IFNE/IFDEQ/IFDNE that answered nil, and an HSETNX, SETNX
  or MSETNX that answered 0. A strategy that tries again after one of those pays one more
  attempt; so does a lock acquisition that found the lock taken.

Commands sent while a connection is being set up (HELLO, CLIENT SETINFO, SELECT) are neither
counted nor delayed: they are not the strategy's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helpers.errors import RaceLabError

if TYPE_CHECKING:
    import redis
    import redis.client
    import redis.cluster

    Client = redis.Redis | redis.cluster.RedisCluster | redis.client.Pipeline

Command = tuple[Any, ...]
_CONDITIONAL_SET = {"NX", "XX", "IFEQ", "IFNE", "IFDEQ", "IFDNE"}
_NX_WRITES = {"HSETNX", "SETNX", "MSETNX"}  # reply 0: nothing written (the field or key existed)


# command_name's answers for the names seen so far (a str or bytes each): asked several times
# for every round trip an explorer replays, of a few names.
_NAMES: dict[str | bytes, str] = {}
_NAMES_MAX = 4096


def command_name(args: Command) -> str:
    """Return the upper-case name of a command given as its arguments ('' for none)."""
    try:
        return _NAMES[args[0]]
    except (IndexError, KeyError, TypeError, ValueError):  # none, new, unhashable (a bytearray,
        # a writable memoryview)
        pass
    if not args:
        return ""
    name = args[0]
    text = (
        bytes(name).decode("latin-1") if isinstance(name, (bytes, bytearray, memoryview)) else name
    )
    upper = str(text).upper()
    if type(name) in (bytes, str) and len(_NAMES) < _NAMES_MAX:
        _NAMES[name] = upper
    return upper


def _text(arg: Any) -> str:
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg).decode("latin-1")
    return str(arg)


def is_failed_conditional_write(args: Command, reply: Any) -> bool:
    """Return True if args is an EXEC, a conditional SET or an ...NX write and reply says it did not apply."""
    name = command_name(args)
    if name in _NX_WRITES:
        return reply == 0
    if reply is not None:
        return False
    if name == "EXEC":
        return True
    return name == "SET" and any(_text(a).upper() in _CONDITIONAL_SET for a in args[3:])


@dataclass
class ClientStats:
    """What one client has sent so far: round trips, commands, failed conditional writes."""

    round_trips: int = 0
    commands: int = 0
    retries: int = 0
    reconnects: int = 0

    def __sub__(self, other: ClientStats) -> ClientStats:
        return ClientStats(
            self.round_trips - other.round_trips,
            self.commands - other.commands,
            self.retries - other.retries,
            self.reconnects - other.reconnects,
        )

    def copy(self) -> ClientStats:
        """Return a snapshot of these counts."""
        return ClientStats(self.round_trips, self.commands, self.retries, self.reconnects)


class Mode:
    """Straight: commands go as they are; round trips, commands and retries are counted."""

    name = "straight"

    def __init__(self) -> None:
        self.stats = ClientStats()
        self.delayed_ns = 0  # network delay really waited (rtt_ms), in total
        self._lock = threading.Lock()  # a cluster client's node connections may share a mode

    def before_round_trip(self, commands: list[Command]) -> list[Command] | None:
        """Called before commands go out in one write; counts them (subclasses also wait).

        Return None to send them, or the commands to send instead (the gated mode does, to time
        out a blocking call logically).
        """
        with self._lock:
            self.stats.round_trips += 1
            self.stats.commands += len(commands)
        return None

    def delay(self, seconds: float) -> None:
        """Wait seconds (the client's network delay, never shorter) and add the time waited to delayed_ns."""
        started = time.perf_counter_ns()
        time.sleep(seconds)
        waited = time.perf_counter_ns() - started
        with self._lock:
            self.delayed_ns += waited

    def on_reconnect(self) -> None:
        """Called when a connection that had been open before is opened again."""
        with self._lock:
            self.stats.reconnects += 1

    def on_reply(self, command: Command, reply: Any) -> None:
        """Called with each reply (or the ResponseError it carried) and the command it answers."""
        if is_failed_conditional_write(command, reply):
            with self._lock:
                self.stats.retries += 1

    @property
    def replies(self) -> Any:
        """Return what answers a replayed round trip from a record instead of writing it (a
        search's shared prefixes, ``helpers.instruments.sharing``, through the gated mode), or
        None: every round trip is written."""
        return None

    def describe(self) -> str:
        """Return a short description for printing."""
        return self.name


Straight = Mode


class Think(Mode):
    """Wait ``seconds`` before every round trip (the network gap other clients fall into)."""

    name = "think"

    def __init__(self, seconds: float, stop: threading.Event | None = None) -> None:
        if not seconds >= 0 or seconds == float("inf"):  # written so that NaN fails too
            raise ValueError(f"think time must be a finite number of seconds >= 0, got {seconds!r}")
        super().__init__()
        self.seconds = seconds
        self.stop = stop  # a run's stop event: a wait in progress ends when the run is stopped
        self.armed = True  # a run connects its clients unarmed, then arms them at the start barrier

    def before_round_trip(self, commands: list[Command]) -> None:
        """Count, then wait (sleep(0) still hands the GIL to another thread) unless not armed yet."""
        super().before_round_trip(commands)
        if not self.armed:
            return None
        if self.seconds > 0 and self.stop is not None:
            self.stop.wait(self.seconds)
        else:
            time.sleep(self.seconds)
        _refuse_if_stopped(self.stop)
        return None

    def describe(self) -> str:
        """Return e.g. 'think 1.0 ms per round trip'."""
        return f"think {self.seconds * 1000:g} ms per round trip"


class Rendezvous:
    """Rounds for the clients of one run: wait() returns when every client still in the run has arrived."""

    def __init__(self, parties: int, stop: threading.Event | None = None) -> None:
        if parties < 1:
            raise ValueError(f"a rendezvous needs at least one party, got {parties}")
        self.parties = parties
        self.stop = stop
        self._arrived = 0
        self._round = 0
        self._cond = threading.Condition()

    def wait(self) -> None:
        """Arrive for this round and wait until the others have arrived (or the run is stopped)."""
        with self._cond:
            this_round = self._round
            self._arrived += 1
            if self._arrived >= self.parties:
                self._next_round()
                return
            while this_round == self._round and not (self.stop is not None and self.stop.is_set()):
                self._cond.wait(0.05)

    def leave(self) -> None:
        """Leave the run for good (a client that finished or failed); the others stop waiting for it."""
        with self._cond:
            self.parties -= 1
            if self.parties > 0 and self._arrived >= self.parties:
                self._next_round()

    def _next_round(self) -> None:
        self._round += 1
        self._arrived = 0
        self._cond.notify_all()


class RunStopped(RaceLabError, RuntimeError):
    """A client of a run that has been stopped (another client failed) must send nothing more."""


def _refuse_if_stopped(stop: threading.Event | None) -> None:
    """Raise RunStopped if the run is stopped: a round trip then could only wait for a dead server."""
    if stop is not None and stop.is_set():
        raise RunStopped("the run was stopped (another client failed): no further round trips")


class Lockstep(Mode):
    """Send each round trip in a round with the run's other clients (see the module docstring)."""

    name = "lockstep"

    def __init__(self, rendezvous: Rendezvous) -> None:
        super().__init__()
        self.rendezvous = rendezvous
        self.armed = True  # a run connects its clients unarmed, then arms them at the start barrier

    def before_round_trip(self, commands: list[Command]) -> None:
        """Count, then wait for this round's other clients."""
        super().before_round_trip(commands)
        if self.armed:
            self.rendezvous.wait()
            _refuse_if_stopped(self.rendezvous.stop)
        return None

    def describe(self) -> str:
        """Return 'lockstep'."""
        return "lockstep: every client's k-th round trip in one round"


MAX_RTT_MS = 10_000  # a network delay past 10 s per round trip is a typo, not a network


def check_rtt_ms(rtt_ms: float) -> float:
    """Return rtt_ms in seconds; ValueError unless it is a number of milliseconds from 0 to 10,000."""
    if (
        isinstance(rtt_ms, bool)
        or not isinstance(rtt_ms, (int, float))
        or not 0 <= rtt_ms <= MAX_RTT_MS  # written so that NaN fails too
    ):
        huge = isinstance(rtt_ms, int) and not isinstance(rtt_ms, bool) and rtt_ms > 10**30
        shown = "an integer over 10**30" if huge else repr(rtt_ms)
        raise ValueError(
            f"rtt_ms must be a number of milliseconds from 0 to {MAX_RTT_MS:,}, got {shown}"
        )
    return rtt_ms / 1000


def make_modes(
    mode: str | Mode,
    clients: int = 1,
    think_s: float = 0.0,
    stop: threading.Event | None = None,
    armed: bool = True,
) -> list[Mode]:
    """Return one Mode per client for a mode name ('straight', 'think', 'lockstep') or a Mode.

    Lockstep clients share one Rendezvous; ``armed=False`` leaves think and lockstep clients
    waiting for nothing until armed (a run connects its clients first). A Mode object is used as
    it is (one client).
    """
    if isinstance(mode, Mode):
        return [mode]
    if mode == "straight":
        return [Mode() for _ in range(clients)]
    if mode == "think":
        modes: list[Think | Lockstep] = [Think(think_s, stop) for _ in range(clients)]
    elif mode == "lockstep":
        rendezvous = Rendezvous(clients, stop)
        modes = [Lockstep(rendezvous) for _ in range(clients)]
    else:
        raise ValueError(
            f"unknown client mode {mode!r}: use 'straight', 'think', 'lockstep' or a Mode "
            f"(gated clients are made by run_schedule and explore)"
        )
    for m in modes:
        m.armed = armed
    return list(modes)


@dataclass(frozen=True)
class Wiring:
    """What one client's connections do besides sending (the hooks of helpers.backend.connection).

    One object per client, handed to each of its connections by the pool (``racelab_wiring``).
    """

    mode: Mode = field(default_factory=Mode)
    rtt_s: float = 0.0  # network delay before each round trip
    guarded: bool = False  # True on a server the suite does not own: refuse what reaches beyond
    parser_class: type | None = None  # a RESP parser to force (None: redis-py's default)
    tally: dict[str, int] | None = None  # embedded only: count every command the server runs


def wiring_of(client: Client) -> Wiring:
    """Return the Wiring of a client made by Lab.client (plain, embedded, cluster) or its pipeline."""
    wiring = getattr(client, "racelab_wiring", None)  # a cluster client keeps it (guard.py)
    if wiring is None and hasattr(client, "connection_pool"):  # a plain client or a pipeline
        wiring = client.connection_pool.connection_kwargs.get("racelab_wiring")
    if not isinstance(wiring, Wiring):
        raise TypeError(f"{client!r} was not made by Lab.client: it has no client mode")
    return wiring


def rtt_of(client: Client) -> float:
    """Return the network delay in ms a Lab client waits before each round trip (0.0 for none)."""
    return wiring_of(client).rtt_s * 1000


def mode_of(client: Client) -> Mode:
    """Return the Mode of a client made by Lab.client (plain, embedded or cluster)."""
    return wiring_of(client).mode


def client_stats(client: Client) -> ClientStats:
    """Return a snapshot of a Lab client's round trips, commands and retries so far."""
    return mode_of(client).stats.copy()
