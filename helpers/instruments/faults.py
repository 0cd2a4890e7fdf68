"""Faults as schedule steps: a client crashes or pauses, the server restarts or fails over.

``explore(..., faults=("crash", "pause"), max_faults=1)`` enumerates these steps like any other
round trip, at most ``max_faults`` of them per schedule. In a schedule they are written:

* ``A!`` crash: A's client dies between two round trips; its connections close, it never runs
  again (``ScheduleRun.crash``). It touches no key: a lock it took stays until its lease ends.
* ``A~`` pause: A stops between two round trips long enough that its leases run out, then goes
  on as if nothing happened (a GC pause, a stopped VM). A's *leases* are the watched (and reset)
  keys whose last write in the schedule was A's and that have a TTL now: each is expired at once
  (``PEXPIREAT key 1``, as ``lease_expires`` does). The step writes those keys. A pause is offered
  only while A holds such a lease (otherwise it would change nothing). Other actors' leases do
  not run out: their holders are not paused.
* ``restart``: the server restarts without persistence: every key (setup's too) and the script
  cache are lost, connections close and clients reconnect on their next round trip.
* ``failover``: the replica is promoted. The replica applied everything up to the start of the
  schedule (setup's writes, confirmed with ``WAIT``) and nothing after it (``CLIENT PAUSE WRITE``
  holds back its replication stream, see ``helpers.instruments.failover``), so every write the
  schedule made before the failover is lost: the worst case of asynchronous replication, certain
  by construction. The clients keep their address (as behind Sentinel or a virtual IP): the
  promoted replica's data is copied back to the server they use by a full resynchronisation,
  after which that server is the primary again and the replica follows it.

When the actors' own clients dial several servers (``helpers.instruments.servers``: Redlock's
masters), "crash" also offers ``crash(<server>)`` for each server beyond the lab's own: that
server restarts without persistence, so it forgets every key and its script cache (a lock it
granted is gone), on the embedded backend as on the real one. "pause" also offers
``pause(<server>)`` while that server holds a key with a TTL: it stalls (or its clock jumps)
past every TTL, so each of those keys expires. The lab's own server restarts with ``restart``.

Restart and failover need a real, single, throwaway server that this suite started (a lab from
``connect(backend="real")``): they stop a process or replace its data. Anywhere else they are
refused with ``FaultUnavailable``, which says why. Crash and pause run on every backend.

Footprints, for ``reduce=True``: a crash touches nothing, a pause writes the keys it expires, a
restart, failover or a server's crash touches everything.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from helpers.backend.scripts import preload
from helpers.backend.server import RedisServer
from helpers.errors import RaceLabError
from helpers.instruments.actors import CRASHED
from helpers.instruments.footprint import EVERYTHING, NOTHING, Footprint, touching

CRASH = "!"  # "A!": A's client dies there
PAUSE = "~"  # "A~": A stalls there until its leases run out
SYNC_TIMEOUT_S = 20.0


class FaultUnavailable(RaceLabError, ValueError):
    """A fault was asked for where it cannot happen (restart or failover off a throwaway server)."""


class Fault:
    """One kind of fault step: its name, how a schedule writes it, where it can go, its effect.

    A client's fault is written as the actor's name and its mark ("A!"); a server's fault as
    its name ("restart"). ``offered`` lists the steps of this kind a run may take next,
    ``footprint`` what one touches (for reduce=True), ``apply`` runs it on a ``ScheduleRun``.
    """

    name = ""
    mark = ""  # a client's fault: the letter after the actor's name; a server's fault: none
    needs_server = False  # restart and failover: a ServerFaults of a throwaway server

    def steps(self, actors: Iterable[str], servers: Sequence[str] = ()) -> list[str]:
        """Return every step of this kind the actors can take, in the order the search tries them."""
        return [a + self.mark for a in actors] if self.mark else [self.name]

    def actor(self, step: str) -> str:
        """Return the actor a step of this kind belongs to (the word itself for a server's fault)."""
        return step[: -len(self.mark)] if self.mark else step

    def offered(self, run: Any) -> list[str]:
        """Return the steps of this kind the run may take next."""
        return self.steps(run.clients)

    def possible(self, run: Any) -> list[str]:
        """Return the steps of this kind that may run now or become possible later in the run."""
        return self.offered(run)

    def footprint(self, run: Any, step: str) -> Footprint:
        """Return what the step touches."""
        return EVERYTHING

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Run the step on run."""
        raise NotImplementedError


class Crash(Fault):
    """ "A!": A's client dies between two round trips; it never runs again. It touches no key."""

    name, mark = "crash", CRASH

    def footprint(self, run: Any, step: str) -> Footprint:
        """Return NOTHING: closing a connection changes no key (a lock it took stays); but
        EVERYTHING while the client has sub-actors, whose steps the crash takes away."""
        name = self.actor(step)
        alive = any(s.owner == name and not s.done for s in run.actors.values())
        return EVERYTHING if alive else NOTHING

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Kill the client: its connections close (ending any WATCH or MULTI), result "(crashed)"."""
        state = run.client(self.actor(step), "crash")
        run.record(step, self.footprint(run, step))
        run.kill(state)
        state.client.connection_pool.disconnect()
        state.gate.open_state = False
        state.result = CRASHED


class Pause(Fault):
    """ "A~": A stalls between two round trips until its leases run out, then goes on."""

    name, mark = "pause", PAUSE

    def offered(self, run: Any) -> list[str]:
        """Return a pause for each client that holds a lease now (else it would change nothing)."""
        return [n + self.mark for n in run.clients if leases(run, n)]

    def possible(self, run: Any) -> list[str]:
        """Return a pause for each client that has written a key: another actor's write can
        take its lease away (or a TTL give it one), so the search must see it as pending."""
        return [n + self.mark for n in run.clients if written(run, n)]

    def footprint(self, run: Any, step: str) -> Footprint:
        """Return every key the actor has written: which of them it still holds is up to others.

        Its leases are the keys it wrote *last*, so another actor's write to any key it wrote
        changes what the pause expires: the two must not commute, although the pause writes
        only its leases (a footprint of the leases alone lost schedules: see
        tests/test_explorer_regressions.py).
        """
        return touching(written(run, self.actor(step)))

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Expire the actor's leases now and add the trace row."""
        name = self.actor(step)
        run.client(name, "pause")  # ScheduleError: an unknown or finished actor, or a clock
        keys = leases(run, name)
        run.record(step, self.footprint(run, step))
        expire(run.observer, keys)
        shown = ", ".join(run.short(k) for k in keys)
        reply = f"lease of {shown} ran out" if keys else "no lease of its own: nothing expires"
        run.add_row(name, f"(pause) {name} stalls past its lease", reply)


class Restart(Fault):
    """ "restart": the server restarts without persistence (every key and the script cache lost)."""

    name, needs_server = "restart", True

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Restart the throwaway server and add the trace row."""
        if server is None:
            raise FaultUnavailable(f"{step} needs a ServerFaults of the run's throwaway server")
        run.record(step, EVERYTHING)  # every key, every connection
        run.add_row("(server)", step, server.restart(run))


class Failover(Restart):
    """ "failover": the replica, which missed the schedule's writes, is promoted."""

    name = "failover"

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Fail the throwaway server over to its replica and add the trace row."""
        if server is None:
            raise FaultUnavailable(f"{step} needs a ServerFaults of the run's throwaway server")
        run.record(step, EVERYTHING)
        run.add_row("(server)", step, server.failover(run))


class ServerCrash(Fault):
    """ "crash(<server>)": a server beyond the lab's own restarts without persistence."""

    name = "crash"

    def steps(self, actors: Iterable[str], servers: Sequence[str] = ()) -> list[str]:
        """Return a crash of each server given."""
        return [f"{self.name}({server})" for server in servers]

    def offered(self, run: Any) -> list[str]:
        """Return a crash of each further server the race's actors have dialed."""
        return self.steps((), run.servers)

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Restart the server (its keys and script cache lost) and add the trace row."""
        name = step[len(self.name) + 1 : -1]
        run.record(step, EVERYTHING)  # its every key, every connection to it
        run.add_row("(server)", self.name, run.crash_server(name), name)


class ServerPause(ServerCrash):
    """ "pause(<server>)": a server beyond the lab's own stalls (or its clock jumps) past every
    TTL it holds: when it answers again, each of its keys with a TTL has expired."""

    name = "pause"

    def offered(self, run: Any) -> list[str]:
        """Return a pause of each further server that holds a key with a TTL now."""
        return self.steps((), [s for s in run.servers if run.server_leases(s)])

    def possible(self, run: Any) -> list[str]:
        """Return a pause of each further server: any step may give one a lease."""
        return self.steps((), run.servers)

    def apply(self, run: Any, step: str, server: ServerFaults | None) -> None:
        """Expire the server's keys that have a TTL and add the trace row."""
        name = step[len(self.name) + 1 : -1]
        run.record(step, EVERYTHING)
        keys = run.pause_server(name)
        shown = ", ".join(run.short(k) for k in keys)
        reply = f"TTL of {shown} ran out" if keys else "no key with a TTL: nothing expires"
        run.add_row("(server)", f"(pause) {name} stalls past its TTLs", reply, name)


KINDS: dict[str, Fault] = {kind.name: kind for kind in (Crash(), Pause(), Restart(), Failover())}
SERVER_WORDS = frozenset(kind.name for kind in KINDS.values() if not kind.mark)
# The faults of the further servers, by the names the user gives: "crash(<server>)", "pause(...)"
SERVER_KINDS: dict[str, Fault] = {kind.name: kind for kind in (ServerCrash(), ServerPause())}
_SERVER_STEP = re.compile(r"(\w+)\((\S+)\)")


def server_fault(step: str) -> Fault | None:
    """Return the kind of a further server's fault step ("crash(localhost:6380)"), else None."""
    found = _SERVER_STEP.fullmatch(step)
    return SERVER_KINDS.get(found[1]) if found else None


@functools.lru_cache(maxsize=4096)  # a search asks about the same few step names at each step
def kind_of(step: str) -> Fault | None:
    """Return the fault kind of a schedule step ("A!", "A~", "restart"), None for a round trip."""
    found = server_fault(step)
    if found is not None:
        return found
    if step in SERVER_WORDS:
        return KINDS[step]
    for kind in KINDS.values():
        if kind.mark and len(step) > len(kind.mark) and step.endswith(kind.mark):
            return kind
    return None


def actor_of(step: str) -> str:
    """Return the actor a step belongs to: "A" for "A", "A!" and "A~"; the word for a server fault."""
    kind = kind_of(step)
    return kind.actor(step) if kind is not None else step


def client_of(run: Any, step: str) -> str:
    """Return the client a step belongs to: actor_of(step), or the actor whose thread (a
    sub-actor, "A1") sent it: a client's threads write its leases too."""
    name = actor_of(step)
    state = getattr(run, "actors", {}).get(name)
    owner = getattr(state, "owner", None)
    return owner if isinstance(owner, str) else name


def kinds_named(names: Iterable[str]) -> list[Fault]:
    """Return the fault kinds with these names, in the order the search tries them."""
    wanted = set(names)
    return [kind for name, kind in [*KINDS.items(), *SERVER_KINDS.items()] if name in wanted]


def checked_kinds(faults: Iterable[str], max_faults: int | None) -> tuple[tuple[str, ...], int]:
    """Return (fault kinds' names, bound) after checking them; the bound defaults to 1 with faults."""
    if isinstance(faults, str):
        faults = (faults,)
    names = tuple(faults)
    unknown = [k for k in names if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown fault {unknown[0]!r}: choose from {', '.join(KINDS)}")
    bound = (1 if names else 0) if max_faults is None else max_faults
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise ValueError(f"max_faults must be a number >= 0, got {max_faults!r}")
    if bound and not names:
        raise ValueError("max_faults=N needs faults=(...) to say which faults")
    return names, bound


def leases(run: Any, actor: str) -> list[str]:
    """Return actor's leases in a run: keys it wrote last (watched or reset) that have a TTL now."""
    keys = run.keys
    last: dict[str, str | None] = {}
    for step, touched in zip(run.names, run.footprints):
        kind = kind_of(step)
        if isinstance(kind, (Crash, ServerCrash)):  # no key of the lab's own server changes
            # (ServerPause is a ServerCrash: it expires keys of a further server only)
            continue
        if isinstance(kind, Restart):  # restart or failover: the data written before is gone
            last = {}
            continue
        writer = None if isinstance(kind, Pause) else client_of(run, step)  # expired: nobody's
        for key in keys:
            if touched.everything or key.encode() in touched.writes:
                last[key] = writer
    mine = [k for k in keys if last.get(k) == actor]
    return [k for k in mine if run.observer.pttl(k) >= 0]


def written(run: Any, actor: str) -> list[str]:
    """Return the run's keys (watched or reset) that actor's round trips have written so far."""
    mine = [t for step, t in zip(run.names, run.footprints) if client_of(run, step) == actor]
    return [k for k in run.keys if any(t.everything or k.encode() in t.writes for t in mine)]


def expire(client: Any, keys: Sequence[str]) -> list[str]:
    """End the TTL of each key now (PEXPIREAT key 1: Redis removes it at once); return the keys."""
    for key in keys:
        client.execute_command("PEXPIREAT", key, 1)
    return list(keys)


def options(run: Any, names: Sequence[str], bound: int, server: bool = True) -> list[str]:
    """Return the fault steps a schedule may take next (none once it holds bound faults)."""
    return _steps(run, names, bound, server, lambda kind: kind.offered(run))


def pending(run: Any, names: Sequence[str], bound: int, server: bool = True) -> list[str]:
    """Return the fault steps that may run now or later (those whose chance another step decides).

    A step that disables or enables a fault races with it like any conflicting step: the search
    sees these as pending steps, offered or not (a pause not offered because another actor's
    write took its actor's lease, say), so that it tries the orders in which the fault runs.
    """
    return _steps(run, names, bound, server, lambda kind: kind.possible(run))


def _steps(
    run: Any,
    names: Sequence[str],
    bound: int,
    server: bool,
    which: Callable[[Fault], list[str]],
) -> list[str]:
    """Return which(kind) for each kind named, or none once the run holds bound faults."""
    if sum(kind_of(n) is not None for n in run.names) >= bound:
        return []
    return [
        step
        for kind in kinds_named(names)
        if server or not kind.needs_server
        for step in which(kind)
    ]


def footprint(run: Any, step: str) -> Footprint:
    """Return what a fault step touches (its kind says: nothing, its leases, or everything)."""
    kind = kind_of(step)
    return kind.footprint(run, step) if kind is not None else EVERYTHING


def all_names(
    actors: Iterable[str], names: Sequence[str], servers: Sequence[str] = ()
) -> list[str]:
    """Return every fault step the actors (and further servers) can take, in search order."""
    actors = list(actors)
    return [step for kind in kinds_named(names) for step in kind.steps(actors, servers)]


def apply(run: Any, step: str, server: ServerFaults | None = None) -> bool:
    """Run step if it is a fault step of run ("A!", "A~", "restart", "failover"); False if not.

    A crash or pause of a name that is no actor here is not a fault step either, so that
    ``ScheduleRun.step`` reports it as the unknown client it is.
    """
    kind = kind_of(step) if step not in run.actors else None
    if kind is None or (kind.mark and kind.actor(step) not in run.actors):
        return False
    kind.apply(run, step, server)
    return True


def refuse_unless_throwaway(lab: Any, kind: str) -> RedisServer:
    """Return the lab's throwaway server; FaultUnavailable (saying why and what to use) if none."""
    use = (
        f"{kind} needs a real throwaway server that this suite started: connect(backend='real') "
        "or RACELAB_BACKEND=real (with a redis-server from `make redis`)"
    )
    if lab.kind == "embedded":
        why = "the embedded backend (fakeredis) has no server process to restart or replicate"
    elif lab.kind == "cluster" or lab.caps.cluster:
        why = "a cluster restarts and fails over node by node, which this model does not cover"
    elif lab.throwaway_server is None:
        why = "this lab's server was not started by the suite: it may hold somebody else's data"
    else:
        server: RedisServer = lab.throwaway_server
        return server
    raise FaultUnavailable(f"{use}; {why}")


def available(lab: Any, kind: str) -> str:
    """Return '' if the fault kind can run on lab, else the reason it cannot (for a skip line)."""
    if not KINDS[kind].needs_server:
        return ""
    try:
        refuse_unless_throwaway(lab, kind)
    except FaultUnavailable as exc:
        return str(exc)
    return ""


def _disconnect_idle(client: Any) -> None:
    """Close a client's idle pooled connections, so its next round trip opens a new one."""
    client.connection_pool.disconnect(inuse_connections=False)


def _wait_synced(replica: redis.Redis) -> None:
    """Wait until replica's link to its primary is up and its first sync is done."""
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while True:
        info = replica.info("replication")
        if info.get("master_link_status") == "up" and not info.get("master_sync_in_progress"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the replica did not sync within {SYNC_TIMEOUT_S:g} s: {info}")
        time.sleep(0.005)


class ServerFaults:
    """The server side of restart and failover for one exploration (or one replayed schedule)."""

    def __init__(self, lab: Any, kinds: Sequence[str]) -> None:
        self.lab, self.kinds = lab, [k for k in kinds if KINDS[k].needs_server]
        self.primary: RedisServer | None = None
        self.replica: RedisServer | None = None
        self._admin: redis.Redis | None = None
        self._replica_admin: redis.Redis | None = None
        self.stalled = False
        self.dirty = False  # the server lost its script cache: restore it before the next run
        for kind in self.kinds:
            self.primary = refuse_unless_throwaway(lab, kind)
        if "failover" in self.kinds:
            self._start_replica()

    def _start_replica(self) -> None:
        assert self.primary is not None
        self.replica = RedisServer().start()
        self._admin = self.primary.client(decode_responses=True)
        self._replica_admin = self.replica.client(decode_responses=True)
        self._delay = str(
            self._admin.config_get("repl-diskless-sync-delay").get("repl-diskless-sync-delay", 5)
        )
        self._admin.config_set("repl-diskless-sync-delay", 0)
        self._replica_admin.config_set("repl-diskless-sync-delay", 0)
        self._replica_admin.replicaof("127.0.0.1", self.primary.port)
        _wait_synced(self._replica_admin)

    def begin(self, run: Any) -> None:
        """Before a run's first step: restore what a fault lost; stall the replica (failover)."""
        if self.dirty:
            self._restore_scripts(run)
        if self._admin is None or self._replica_admin is None:
            return
        acked = self._admin.wait(1, int(SYNC_TIMEOUT_S * 1000))
        if acked != 1:
            raise TimeoutError("the replica did not confirm the schedule's setup (WAIT 1 -> 0)")
        self._replica_admin.execute_command("CLIENT", "PAUSE", 600_000, "WRITE")
        self.stalled = True

    def end(self) -> None:
        """After a run: let a stalled replica catch up (a failover already resynced it)."""
        if self.stalled and self._replica_admin is not None:
            self._replica_admin.execute_command("CLIENT", "UNPAUSE")
        self.stalled = False

    def _restore_scripts(self, run: Any) -> None:
        """Load the suite's scripts and the ones the actors loaded, as before the fault."""
        preload(run.observer)
        for kind, source in sorted(run.loaded):
            if kind == "script":
                run.observer.script_load(source)
            elif kind == "function":
                run.observer.function_load(source, replace=True)
        self.dirty = False

    def restart(self, run: Any) -> str:
        """Restart the server without persistence; return what the trace row says happened."""
        assert self.primary is not None
        self.end()  # a stalled replica must not hold back the restarted primary's stream
        self.primary.stop()
        self.primary.start()
        self._reconnect(run)
        if self._admin is not None and self._replica_admin is not None:
            self._admin.config_set("repl-diskless-sync-delay", 0)
            self._replica_admin.execute_command("CLIENT", "PAUSE", 600_000, "WRITE")
            self.stalled = True  # it resyncs the empty dataset, then applies nothing more
        self.dirty = True
        return "data and script cache lost"

    def failover(self, run: Any) -> str:
        """Promote the replica (it missed the schedule's writes); return the trace row's reply."""
        if "failover" not in self.kinds or self._admin is None or self._replica_admin is None:
            raise FaultUnavailable(
                "failover: explore(..., faults=('failover',)) starts the replica"
            )
        assert self.primary is not None and self.replica is not None
        replica, primary = self._replica_admin, self._admin
        replica.replicaof("NO", "ONE")  # promoted, with what it had applied
        replica.execute_command("CLIENT", "UNPAUSE")
        self.stalled = False
        primary.replicaof("127.0.0.1", self.replica.port)  # the clients' address takes its data
        _wait_synced(primary)
        primary.replicaof("NO", "ONE")
        replica.replicaof("127.0.0.1", self.primary.port)  # and follows it again
        self._reconnect(run)
        self.dirty = True
        return "the replica, which missed the schedule's writes, is the primary"

    def _reconnect(self, run: Any) -> None:
        """Close the run's connections: each client reconnects at its next round trip.

        A parked actor holds the connection of the round trip it is about to send; it gets a
        new one, as it would have had it asked the pool after the fault. An actor with a WATCH
        or MULTI open keeps its broken connection: redis-py then raises WatchError (or
        ConnectionError) at its next round trip, as it does in production.
        """
        _disconnect_idle(run.observer)
        for state in run.actors.values():
            if state.gate is not None and not state.done:
                state.client.connection_pool.disconnect(inuse_connections=not state.gate.open_state)
        if self._admin is not None:
            _disconnect_idle(self._admin)

    def close(self) -> None:
        """Stop the replica and put the primary's settings back."""
        if self._admin is not None:
            try:
                self._admin.config_set("repl-diskless-sync-delay", self._delay)
            finally:
                self._admin.close()
        if self._replica_admin is not None:
            self._replica_admin.close()
        if self.replica is not None:
            self.replica.stop()

    def __enter__(self) -> ServerFaults:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
