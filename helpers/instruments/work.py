"""Exact work per operation: round trips, commands sent and run by the server, retries.

``count_work(lab, fn)`` calls ``fn(client)`` on a *private, fresh* server and counts, per call:

* ``round_trips``: writes to the socket (a pipeline or MULTI/EXEC block is one), and ``sent``:
  commands the client sent, MULTI and EXEC included (the client's mode, ``helpers.backend.modes``);
* ``executed``: commands the server ran: what clients sent and the server ran at once, each
  command an EXEC ran (not when it was queued), and every ``redis.call``/``redis.pcall`` inside a
  script or function. This is what Redis counts in ``INFO commandstats``;
* ``retries``: conditional writes that did not apply (a failed EXEC, SET NX ..., HSETNX 0).

The server is private so that the counts are exact and equal on every backend: on the embedded
backend a new fakeredis server whose command dispatch counts each command (the one place both
client commands and a script's ``redis.call`` pass); on a real server or cluster a throwaway
redis-server from ``helpers.backend.server``, flushed before each count, read with ``INFO
commandstats`` before and after (a fakeredis server if none can be started). The lab's own
server and data are never touched: ``setup(client)`` writes whatever ``fn`` needs first.
Commands a connection sends while it is set up (HELLO, CLIENT SETINFO, SELECT) are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import redis

from helpers.backend import embedded
from helpers.backend.lab import Lab
from helpers.backend.modes import Wiring, client_stats
from helpers.backend.server import RedisServer, ServerNotFound

Strategy = Callable[[redis.Redis], Any]
# Connection set-up, and our own INFO: never a strategy's work.
NOT_WORK = frozenset({"hello", "client|setinfo", "select", "auth", "info"})


@dataclass(frozen=True)
class Work:
    """What one call of a strategy cost, on average over `calls` calls (exact when all alike)."""

    calls: int
    round_trips: float
    sent: float
    executed: float
    retries: float
    executed_by_command: dict[str, float] = field(default_factory=dict, compare=False)

    def row(self) -> dict[str, float]:
        """Return the four counts per call as a dict."""
        return {
            "round trips": self.round_trips,
            "commands sent": self.sent,
            "commands run": self.executed,
            "retries": self.retries,
        }


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


class WorkTable(Mapping[str, Work]):
    """Work of several strategies by name; ``table()`` prints them side by side."""

    def __init__(self, works: Mapping[str, Work]) -> None:
        self._works = dict(works)

    def __getitem__(self, name: str) -> Work:
        return self._works[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._works)

    def __len__(self) -> int:
        return len(self._works)

    def table(self) -> str:
        """Return a fixed-width table: one row per strategy, the counts per call."""
        columns = ["round trips", "commands sent", "commands run", "retries"]
        width = max(len("strategy"), *(len(n) for n in self._works))
        calls = {w.calls for w in self._works.values()}
        lines = [f"{'strategy':<{width}}" + "".join(f"{c:>15}" for c in columns)]
        for name, work in self._works.items():
            row = work.row()
            lines.append(f"{name:<{width}}" + "".join(f"{_number(row[c]):>15}" for c in columns))
        lines.append(
            f"(per call, over {'/'.join(map(str, sorted(calls)))} calls; "
            "commands run include those inside scripts and MULTI blocks)"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()


# --- counting what the server ran ----------------------------------------------------------


class _PrivateServer:
    """A fresh server of our own: hands out counting clients and says what it ran."""

    where = "a private fakeredis server"

    def __init__(self) -> None:
        self.server = embedded.new_server()
        self.tally: dict[str, int] = {}  # what the server ran, counted by its sockets

    def client(self) -> redis.Redis:
        return embedded.new_client(self.server, Wiring(tally=self.tally), decode_responses=True)

    def executed(self) -> dict[str, int]:
        return dict(self.tally)

    def close(self) -> None:
        self.tally = {}


class _ScratchRedis(_PrivateServer):
    """A throwaway redis-server of this process, flushed before each count (see module docstring)."""

    _shared: RedisServer | None = None

    def __init__(self, lab: Lab) -> None:
        if _ScratchRedis._shared is None or not _ScratchRedis._shared.is_running():
            _ScratchRedis._shared = RedisServer().start()
        server = _ScratchRedis._shared
        self.where = f"a private redis-server on port {server.port}"
        self.lab = Lab(
            kind="real", ns=lab.ns, owns_server=True, url=server.url, parser_class=lab.parser_class
        )
        self.admin = server.client()
        self.admin.flushall()
        self.admin.script_flush()
        self.admin.function_flush()

    def client(self) -> redis.Redis:
        client = self.lab.client()
        assert isinstance(client, redis.Redis)  # a lab of one plain server gives no cluster client
        return client

    def executed(self) -> dict[str, int]:
        stats = self.admin.info("commandstats")
        return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}

    def close(self) -> None:
        self.lab.close()
        self.admin.close()


def _private_server(lab: Lab) -> _PrivateServer:
    if lab.kind == "embedded":
        return _PrivateServer()
    try:
        return _ScratchRedis(lab)
    except ServerNotFound:
        return _PrivateServer()


def _count_one(lab: Lab, fn: Strategy, setup: Strategy | None, calls: int, warmup: int) -> Work:
    private = _private_server(lab)
    try:
        client = private.client()
        if setup is not None:
            setup(client)
        for _ in range(warmup):
            fn(client)
        client.ping()  # connected, so nothing of the set-up falls in the counted calls
        before, ran_before = client_stats(client), private.executed()
        for _ in range(calls):
            fn(client)
        spent, ran_after = client_stats(client) - before, private.executed()
    finally:
        private.close()
    ran = {
        name: (n - ran_before.get(name, 0)) / calls
        for name, n in ran_after.items()
        if name not in NOT_WORK and n != ran_before.get(name, 0)
    }
    return Work(
        calls=calls,
        round_trips=spent.round_trips / calls,
        sent=spent.commands / calls,
        executed=sum(ran.values()),
        retries=spent.retries / calls,
        executed_by_command=dict(sorted(ran.items())),
    )


@overload
def count_work(
    lab: Lab, fn: Strategy, setup: Strategy | None = ..., calls: int = ..., warmup: int = ...
) -> Work: ...
@overload
def count_work(
    lab: Lab,
    fn: Mapping[str, Strategy],
    setup: Strategy | None = ...,
    calls: int = ...,
    warmup: int = ...,
) -> WorkTable: ...


def count_work(
    lab: Lab,
    fn: Strategy | Mapping[str, Strategy],
    setup: Strategy | None = None,
    calls: int = 10,
    warmup: int = 1,
) -> Work | WorkTable:
    """Return the Work per call of fn(client) (a WorkTable for a {name: fn} dict), counted exactly.

    Each count starts on a fresh private server (module docstring): setup(client) first, then
    ``warmup`` uncounted calls (they load scripts, create counters), then ``calls`` counted ones.
    """
    if calls < 1 or warmup < 0:
        raise ValueError(f"need calls >= 1 and warmup >= 0, got {calls} and {warmup}")
    if isinstance(fn, Mapping):
        return WorkTable({name: _count_one(lab, f, setup, calls, warmup) for name, f in fn.items()})
    return _count_one(lab, fn, setup, calls, warmup)
