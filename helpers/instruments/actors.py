"""The actors' side of a run: each actor's thread or greenlet, parked before its next round trip.

``helpers.instruments.schedule.ScheduleRun`` decides which actor goes next; this module is how
the actor gets there. Each actor's client is gated (``Gate``): a round trip first checks who sends
it (only the actor's own thread or greenlet may), then parks until the run grants that actor a
step. With greenlets (the explorer's runner) a step is a switch of the calling thread, watched by
``WATCHDOG`` so that an actor waiting for something other than Redis cannot hang the search;
with threads (the runner where greenlet is missing) it is two hand-offs under one condition.

An actor that is a coroutine function (``async def``) runs on an event loop of its own inside its
thread or greenlet, given the asyncio view of its gated client (``helpers.instruments.aio``); a
round trip parks it exactly as it parks a synchronous actor. Around every switch into a greenlet,
asyncio's per-thread state (the running loop) is swapped for the actor's (``LoopSlot``).

With greenlets, a thread an actor's call starts is a sub-actor (``spawn``): a greenlet of its own,
named after the actor and numbered ("A1"), that parks at its round trips like any actor and
sends through the actor's clients. A wait on a thread primitive parks its caller too (``block``,
a ``Wait``): ``settle``, after every step, starts new sub-actors and wakes each waiter whose wait
is over, in the actors' order, as part of that step. A woken actor's next step depends on the
step that woke it through no key, so its footprint is EVERYTHING; a crash of an actor takes its
sub-actors with it.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from helpers.backend.modes import Command, Mode, command_name
from helpers.backend.scripts import script_name
from helpers.errors import RaceLabError
from helpers.instruments import aio, blocking, logical_time
from helpers.instruments.adopt import (
    SPUN,
    ActorContext,
    ActorRefused,
    Refusal,
    SpinBound,
    actor_running,
    check_sender,
    event_loop,
    refuse_if_started,
)
from helpers.instruments.deadline import raise_in
from helpers.instruments.footprint import (
    EVERYTHING,
    MOVES_CLOCK,
    NOTHING,
    READS_CLOCK,
    Footprint,
    KeyTable,
    Transactions,
)
from helpers.instruments.servers import Servers, qualified

try:  # runner="greenlet": a gated step is a switch, not two thread hand-offs
    import greenlet  # type: ignore[import-untyped]  # greenlet ships no type information
except ImportError:  # pragma: no cover - the lock has it; threads work without it
    greenlet = None

Actor = Callable[[Any], Any]
UNFINISHED = "(unfinished)"
CRASHED = "(crashed)"  # the result of an actor whose client crashed ("A!")
STEP_TIMEOUT_S = 30.0  # an actor that does not reach its next round trip by then is stuck
STOP_WAIT_S = 1.0  # an actor thread not ended this long after its run closed is interrupted


def on_server(footprint: Footprint, server: str) -> Footprint:
    """Return a footprint of a further server's round trip: its keys are that server's own."""
    if not server or footprint.everything:
        return footprint
    return Footprint(
        frozenset(qualified(server, k) for k in footprint.reads),
        frozenset(qualified(server, k) for k in footprint.writes),
    )


_CLEANUP = frozenset({"UNWATCH", "DISCARD", "RESET"})  # what a stopped actor's way out sends
_LOADS = frozenset({"EVAL", "EVAL_RO", "SCRIPT", "FUNCTION"})  # what may load a script or library
_POOL_LOG = logging.getLogger("concurrent.futures")  # a pool worker's "Exception in worker"


class ScheduleError(RaceLabError, ValueError):
    """A schedule names an unknown or finished client, leaves clients unfinished, or an actor is stuck."""


class Aborted(BaseException):
    """Raised inside an actor at its next round trip when its run closes before it finished.

    A BaseException, so that an actor's own ``except Exception`` cannot swallow it.
    """


def _word(text: str) -> str:
    """Return text for a command line: quoted if empty or unprintable (a newline must not break the table).

    Spaces are left as they are: labels such as "(clock)", "lease on", key read naturally.
    """
    return text if text and text.isprintable() else repr(text)


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def _recovers_script(commands: Sequence[Command]) -> bool:
    """Return True if a round trip is one command that loads or calls a script (NOSCRIPT's cure)."""
    return len(commands) == 1 and command_name(commands[0]).split()[0] in (
        "SCRIPT",
        "EVAL",
        "EVALSHA",
    )


def describe_round_trip(commands: Sequence[Command], short: Callable[[Any], str]) -> str:
    """Return the commands of one round trip as text: 'GET k', or 'MULTI, INCR k, EXEC'."""
    return ", ".join(_command_text(c, short) for c in commands)


def _command_text(args: Command, short: Callable[[Any], str]) -> str:
    words = [str(a) if isinstance(a, (int, float)) else short(a) for a in args]
    if command_name(args) == "EVALSHA" and len(words) > 1:
        name = script_name(words[1])
        words[1] = f"sha1({name}.lua)" if name else words[1][:8] + "..."
    elif (
        command_name(args) == "EVAL" and len(words) > 1 and ("\n" in words[1] or len(words[1]) > 40)
    ):
        words[1] = f"<script of {len(words[1])} characters>"
    return " ".join(_word(w) for w in words)


class Gate(Mode):
    """The gated mode of one actor's client: each round trip waits for the schedule to name it."""

    name = "gated"

    def __init__(self, actor: str) -> None:
        super().__init__()
        self.actor = actor
        self.run: Actors | None = None  # None: commands pass (connecting, resetting)
        self.open_state = False  # a WATCH or MULTI left open on the connection
        self.server = ""  # the server of the round trip under way ('' the lab's own: OnServer)

    def before_round_trip(self, commands: list[Command]) -> list[Command] | None:
        """Refuse another thread's round trip (ActorRefused), count, park until the run grants
        this actor a step (or raise Aborted); return what to send instead, if anything."""
        run = self.run
        if run is not None:
            run.check_sender(self.actor, commands)
        else:
            refuse_if_started(lambda: describe_round_trip(commands, _text))
        super().before_round_trip(commands)
        if run is not None:
            return run.park(self.actor, commands, self.server)
        return None

    def on_reply(self, command: Command, reply: Any) -> None:
        """Count, note an open WATCH or MULTI, and keep the reply for the trace row of the step in progress."""
        super().on_reply(command, reply)
        name = command_name(command)
        if name in ("WATCH", "MULTI"):
            self.open_state = True
        elif name in ("EXEC", "DISCARD", "UNWATCH"):
            self.open_state = False
        if self.run is not None:
            self.run.reply(self.actor, reply)

    @property
    def replies(self) -> Any:
        """Return the search's shared prefixes while a run holds this client (Mode.replies)."""
        run = self.run
        return run.sharing if run is not None else None


class _Watchdog:
    """Interrupts the main thread when an actor greenlet runs STEP_TIMEOUT_S without parking.

    A greenlet actor runs on the explorer's own thread, so one that waits for something other than
    Redis (an Event, a lock, input()) would hang the whole search. While a switch into an actor is
    under way, one daemon thread (for the whole process, polling a few times a second) watches
    it: a switch only numbers itself, reading no clock, and the thread times each switch from
    when it first sees it. Past the deadline it sends SIGINT to the main thread,
    whose KeyboardInterrupt (raised in the actor, where it waits) the run turns into a
    ScheduleError naming the actor. Where SIGINT is ignored (a background job), Python's handler
    stands in while a switch is under way. Off the main thread nothing can be interrupted, so it
    does not arm.
    """

    def __init__(self) -> None:
        self.fired = False
        self._since: int | None = None  # the number of the switch under way
        self._switches = 0  # switches numbered so far
        self._restore: Any = None  # SIGINT's disposition to put back at disarm (SIG_IGN, SIG_DFL)
        self._thread: threading.Thread | None = None

    def arm(self) -> bool:
        """Watch one switch; return False when it cannot watch (not the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        handler = signal.getsignal(signal.SIGINT)
        if handler is None:
            return False  # a handler Python did not install: the interrupt is not ours to send
        if not callable(handler):  # ignored or left to the OS (a background job): ours meanwhile
            self._restore = handler
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.start()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, daemon=True, name="racelab-watchdog"
            )
            self._thread.start()
        return True

    def steady(self) -> bool:
        """Return True when a switch needs only the clock started (``start``), not ``arm``.

        So it is on the main thread while Python's own SIGINT handler is in place, the usual
        case: a run asks once (``Actors``), not at every switch.
        """
        if threading.current_thread() is not threading.main_thread():
            return False
        return callable(signal.getsignal(signal.SIGINT)) and self.arm()

    def forked(self) -> None:
        """Forget the watching thread: in a forked process it does not exist (the next arm starts one)."""
        self._thread, self._since, self.fired = None, None, False

    def start(self) -> None:
        """Number a new switch under way, when ``steady`` said that is all it takes."""
        self._switches += 1
        self._since = self._switches

    def disarm(self) -> None:
        self._since = None
        if self._restore is not None:
            signal.signal(signal.SIGINT, self._restore)
            self._restore = None

    def _watch(self) -> None:
        seen, at = None, 0.0  # the switch under way at the last look, and when first seen
        while True:
            time.sleep(min(1.0, STEP_TIMEOUT_S / 4))
            since, now = self._since, time.monotonic()
            if since is None or since != seen:  # none under way, or a new one since
                seen, at = since, now
            elif now - at > STEP_TIMEOUT_S:
                self.fired, self._since, seen = True, None, None
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


WATCHDOG = _Watchdog()


def _call(state: ActorState) -> Any:
    """Return what the actor returns: called with its client, or run on a loop if async."""
    if aio.is_async_actor(state.fn):
        return aio.run_actor(state.fn, state.client, event_loop())
    result = state.fn(state.client)
    if inspect.iscoroutine(result):  # a lambda around an async def: its client is not asyncio
        result.close()
        raise TypeError(
            f"actor {state.name} returned a coroutine: define the actor itself with async def "
            "(it is then given a redis.asyncio client), or run the coroutine inside it"
        )
    return result


def _end_step(state: ActorState) -> None:
    """Keep the replies of the step the actor just ran for its trace row (``step_replies``).

    Replies come only in a step the run granted; an actor woken from a wait (``Actors.settle``)
    that parks again or ends has none, and the last step's stay.
    """
    if state.replies:
        state.step_replies, state.replies = state.replies, []


class ActorState:
    """One actor's thread and where it stands."""

    def __init__(
        self, name: str, fn: Actor, client: Any, gate: Gate | None, footprint: Footprint
    ) -> None:
        self.name, self.fn, self.client, self.gate = name, fn, client, gate
        self.thread: threading.Thread | None = None
        self.glet: Any = None  # the greenlet it runs in (runner="greenlet")
        self.slot = aio.LoopSlot()  # asyncio's per-thread state while its greenlet is out
        self.footprint = footprint  # of its next step (a clock's is known; a client's when parked)
        self.clock: logical_time.ActorClock | None = None  # what it reads as the time (a client)
        self.transactions = Transactions()  # its open WATCH and MULTI, for footprints
        self.call: blocking.Call | None = None  # its next round trip, when that is a blocking call
        self.instead: list[Command] | None = None  # what to send instead of its next round trip
        self.parked = False
        self.started = False  # its code began (a lazy run's client: at its first step)
        self.ticks = 0  # the steps a clock has taken (a Clock may have several: times=n)
        self.done = False
        self.pending: list[Command] = []
        self.server = ""  # the server its pending round trip goes to ('' the lab's own)
        self.replies: list[Any] = []
        self.step_replies: list[Any] = []
        self.result: Any = UNFINISHED
        self.crash: BaseException | None = None
        self.aborted = False
        self.stopped_clean = False  # aborted before a round trip, and sent nothing on its way out
        self.killed = False  # crashed: stopped at its next round trip, never to run again
        self.round_trips = 0  # sent through the race's clients (its own and adopted ones)
        self.recovering = False  # its last reply was NOSCRIPT: the load and retry are this step
        self.owner: str | None = None  # a sub-actor's actor: whose call started its thread
        self.subs = 0  # the sub-actors its calls started so far (A1, A2, ...: its names)
        self.context: Any = None  # a sub-actor's contextvars (its owner's, when it started)
        self.ended: Callable[[], None] | None = None  # a sub-actor's thread, told it ended
        self.wait: Wait | None = None  # a thread wait it is parked in, instead of a round trip
        # It began, or woke from a wait, in another's step: its next step depends on that one
        # in a way no key shows, so its footprint is EVERYTHING (the reduction orders it so).
        self.woken = False


class Wait:
    """A wait on a thread primitive (a future, an event, a join) that an actor is parked in.

    It is over when ``ready()`` (another actor's or sub-actor's step made it so: the run wakes
    it then, as part of that step), or, if it has a deadline, when the run lets it time out: that
    happens, as a blocking call's timeout does, only once nothing else can run.
    """

    def __init__(self, ready: Callable[[], bool], deadline_ns: int | None) -> None:
        self.ready, self.deadline_ns = ready, deadline_ns
        self.timed_out = False

    def describe(self) -> str:
        """Return what the trace says the actor waits in."""
        return "(waits for its threads)" if self.deadline_ns is None else "(waits, with a timeout)"


class Actors:
    """The actors of one run: each in its thread or greenlet, parked before its next round trip.

    ``Gate`` calls ``check_sender``, ``park`` and ``reply`` from the actor's side; the run calls
    ``start``, ``resume``, ``kill`` and ``stop`` from the scheduler's side. With greenlets a step
    is a switch of the calling thread; with threads, two hand-offs under one condition.
    """

    def __init__(
        self,
        lab: Any,
        observer: Any,
        node: tuple[str, int] | None,
        loaded: set[tuple[str, str]],
        clock: logical_time.LogicalClock,
        greenlets: bool,
        keys: KeyTable | None,
        short: Callable[[Any], str],
        servers: Servers | None = None,
    ) -> None:
        self.lab, self.observer, self.node, self.loaded = lab, observer, node, loaded
        self.servers = servers if servers is not None else Servers(lab)
        self.clock, self.short = clock, short
        self.states: dict[str, ActorState] = {}
        self.refused: list[ActorRefused] = []  # round trips from threads not an actor's own
        self.new_global_state: list[tuple[str, str]] = []  # scripts/libraries first loaded now
        self._keys = keys
        self._greenlets = greenlets and greenlet is not None
        self._hub = greenlet.getcurrent() if self._greenlets else None
        self._by_glet: dict[Any, ActorState] = {}  # each greenlet -> the actor it runs
        self._threaded = False  # some actor started a thread (a sub-actor): settle has work
        self._cond = threading.Condition()
        self._closing = False
        self._steady: bool | None = None  # WATCHDOG.steady(), asked at this run's first switch
        self.sharing: Any = None  # a search's shared prefixes (helpers.instruments.sharing)

    # --- the actors' side (their own threads or greenlets) -------------------------------------

    def start(self, state: ActorState) -> None:
        assert state.gate is not None  # only gated actors are started
        state.gate.run, state.started = self, True
        state.clock = logical_time.ActorClock(self.clock)
        if self._greenlets:
            state.glet = greenlet.greenlet(self._body)
            self._by_glet[state.glet] = state
            self.switch(state, state)  # runs the actor up to its first round trip
            self.check_crash(state)
            self.settle(by=state)
            self._refuse_if_ungated(state)
            return
        state.thread = threading.Thread(
            target=self._body, args=(state,), daemon=True, name=f"racelab-actor-{state.name}"
        )
        state.thread.start()
        self.wait_until_parked(state)
        self._refuse_if_ungated(state)

    def check_sender(self, name: str, commands: list[Command]) -> None:
        """Raise ActorRefused if this round trip of name's client comes from another thread
        (a sub-actor of name's, a thread name's calls started, is name's own)."""
        state = self.states.get(name)
        if state is not None and state.glet is not None and greenlet.getcurrent() is state.glet:
            return  # the actor's own greenlet (every step of a greenlet run): nothing to check
        if state is not None and self.sender(name) is state:
            what = lambda: describe_round_trip(commands, self.short)  # noqa: E731 - asked on refusal
            check_sender(name, state.thread, state.glet, self.refused, what)

    def _refuse_if_ungated(self, state: ActorState) -> None:
        """Raise ActorRefused if the actor ended without one round trip the race could see."""
        if state.done and state.round_trips == 0 and state.result is not SPUN:
            raise ActorRefused(
                f"actor {state.name} finished without a single round trip through the race's "
                f"clients (result {state.result!r}): whatever it did, the schedule could not see "
                "it. Does it talk to a server through a client the race cannot adopt (a cluster "
                "client, another library's connection)? An actor must act through Redis.",
                reason=Refusal.NO_ROUND_TRIP,
            )

    @property
    def threaded(self) -> bool:
        """Return True once some actor started a thread (a sub-actor)."""
        return self._threaded

    def sender(self, name: str) -> ActorState:
        """Return the state of who sends through name's client now: name, or its sub-actor."""
        if self._threaded:
            found = self._by_glet.get(greenlet.getcurrent())
            if found is not None and found.owner == name:
                return found
        return self.states[name]

    def _body(self, state: ActorState) -> None:
        gate, node = state.gate, self.node
        servers = self.servers
        context = ActorContext(
            state.name,
            lambda decode, address: servers.client(address, gate, decode, node),
            servers.release,
            refused=self.refused,
        )
        if self._greenlets:  # its threads are sub-actors; its waits on them park it
            context.spawn = lambda run, ended: self.spawn(state, run, ended)
            context.block = self.block
        try:
            if state.owner is not None:  # a sub-actor: in its owner's context already
                result: Any = state.fn(None)
            else:
                assert state.clock is not None  # set by start
                with actor_running(context), logical_time.reading(state.clock):
                    result = _call(state)
        except Aborted:
            result = UNFINISHED
        except SpinBound:
            result = SPUN
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            # The server did not answer (frozen, paused, gone): that is no outcome of the race,
            # so it is raised by step() at once, never recorded as the actor's result.
            result = UNFINISHED if state.aborted else exc
            if not state.aborted:
                state.crash = exc
        except redis.RedisError as exc:  # a Redis error ends the actor: it is its result
            result = UNFINISHED if state.aborted else exc
        except BaseException as exc:  # noqa: BLE001 - a bug in the actor: raised by step()
            result, state.crash = exc, exc
        with self._cond:
            state.result = result
            _end_step(state)
            state.done = True
            self._cond.notify_all()

    def spawn(self, by: ActorState, run: Callable[[], Any], ended: Callable[[], None]) -> str:
        """Make a thread that by's call starts a sub-actor of by's actor; return its name.

        It is named after that actor and numbered in the order its threads start ("A1", "A2",
        ...; a thread a sub-actor starts is the actor's too). It starts running, up to its first
        round trip, once the actor that started it parks (``settle``); ended() is called when
        it ends, however it ends.
        """
        owner = self.states[by.owner or by.name]
        owner.subs += 1
        self._threaded = True
        name = f"{owner.name}{owner.subs}"
        state = ActorState(name, lambda _client: run(), None, owner.gate, EVERYTHING)
        state.owner, state.context, state.ended = owner.name, contextvars.copy_context(), ended
        state.started = True  # begun by its starter's step (settle runs it), never lazily
        # It starts after what its starter slept; then its sleeps are its own, as a thread's.
        state.clock = logical_time.ActorClock(self.clock, since=by.clock)
        state.context.run(logical_time.use, state.clock)
        self.states[name] = state
        return name

    def settle(self, by: ActorState | None = None) -> None:
        """Start each new sub-actor, and wake each actor whose wait is over, until none is left.

        This is part of the step that made it so (by's, when a client's): no round trip is sent
        meanwhile, so where in the step it happens makes no difference to Redis. Actors are
        visited in their order. A woken actor's clock catches up with by's: it wakes after what
        made its wait true, and so after by's sleeps.
        """
        while self._threaded:
            for state in self.states.values():
                if state.done:
                    continue
                if state.owner is not None and state.glet is None:
                    state.woken = True
                    state.glet = greenlet.greenlet(self._sub_body)
                    state.glet.gr_context = state.context
                    self._by_glet[state.glet] = state
                    self.switch(state, state)  # runs it up to its first round trip
                    break
                if state.wait is not None and state.parked and state.wait.ready():
                    state.parked, state.woken = False, True
                    if by is not None and by.clock is not None and state.clock is not None:
                        state.clock.catch_up(by.clock)
                    self.switch(state)  # its wait returns True; it runs to its next park
                    break
            else:
                return
            self.check_crash(state)

    def block(self, ready: Callable[[], bool], timeout_s: float | None) -> bool | None:
        """Park the actor running here until ready() (return True) or its timeout (False).

        Called by a thread primitive's wait (``helpers.instruments.adopt``) inside an actor or
        sub-actor of a greenlet run; a timeout of 0 or less only asks ready(). None: the caller
        is no actor of this run (its wait is a real one).
        """
        state = self._by_glet.get(greenlet.getcurrent())
        if state is None:
            return None
        if ready():
            return True
        if timeout_s is not None and timeout_s <= 0:
            return False
        assert state.clock is not None  # every started actor has one
        now = state.clock.monotonic_ns()
        deadline = None if timeout_s is None else now + round(timeout_s * 1e9)
        state.wait = wait = Wait(ready, deadline)
        state.footprint = NOTHING  # waiting touches no key (a timeout's step: EVERYTHING)
        _end_step(state)
        state.pending = []
        state.parked = True
        try:
            if not (self._closing or state.killed):
                assert self._hub is not None  # set whenever greenlets run
                self._hub.switch()  # back to the scheduler: woken by settle, or timed out
            if self._closing or state.killed:
                state.parked, state.aborted = False, True
                raise Aborted(f"the schedule ended while {state.name} waited {wait.describe()}")
        finally:
            state.wait = None
        return not wait.timed_out

    def time_out(self, state: ActorState) -> None:
        """Let state's wait time out: the run's clock moves to its deadline, and it runs on."""
        wait = state.wait
        assert wait is not None and wait.deadline_ns is not None
        self.clock.advance((wait.deadline_ns - self.clock.monotonic_ns()) / 1e9)
        wait.timed_out = True
        self.resume(state)

    def _sub_body(self, state: ActorState) -> None:
        try:
            self._body(state)
        finally:
            assert state.ended is not None  # every sub-actor has one
            state.ended()

    def park(self, name: str, commands: list[Command], server: str = "") -> list[Command] | None:
        state = self.sender(name)
        state.round_trips += 1
        if state.owner is not None:  # a sub-actor's round trip is its actor's too
            self.states[state.owner].round_trips += 1
        state.server = server
        if state.recovering and _recovers_script(commands):
            # NOSCRIPT, then SCRIPT LOAD (or EVAL) and the retried call: one step, the one that
            # met the cold cache, so a replay with a cold cache has the steps of a warm one
            state.recovering = command_name(commands[0]).startswith("SCRIPT")
            self._note_global_state(commands)
            return None
        state.recovering = False
        state.call = blocking.call_of(commands)
        if state.call is not None:  # made now: XREAD's "$" is the stream's last id now
            observer = self.servers.observer(server) or self.observer  # the call's own server
            state.call = blocking.resolved(observer, state.call)
            if state.call.command != tuple(commands[0]):
                state.instead = [state.call.command]
        self._park_until_granted(state, commands)
        instead, state.instead, state.call = state.instead, None, None
        return instead

    def _park_until_granted(self, state: ActorState, commands: list[Command]) -> None:
        self._note_global_state(commands)
        if self._keys is not None:
            state.footprint = on_server(
                state.transactions.footprint(self._keys, commands), state.server
            )
            assert state.clock is not None  # every started actor has one
            state.footprint |= MOVES_CLOCK if state.clock.moves else READS_CLOCK
            if state.woken:
                state.footprint, state.woken = EVERYTHING, False
        if self._greenlets:
            _end_step(state)
            state.pending = commands
            state.parked = True
            if not (self._closing or state.killed):
                assert self._hub is not None  # set whenever greenlets run
                self._hub.switch()  # back to the scheduler, until it grants this actor a step
            if self._closing or state.killed:
                self._abort(state, commands)
            return
        with self._cond:
            _end_step(state)
            state.pending = commands
            state.parked = True
            self._cond.notify_all()
            while state.parked and not (self._closing or state.killed):
                self._cond.wait()
            if self._closing or state.killed:
                self._abort(state, commands)

    def _abort(self, state: ActorState, commands: list[Command]) -> None:
        """Stop an actor at the round trip it is about to send: its run is closing."""
        state.parked = False
        if state.aborted:
            state.stopped_clean = False  # it tried another round trip on its way out
            if all(command_name(c) in _CLEANUP for c in commands):  # a pipeline's UNWATCH on
                # the way out: the connection is about to be closed anyway, which redis-py
                # handles quietly
                raise redis.ConnectionError(f"the schedule ended: {state.name} is stopped")
            # A library swallowed the first (a bare except, as redlock-py's loop over its
            # masters has): stopped again, never handed an error it would log and go on from.
            raise Aborted(f"the schedule ended before {state.name} sent {commands}")
        state.aborted = state.stopped_clean = True
        raise Aborted(f"the schedule ended before {state.name} sent {commands}")

    def _note_global_state(self, commands: list[Command]) -> None:
        """Record a script or Function library loaded for the first time (server-global state)."""
        for args in commands:
            first = command_name(args)
            if first not in _LOADS and " " not in first:
                continue  # (most round trips: nothing is loaded)
            if args and " " in _text(args[0]):  # redis-py sends "SCRIPT LOAD" as one argument
                args = (*_text(args[0]).split(), *args[1:])
            name = command_name(args)
            if name in ("EVAL", "EVAL_RO") and len(args) > 1:
                loaded = ("script", _text(args[1]))
            elif (
                name in ("SCRIPT", "FUNCTION")
                and len(args) > 2
                and _text(args[1]).upper() == "LOAD"
            ):
                loaded = (name.lower(), _text(args[-1]))
            else:
                continue
            if loaded not in self.loaded:
                self.loaded.add(loaded)
                self.new_global_state.append(loaded)

    def reply(self, name: str, reply: Any) -> None:
        state = self.sender(name)
        state.replies.append(reply)
        if isinstance(reply, redis.exceptions.NoScriptError):
            state.recovering = True  # redis-py's NoScriptError: its load and retry ride along

    def check_crash(self, state: ActorState) -> None:
        """Raise the run's first refusal (the cause, when a library wraps it and crashes on it:
        a cluster client that finds no reachable node), else the actor's crash, if any."""
        if self.refused:  # a round trip or socket the race refused, wherever it was caught
            raise self.refused[0]
        if state.crash is not None:
            raise state.crash

    def switch(self, state: ActorState, *args: Any) -> None:
        """Switch into the actor's greenlet until it parks or ends; ScheduleError if it hangs."""
        if self._steady is None:
            self._steady = WATCHDOG.steady()
        if self._steady:
            WATCHDOG.start()
            armed = True
        else:
            armed = WATCHDOG.arm()
        state.slot.swap()  # the actor's running loop in, the scheduler's out
        try:
            state.glet.switch(*args)
        except KeyboardInterrupt:
            if not WATCHDOG.fired:
                raise  # the learner pressed stop
            state.crash = None
        finally:
            state.slot.swap()
            if armed:
                WATCHDOG.disarm()
        if WATCHDOG.fired:
            WATCHDOG.fired = False
            if isinstance(state.crash, KeyboardInterrupt):
                state.crash = None
            raise ScheduleError(
                f"actor {state.name} did not reach its next round trip within "
                f"{STEP_TIMEOUT_S:g} s: it waits for something other than Redis (an Event, a "
                "lock, a queue, input()); an actor may only wait on its client's replies"
            )

    def _stop(self, state: ActorState) -> None:
        """Switch into a closing run's (or a crashed client's) actor so that it stops.

        A thread pool's worker logs any exception that ends it ("Exception in worker", with a
        traceback): being stopped is none of its errors, so that log is held while it stops.
        """
        if state.owner is None:
            self.switch(state)
            return
        held, _POOL_LOG.disabled = _POOL_LOG.disabled, True
        try:
            self.switch(state)
        finally:
            _POOL_LOG.disabled = held

    def _never_started(self, state: ActorState) -> None:
        """End a sub-actor whose thread never ran (its run closed, or its actor crashed)."""
        state.result, state.done, state.aborted = UNFINISHED, True, True
        assert state.ended is not None  # every sub-actor has one
        state.ended()

    def wait_until_parked(self, state: ActorState) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: state.parked or state.done, STEP_TIMEOUT_S)
        if not ok:
            raise ScheduleError(
                f"actor {state.name} did not reach its next round trip within "
                f"{STEP_TIMEOUT_S:g} s (is it waiting for something else?)"
            )
        self.check_crash(state)

    # --- the scheduler's side -------------------------------------------------------------------

    def resume(self, state: ActorState) -> None:
        """Let a parked actor send its round trip and run until it parks again (or ends)."""
        if state.clock is not None:  # its round trip comes after its sleeps ended
            state.clock.settle()
        if self._greenlets:
            state.parked = False
            self.switch(state)  # the actor sends, reads the reply, runs to its next one
            self.check_crash(state)
            self.settle(by=state)
            return
        with self._cond:
            state.parked = False
            self._cond.notify_all()
        self.wait_until_parked(state)

    def kill(self, state: ActorState) -> None:
        """Stop a parked actor for good (a crash): it never sends its round trip."""
        state.killed = True
        if not state.started:  # a lazy run's client that had not begun: it never will
            state.done = True
        elif self._greenlets:
            self.switch(state)  # its park sees it killed and stops it
            for sub in list(self.states.values()):  # a crashed client's threads go with it
                if sub.owner == state.name and not sub.done:
                    sub.killed = True
                    if sub.glet is None:
                        self._never_started(sub)
                    else:
                        self._stop(sub)
        else:
            with self._cond:
                self._cond.notify_all()
                stopped = self._cond.wait_for(lambda: state.done, STEP_TIMEOUT_S)
            if not stopped:
                raise ScheduleError(f"actor {state.name} did not stop within {STEP_TIMEOUT_S:g} s")
        self.check_crash(state)

    def stop(self) -> None:
        """Stop every unfinished actor at its next round trip and join its thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for state in list(self.states.values()):
            if state.owner is not None and state.glet is None and not state.done:
                self._never_started(state)
            if state.glet is not None and not state.glet.dead:
                self._stop(state)  # its park sees the run closing and stops it
            if state.thread is not None:
                state.thread.join(min(STOP_WAIT_S, STEP_TIMEOUT_S))
                if state.thread.is_alive():  # stuck outside Redis (spinning, waiting): stopped
                    raise_in(state.thread, Aborted)
                    state.thread.join(STEP_TIMEOUT_S)
