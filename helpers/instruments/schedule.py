"""Forced interleavings: run clients' round trips in an exact order, e.g. ``"ABAB"``.

An *actor* is an ordinary function of a redis-py client, written as an application writes it::

    def naive_allow(client, key, limit):
        count = int(client.get(key) or 0)
        if count >= limit:
            return False
        client.incr(key)
        return True

    limiter = partial(naive_allow, key=k, limit=5)
    trace = run_schedule(lab, {"A": limiter, "B": limiter}, "ABAB",
                         setup=lambda c: c.set(k, 4), watch=[k])
    print(trace)          # step, client, round trip sent, reply, state after
    trace.results         # {"A": True, "B": True}

Each actor runs in its own thread with its own *gated* client (``helpers.backend.modes``): every
round trip it makes waits until the schedule names it. A letter in the schedule lets that actor
send one round trip, read the reply and run on until it is about to send the next one (or ends).
One round trip is what the server receives in one piece: a single command, or a whole pipeline or
MULTI/EXEC block. WATCH, and each immediate command after it on a pipeline, is a round trip of its
own. Nothing of another actor can run inside one round trip, which is why a Lua script, a
MULTI/EXEC block or one native command closes a race.

An actor's result is what its function returned, or the ``redis.RedisError`` it raised (a Redis
error ends that actor). A connection that breaks or a reply that never comes (the server is
frozen, paused or gone) is no outcome of the race: like any other exception (a bug in the
actor), it is raised by ``step``.
An actor that has not finished when the run closes is stopped at its next round trip (its
result is "(unfinished)"), as if its process had died there; its connections are closed, which
also ends any WATCH or MULTI it had open.

Before every run the keys in ``reset`` (default: ``watch``) are deleted and ``setup(client)`` is
called, so a run never sees a previous run's data. List every key the actors touch there.

Lease expiry is modelled as an event, never as a wall-clock sleep. ``lease_expires(key)`` is a
``Clock`` actor with a single step: if the key has a TTL, it ends that TTL now (``PEXPIREAT key
1``, a moment in the past: Redis removes the key at once); a key without a TTL never expires, so
the step changes nothing, as time would not. Placing the clock's letter in the schedule says
*when* the lease runs out relative to the clients' round trips, which is all a race depends on.
What the model does not show: on a real server expiry done this way is reported as a ``del``
keyspace event (not ``expired``), and a real client may also pause for any length of time.

The actors read the run's own clock, not the wall's (``helpers.instruments.logical_time``): it
starts at the same instant in every run and only ``time.sleep`` moves it, without waiting. So an
actor that stamps with ``time.time()`` reads the same times in every run of a schedule. A clock
step ends a TTL on the server and leaves the actors' clock where it is (that module says why).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from helpers.backend.modes import Command, Mode, command_name
from helpers.backend.scripts import preload, script_name
from helpers.errors import RaceLabError
from helpers.instruments import blocking, logical_time
from helpers.instruments.adopt import (
    SPUN,
    ActorContext,
    ActorRefused,
    Refusal,
    SpinBound,
    actor_running,
    check_sender,
    refuse_if_started,
)
from helpers.instruments.footprint import (
    EVERYTHING,
    NOTHING,
    Footprint,
    KeyTable,
    Transactions,
    touching,
)
from helpers.instruments.history import Op, Span, hold_spans

try:  # runner="greenlet": a gated step is a switch, not two thread hand-offs
    import greenlet  # type: ignore[import-untyped]  # greenlet ships no type information
except ImportError:  # pragma: no cover - the lock has it; threads work without it
    greenlet = None

Actor = Callable[[Any], Any]
MISSING = "nil"
UNFINISHED = "(unfinished)"
CRASHED = "(crashed)"
CRASH = "!"  # the step "A!" in a schedule: A's client dies there (ScheduleRun.crash)
STEP_TIMEOUT_S = 30.0  # an actor that does not reach its next round trip by then is stuck


class ScheduleError(RaceLabError, ValueError):
    """A schedule names an unknown or finished client, leaves clients unfinished, or an actor is stuck."""


class Aborted(BaseException):
    """Raised inside an actor at its next round trip when its run closes before it finished.

    A BaseException, so that an actor's own ``except Exception`` cannot swallow it.
    """


class Clock:
    """An actor that is one step however many commands it sends: time passing, not a client."""

    def __init__(self, fn: Actor, label: str, key: str | None = None) -> None:
        self.fn, self.label, self.key = fn, label, key

    def footprint(self) -> Footprint:
        """Return what the clock's step touches: its key, or everything when it names none."""
        return touching([self.key]) if self.key is not None else EVERYTHING

    def describe(self, short: Callable[[Any], str]) -> str:
        """Return the label for a trace, with {key} replaced by the key without the run prefix."""
        return self.label.replace("{key}", short(self.key) if self.key is not None else "")

    def __call__(self, client: Any) -> Any:
        return self.fn(client)


