"""One entry point to the backend in use: ``lab = connect("05_get_then_incr")``.

Selection order:

1. ``REDIS_URL`` set: that real server (or cluster, detected with INFO). The suite does not
   own it, so destructive commands are refused (``helpers.backend.guard``) and only keys under this
   run's prefix are touched.
2. ``RACELAB_BACKEND=real`` (or ``cluster``): a throwaway redis-server (or 3-node cluster) on
   loopback, started now and stopped by ``lab.close()`` or at exit.
3. Otherwise the embedded backend: one shared fakeredis ``FakeServer`` pinned to 8.4.

``connect(backend=...)`` overrides the environment. Capabilities are probed on the server,
never read from a version table.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import redis
import redis.cluster
from redis.connection import parse_url

from helpers.backend import embedded
from helpers.backend.guard import GuardedRedis, GuardedRedisCluster, check_command
from helpers.backend.modes import Mode, Think, connection_class_for
from helpers.backend.namespace import Namespace, new_run_id
from helpers.backend.scripts import load_script
from helpers.backend.server import RedisClusterServer, RedisServer, is_owned_url

# redis-py >= 7.1 warns "Call to experimental method delex/digest ..." and "... experimental
# usage of input argument/s 'ifeq'" on every call of the Redis 8.4 commands this suite
# teaches. They are stable server commands; the warning is about redis-py's Python signature.
# Repeated in every cell, it would bury the output the learner should read (and change with
# redis-py versions, breaking nbval), so we filter exactly those two messages and no others.
warnings.filterwarnings("ignore", message=r"Call to experimental method (delex|digest|digest_local)\b",
                        category=UserWarning)
warnings.filterwarnings("ignore", message=r"Call to '\w+' method with experimental usage of input argument",
                        category=UserWarning)

BACKENDS = ("embedded", "real", "cluster")


@dataclass(frozen=True)
class Capabilities:
    """What the server in use can do, each probed with a harmless command."""

    lua: bool = False
    functions: bool = False
    set_ifeq: bool = False
    delex: bool = False
    digest: bool = False
    eval_ro: bool = False
    script_kill: bool = False
    cluster: bool = False

    def table(self) -> str:
        """Return one 'name  yes/no' line per capability."""
        return "\n".join(f"  {f.name:<12}{'yes' if getattr(self, f.name) else 'no'}"
                         for f in fields(self))


def _works(call: Any) -> bool:
    try:
        call()
        return True
    except redis.ResponseError:
        return False


def raw_command(client: Any, *args: Any) -> Any:
    """Send one command on a pooled connection and return the unparsed reply.

    redis-py parses every COMMAND subcommand as COMMAND INFO, which breaks on COMMAND DOCS,
    so this bypasses its reply callbacks, but not the guard: a client that does not say it may
    (``racelab_owned``) never sends a destructive command this way.
    """
    check_command(args, getattr(client, "racelab_owned", False))
    if isinstance(client, redis.cluster.RedisCluster):
        client = client.get_redis_connection(client.get_default_node())
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        pool.release(conn)


def probe_capabilities(client: Any, probe_key: str, cluster: bool) -> Capabilities:
    """Return the capabilities of the server behind client; writes nothing that survives."""
    def command_exists(name: str) -> bool:
        try:
            return bool(raw_command(client, "COMMAND", "DOCS", name))
        except redis.ResponseError:
            return False

    return Capabilities(
        lua=_works(lambda: client.eval("return 1", 1, probe_key)),
        functions=_works(lambda: client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "racelab-probe")),
        # IFEQ never creates a missing key, DELEX/DIGEST of a missing key change nothing.
        set_ifeq=_works(lambda: client.execute_command("SET", probe_key, "v", "IFEQ", "x")),
        delex=_works(lambda: client.execute_command("DELEX", probe_key)),
        digest=_works(lambda: client.execute_command("DIGEST", probe_key)),
        eval_ro=_works(lambda: client.eval_ro("return 1", 1, probe_key)),
        # Never probe with SCRIPT KILL itself: on a shared server it would kill somebody's script.
        script_kill=command_exists("script|kill"),
        cluster=cluster,
    )


def _server_version(client: Any, server: Any) -> str:
    if server is not None and hasattr(server, "version") and not isinstance(server, (RedisServer, RedisClusterServer)):
        return ".".join(str(p) for p in server.version)
    info = client.info("server")
    if isinstance(info, dict) and "redis_version" not in info:  # cluster: one dict per node
        info = next(iter(info.values()))
    return str(info["redis_version"])


def _is_cluster(url: str) -> bool:
    with redis.Redis(**parse_url(url), socket_timeout=5) as probe:
        try:
            return str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
        except redis.ResponseError:
            return False


def _make_mode(mode: str | Mode, think_s: float) -> Mode:
    """Return a Mode for Lab.client's mode argument."""
    if isinstance(mode, Mode):
        return mode
    if mode == "straight":
        return Mode()
    if mode == "think":
        return Think(think_s)
    raise ValueError(f"unknown client mode {mode!r}: use 'straight', 'think' or a Mode "
                     f"(gated clients are made by run_schedule and explore)")


