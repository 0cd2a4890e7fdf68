"""Forced interleavings: run clients' Redis commands in an exact order, e.g. ``"ABAB"``.

A client program is a generator function. It yields one *step* per Redis command and gets the
reply back from ``yield``::

    def naive_limiter(key, limit):
        def program():
            count = int((yield cmd("GET", key)) or 0)
            if count < limit:
                yield cmd("INCR", key)
                return "allowed"
            return "rejected"
        return program

    trace = run_schedule(lab, {"A": naive_limiter(k, 5), "B": naive_limiter(k, 5)}, "ABAB",
                         setup=lambda c: c.set(k, 4), watch=[k])
    print(trace)          # step, client, command, reply, state after
    trace.results         # {"A": "allowed", "B": "allowed"}

Steps:

* ``cmd(*args)``: one raw Redis command, sent with ``execute_command`` (redis-py's reply
  parsing applies, so replies look as they do in redis-py).
* ``call(label, fn)``: ``fn(client)`` as ONE step: a Lua script, a MULTI/EXEC pipeline, a native
  Redis 8.4 command. Nothing of another client can run inside it, which is the point of the fixes.

Each client gets its own connection for the whole run, so WATCH and MULTI state is per client as
on a real server. A Redis error reply is thrown into the program at its ``yield``; a program that
does not catch it ends, and the exception becomes its result. Any other exception is a bug in the
program and propagates.

Before every run the keys in ``reset`` (default: ``watch``) are deleted and ``setup(client)`` is
called, so a run never sees a previous run's data. List every key the programs touch there.

Lease expiry is modelled as an event, never as a wall-clock sleep. ``clock_expires(key)`` is a
program for a "clock" actor with a single step: if the key has a TTL, it ends that TTL now
(``PEXPIREAT key 1``, a moment in the past, which Redis treats as "the TTL has run out": the key
is removed at once); a key without a TTL never expires, so the step changes nothing, as time
would not. Placing the clock's letter in the schedule says *when* the lease runs out relative to
the clients' commands, which is the only thing about time a race depends on. What the model does
not show: on a real server expiry is reported as a ``del`` (not ``expired``) keyspace event when
done this way, and a real client may also be paused (GC, network) for any length of time.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.connection import parse_url

from helpers.guard import GuardedRedis
from helpers.race import Op

Program = Callable[[], Generator["Step", Any, Any]]
MISSING = "nil"


class ScheduleError(ValueError):
    """A schedule names an unknown or finished client, or leaves clients unfinished."""


@dataclass(frozen=True)
class Step:
    """One step of a client program: a label for the trace and the function that runs it."""

    label: str
    run: Callable[[Any], Any]
    args: tuple[Any, ...] = ()

    def display(self, short: Callable[[Any], str]) -> str:
        """Return the label with keys shortened (raw commands) or as given (calls)."""
        if not self.args:
            return self.label
        return " ".join(_word(short(a)) for a in self.args)


def _word(text: str) -> str:
    """Return text for a command line: quoted if empty or unprintable (a newline must not break the table).

    Spaces are left as they are: labels such as "(clock)", "lease on", key read naturally.
    """
    return text if text and text.isprintable() else repr(text)


def _one_line(text: str) -> str:
    """Return text with unprintable characters (newlines, escapes) shown as Python escapes."""
    return text if text.isprintable() else repr(text)[1:-1]


def cmd(*args: Any) -> Step:
    """Return a step that sends one raw Redis command, e.g. cmd("INCR", key)."""
    if not args:
        raise ValueError("cmd() needs a command name")
    return Step(str(args[0]), lambda client: client.execute_command(*args), tuple(args))


def call(label: str, fn: Callable[[Any], Any]) -> Step:
    """Return a step that runs fn(client) as one step (a script, an EXEC, a native command)."""
    if not callable(fn):
        raise TypeError(f"call({label!r}, fn): fn must be callable")
    return Step(label, fn)


def clock_expires(key: str, label: str | None = None) -> Program:
    """Return a one-step program that ends key's TTL now (see module docstring for the model)."""
    def expire_now(client: Any) -> str:
        ttl = client.pttl(key)
        if ttl == -2:
            return "key missing: nothing expires"
        if ttl == -1:
            return "no TTL: nothing expires"
        client.execute_command("PEXPIREAT", key, 1)
        return "TTL ran out: key expired"

    def program() -> Generator[Step, Any, str]:
        return (yield Step(label or "", expire_now, () if label else ("(clock)", "TTL", "of", key, "runs", "out")))

    return program


