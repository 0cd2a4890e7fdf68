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
starts at the same instant in every run and only ``time.sleep`` moves it, without waiting (the
others see a sleep from the sleeper's next step). So an actor that stamps with ``time.time()``
reads the same times in every run of a schedule. A ``lease_expires`` step ends a TTL on the
server and leaves the actors' clock where it is (that module says why); ``time_passes(s, keys)``
is the clock step that moves it, and the keys' TTLs with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from helpers.backend.modes import Command, command_name
from helpers.backend.scripts import preload
from helpers.instruments import blocking, faults, logical_time
from helpers.instruments.actors import (
    CRASHED,
    UNFINISHED,
    Actors,
    ActorState,
    Gate,
    ScheduleError,
    _text,
    describe_round_trip,
    greenlet,
)
from helpers.instruments.footprint import (
    EVERYTHING,
    MOVES_CLOCK,
    NOTHING,
    Footprint,
    KeyTable,
    touching,
)
from helpers.instruments.history import Op, Span, hold_spans
from helpers.instruments.servers import Servers
from helpers.instruments.spec import RaceSpec

Actor = Callable[[Any], Any]
MISSING = "nil"
CRASH = faults.CRASH  # the step "A!" in a schedule: A's client dies there (ScheduleRun.crash)


class Clock:
    """An actor that is one step however many commands it sends: time passing, not a client.

    Its step touches key, or keys when given, or everything when it names none. With seconds,
    the step also moves the actors' clock that far (``time_passes``). With times=n it has n
    such steps, one after another (its result is the last one's).
    """

    def __init__(
        self,
        fn: Actor,
        label: str,
        key: str | None = None,
        seconds: float = 0.0,
        keys: Sequence[str] | None = None,
        times: int = 1,
    ) -> None:
        self.fn, self.label, self.key, self.seconds, self.times = fn, label, key, seconds, times
        self.keys = tuple(keys) if keys is not None else None if key is None else (key,)

    def footprint(self) -> Footprint:
        """Return what the clock's step touches: its keys (and the actors' clock if it moves it)."""
        if self.keys is None:
            return EVERYTHING
        return touching(self.keys) | (MOVES_CLOCK if self.seconds else NOTHING)

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


def time_passes(
    seconds: float, keys: Sequence[str] = (), label: str | None = None, times: int = 1
) -> Clock:
    """Return a Clock actor after whose step seconds have passed, for the actors and for keys.

    The actors' clock (``helpers.instruments.logical_time``) moves forward by seconds, so an
    actor that reads the time after this step reads it later: a rate limiter's window can end
    between two requests. The TTL of each of keys is shortened by as much, and one that would
    run out within the step ends now (``PEXPIREAT key 1``), so the server's expiries keep pace
    with the actors' clock; a key with no TTL, or missing, is left alone. Its step touches keys
    and the actors' clock, nothing else. With times=n the clock has n such steps (the time
    moves on twice: ``times=2``, written "T" twice in a schedule).

    A race with such a step starts its clients lazily (``ScheduleRun``): the code before a
    client's first round trip runs at its first step, so it reads the time of that step.
    """
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 < seconds < math.inf
    ):
        raise ValueError(f"seconds must be a number > 0, got {seconds!r}")
    if isinstance(keys, (str, bytes)):
        raise ValueError(f"keys must be a list of keys, got the string {keys!r}")
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times must be a number >= 1, got {times!r}")
    keys = tuple(keys)
    moved_ms = round(seconds * 1000)

    def pass_time(client: Any) -> str:
        ended = 0
        for key in keys:
            ttl = client.pttl(key)
            if ttl < 0:
                continue  # missing, or no TTL: time passing changes nothing
            if ttl <= moved_ms:
                client.execute_command("PEXPIREAT", key, 1)
                ended += 1
            else:
                client.pexpire(key, ttl - moved_ms)
        return f"{seconds:g} s passed" + (f", {ended} TTL(s) ran out" if ended else "")

    return Clock(pass_time, label or f"(clock) {seconds:g} s pass", None, seconds, keys, times)