@dataclass
class Lab:
    """The backend in use: hands out clients of one server, and this run's key namespace."""

    kind: str
    ns: Namespace
    owns_server: bool
    url: str | None = None
    _server: Any = None
    _clients: list[Any] = field(default_factory=list)
    version: str = ""
    caps: Capabilities = field(default_factory=Capabilities)

    def client(self, mode: str | Mode = "straight", think_s: float = 0.0, decode_responses: bool = True,
               node: tuple[str, int] | None = None, **kwargs: Any) -> Any:
        """Return a new independent client (its own connections) of the backend's server.

        ``mode`` decides the timing of its round trips (``helpers.backend.modes``): "straight"
        (as they are), "think" (wait think_s seconds before each), or a Mode object. On a
        cluster, ``node=(host, port)`` gives a plain client of that one node instead of a client
        that routes by key (what forced schedules need for WATCH and MULTI on one connection).
        """
        mode = _make_mode(mode, think_s)
        if self.kind == "embedded":
            base = embedded.connection_class()
            c = embedded.new_client(self._server, decode_responses=decode_responses,
                                    connection_class=connection_class_for(base, mode), **kwargs)
        elif (self.caps.cluster or self.kind == "cluster") and node is None:
            c = GuardedRedisCluster.from_url(self.url, decode_responses=decode_responses,
                                             racelab_owned=self.owns_server,
                                             connection_class=connection_class_for(redis.Connection, mode),
                                             **kwargs)
            c.racelab_mode = mode
        else:
            single = kwargs.pop("single_connection_client", False)
            where = {} if node is None else {"host": node[0], "port": node[1]}
            pool = redis.ConnectionPool(**{**parse_url(self.url), **where}, decode_responses=decode_responses,
                                        connection_class=connection_class_for(redis.Connection, mode),
                                        **kwargs)
            c = GuardedRedis(connection_pool=pool, single_connection_client=single,
                             racelab_owned=self.owns_server)
            c.auto_close_connection_pool = True  # close() disconnects the pool made here
        self._clients.append(c)
        return c

    def key(self, name: str) -> str:
        """Return this run's key for a short name."""
        return self.ns.key(name)

    def script(self, name: str, client: Any = None) -> Any:
        """Return lua/<name>.lua as a callable Script bound to client (default: a new client)."""
        return load_script(client if client is not None else self.client(), name)

    def describe(self) -> str:
        """Return a short human description: backend, server version, capabilities."""
        where = {"embedded": "fakeredis in this process (no server needed)",
                 "real": "a real redis-server", "cluster": "a real Redis Cluster"}[self.kind]
        owner = "started by the suite" if self.owns_server and self.kind != "embedded" else (
            "in-process" if self.kind == "embedded" else "NOT started by the suite: only our keys are touched")
        return (f"backend: {self.kind} ({where}, {owner})\nserver version: {self.version}\n"
                f"key prefix: {self.ns.prefix}\ncapabilities:\n{self.caps.table()}")

    def cleanup(self) -> int:
        """Delete this run's keys (and nothing else); return how many were deleted."""
        c = self.client(decode_responses=False)  # binary key names must not break cleanup
        try:
            return self.ns.cleanup(c)
        finally:
            self._close_client(c)

    def release(self, c: Any) -> None:
        """Close one client handed out by client() now, instead of at close(); returns nothing."""
        self._close_client(c)

    def _close_client(self, c: Any) -> None:
        if c in self._clients:
            self._clients.remove(c)
        c.close()

    def close(self) -> None:
        """Close every client handed out and stop a server the lab started. Safe to call twice."""
        for c in list(self._clients):
            self._close_client(c)
        if isinstance(self._server, (RedisServer, RedisClusterServer)):
            self._server.stop()

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()
        self.close()


def connect(notebook: str = "adhoc", backend: str | None = None, url: str | None = None,
            run_id: str | None = None, owned: bool | None = None) -> Lab:
    """Return a Lab for the selected backend (see module docstring for the order).

    ``owned`` says whether the server at ``url`` may take destructive commands; by default
    only a server this process started (helpers.backend.server) counts as owned.
    """
    ns = Namespace(notebook, run_id or new_run_id())
    url = url if url is not None else (os.environ.get("REDIS_URL") if backend is None else None)
    backend = backend or ("real" if url else os.environ.get("RACELAB_BACKEND", "embedded"))
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if url:
        lab = Lab(kind="cluster" if _is_cluster(url) else "real", ns=ns, url=url,
                  owns_server=is_owned_url(url) if owned is None else owned)
    elif backend == "embedded":
        lab = Lab(kind="embedded", ns=ns, owns_server=True, _server=embedded.new_server())
    elif backend == "real":
        server = RedisServer().start()
        lab = Lab(kind="real", ns=ns, owns_server=True, url=server.url, _server=server)
    else:
        cluster = RedisClusterServer().start()
        lab = Lab(kind="cluster", ns=ns, owns_server=True, url=cluster.url, _server=cluster)
    probe = lab.client()
    try:
        lab.version = _server_version(probe, lab._server)
        lab.caps = probe_capabilities(probe, ns.key("__probe__"), cluster=lab.kind == "cluster")
    finally:
        lab._close_client(probe)
    return lab