def lease_expires(key: str, label: str | None = None, value: Any = None) -> Clock:
    """Return a Clock actor that ends key's TTL now (see the module docstring for the model).

    With value, it is the lease of the holder that wrote value that runs out: the TTL ends only
    if key still holds value (a lease taken later by another holder has not run out yet).
    """

    def expire_now(client: Any) -> str:
        ttl = client.pttl(key)
        if ttl == -2:
            return "key missing: nothing expires"
        if ttl == -1:
            return "no TTL: nothing expires"
        if value is not None and client.get(key) != value:
            return "another holder's lease: nothing expires"
        client.execute_command("PEXPIREAT", key, 1)
        return "TTL ran out: key expired"

    return Clock(expire_now, label or "(clock) TTL of {key} runs out", key)


def _word(text: str) -> str:
    """Return text for a command line: quoted if empty or unprintable (a newline must not break the table).

    Spaces are left as they are: labels such as "(clock)", "lease on", key read naturally.
    """
    return text if text and text.isprintable() else repr(text)


def _one_line(text: str) -> str:
    """Return text with unprintable characters (newlines, escapes) shown as Python escapes."""
    return text if text.isprintable() else repr(text)[1:-1]


def format_value(value: Any, short: Callable[[Any], str]) -> str:
    """Return a stable one-line text for a reply or result (keys shortened, errors by class)."""
    if value is None:
        return MISSING
    if isinstance(value, BaseException):
        return _one_line(f"{type(value).__name__}: {value}")
    if isinstance(value, bytes):
        try:
            return repr(short(value.decode()).encode())
        except UnicodeDecodeError:  # binary: shown as bytes, never decoded
            return repr(value)
    if isinstance(value, str):
        return repr(short(value))
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{format_value(k, short)}: {format_value(v, short)}" for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, (list, tuple)):
        inner = ", ".join(format_value(v, short) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return repr(value)


def short_text(lab: Any, x: Any) -> str:
    """Return x as text for a trace: keys without the run prefix, undecodable bytes as b'...'."""
    if isinstance(x, bytes):
        try:
            x = x.decode()
        except UnicodeDecodeError:
            prefix = lab.ns.prefix.encode()
            return repr(x[len(prefix) :] if x.startswith(prefix) else x)
    return lab.ns.short(x) if isinstance(x, str) else _text(x)


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def read_state(client: Any, keys: Iterable[str], short: Callable[[Any], str]) -> str:
    """Return 'key=value, ...' for keys (any type; nil if missing; '(ttl)' if it has one)."""
    parts = []
    for key in keys:
        kind = _text(client.type(key))
        if kind == "none":
            value = MISSING
        elif kind == "string":
            value = _text(client.get(key))
        elif kind == "hash":
            items = sorted((_text(f), _text(v)) for f, v in client.hgetall(key).items())
            value = "{" + ", ".join(f"{f}: {v}" for f, v in items) + "}"
        elif kind == "set":
            value = "{" + ", ".join(sorted(_text(m) for m in client.smembers(key))) + "}"
        elif kind == "list":
            value = "[" + ", ".join(_text(m) for m in client.lrange(key, 0, -1)) + "]"
        elif kind == "zset":
            value = (
                "["
                + ", ".join(
                    f"{_text(m)}:{s:g}" for m, s in client.zrange(key, 0, -1, withscores=True)
                )
                + "]"
            )
        else:
            value = f"<{kind}>"
        ttl = " (ttl)" if kind != "none" and client.pttl(key) >= 0 else ""
        parts.append(f"{_one_line(short(key))}={_one_line(value)}{ttl}")
    return ", ".join(parts)


@dataclass(frozen=True)
class TraceRow:
    """One executed step: number, client, command, reply, and the watched keys afterwards."""

    step: int
    client: str
    command: str
    reply: str
    state: str


@dataclass
class Trace:
    """What a forced schedule did, step by step; prints as a table identical on every backend."""

    schedule: str
    rows: list[TraceRow]
    results: dict[str, Any]
    initial_state: str = ""
    result_text: dict[str, str] = field(default_factory=dict)
    actors: dict[str, Actor] = field(default_factory=dict, repr=False)

    def table(self) -> str:
        """Return the trace as a fixed-width text table with the results below it."""
        head = TraceRow(0, "client", "command", "reply", "state after")
        rows = [TraceRow(0, "", "(setup)", "", self.initial_state)] + self.rows
        width_c = max(len(r.client) for r in [head, *rows])
        width_m = max(len(r.command) for r in [head, *rows])
        width_r = max(len(r.reply) for r in [head, *rows])
        lines = [
            f"{'step':>4}  {head.client:<{width_c}}  {head.command:<{width_m}}  "
            f"{head.reply:<{width_r}}  {head.state}".rstrip()
        ]
        lines.append("-" * len(lines[0]))
        for r in rows:
            num = str(r.step) if r.command != "(setup)" else ""
            lines.append(
                f"{num:>4}  {r.client:<{width_c}}  {r.command:<{width_m}}  "
                f"{r.reply:<{width_r}}  {r.state}".rstrip()
            )
        results = "  ".join(f"{name} -> {text}" for name, text in self.result_text.items())
        lines.append(f"results: {results}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.table())

    @property
    def final_state(self) -> str:
        """Return the watched keys' state after the last step."""
        return self.rows[-1].state if self.rows else self.initial_state

    def history(self) -> list[Op]:
        """Return the steps as Ops in logical time (step n runs from n-1 to n), for timelines."""
        return [Op(row.client, row.command, row.step - 1, row.step, row.reply) for row in self.rows]

    def spans(
        self, acquired: Callable[[Op], bool], released: Callable[[Op], bool], label: str
    ) -> list[Span]:
        """Return each client's spans from an op where acquired(op) to its next released(op)."""
        return hold_spans(self.history(), acquired, released, label)


def parse_schedule(schedule: str | Sequence[str]) -> list[str]:
    """Return a schedule as a list of client names ('ABAB' or 'A B A B' or ['A', 'B', ...]).

    Faults (``helpers.instruments.faults``): "A!" (A crashes), "A~" (A pauses until its leases
    run out), and the words "restart" and "failover" between spaces.
    """
    from helpers.instruments.faults import PAUSE, SERVER_KINDS

    if isinstance(schedule, str):
        names: list[str] = []
        for word in schedule.split():
            if word in SERVER_KINDS:
                names.append(word)
                continue
            for c in word:
                if c in (CRASH, PAUSE) and names:
                    names[-1] += c  # "AB!A": B crashes after A's first step
                else:
                    names.append(c)
        return names
    return [str(c) for c in schedule]


def schedule_text(names: Sequence[str]) -> str:
    """Return names joined as 'ABAB' when every name is one character, else 'A B A B'."""
    return ("" if all(len(n) == 1 for n in names) else " ").join(names)


def schedule_names(text: str, known: Sequence[str]) -> list[str]:
    """Return the step names of a schedule_text ('ABAB', 'A B A!', or one long name: 'A!')."""
    if " " in text:
        return text.split()
    return [text] if len(text) > 1 and text in known else list(text)


class Gate(Mode):
    """The gated mode of one actor's client: each round trip waits for the schedule to name it."""

    name = "gated"

    def __init__(self, actor: str) -> None:
        super().__init__()
        self.actor = actor
        self.run: ScheduleRun | None = None  # None: commands pass (connecting, resetting)
        self.open_state = False  # a WATCH or MULTI left open on the connection

    def before_round_trip(self, commands: list[Command]) -> list[Command] | None:
        """Refuse another thread's round trip (ActorRefused), count, park until the run grants
        this actor a step (or raise Aborted); return what to send instead, if anything."""
        run = self.run
        if run is not None:
            run._check_sender(self.actor, commands)
        else:
            refuse_if_started(lambda: describe_round_trip(commands, _text))
        super().before_round_trip(commands)
        if run is not None:
            return run._park(self.actor, commands)
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
            self.run._reply(self.actor, reply)


class _Watchdog:
    """Interrupts the main thread when an actor greenlet runs STEP_TIMEOUT_S without parking.

    A greenlet actor runs on the explorer's own thread, so one that waits for something other than
    Redis (an Event, a lock, input()) would hang the whole search. While a switch into an actor is
    under way, one daemon thread (for the whole process, polling a few times a second, so a step
    costs it nothing) watches the clock; past the deadline it sends SIGINT to the main thread,
    whose KeyboardInterrupt (raised in the actor, where it waits) the run turns into a
    ScheduleError naming the actor. Where SIGINT is ignored (a background job), Python's handler
    stands in while a switch is under way. Off the main thread nothing can be interrupted, so it
    does not arm.
    """

    def __init__(self) -> None:
        self.fired = False
        self._since: float | None = None  # when the switch under way began
        self._restore: Any = None  # SIGINT's disposition to put back at disarm (SIG_IGN, SIG_DFL)
        self._thread: threading.Thread | None = None

    def arm(self) -> bool:
        """Start the clock for one switch; return False when it cannot watch (not the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        handler = signal.getsignal(signal.SIGINT)
        if handler is None:
            return False  # a handler Python did not install: the interrupt is not ours to send
        if not callable(handler):  # ignored or left to the OS (a background job): ours meanwhile
            self._restore = handler
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self._since = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, daemon=True, name="racelab-watchdog"
            )
            self._thread.start()
        return True

    def disarm(self) -> None:
        self._since = None
        if self._restore is not None:
            signal.signal(signal.SIGINT, self._restore)
            self._restore = None

    def _watch(self) -> None:
        while True:
            time.sleep(min(1.0, STEP_TIMEOUT_S / 4))
            since = self._since
            if since is not None and time.monotonic() - since > STEP_TIMEOUT_S:
                self.fired, self._since = True, None
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


_WATCHDOG = _Watchdog()


class _ActorState:
    """One actor's thread and where it stands."""

    def __init__(self, name: str, fn: Actor, client: Any, gate: Gate | None) -> None:
        self.name, self.fn, self.client, self.gate = name, fn, client, gate
        self.thread: threading.Thread | None = None
        self.glet: Any = None  # the greenlet it runs in (runner="greenlet")
        self.footprint: Footprint = fn.footprint() if isinstance(fn, Clock) else EVERYTHING
        self.transactions = Transactions()  # its open WATCH and MULTI, for footprints
        self.call: blocking.Call | None = None  # its next round trip, when that is a blocking call
        self.instead: list[Command] | None = None  # what to send instead of its next round trip
        self.parked = False
        self.done = False
        self.pending: list[Command] = []
        self.replies: list[Any] = []
        self.step_replies: list[Any] = []
        self.result: Any = UNFINISHED
        self.crash: BaseException | None = None
        self.aborted = False
        self.killed = False  # crashed: stopped at its next round trip, never to run again
        self.round_trips = 0  # sent through the race's clients (its own and adopted ones)
        self.recovering = False  # its last reply was NOSCRIPT: the load and retry are this step


def _node_of(lab: Any, keys: Sequence[str]) -> tuple[str, int] | None:
    """Return (host, port) of the cluster node holding every key; None if not a cluster or spread out."""
    if not keys or not (lab.caps.cluster or lab.kind == "cluster"):
        return None
    router = lab.client()
    try:
        nodes = {(n.host, n.port) for n in (router.get_node_from_key(k) for k in keys)}
    finally:
        lab.release(router)
    # Keys on one node: a plain client of that node, so WATCH and MULTI stay on one connection.
    # Keys spread over nodes: a client that routes by key (plain commands and scripts only).
    return nodes.pop() if len(nodes) == 1 else None


class Connections:
    """Gated clients reused across replays (explore): an observer plus one client per actor."""

    def __init__(self, lab: Any, actors: Mapping[str, Actor], keys: Sequence[str] = ()) -> None:
        self.lab = lab
        self.observer = lab.client()
        self.clients: dict[str, tuple[Any, Gate | None]] = {}
        self.loaded: set[tuple[str, str]] = set()  # scripts and libraries the actors loaded
        self.keys = list(keys)
        self.node: tuple[str, int] | None = None
        self._key_table: KeyTable | None = None
        try:
            preload(self.observer)  # so that no actor's EVALSHA meets NOSCRIPT mid-schedule
            node = self.node = _node_of(lab, list(keys))
            for name, fn in actors.items():
                if isinstance(fn, Clock):
                    self.clients[name] = (self.observer, None)
                    continue
                gate = Gate(name)
                client = lab.client(mode=gate, node=node)
                client.ping()  # connect now, ungated: the handshake is not the actor's round trip
                self.clients[name] = (client, gate)
        except BaseException:
            self.close()
            raise

    @property
    def key_table(self) -> KeyTable:
        """Return the server's command table (read once, with the observer), for footprints."""
        if self._key_table is None:
            self._key_table = KeyTable(self.observer, self.keys)
        return self._key_table

    def close(self) -> None:
        """Release every client."""
        for client, gate in self.clients.values():
            if gate is not None:
                self.lab.release(client)
        self.lab.release(self.observer)
        self.clients.clear()

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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


def reply_of_round_trip(commands: Sequence[Command], replies: Sequence[Any]) -> Any:
    """Return what a round trip answered: the reply; EXEC's for a MULTI block; else the list."""
    if len(replies) == 1:
        return replies[0]
    if (
        commands
        and command_name(commands[0]) == "MULTI"
        and command_name(commands[-1]) == "EXEC"
        and replies
    ):
        return replies[-1]
    return list(replies)


class ScheduleRun:
    """One run: reset keys, start every actor, then round trips granted one at a time by the caller.

    Each run makes its own gated clients, unless ``connections`` (a ``Connections``) is given; with
    ``observe=False`` the watched keys are not read after each step (faster; rows show no state).
    ``footprints=True`` records the keys each step reads and writes (``next_footprints``,
    ``footprints``; see ``helpers.instruments.footprint``). ``runner="greenlet"`` runs the actors
    as greenlets of the calling thread instead of threads: a step is then a switch, not two
    thread hand-offs, but ``step`` must be called from the thread that made the run, and an actor
    that blocks on something other than Redis blocks the caller (no step timeout).
    """

    def __init__(
        self,
        lab: Any,
        actors: Mapping[str, Actor],
        setup: Callable[[Any], Any] | None = None,
        watch: Sequence[str] = (),
        reset: Sequence[str] | None = None,
        connections: Connections | None = None,
        observe: bool = True,
        *,
        footprints: bool = False,
        runner: str = "thread",
    ) -> None:
        if runner not in ("thread", "greenlet"):
            raise ValueError(f"runner must be 'thread' or 'greenlet', got {runner!r}")
        if not actors:
            raise ValueError("actors must name at least one client")
        not_callable = [n for n, fn in actors.items() if not callable(fn)]
        if not_callable:
            raise TypeError(f"actor {not_callable[0]!r} is not a function of a client")
        to_reset = list(reset) if reset is not None else list(watch)
        foreign = [k for k in to_reset if not lab.ns.owns(k)]
        if foreign:  # the keys are deleted before every run: never somebody else's
            raise ValueError(
                f"reset/watch keys are deleted before each run, so they must lie under this "
                f"run's prefix {lab.ns.prefix!r}; {foreign[0]!r} does not (use lab.key)"
            )
        self.lab, self.watch, self.observe = lab, list(watch), observe
        self.short = lambda x: short_text(lab, x)
        self._own = connections is None
        self._connections = connections or Connections(lab, actors, [*to_reset, *self.watch])
        self.observer = self._connections.observer
        self._cond = threading.Condition()
        self._closing = False
        self.rows: list[TraceRow] = []
        self.names: list[str] = []
        self.footprints: list[Footprint] = []  # of each step run (footprints=True)
        self.waited = False  # some actor had to wait for a blocking call (see waiting)
        self.new_global_state: list[tuple[str, str]] = []  # scripts/libraries first loaded now
        self.actors: dict[str, _ActorState] = {}
        self._keys = self._connections.key_table if footprints else None
        self._greenlets = runner == "greenlet" and greenlet is not None
        self._hub = greenlet.getcurrent() if self._greenlets else None
        self.refused: list[ActorRefused] = []  # round trips from threads not an actor's own
        self.clock = logical_time.LogicalClock().open()  # what its actors read as the time
        try:
            if to_reset:
                self.observer.delete(*to_reset)
            if setup is not None:
                setup(self.observer)
            self.initial_state = self._state()
            for name, fn in actors.items():
                client, gate = self._connections.clients[name]
                self.actors[name] = _ActorState(name, fn, client, gate)
            for state in self.actors.values():
                if state.gate is not None:
                    self._start(state)
        except BaseException:
            self.close()
            raise

    # --- the actors' side (their own threads) ---------------------------------------------------

    def _start(self, state: _ActorState) -> None:
        assert state.gate is not None  # only gated actors are started
        state.gate.run = self
        if self._greenlets:
            state.glet = greenlet.greenlet(self._body)
            self._switch(state, state)  # runs the actor up to its first round trip
            self._check_crash(state)
            self._refuse_if_ungated(state)
            return
        state.thread = threading.Thread(
            target=self._body, args=(state,), daemon=True, name=f"racelab-actor-{state.name}"
        )
        state.thread.start()
        self._wait_until_parked(state)
        self._refuse_if_ungated(state)

    def _check_sender(self, name: str, commands: list[Command]) -> None:
        """Raise ActorRefused if this round trip of name's client comes from another thread."""
        state = self.actors.get(name)
        if state is not None:
            what = lambda: describe_round_trip(commands, self.short)  # noqa: E731 - asked on refusal
            check_sender(name, state.thread, state.glet, self.refused, what)

    def _refuse_if_ungated(self, state: _ActorState) -> None:
        """Raise ActorRefused if the actor ended without one round trip the race could see."""
        if state.done and state.round_trips == 0 and state.result is not SPUN:
            raise ActorRefused(
                f"actor {state.name} finished without a single round trip through the race's "
                f"clients (result {state.result!r}): whatever it did, the schedule could not see "
                "it. Does it talk to a server through a client the race cannot adopt (a cluster "
                "client, another library's connection)? An actor must act through Redis.",
                reason=Refusal.NO_ROUND_TRIP,
            )

    def _body(self, state: _ActorState) -> None:
        gate, node = state.gate, self._connections.node
        context = ActorContext(
            state.name,
            lambda decode: self.lab.client(mode=gate, decode_responses=decode, node=node),
            self.lab.release,
            refused=self.refused,
        )
        try:
            with actor_running(context), logical_time.reading(self.clock):
                result: Any = state.fn(state.client)
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
            state.step_replies, state.replies = state.replies, []
            state.done = True
            self._cond.notify_all()

    def _park(self, name: str, commands: list[Command]) -> list[Command] | None:
        state = self.actors[name]
        state.round_trips += 1
        if state.recovering and _recovers_script(commands):
            # NOSCRIPT, then SCRIPT LOAD (or EVAL) and the retried call: one step, the one that
            # met the cold cache, so a replay with a cold cache has the steps of a warm one
            state.recovering = command_name(commands[0]).startswith("SCRIPT")
            self._note_global_state(commands)
            return None
        state.recovering = False
        state.call = blocking.call_of(commands)
        if state.call is not None:  # made now: XREAD's "$" is the stream's last id now
            state.call = blocking.resolved(self.observer, state.call)
            if state.call.command != tuple(commands[0]):
                state.instead = [state.call.command]
        self._park_until_granted(name, commands)
        instead, state.instead, state.call = state.instead, None, None
        return instead

    def _park_until_granted(self, name: str, commands: list[Command]) -> None:
        state = self.actors[name]
        self._note_global_state(commands)
        if self._keys is not None:
            state.footprint = state.transactions.footprint(self._keys, commands)
        if self._greenlets:
            state.step_replies, state.replies = state.replies, []
            state.pending = commands
            state.parked = True
            if not (self._closing or state.killed):
                assert self._hub is not None  # set whenever greenlets run
                self._hub.switch()  # back to the scheduler, until it grants this actor a step
            if self._closing or state.killed:
                self._abort(state, commands)
            return
        with self._cond:
            state.step_replies, state.replies = state.replies, []
            state.pending = commands
            state.parked = True
            self._cond.notify_all()
            while state.parked and not (self._closing or state.killed):
                self._cond.wait()
            if self._closing or state.killed:
                self._abort(state, commands)

    def _abort(self, state: _ActorState, commands: list[Command]) -> None:
        """Stop an actor at the round trip it is about to send: its run is closing."""
        state.parked = False
        if state.aborted:  # cleanup code on the way out (a pipeline's UNWATCH): the
            # connection is about to be closed anyway, which redis-py handles quietly
            raise redis.ConnectionError(f"the schedule ended: {state.name} is stopped")
        state.aborted = True
        raise Aborted(f"the schedule ended before {state.name} sent {commands}")

    def _note_global_state(self, commands: list[Command]) -> None:
        """Record a script or Function library loaded for the first time (server-global state)."""
        for args in commands:
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
            if loaded not in self._connections.loaded:
                self._connections.loaded.add(loaded)
                self.new_global_state.append(loaded)

    def _reply(self, name: str, reply: Any) -> None:
        state = self.actors[name]
        state.replies.append(reply)
        if isinstance(reply, redis.exceptions.NoScriptError):
            state.recovering = True  # redis-py's NoScriptError: its load and retry ride along

    # --- the scheduler's side -------------------------------------------------------------------

    def _check_crash(self, state: _ActorState) -> None:
        if state.crash is not None:
            raise state.crash
        if self.refused:  # a thread other than an actor's own sent a round trip: refused there
            raise self.refused[0]

    def _switch(self, state: _ActorState, *args: Any) -> None:
        """Switch into the actor's greenlet until it parks or ends; ScheduleError if it hangs."""
        armed = _WATCHDOG.arm()
        try:
            state.glet.switch(*args)
        except KeyboardInterrupt:
            if not _WATCHDOG.fired:
                raise  # the learner pressed stop
            state.crash = None
        finally:
            if armed:
                _WATCHDOG.disarm()
        if _WATCHDOG.fired:
            _WATCHDOG.fired = False
            if isinstance(state.crash, KeyboardInterrupt):
                state.crash = None
            raise ScheduleError(
                f"actor {state.name} did not reach its next round trip within "
                f"{STEP_TIMEOUT_S:g} s: it waits for something other than Redis (an Event, a "
                "lock, a queue, input()); an actor may only wait on its client's replies"
            )

    def _wait_until_parked(self, state: _ActorState) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: state.parked or state.done, STEP_TIMEOUT_S)
        if not ok:
            raise ScheduleError(
                f"actor {state.name} did not reach its next round trip within "
                f"{STEP_TIMEOUT_S:g} s (is it waiting for something else?)"
            )
        self._check_crash(state)

    def _state(self) -> str:
        return read_state(self.observer, self.watch, self.short) if self.observe else ""

    def next_footprints(self) -> dict[str, Footprint]:
        """Return {actor: what its next step reads and writes} for every unfinished actor."""
        return {n: s.footprint for n, s in self.actors.items() if not s.done}

    @property
    def unfinished(self) -> list[str]:
        """Return the actors that still have a step to run, in the order they were given."""
        return [n for n, s in self.actors.items() if not s.done]

    @property
    def waiting(self) -> list[str]:
        """Return the actors whose next round trip is a blocking call the server cannot answer yet."""
        found = [
            n
            for n, s in self.actors.items()
            if not s.done and s.call is not None and not blocking.answerable(self.observer, s.call)
        ]
        self.waited = self.waited or bool(found)
        return found

    @property
    def runnable(self) -> list[str]:
        """Return the actors a schedule may name next (``helpers.instruments.blocking``).

        Every unfinished actor but the waiting ones; when all are waiting, the ones whose call
        can time out (their step is the timeout). Empty when the rest block forever.
        """
        waiting = self.waiting
        ready = [n for n in self.unfinished if n not in waiting]
        if ready or not waiting:
            return ready
        return [n for n in waiting if self.actors[n].call.timeout_s > 0]  # type: ignore[union-attr]

    @property
    def blocked(self) -> list[str]:
        """Return the actors left waiting forever (nothing else can run): the schedule ends."""
        return self.unfinished if not self.runnable else []

    @property
    def results(self) -> dict[str, Any]:
        """Return {actor: result} for the actors that have finished."""
        return {n: s.result for n, s in self.actors.items() if s.done and not s.aborted}

    def waiting_on(self) -> dict[str, str]:
        """Return {actor: the round trip it will send next} for every unfinished actor."""
        return {
            n: (
                s.fn.describe(self.short)
                if isinstance(s.fn, Clock)
                else describe_round_trip(s.pending, self.short)
            )
            for n, s in self.actors.items()
            if not s.done
        }

    def step(self, name: str) -> TraceRow:
        """Let actor name send its next round trip and run up to the one after; return the trace row."""
        state = self._runnable(name)
        if state.gate is None:  # a Clock: its whole function is this one step
            assert isinstance(state.fn, Clock)
            command = state.fn.describe(self.short)
            reply = self.advance(name)
        else:
            command = describe_round_trip(state.pending, self.short)
            if state.call is not None and name in self.waiting:
                command += " (times out: nothing else can run)"
            reply = self.advance(name)
        row = TraceRow(
            len(self.rows) + 1, name, command, format_value(reply, self.short), self._state()
        )
        self.rows.append(row)
        return row

    def advance(self, name: str) -> Any:
        """Run actor name's next step as step() does, without a trace row; return its reply."""
        state = self._runnable(name)
        if state.call is not None and name in self.waiting:
            self._time_out(state)
        self.footprints.append(state.footprint)
        self.names.append(name)
        if state.gate is None:
            return self._tick(state)
        pending = state.pending
        if self._greenlets:
            state.parked = False
            self._switch(state)  # the actor sends, reads the reply, runs to its next one
            self._check_crash(state)
        else:
            with self._cond:
                state.parked = False
                self._cond.notify_all()
            self._wait_until_parked(state)
        return reply_of_round_trip(pending, state.step_replies)

    def _time_out(self, state: _ActorState) -> None:
        """Let a waiting call run as its timeout, or raise ScheduleError while others can run."""
        call = state.call
        assert call is not None
        if state.name not in self.runnable:
            why = (
                "it blocks forever (timeout 0) and"
                if call.timeout_s <= 0
                else "another client can still run, and"
            )
            raise ScheduleError(
                f"{state.name} is waiting in {describe_round_trip([call.command], self.short)}: "
                f"{why} nothing it waits for is there yet; name another client first"
            )
        state.instead = [call.timed_out()]

    def crash(self, name: str) -> None:
        """Kill actor name between two round trips: its connections close, it never runs again.

        Closing the connection ends any WATCH or MULTI it had open; its keys (a lock it took)
        stay until they expire. Its result is "(crashed)" and it is left out of ``results``.
        """
        state = self._runnable(name)
        if state.gate is None:
            raise ScheduleError(f"{name!r} is a clock, not a client: it cannot crash")
        self.names.append(name + CRASH)
        self.footprints.append(NOTHING)  # closing a connection changes no key
        state.killed = True
        if self._greenlets:
            self._switch(state)  # its _park sees it killed and stops it
        else:
            with self._cond:
                self._cond.notify_all()
                stopped = self._cond.wait_for(lambda: state.done, STEP_TIMEOUT_S)
            if not stopped:
                raise ScheduleError(f"actor {name} did not stop within {STEP_TIMEOUT_S:g} s")
        self._check_crash(state)
        state.client.connection_pool.disconnect()
        state.gate.open_state = False
        state.result = CRASHED

    def _runnable(self, name: str) -> _ActorState:
        """Return the state of actor name; ScheduleError if it is unknown or finished."""
        state = self.actors.get(name)
        if state is None:
            raise ScheduleError(
                f"schedule names {name!r}, which is not a client ({', '.join(self.actors)})"
            )
        if state.done:
            raise ScheduleError(
                f"schedule asks {name!r} for step {len(self.names) + 1}, but {name!r} "
                f"has already finished (result {format_value(state.result, self.short)})"
            )
        return state

    def _tick(self, state: _ActorState) -> Any:
        clock: Clock = state.fn  # type: ignore[assignment]
        state.result = clock(self.observer)
        state.done = True
        return state.result

    def trace(self) -> Trace:
        """Return the Trace of the steps run so far (unfinished actors show "(unfinished)")."""
        blocked = self.blocked
        text = {
            n: CRASHED
            if s.killed
            else format_value(s.result, self.short)
            if s.done and not s.aborted
            else blocking.BLOCKED
            if n in blocked
            else UNFINISHED
            for n, s in self.actors.items()
        }
        return Trace(
            schedule_text(self.names),
            list(self.rows),
            self.results,
            self.initial_state,
            text,
            {n: s.fn for n, s in self.actors.items()},
        )

    def close(self) -> None:
        """Stop unfinished actors at their next round trip, join their threads, release or keep clients."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for state in self.actors.values():
            if state.glet is not None and not state.glet.dead:
                self._switch(state)  # its _park sees the run closing and stops it
            if state.thread is not None:
                state.thread.join(STEP_TIMEOUT_S)
            if state.gate is not None:
                state.gate.run = None
                if state.aborted or not state.done or state.gate.open_state:
                    # Closing its connections ends any WATCH or MULTI the actor left open, so the next
                    # replay on the same client starts clean (reconnecting is not a round trip of it).
                    state.client.connection_pool.disconnect()
                    state.gate.open_state = False
        self.actors.clear()
        self.clock.close()
        if self._own:
            self._connections.close()

    def __enter__(self) -> ScheduleRun:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- faults ---

    def fault(self, name: str, server: Any = None) -> bool:
        """Run name if it is a fault step ("A!", "A~", "restart", "failover"); False if it is not.

        A crash or pause of a name that is no actor here is not a fault step either, so that
        ``step`` reports it as the unknown client it is.
        """
        from helpers.instruments import faults

        kind = faults.kind_of(name) if name not in self.actors else None
        if kind in ("crash", "pause") and faults.actor_of(name) not in self.actors:
            return False
        if kind == "crash":
            self.crash(faults.actor_of(name))
        elif kind == "pause":
            self.pause(faults.actor_of(name))
        elif kind is not None:
            self.server_fault(name, server)
        return kind is not None

    def pause(self, name: str) -> TraceRow:
        """Stop actor name between two round trips until its leases run out ("A~"); return the row.

        Its leases are the watched or reset keys it wrote last that have a TTL
        (``helpers.instruments.faults.leases``): each expires now. Then A goes on.
        """
        from helpers.instruments import faults

        state = self._runnable(name)
        if state.gate is None:
            raise ScheduleError(f"{name!r} is a clock, not a client: it cannot pause")
        keys = faults.leases(self, name)
        self.names.append(name + faults.PAUSE)
        self.footprints.append(touching(keys))
        faults.expire(self.observer, keys)
        shown = ", ".join(self.short(k) for k in keys)
        reply = f"lease of {shown} ran out" if keys else "no lease of its own: nothing expires"
        return self._fault_row(name, f"(pause) {name} stalls past its lease", reply)

    def server_fault(self, word: str, server: Any) -> TraceRow:
        """Restart the server or fail it over ("restart", "failover"); return the trace row."""
        from helpers.instruments.faults import RESTART, FaultUnavailable

        if server is None:
            raise FaultUnavailable(f"{word} needs a ServerFaults of the run's throwaway server")
        self.names.append(word)
        self.footprints.append(EVERYTHING)  # every key, every connection
        reply = server.restart(self) if word == RESTART else server.failover(self)
        return self._fault_row("(server)", word, reply)

    def _fault_row(self, client: str, command: str, reply: str) -> TraceRow:
        row = TraceRow(len(self.rows) + 1, client, command, reply, self._state())
        self.rows.append(row)
        return row


def run_schedule(
    lab: Any,
    actors: Mapping[str, Actor],
    schedule: str | Sequence[str],
    setup: Callable[[Any], Any] | None = None,
    watch: Sequence[str] = (),
    reset: Sequence[str] | None = None,
    finish: bool = False,
) -> Trace:
    """Run the actors' round trips in the exact order schedule gives; return the Trace.

    With finish=True, actors still unfinished when the schedule ends run on, in order, to their
    end; otherwise that is a ScheduleError. Fault steps ("A!", "A~", "restart", "failover") run
    as ``helpers.instruments.faults`` describes; restart and failover need a throwaway server.
    """
    from contextlib import nullcontext

    from helpers.instruments import faults

    order = parse_schedule(schedule)
    kinds = {faults.kind_of(n) for n in order if n not in actors}
    server_kinds = [k for k in faults.SERVER_KINDS.values() if k in kinds]
    with (
        faults.ServerFaults(lab, server_kinds) if server_kinds else nullcontext() as server,
        ScheduleRun(lab, actors, setup, watch, reset, footprints="pause" in kinds) as run,
    ):
        if server is not None:
            server.begin(run)
        try:
            for name in order:
                if not run.fault(name, server):
                    run.step(name)
            if finish:
                while run.runnable:
                    run.step(run.runnable[0])
            elif run.runnable:
                raise ScheduleError(
                    f"schedule {schedule_text(order)!r} ends with unfinished clients: "
                    f"{', '.join(run.unfinished)} (add their steps, or pass finish=True)"
                )
            return run.trace()
        finally:
            if server is not None:
                server.end()
