"""One server per address: the servers an actor's own clients dial, each a server of the lab.

A library given several URLs (Redlock's masters) builds one client per URL. Inside a race every
such client is adopted (``helpers.instruments.adopt``); ``Servers`` says where its round trips
go, by the address the client dials (``host:port``, or a socket path):

* the first address dialed is the lab's own server, as it always was: a library given one URL
  reads and writes the keys the race's setup, watch list and invariant see;
* each further address is a server of its own that the race starts: a fresh embedded server
  (fakeredis) on the embedded backend, a throwaway redis-server on the real one. Keys, script
  caches and faults stay apart. Each run starts it empty (FLUSHALL on a server the race
  started, with the scripts the actors loaded put back), and ``Servers.close`` stops it;
* an address the lab cannot map is refused (``UnmappedServer``, which the actor gets as
  ``ActorRefused`` with reason ``UNMAPPED``): a second address on a cluster lab, on a real lab
  where no redis-server can start, or more than ``MAX_SERVERS`` addresses.

A server is named by its address as the library wrote it (``localhost:6380``). Its fault steps
are ``crash(localhost:6380)``: it restarts without persistence, so it forgets every key and its
script cache (``helpers.instruments.faults.ServerCrash``; ``Servers.crash`` says how), and
``pause(localhost:6380)``: it stalls (or its clock jumps) past every TTL it holds, so each key
with a TTL expires (``ServerPause``). As soon as a race has more than one server, each trace
row names the server its round trip went to, and a round trip's footprint holds that server's
keys only (the same key name on two servers is two keys: their steps commute).

Addresses are compared as written: ``localhost:6379`` and ``127.0.0.1:6379`` are two servers.
A URL's database number is ignored, as it was before: the lab's own server's keys are in the
lab's database, a further server's in database 0.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fakeredis
import redis

from helpers.backend import embedded
from helpers.backend.connection import new_pool
from helpers.backend.modes import Command, Mode, Wiring
from helpers.backend.server import RedisServer, ServerNotFound
from helpers.errors import RaceLabError

MAX_SERVERS = 7  # addresses one race may dial: a Redlock of 7 masters, more would be a bug


class UnmappedServer(RaceLabError, ValueError):
    """An actor's client dialed an address the lab cannot give a server of its own."""