def format_value(value: Any, short: Callable[[Any], str]) -> str:
    """Return a stable one-line text for a reply or result (keys shortened, errors by class)."""
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
        return "{" + ", ".join(f"{format_value(k, short)}: {format_value(v, short)}"
                               for k, v in value.items()) + "}"
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
            return repr(x[len(prefix):] if x.startswith(prefix) else x)
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
            value = "[" + ", ".join(f"{_text(m)}:{s:g}" for m, s in client.zrange(key, 0, -1, withscores=True)) + "]"
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

    def table(self) -> str:
        """Return the trace as a fixed-width text table with the results below it."""
        head = TraceRow(0, "client", "command", "reply", "state after")
        rows = [TraceRow(0, "", "(setup)", "", self.initial_state)] + self.rows
        width_c = max(len(r.client) for r in [head, *rows])
        width_m = max(len(r.command) for r in [head, *rows])
        width_r = max(len(r.reply) for r in [head, *rows])
        lines = [f"{'step':>4}  {head.client:<{width_c}}  {head.command:<{width_m}}  "
                 f"{head.reply:<{width_r}}  {head.state}".rstrip()]
        lines.append("-" * len(lines[0]))
        for r in rows:
            num = str(r.step) if r.command != "(setup)" else ""
            lines.append(f"{num:>4}  {r.client:<{width_c}}  {r.command:<{width_m}}  "
                         f"{r.reply:<{width_r}}  {r.state}".rstrip())
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


def parse_schedule(schedule: str | Sequence[str]) -> list[str]:
    """Return a schedule as a list of client names ('ABAB' or 'A B A B' or ['A', 'B', ...])."""
    if isinstance(schedule, str):
        return [c for c in schedule if not c.isspace()]
    return [str(c) for c in schedule]


def schedule_text(names: Sequence[str]) -> str:
    """Return names joined as 'ABAB' when every name is one character, else 'A B A B'."""
    return ("" if all(len(n) == 1 for n in names) else " ").join(names)


class Connections:
    """Clients reused across replays (explore): an observer plus one pinned connection per client.

    A replay that leaves a raw MULTI open or keys WATCHed gets DISCARD/UNWATCH when it closes, so
    the next replay starts with clean connection state. ``call`` steps must leave the connection as
    they found it (redis-py pipelines do).
    """

    def __init__(self, lab: Any, names: Iterable[str], keys: Sequence[str] = ()) -> None:
        self.lab, self.keys = lab, list(keys)
        self.observer = lab.client()
        self.actors: dict[str, Any] = {}
        try:
            for name in names:
                self.actors[name] = actor_client(lab, self.keys, self.observer)
        except BaseException:
            self.close()
            raise

    def replace(self, name: str) -> None:
        """Swap client name's connection for a new one (after its state could not be reset)."""
        self.lab.release(self.actors[name])
        self.actors[name] = actor_client(self.lab, self.keys, self.observer)

    def close(self) -> None:
        """Release every client."""
        for client in [*self.actors.values(), self.observer]:
            self.lab.release(client)
        self.actors.clear()

    def __enter__(self) -> "Connections":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def actor_client(lab: Any, keys: Sequence[str] = (), router: Any = None) -> Any:
    """Return a client pinned to one connection, so WATCH/MULTI state lasts across its steps.

    A cluster client cannot do that (it routes by key, so MULTI/EXEC/UNWATCH have nowhere to go
    and WATCH lands on any pooled connection). When ``router`` is a cluster client and all of
    ``keys`` live on one node, the actor is a plain single-connection client of that node, which
    serves every command of a schedule whose keys share a hash tag.
    """
    node = _single_node(router, keys) if hasattr(router, "get_node_from_key") and keys else None
    if node is None:
        return lab.client(single_connection_client=True)
    host, port = node
    options = {**parse_url(lab.url), "host": host, "port": port}
    return GuardedRedis(**options, decode_responses=True, single_connection_client=True,
                        racelab_owned=lab.owns_server)


def _single_node(router: Any, keys: Sequence[str]) -> tuple[str, int] | None:
    """Return (host, port) of the cluster node holding every key, or None if they are spread out."""
    nodes = {(n.host, n.port) for n in (router.get_node_from_key(k) for k in keys)}
    return nodes.pop() if len(nodes) == 1 else None


