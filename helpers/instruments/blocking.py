"""Blocking commands in a schedule: an actor waits, not runs, until the server could answer it.

An actor whose next round trip is a blocking call (``BLPOP``, ``BRPOP``, ``BLMOVE``,
``BRPOPLPUSH``, ``BLMPOP``, ``BZPOPMIN``, ``BZPOPMAX``, ``BZMPOP``, ``XREAD ... BLOCK``,
``WAIT``) is *waiting* while the call has nothing to return: no list or sorted set it names holds
an element, no stream it reads has an entry past the id it asked for, or fewer replicas than it
asks for are connected. A waiting actor leaves the runnable set, so a schedule cannot name it
and the explorer does not enumerate it, until another actor's step makes the call answerable;
then its step sends the call, which the server answers at once.

When every unfinished actor is waiting, time passes: each waiting call with a timeout can run,
its step being the *logical timeout*. It is sent with its timeout cut to the shortest the server
accepts (1 ms), so its reply is the server's own timeout reply (nil, or WAIT's count) without
the wall-clock wait, and the run's logical clock (what the actors read as the time) moves by the
timeout and 1 ms: a library that times its own wait (``elapsed > timeout``) sees that it ran out. A call that blocks forever (timeout 0) never times out: when only such
calls are left the schedule ends there, its actors *blocked* (their result "(blocked)").

``XREAD ... BLOCK ... $`` asks for entries added after the call; the call is made when the actor
reaches it, so ``$`` is read then (the stream's last id) and sent as that id.

A call inside MULTI, or sent with other commands in one pipeline, never blocks (Redis runs it
as its non-blocking form), so only a round trip of that one command can wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from helpers.backend.modes import command_name

Command = tuple[Any, ...]
BLOCKED = "(blocked)"  # the result of an actor still waiting, forever, when its schedule ends
_TIMEOUT_LAST = {"BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX", "BRPOPLPUSH", "BLMOVE"}
_NUMKEYS_FIRST = {"BLMPOP", "BZMPOP"}  # BLMPOP timeout numkeys key ... LEFT|RIGHT
_BLOCKING = _TIMEOUT_LAST | _NUMKEYS_FIRST | {"XREAD", "WAIT"}  # the rest never wait


def _text(arg: Any) -> str:
    return arg.decode("latin-1") if isinstance(arg, (bytes, bytearray)) else str(arg)


@dataclass(frozen=True)
class Call:
    """One blocking call: its command, the keys it waits on, its timeout (0: forever)."""

    command: Command
    name: str
    keys: tuple[Any, ...]
    timeout_s: float
    timeout_at: int  # the argument position of the timeout
    stream_ids: tuple[Any, ...] = ()  # XREAD: the id asked for, per stream
    replicas: int = 0  # WAIT: how many it waits for

    def timed_out(self) -> Command:
        """Return the command with its timeout cut to 1 ms: the server answers as on timeout."""
        shortest = "1" if self.name in ("XREAD", "WAIT") else "0.001"  # milliseconds, seconds
        args = list(self.command)
        args[self.timeout_at] = shortest
        return tuple(args)


def call_of(commands: Sequence[Command]) -> Call | None:
    """Return the blocking call a round trip makes, or None (it is not one, or cannot block)."""
    if len(commands) != 1 or not commands[0]:
        return None
    name = command_name(commands[0])
    if name not in _BLOCKING:
        return None
    command = tuple(commands[0])
    try:
        if name in _TIMEOUT_LAST:
            last = len(command) - 1
            keys = (
                command[1:last]
                if name in ("BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX")
                else (command[1],)
            )
            return Call(command, name, tuple(keys), float(_text(command[last])), last)
        if name in _NUMKEYS_FIRST:
            numkeys = int(_text(command[2]))
            return Call(command, name, tuple(command[3 : 3 + numkeys]), float(_text(command[1])), 1)
        if name == "XREAD":
            return _xread(command)
        if name == "WAIT":
            return Call(
                command, name, (), float(_text(command[2])) / 1000, 2, (), int(_text(command[1]))
            )
    except (IndexError, ValueError):
        return None  # malformed: the server will say so at once, so it does not wait
    return None


def _xread(command: Command) -> Call | None:
    """Return XREAD's call when it has BLOCK (None without: it never waits)."""
    words = [_text(a).upper() for a in command]
    if "BLOCK" not in words or "STREAMS" not in words:
        return None
    block = words.index("BLOCK") + 1
    streams = words.index("STREAMS") + 1
    rest = command[streams:]
    half = len(rest) // 2
    return Call(
        command, "XREAD", tuple(rest[:half]), float(words[block]) / 1000, block, tuple(rest[half:])
    )


def resolved(observer: redis.Redis, call: Call) -> Call:
    """Return the call with XREAD's '$' read now (the stream's last id), as the server would."""
    if call.name != "XREAD" or not any(_text(i) == "$" for i in call.stream_ids):
        return call
    ids = []
    for key, asked in zip(call.keys, call.stream_ids):
        if _text(asked) != "$":
            ids.append(asked)
            continue
        last = observer.xrevrange(key, count=1)
        ids.append(_text(last[0][0]) if last else "0-0")
    first = len(call.command) - len(call.keys)
    command = (*call.command[:first], *ids)
    return Call(command, call.name, call.keys, call.timeout_s, call.timeout_at, tuple(ids))


def answerable(observer: redis.Redis, call: Call) -> bool:
    """Return True if the server would answer the call now, without waiting."""
    if call.name == "WAIT":
        return call.replicas <= 0 or _replicas(observer) >= call.replicas
    if call.name == "XREAD":
        streams = {k: i for k, i in zip(call.keys, call.stream_ids)}
        try:
            return bool(observer.xread(streams, count=1))
        except redis.ResponseError:
            return True  # a wrong type or a bad id: the server answers with the error at once
    try:
        return observer.exists(*call.keys) > 0  # a list or sorted set exists while not empty
    except redis.ResponseError:
        return True


def _replicas(observer: redis.Redis) -> int:
    try:
        return int(observer.info("replication").get("connected_slaves", 0))
    except redis.RedisError:
        return 0