TIMEOUT_PAST_S = 0.001  # a logical timeout moves the clock this much past the call's timeout
TIMED_OUT = "(timed out)"  # the reply of a step that is a wait's timeout
STARTS = "(starts)"  # what a lazy run's client does at its first step, before its round trip
# A forced schedule runs its actors as the explorer does (greenlets: the threads an actor starts
# are its sub-actors); threads where greenlet is missing.
FORCED_RUNNER = "greenlet" if greenlet is not None else "thread"


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
    server: str = ""  # where the round trip went, named when the race has several servers


@dataclass
class Trace:
    """What a forced schedule did, step by step; prints as a table identical on every backend."""

    schedule: str
    rows: list[TraceRow]
    results: dict[str, Any]
    initial_state: str = ""
    result_text: dict[str, str] = field(default_factory=dict)
    actors: dict[str, Actor] = field(default_factory=dict, repr=False)
    # The lab's own server's name when the race dialed several servers ('': one server): then each
    # row says which server it went to (a row without one went to the lab's own).
    servers: str = ""

    def table(self) -> str:
        """Return the trace as a fixed-width text table with the results below it."""
        head = TraceRow(0, "client", "command", "reply", "state after", "server")
        rows = [TraceRow(0, "", "(setup)", "", self.initial_state)] + self.rows
        width_c = max(len(r.client) for r in [head, *rows])
        width_s = max(len(r.server) for r in [head, *rows]) if self.servers else 0
        width_m = max(len(r.command) for r in [head, *rows])
        width_r = max(len(r.reply) for r in [head, *rows])

        def line(num: str, r: TraceRow) -> str:
            server = f"{r.server:<{width_s}}  " if self.servers else ""
            return (
                f"{num:>4}  {r.client:<{width_c}}  {server}{r.command:<{width_m}}  "
                f"{r.reply:<{width_r}}  {r.state}".rstrip()
            )

        lines = [line("step", head)]
        lines.append("-" * len(lines[0]))
        for r in rows:
            lines.append(line(str(r.step) if r.command != "(setup)" else "", r))
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
    run out), and the words "restart", "failover" and "crash(<server>)" between spaces. Digits
    belong to the name before them: "AA1A2" is A, then its sub-actors A1 and A2.
    """
    if isinstance(schedule, str):
        names: list[str] = []
        for word in schedule.split():
            if word in faults.SERVER_WORDS or faults.server_fault(word):
                names.append(word)
                continue
            for c in word:
                if c in (faults.CRASH, faults.PAUSE) and names:
                    names[-1] += c  # "AB!A": B crashes after A's first step
                elif c.isdigit() and names and names[-1][-1] not in (faults.CRASH, faults.PAUSE):
                    names[-1] += c  # "AA1": A's sub-actor A1
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
        self.servers = Servers(lab)  # the further servers the actors' own clients dial
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
        """Release every client and stop the further servers."""
        self.servers.close()
        for client, gate in self.clients.values():
            if gate is not None:
                self.lab.release(client)
        self.lab.release(self.observer)
        self.clients.clear()

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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


def _next_text(state: ActorState, short: Callable[[Any], str]) -> str:
    """Return what an actor sends next: its round trip, or a clock's label."""
    if isinstance(state.fn, Clock):
        return state.fn.describe(short)
    if state.wait is not None:
        return state.wait.describe()
    if not state.started:
        return STARTS
    return describe_round_trip(state.pending, short)