class ScheduleRun:
    """One replay: reset keys, then steps chosen one at a time by the caller.

    Each run opens fresh connections, unless ``connections`` (a ``Connections``) is given; with
    ``observe=False`` the watched keys are not read after each step (faster; rows show no state).
    """

    def __init__(self, lab: Any, programs: Mapping[str, Program], setup: Callable[[Any], Any] | None = None,
                 watch: Sequence[str] = (), reset: Sequence[str] | None = None,
                 connections: Connections | None = None, observe: bool = True) -> None:
        if not programs:
            raise ValueError("programs must name at least one client")
        to_reset = list(reset) if reset is not None else list(watch)
        foreign = [k for k in to_reset if not lab.ns.owns(k)]
        if foreign:  # the keys are deleted before every run: never somebody else's
            raise ValueError(f"reset/watch keys are deleted before each run, so they must lie under this "
                             f"run's prefix {lab.ns.prefix!r}; {foreign[0]!r} does not (use lab.key)")
        self.lab, self.watch, self.observe = lab, list(watch), observe
        self.short = lambda x: short_text(lab, x)
        self._shared = connections
        self._own = connections is None
        self.observer = lab.client() if connections is None else connections.observer
        self.actors: dict[str, Any] = {}
        self.rows: list[TraceRow] = []
        self.names: list[str] = []
        self.results: dict[str, Any] = {}
        self._gens: dict[str, Generator[Step, Any, Any]] = {}
        self._pending: dict[str, Step] = {}
        self._in_multi: set[str] = set()
        self._watching: set[str] = set()
        try:
            if to_reset:
                self.observer.delete(*to_reset)
            if setup is not None:
                setup(self.observer)
            self.initial_state = self._state()
            for name, program in programs.items():
                self.actors[name] = (actor_client(lab, [*to_reset, *self.watch], self.observer)
                                     if connections is None else connections.actors[name])
                self._gens[name] = program()
                self._advance(name, lambda g: next(g))
        except BaseException:
            self.close()
            raise

    def _state(self) -> str:
        return read_state(self.observer, self.watch, self.short) if self.observe else ""

    def _track(self, name: str, step: Step) -> None:
        """Follow raw MULTI/EXEC/WATCH so close() can leave a shared connection clean."""
        if not step.args:
            return
        command = _text(step.args[0]).upper()
        if command == "MULTI":
            self._in_multi.add(name)
        elif command in ("EXEC", "DISCARD"):
            self._in_multi.discard(name)
            self._watching.discard(name)
        elif command == "WATCH":
            self._watching.add(name)
        elif command == "UNWATCH":
            self._watching.discard(name)

    def _advance(self, name: str, resume: Callable[[Generator[Step, Any, Any]], Step]) -> None:
        """Resume a program until its next step (kept pending) or its end (result recorded)."""
        try:
            step = resume(self._gens[name])
        except StopIteration as stop:
            self.results[name] = stop.value
            self._pending.pop(name, None)
            return
        except redis.RedisError as exc:  # the program did not catch a Redis error: it ends with it
            self.results[name] = exc
            self._pending.pop(name, None)
            return
        if not isinstance(step, Step):
            raise TypeError(f"client {name} yielded {step!r}; yield cmd(...) or call(...) steps")
        self._pending[name] = step

    @property
    def unfinished(self) -> list[str]:
        """Return the clients that still have a step to run, in program order."""
        return [n for n in self._gens if n in self._pending]

    def step(self, name: str) -> TraceRow:
        """Run client name's next step; return the trace row it produced."""
        if name not in self._gens:
            raise ScheduleError(f"schedule names {name!r}, which is not a client ({', '.join(self._gens)})")
        if name not in self._pending:
            raise ScheduleError(f"schedule asks {name!r} for step {len(self.rows) + 1}, but {name!r} "
                                f"has already finished (result {format_value(self.results[name], self.short)})")
        step = self._pending[name]
        self._track(name, step)
        try:
            reply: Any = step.run(self.actors[name])
            failed = None
        except redis.RedisError as exc:
            reply, failed = exc, exc
        if failed is None:
            self._advance(name, lambda g: g.send(reply))
        else:
            self._advance(name, lambda g: g.throw(failed))
        row = TraceRow(len(self.rows) + 1, name, step.display(self.short), format_value(reply, self.short),
                       self._state())
        self.rows.append(row)
        self.names.append(name)
        return row

    def trace(self) -> Trace:
        """Return the Trace of the steps run so far (results of finished clients only)."""
        text = {n: format_value(self.results[n], self.short) if n in self.results else "(unfinished)"
                for n in self._gens}
        return Trace(schedule_text(self.names), list(self.rows), dict(self.results),
                     self.initial_state, text)

    def close(self) -> None:
        """Close the program generators; release this run's connections or reset shared ones."""
        for gen in self._gens.values():
            gen.close()
        if self._own:
            for client in [*self.actors.values(), self.observer]:
                self.lab.release(client)
        else:
            for name in self.actors:
                if name in self._in_multi or name in self._watching:
                    self._reset_connection(name)
        self.actors.clear()

    def _reset_connection(self, name: str) -> None:
        """DISCARD an open MULTI (which also unwatches) or UNWATCH; replace the client if that fails."""
        try:
            self.actors[name].execute_command("DISCARD" if name in self._in_multi else "UNWATCH")
        except redis.RedisError:  # broken connection or unexpected state: start over with a new one
            self._shared.replace(name)

    def __enter__(self) -> "ScheduleRun":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_schedule(lab: Any, programs: Mapping[str, Program], schedule: str | Sequence[str],
                 setup: Callable[[Any], Any] | None = None, watch: Sequence[str] = (),
                 reset: Sequence[str] | None = None, finish: bool = False) -> Trace:
    """Run programs in the exact order schedule gives; return the Trace (see module docstring)."""
    order = parse_schedule(schedule)
    with ScheduleRun(lab, programs, setup, watch, reset) as run:
        for name in order:
            run.step(name)
        if finish:
            while run.unfinished:
                run.step(run.unfinished[0])
        elif run.unfinished:
            raise ScheduleError(f"schedule {schedule_text(order)!r} ends with unfinished clients: "
                                f"{', '.join(run.unfinished)} (add their steps, or pass finish=True)")
        return run.trace()