def address_of(client: Any) -> str:
    """Return the address a redis-py client dials: 'host:port', or 'unix:<path>'."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    path = kwargs.get("path")
    if path:
        return f"unix:{path}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def qualified(server: str, key: bytes) -> bytes:
    """Return a key of server as footprints compare it (the lab's own server: the key itself)."""
    return b"\0" + server.encode() + b"\0" + key if server else key


def _outside_actors(start: Callable[[str], _Server], address: str) -> _Server:
    """Return start(address) run as the suite, not as the actor that dialed (wall-clock sleeps
    while a redis-server starts, its own connections)."""
    return contextvars.Context().run(start, address)


class OnServer(Mode):
    """The mode of an actor's client of one further server: the actor's gate, naming the server."""

    name = "gated"

    def __init__(self, gate: Any, server: str) -> None:
        super().__init__()
        self.gate, self.server = gate, server

    def before_round_trip(self, commands: list[Command]) -> list[Command] | None:
        """Park in the actor's gate with this server named; return what to send instead, if any."""
        self.gate.server = self.server
        try:
            instead: list[Command] | None = self.gate.before_round_trip(commands)
        finally:
            self.gate.server = ""
        return instead

    def on_reply(self, command: Command, reply: Any) -> None:
        """Hand the reply to the actor's gate."""
        self.gate.on_reply(command, reply)

    def on_reconnect(self) -> None:
        """Count a reconnect on the actor's gate."""
        self.gate.on_reconnect()


@dataclass
class _Server:
    """A further server of one race: the process or in-process server, its admin client."""

    name: str
    backend: fakeredis.FakeServer | RedisServer
    admin: redis.Redis
    clients: list[redis.Redis] = field(default_factory=list)  # the actors' clients of it
    scripts: set[tuple[str, str]] = field(default_factory=set)  # loaded here by the race


class Servers:
    """The servers of one race (kept across its replays): the lab's own, and one per address."""

    def __init__(self, lab: Any) -> None:
        self.lab = lab
        self.main = ""  # the first address dialed: the lab's own server
        self.extra: dict[str, _Server] = {}
        self.found: list[str] = []  # addresses found since the caller last looked (new_found)

    @property
    def names(self) -> list[str]:
        """Return the further servers' names, in the order they were first dialed."""
        return list(self.extra)

    def label(self, server: str) -> str:
        """Return how the trace names a server ('' for the lab's own: its address, or 'lab')."""
        return server or self.main or "lab"

    def server_of(self, address: str) -> str:
        """Return the server an address maps to ('' for the lab's own); start it on first use."""
        if address in self.extra:
            return address
        if not self.main:
            self.main = address
        if address == self.main:
            return ""
        if address not in self.extra:
            self.extra[address] = _outside_actors(self._start, address)
            self.found.append(address)
        return address

    def _start(self, address: str) -> _Server:
        """Start a further server for address; UnmappedServer if the lab cannot."""
        lab = self.lab
        if lab.kind == "cluster" or lab.caps.cluster:
            raise UnmappedServer(
                f"an actor's client dials {address} as well as {self.main}: a cluster lab has no "
                "server of its own to give a second address (use backend='embedded' or 'real')"
            )
        if len(self.extra) + 1 >= MAX_SERVERS:
            raise UnmappedServer(
                f"an actor's client dials {address}, a server beyond the {MAX_SERVERS} one race "
                f"may have ({self.main}, {', '.join(self.extra)})"
            )
        if lab.kind == "embedded":
            fake = embedded.new_server()
            return _Server(address, fake, embedded.new_client(fake))
        try:
            process = RedisServer().start()
        except ServerNotFound as exc:
            raise UnmappedServer(
                f"an actor's client dials {address} as well as {self.main}: on a real server a "
                f"further address is a throwaway redis-server of the race's own, and none can "
                f"start here ({exc})"
            ) from None
        admin = redis.Redis(connection_pool=new_pool(Wiring(), host="127.0.0.1", port=process.port))
        return _Server(address, process, admin)

    def client(self, address: str, gate: Any, decode: bool, node: Any = None) -> Any:
        """Return a client, gated by gate, of the server address maps to."""
        server = self.server_of(address)
        if not server:
            return self.lab.client(mode=gate, decode_responses=decode, node=node)
        found = self.extra[server]
        wiring = Wiring(mode=OnServer(gate, server))
        if isinstance(found.backend, fakeredis.FakeServer):
            client = embedded.new_client(found.backend, wiring, decode_responses=decode)
        else:
            pool = new_pool(
                wiring, host="127.0.0.1", port=found.backend.port, decode_responses=decode
            )
            client = redis.Redis(connection_pool=pool)
            client.auto_close_connection_pool = True
        found.clients.append(client)
        return client

    def release(self, client: Any) -> None:
        """Close a client handed out by client()."""
        for found in self.extra.values():
            if client in found.clients:
                found.clients.remove(client)
                client.close()
                return
        self.lab.release(client)

    def observer(self, server: str) -> redis.Redis | None:
        """Return a client that reads further server's keys unseen by any gate (None: the lab's)."""
        return self.extra[server].admin if server else None

    def new_found(self) -> list[str]:
        """Return the addresses found since the last call (a search restarts to know them)."""
        found, self.found = self.found, []
        return found

    def reset(self, loaded: set[tuple[str, str]]) -> None:
        """Empty every further server (the race started them) and load the actors' scripts."""
        for found in self.extra.values():
            found.admin.flushall()
            for kind, source in sorted(loaded - found.scripts):
                if kind == "script":
                    found.admin.script_load(source)
                else:
                    found.admin.function_load(source, replace=True)
            found.scripts |= loaded

    def crash(self, name: str) -> str:
        """Restart server name without persistence, as its clients see it; return the row's reply.

        Its keys, script cache and Function libraries are gone and every connection of the
        actors to it is closed (each reconnects at its next round trip; one with a WATCH or
        MULTI open gets redis-py's error), on the embedded backend as on the real one. A real
        server's process is not restarted: a restart costs about 0.2 s, and the race sees no
        difference (nothing it sends reads the process's run id or uptime).
        """
        if name == self.main:
            raise UnmappedServer(
                f"crash({name}): {name} is the lab's own server (the first address dialed); it "
                "restarts with the step 'restart' (a real throwaway server)"
            )
        if name not in self.extra:  # not dialed yet in this run: it starts empty, crashes empty
            self.extra[name] = _outside_actors(self._start, name)
        found = self.extra[name]
        found.admin.flushall()
        found.admin.script_flush()
        found.admin.function_flush()
        for client in found.clients:  # they reconnect at their next round trip
            client.connection_pool.disconnect()
        found.scripts = set()
        return "restarted without persistence: its keys and script cache are lost"

    def leases(self, name: str) -> list[bytes]:
        """Return the keys of further server name that have a TTL now."""
        admin = self.extra[name].admin
        keys = list(admin.scan_iter(count=1000))
        if not keys:
            return []
        with admin.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.pttl(key)
            ttls = pipe.execute()
        return sorted(key for key, ttl in zip(keys, ttls) if ttl >= 0)

    def pause(self, name: str) -> list[bytes]:
        """Let further server name stall past every TTL: each key with one expires; return them."""
        if name not in self.extra:
            return []
        keys = self.leases(name)
        for key in keys:
            self.extra[name].admin.execute_command("PEXPIREAT", key, 1)
        return keys

    def close(self) -> None:
        """Stop every further server."""
        for found in self.extra.values():
            for client in found.clients:
                client.close()
            found.admin.close()
            if isinstance(found.backend, RedisServer):
                found.backend.stop()
        self.extra.clear()


__all__ = ["MAX_SERVERS", "OnServer", "Servers", "UnmappedServer", "address_of", "qualified"]