class ScheduleRun:
    """One run: reset keys, start every actor, then round trips granted one at a time by the caller.

    Each run makes its own gated clients, unless ``connections`` (a ``Connections``) is given; with
    ``observe=False`` the watched keys are not read after each step (faster; rows show no state).
    ``footprints=True`` records the keys each step reads and writes (``next_footprints``,
    ``footprints``). ``runner="greenlet"`` runs the actors as greenlets of the calling thread (a
    step is a switch; see ``helpers.instruments.actors``). In a race with a ``time_passes`` step
    the run is *lazy*: a client starts at its first step, not when the run opens, so the code
    before its first round trip reads the time of that step (its first step runs that code and
    sends the round trip; what it touches is known only then, so it counts as everything).
    Fault steps ("A!", "A~", "restart", "failover") are ``helpers.instruments.faults``'s: they
    act through ``client``, ``kill``, ``record`` and ``add_row``. ``sharing`` is a search's
    ``helpers.instruments.sharing.PrefixSharing``, which the actors' gated clients ask.
    """

    def __init__(
        self,
        spec: RaceSpec,
        connections: Connections | None = None,
        observe: bool = True,
        *,
        footprints: bool = False,
        runner: str = "thread",
        sharing: Any = None,
    ) -> None:
        if runner not in ("thread", "greenlet"):
            raise ValueError(f"runner must be 'thread' or 'greenlet', got {runner!r}")
        lab, self.spec, self.observe = spec.lab, spec, observe
        self.lab, self.watch = lab, list(spec.watch)
        self.short = lambda x: short_text(lab, x)
        self._own = connections is None
        self._connections = connections or Connections(lab, spec.actors, [*spec.keys, *spec.watch])
        self.observer = self._connections.observer
        self.rows: list[TraceRow] = []
        self.names: list[str] = []
        self.footprints: list[Footprint] = []  # of each step run (footprints=True)
        self.waited = False  # some actor had to wait for a blocking call (see waiting)
        # A race with a time_passes step starts its clients lazily, each at its first step.
        self.lazy = any(isinstance(fn, Clock) and fn.seconds for fn in spec.actors.values())
        self._started = STARTS  # what the last client started lazily did in its first step
        self.clock = logical_time.LogicalClock().open()  # what its actors read as the time
        table = self._connections.key_table if footprints else None
        self._actors = Actors(
            lab, self.observer, self._connections.node, self._connections.loaded, self.clock,
            runner == "greenlet", table, self.short, self._connections.servers,
        )  # fmt: skip
        self._actors.sharing = sharing  # a search's shared prefixes (explore), else None
        self.actors = self._actors.states
        # What faults and the search read of a run: its keys (reset, then watched, each once),
        # the scripts and libraries loaded (this run's first loads apart), refused round trips.
        self.keys = list(dict.fromkeys(self._connections.keys))
        self.loaded = self._connections.loaded
        self.new_global_state = self._actors.new_global_state
        self.refused = self._actors.refused
        # A search sharing prefixes puts the whole keyspace back when its replay leaves the
        # record (``PrefixSharing.restores``); the steps before are answered from the record, so
        # the keys need no reset nor setup first.
        restores = sharing is not None and sharing.restores
        try:
            if spec.keys and not restores:
                self.observer.delete(*spec.keys)
            self._connections.servers.reset(self.loaded)
            if spec.setup is not None and not restores:
                spec.setup(self.observer)
            self.initial_state = self._state()
            for name, fn in spec.actors.items():
                client, gate = self._connections.clients[name]
                step = fn.footprint() if isinstance(fn, Clock) else EVERYTHING
                self.actors[name] = ActorState(name, fn, client, gate, step)
            for state in list(self.actors.values()):  # (sub-actors join as they start)
                if state.gate is not None and state.owner is None and not self.lazy:
                    self._actors.start(state)
        except BaseException:
            self.close()
            raise

    # --- what a run shows ------------------------------------------------------------------------

    def _state(self) -> str:
        return read_state(self.observer, self.watch, self.short) if self.observe else ""

    def next_footprints(self) -> dict[str, Footprint]:
        """Return {actor: what its next step touches} (a timeout, if it ran now: everything)."""
        if self._free():
            return {n: s.footprint for n, s in self.actors.items() if not s.done}
        late = (set(self.waiting) | set(self.in_wait)) & set(self.runnable)
        return {
            n: EVERYTHING if n in late else s.footprint
            for n, s in self.actors.items()
            if not s.done
        }

    @property
    def unfinished(self) -> list[str]:
        """Return the actors that still have a step to run, in the order they were given."""
        return [n for n, s in self.actors.items() if not s.done]

    @property
    def servers(self) -> list[str]:
        """Return the further servers the actors' own clients dialed (a crash can hit them)."""
        return self._connections.servers.names

    @property
    def clients(self) -> list[str]:
        """Return the unfinished actors that are clients (not clocks nor sub-actors): those a
        fault can hit (a crash takes a client's sub-actors with it)."""
        return [
            n
            for n in self.unfinished
            if self.actors[n].gate is not None and self.actors[n].owner is None
        ]

    @property
    def waiting(self) -> list[str]:
        """Return the actors whose next round trip is a blocking call the server cannot answer yet."""
        servers = self._connections.servers
        found = [
            n
            for n, s in self.actors.items()
            if not s.done
            and s.call is not None
            and not blocking.answerable(servers.observer(s.server) or self.observer, s.call)
        ]
        self.waited = self.waited or bool(found)
        return found

    @property
    def in_wait(self) -> list[str]:
        """Return the actors parked in a wait on a thread primitive (``actors.Wait``)."""
        return [n for n, s in self.actors.items() if not s.done and s.wait is not None]

    @property
    def runnable(self) -> list[str]:
        """Return the actors a schedule may name next (``helpers.instruments.blocking``).

        Every unfinished actor but the waiting ones (on a blocking call, or in a wait on a thread
        primitive); when all are waiting, the ones that can time out (their step is the
        timeout). Empty when the rest block forever.
        """
        free = self._free()
        if free is not None:
            return free
        waiting, in_wait = self.waiting, self.in_wait
        ready = [n for n in self.unfinished if n not in waiting and n not in in_wait]
        if ready:
            return ready
        return [
            n
            for n in self.unfinished
            if (n in waiting and self.actors[n].call.timeout_s > 0)  # type: ignore[union-attr]
            or (n in in_wait and self.actors[n].wait.deadline_ns is not None)  # type: ignore[union-attr]
        ]

    def _free(self) -> list[str] | None:
        """Return the unfinished actors when none waits (on a blocking call or a thread
        primitive), the usual case, in one pass; else None."""
        free = []
        for n, s in self.actors.items():
            if not s.done:
                if s.call is not None or s.wait is not None:
                    return None
                free.append(n)
        return free

    @property
    def blocked(self) -> list[str]:
        """Return the actors left waiting forever (nothing else can run): the schedule ends."""
        return self.unfinished if not self.runnable else []

    @property
    def results(self) -> dict[str, Any]:
        """Return {actor: result} for the actors that have finished (sub-actors apart)."""
        return {
            n: s.result
            for n, s in self.actors.items()
            if s.done and not s.aborted and s.owner is None
        }

    def waiting_on(self) -> dict[str, str]:
        """Return {actor: the round trip it will send next} for every unfinished actor."""
        return {n: _next_text(s, self.short) for n, s in self.actors.items() if not s.done}

    # --- steps ----------------------------------------------------------------------------------

    def step(self, name: str) -> TraceRow:
        """Let actor name send its next round trip and run up to the one after; return the trace row.

        An actor that waits for its own threads stands for them: its first sub-actor that can
        run takes the step (the row names it).
        """
        name = self._stand_in(name)
        state, command = self._runnable(name), self.waiting_on()[name]
        if (state.call is not None and name in self.waiting) or state.wait is not None:
            command += " (times out: nothing else can run)"
        servers = self._connections.servers
        server = servers.label(state.server) if servers.names else ""
        starts = not state.started and state.gate is not None
        reply = self.advance(name)
        if starts:  # what it sent is known now: the round trip its start led to, if any
            command, server = self._started, servers.label(state.server) if servers.names else ""
        text = TIMED_OUT if reply is TIMED_OUT else format_value(reply, self.short)
        return self.add_row(name, command, text, server)

    def share_point(self) -> tuple[bool, bool]:
        """Return (clean, spoilt) before the next step, for a search sharing prefixes
        (``helpers.instruments.sharing``): clean when no actor has a WATCH or MULTI open;
        spoilt, for the rest of the run, once an actor waits on a blocking call or a thread
        (whose parking reads the server) or started a thread."""
        states = self.actors.values()
        spoilt = self.waited or self._actors.threaded
        spoilt = spoilt or any(s.call is not None or s.wait is not None for s in states)
        clean = not any(s.gate is not None and s.gate.open_state for s in states)
        return clean, spoilt

    def standing(self) -> Hashable | None:
        """Return the run's clocks and each actor's standing, for ``PrefixSharing.state``; None
        when an actor stands where its round trips and replies do not say all (it has sub-actors
        or is one, waits, crashed, is recovering from NOSCRIPT or has a reply to send instead)."""
        standing = []
        for name, s in self.actors.items():
            if (
                s.owner is not None
                or s.subs
                or s.call is not None
                or s.wait is not None
                or s.instead is not None
                or s.crash is not None
                or s.aborted
                or s.killed
                or s.recovering
            ):
                return None
            clock = s.clock
            moved = (clock.own_ns, clock.moves) if clock is not None else None
            standing.append((name, s.started, s.done, s.ticks, moved))
        return self.clock.elapsed_ns, tuple(standing)

    def _stand_in(self, name: str) -> str:
        """Return name, or the first sub-actor of name that can run while name waits for it."""
        state = self.actors.get(name)
        if state is None or state.wait is None or name in (runnable := self.runnable):
            return name
        return next((n for n in runnable if self.actors[n].owner == name), name)

    def advance(self, name: str) -> Any:
        """Run actor name's next step as step() does, without a trace row; return its reply."""
        name = self._stand_in(name)
        state = self._runnable(name)
        if state.wait is not None:  # a wait on a thread primitive: the step is its timeout
            if name not in self.runnable:
                raise ScheduleError(
                    f"{name} {state.wait.describe()[1:-1]}: another client can still run"
                    if state.wait.deadline_ns is not None
                    else f"{name} {state.wait.describe()[1:-1]}, with no timeout: name them"
                )
            self.record(name, EVERYTHING)
            self._actors.time_out(state)
            return TIMED_OUT
        if not state.started and state.gate is not None:
            return self._start(name, state)
        late = state.call is not None and name in self.waiting  # the step is its call's timeout
        self.record(name, self._time_out(state) if late else state.footprint)
        if state.gate is None:
            if isinstance(state.fn, Clock):  # one that says time passes moves the actors' clock
                self.clock.advance(state.fn.seconds)
            state.result = state.fn(self.observer)  # a Clock ticks with the observer
            state.ticks += 1
            state.done = not isinstance(state.fn, Clock) or state.ticks >= state.fn.times
            return state.result
        pending = state.pending
        self._actors.resume(state)
        return reply_of_round_trip(pending, state.step_replies)

    def _start(self, name: str, state: ActorState) -> Any:
        """Run a lazy run's client up to its first round trip and send it, as one step.

        Its step touches everything (what it sends is known only now). If its first round trip
        cannot be sent yet (a blocking call with nothing to answer it, a wait on a thread), or
        it ends before any, the step is its start alone.
        """
        self.record(name, EVERYTHING)
        self._actors.start(state)
        if state.done or state.wait is not None or name in self.waiting:
            self._started = STARTS
            return None
        pending = state.pending
        self._started = f"{STARTS} {describe_round_trip(pending, self.short)}"
        self._actors.resume(state)
        return reply_of_round_trip(pending, state.step_replies)

    def _time_out(self, state: ActorState) -> Footprint:
        """Let a waiting call time out (ScheduleError while others can run); return EVERYTHING.

        A timeout comes only once nothing else can run, so it is ordered against every step.
        """
        call = state.call
        assert call is not None
        if state.name not in self.runnable:
            forever = call.timeout_s <= 0
            why = (
                "it blocks forever (timeout 0) and"
                if forever
                else "another client can still run, and"
            )
            raise ScheduleError(
                f"{state.name} is waiting in {describe_round_trip([call.command], self.short)}: "
                f"{why} nothing it waits for is there yet; name another client first"
            )
        state.instead = [call.timed_out()]
        # Time passes for everyone (every unfinished actor is waiting): the run's clock moves by
        # the timeout and the shortest step a server's clock shows, as a real server answers
        # only once its timeout is past, so a library that times its own wait sees it ran out.
        self.clock.advance(call.timeout_s + TIMEOUT_PAST_S)
        return EVERYTHING

    def client(self, name: str, doing: str) -> ActorState:
        """Return client name's state for a fault; ScheduleError if unknown, finished or a clock."""
        state = self._runnable(name)
        if state.gate is None:
            raise ScheduleError(f"{name!r} is a clock, not a client: it cannot {doing}")
        return state

    def kill(self, state: ActorState) -> None:
        """Stop a parked client for good (a crash): it never sends its round trip."""
        self._actors.kill(state)

    def crash_server(self, name: str) -> str:
        """Restart further server name without persistence; return what the trace row says."""
        return self._connections.servers.crash(name)

    def server_leases(self, name: str) -> list[bytes]:
        """Return the keys of further server name that have a TTL now."""
        return self._connections.servers.leases(name)

    def pause_server(self, name: str) -> list[bytes]:
        """Expire every key with a TTL on further server name; return those keys."""
        return self._connections.servers.pause(name)

    def record(self, name: str, footprint: Footprint) -> None:
        """Record a step as run: its name in the schedule and what it touched."""
        self.names.append(name)
        self.footprints.append(footprint)

    def add_row(self, client: str, command: str, reply: str, server: str = "") -> TraceRow:
        """Append the trace row of the step just run (the watched keys read now); return it."""
        row = TraceRow(len(self.rows) + 1, client, command, reply, self._state(), server)
        self.rows.append(row)
        return row

    def _runnable(self, name: str) -> ActorState:
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

    def result_texts(self) -> dict[str, str]:
        """Return each actor's result as shown: its value, or crashed, blocked or unfinished."""
        blocked = self.blocked
        return {
            n: CRASHED
            if s.killed
            else format_value(s.result, self.short)
            if s.done and not s.aborted
            else blocking.BLOCKED
            if n in blocked
            else UNFINISHED
            for n, s in self.actors.items()
            if s.owner is None
        }

    def trace(self) -> Trace:
        """Return the Trace of the steps run so far (unfinished actors show "(unfinished)")."""
        servers = self._connections.servers
        main = servers.label("") if servers.names else ""
        return Trace(
            schedule_text(self.names),
            [replace(r, server=r.server or main) for r in self.rows],
            self.results,
            self.initial_state,
            self.result_texts(),
            {n: s.fn for n, s in self.actors.items()},
            main,
        )

    def close(self) -> None:
        """Stop unfinished actors at their next round trip, join their threads, release or keep clients."""
        self._actors.stop()
        for state in self.actors.values():
            if state.gate is not None and state.owner is None:  # (a sub-actor's is its actor's)
                state.gate.run = None
                stopped = state.aborted and not state.stopped_clean
                if stopped or not state.done or state.gate.open_state:
                    # Closing its connections ends any WATCH or MULTI the actor left open, so the
                    # next replay on the same client starts clean (reconnecting is no round trip).
                    # One stopped before a round trip, with none open and nothing sent on its way
                    # out, left its connection idle in its pool: kept (a reconnect's handshake
                    # cost a third of a cut replay).
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
    spec = RaceSpec(lab, dict(actors), setup, tuple(watch), None if reset is None else tuple(reset))
    order = parse_schedule(schedule)
    kinds = {kind.name for n in order if n not in actors and (kind := faults.kind_of(n))}
    server_kinds = [k for k in kinds if faults.KINDS[k].needs_server]
    with (
        faults.ServerFaults(lab, server_kinds) if server_kinds else nullcontext() as server,
        ScheduleRun(spec, footprints="pause" in kinds, runner=FORCED_RUNNER) as run,
    ):
        if server is not None:
            server.begin(run)
        try:
            for name in order:
                if not faults.apply(run, name, server):
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
