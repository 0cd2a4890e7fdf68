"""One entry point to the backend in use: ``lab = connect("05_get_then_incr")``.

Selection order:

1. ``REDIS_URL`` set: that real server (or cluster, detected with INFO). The suite does not
   own it, so destructive commands are refused (``helpers.backend.guard``) and only keys under this
   run's prefix are touched.
2. ``RACELAB_BACKEND=real`` (or ``cluster``): a throwaway redis-server (or 3-node cluster) on
   loopback, started now and stopped by ``lab.close()`` or at exit.
3. Otherwise the embedded backend: one shared fakeredis ``FakeServer`` pinned to 8.4.

``connect(backend=...)`` overrides the environment. ``RACELAB_PARSER=python`` makes every client
use redis-py's Python reply parser even when hiredis is installed (``lab.parser`` says which). Capabilities are probed on the server,
never read from a version table.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import redis
import redis.cluster
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.retry import Retry
from redis.utils import HIREDIS_AVAILABLE

from helpers.backend import embedded
from helpers.backend.guard import GuardedRedis, GuardedRedisCluster, check_command
from helpers.backend.modes import Mode, Think, check_rtt_ms, connection_class_for
from helpers.backend.namespace import Namespace, new_run_id
from helpers.backend.scripts import load_script
from helpers.backend.server import RedisClusterServer, RedisServer, is_owned_url

# redis-py >= 7.1 warns "Call to experimental method delex/digest ..." and "... experimental
# usage of input argument/s 'ifeq'" on every call of the Redis 8.4 commands this suite
# teaches. They are stable server commands; the warning is about redis-py's Python signature.
# Repeated in every cell, it would bury the output the learner should read (and change with
# redis-py versions, breaking nbval), so we filter exactly those two messages and no others.
warnings.filterwarnings(
    "ignore",
    message=r"Call to experimental method (delex|digest|digest_local)\b",
    category=UserWarning,
)
warnings.filterwarnings(
    "ignore",
    message=r"Call to '\w+' method with experimental usage of input argument",
    category=UserWarning,
)

BACKENDS = ("embedded", "real", "cluster")

# Every client of a real server has these, so a frozen or dead server is a clear error within
# 10 s, never a minute of redis-py's retries (5 s timeout x 3 retries with backoff, twice).
CONNECT_TIMEOUT_S = 2.0  # to open a TCP connection
REPLY_TIMEOUT_S = 5.0  # to wait for one reply; a blocking command needs a longer socket_timeout
# No silent retry: a command whose connection broke raises (the next command reconnects, and the
# client's mode counts it). A retry would hide a server restart from a run, and would reopen the
# connections a run closes to stop its clients.
RECONNECT_RETRIES = 0


class ServerUnavailable(redis.ConnectionError):
    """connect() could not use the server: it refused the connection or did not answer in time."""


class NoReply(redis.TimeoutError):
    """The server sent no reply within the client's timeout: it is stopped, paused or overloaded."""


class TimedConnection(redis.Connection):
    """A redis.Connection whose timeouts say which server did not answer, and within what limit."""

    def _no_reply(self, exc: redis.TimeoutError, limit: float | None, doing: str) -> NoReply:
        return NoReply(
            f"no reply from {self.host}:{self.port} within {limit} s {doing}: the server is "
            f"stopped (SIGSTOP), paused or overloaded, or a blocking command needs a longer "
            f"socket_timeout ({exc})"
        )

    def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().connect_check_health(*args, **kwargs)
        except NoReply:
            raise
        except redis.TimeoutError as exc:
            raise self._no_reply(exc, self.socket_connect_timeout, "while connecting") from exc

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except NoReply:
            raise
        except redis.TimeoutError as exc:
            raise self._no_reply(exc, self.socket_timeout, "to a command") from exc


PYTHON_PARSER = _RESP2Parser  # redis-py's pure-Python parser (it takes RESP3's when needed)


def hiredis_version() -> str | None:
    """Return the version of the hiredis that redis-py uses, or None (not installed, too old)."""
    if not HIREDIS_AVAILABLE:
        return None
    import hiredis  # noqa: PLC0415 - present only when HIREDIS_AVAILABLE

    return str(hiredis.__version__)


def parser_description(kind: str, parser_class: type | None = None) -> str:
    """Return e.g. 'hiredis 3.2.1' or 'Python parser (hiredis not installed)' for a backend."""
    if kind == "embedded":
        return "none: the embedded backend hands replies over in-process (no hiredis needed)"
    version = hiredis_version()
    if parser_class is not None and parser_class is not _HiredisParser:
        return "Python parser (hiredis " + (
            "installed, turned off)" if version else "not installed)"
        )
    if version:
        return f"hiredis {version}"
    return "Python parser (hiredis not installed; pip install hiredis parses replies faster)"


def client_defaults() -> dict[str, Any]:
    """Return the timeouts and the retry policy (none) every client of a real server gets by default."""
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": REPLY_TIMEOUT_S,
        "retry": Retry(NoBackoff(), RECONNECT_RETRIES),
    }


def redacted(url: str) -> str:
    """Return url without its password (REDIS_URL may carry an ACL user's)."""
    return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)


@dataclass(frozen=True)
class Capabilities:
    """What the server in use can do, each probed without harm (see probe_capabilities)."""

    lua: bool = False
    functions: bool = False
    set_ifeq: bool = False
    delex: bool = False
    digest: bool = False
    eval_ro: bool = False
    script_kill: bool = False
    cluster: bool = False
    # (capability, why): why one is missing, or a refusal the probe saw that is not a missing command
    notes: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def names(self) -> list[str]:
        """Return the capability names, in table order."""
        return [f.name for f in fields(self) if f.name != "notes"]

    def why(self, name: str) -> str:
        """Return why a capability is missing (or what the probe saw), '' when there is nothing to say."""
        return dict(self.notes).get(name, "")

    def table(self) -> str:
        """Return one 'name  yes/no' line per capability, with the reason for each note."""
        lines = []
        for name in self.names():
            line = f"  {name:<12}{'yes' if getattr(self, name) else 'no'}"
            lines.append(f"{line:<18}({self.why(name)})" if self.why(name) else line)
        return "\n".join(lines)


# Errors that say the server refused a call *now* (out of memory, a read-only replica, a busy
# script, still loading, ...), not that the command is missing. redis-py turns most of them into
# classes and drops the code from the message; the rest keep their code as the first word.
_REFUSED_NOW = (
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.BusyLoadingError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.MasterDownError,
    redis.exceptions.NoScriptError,
)
_REFUSED_NOW_CODES = (
    "OOM",
    "READONLY",
    "BUSY",
    "LOADING",
    "MISCONF",
    "MASTERDOWN",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOREPLICAS",
)


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


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def command_known(client: Any, name: str) -> bool | None:
    """Return whether COMMAND INFO knows name ('script|kill' for a subcommand); None if it cannot say."""
    try:
        reply = raw_command(client, "COMMAND", "INFO", name)
    except redis.ResponseError:  # no COMMAND INFO (an ACL user without it, a partial emulation)
        return None
    if isinstance(reply, dict):  # RESP3 servers may answer with a map
        return bool(reply)
    return bool(reply) and reply[0] is not None


def argument_tokens(client: Any, command: str) -> set[str] | None:
    """Return every option token COMMAND DOCS lists for command (e.g. SET's 'IFEQ'); None if it cannot say."""
    try:
        docs = raw_command(client, "COMMAND", "DOCS", command)
    except redis.ResponseError:
        return None
    tokens: set[str] = set()

    def walk(node: Any) -> None:
        items = list(node.items()) if isinstance(node, dict) else None
        if items is None and isinstance(node, list):  # RESP2: flat [name, value, name, value, ...]
            for i, item in enumerate(node):
                if _text(item) == "token" and i + 1 < len(node):
                    tokens.add(_text(node[i + 1]).upper())
                walk(item)
            return
        for key, value in items or []:
            if _text(key) == "token":
                tokens.add(_text(value).upper())
            walk(value)

    walk(docs)
    return tokens if docs else None


def _probe(call: Any, known: bool | None, what: str, server: str) -> tuple[bool, str]:
    """Return (usable, note) for one capability from a harmless call and what COMMAND INFO said."""
    try:
        call()
        return True, ""
    except (redis.ResponseError, redis.exceptions.BusyLoadingError) as exc:
        error = exc
    except (redis.ConnectionError, redis.TimeoutError):
        raise  # the server is gone or frozen: that is no answer about the command
    except redis.RedisError as exc:  # a cluster client refuses a command its server did not list
        error = exc
    message = f"{type(error).__name__}: {error}"
    refused_now = (
        isinstance(error, _REFUSED_NOW) or str(error).split(" ", 1)[0].upper() in _REFUSED_NOW_CODES
    )
    if isinstance(error, redis.exceptions.NoPermissionError):
        return False, f"this connection's user may not use {what} ({message})"
    if refused_now and known is not False:
        return True, f"{what} exists; the server refused the probe for now ({message})"
    return (
        False,
        f"{server} has no {what}" if known is False else f"{server}: {what} failed ({message})",
    )


def probe_capabilities(
    client: Any, probe_key: str, cluster: bool, server: str = "this server"
) -> Capabilities:
    """Return the capabilities of the server behind client; writes nothing that survives.

    COMMAND INFO and COMMAND DOCS say whether a command or an option exists. A harmless call then
    checks that it works: an error that says "refused now" (OOM, READONLY, BUSY, ...) is not a
    missing command. Where the server cannot answer COMMAND DOCS (the embedded backend), the
    call alone decides.
    """
    notes: list[tuple[str, str]] = []

    def check(name: str, command: str, call: Any, what: str) -> bool:
        ok, note = _probe(call, command_known(client, command), what, server)
        if note:
            notes.append((name, note))
        return ok

    set_tokens = argument_tokens(client, "set")
    if set_tokens is not None:
        set_ifeq = "IFEQ" in set_tokens
        if not set_ifeq:
            notes.append(("set_ifeq", f"{server} has no SET ... IFEQ option"))
    else:  # IFEQ never creates a missing key
        set_ifeq = check(
            "set_ifeq",
            "set",
            lambda: client.execute_command("SET", probe_key, "v", "IFEQ", "x"),
            "SET ... IFEQ option",
        )
    script_kill = bool(command_known(client, "script|kill"))
    if (
        not script_kill
    ):  # never probed by calling it: on a shared server it would kill somebody's script
        notes.append(("script_kill", f"{server} has no SCRIPT KILL"))
    return Capabilities(
        lua=check(
            "lua", "eval", lambda: client.eval("return 1", 1, probe_key), "EVAL (Lua scripts)"
        ),
        functions=check(
            "functions",
            "function|list",
            lambda: client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "racelab-probe"),
            "FUNCTION (Lua libraries)",
        ),
        set_ifeq=set_ifeq,
        # DELEX and DIGEST of a missing key change nothing.
        delex=check(
            "delex", "delex", lambda: client.execute_command("DELEX", probe_key), "DELEX command"
        ),
        digest=check(
            "digest",
            "digest",
            lambda: client.execute_command("DIGEST", probe_key),
            "DIGEST command",
        ),
        eval_ro=check(
            "eval_ro",
            "eval_ro",
            lambda: client.eval_ro("return 1", 1, probe_key),
            "EVAL_RO command",
        ),
        script_kill=script_kill,
        cluster=cluster,
        notes=tuple(notes),
    )


_PRODUCTS = {"redis": "Redis", "valkey": "Valkey"}


@dataclass(frozen=True)
class ServerIdentity:
    """Which server answers: its name ('redis', 'valkey', 'fakeredis') and its own version."""

    name: str
    version: str
    redis_version: str = ""  # what INFO's redis_version says (Valkey reports 7.2.4 there)

    def label(self) -> str:
        """Return e.g. 'Redis 8.6.3', 'Valkey 9.1.2' or 'fakeredis (as Redis 8.4.0)'."""
        if self.name == "fakeredis":
            return f"fakeredis (as Redis {self.version})"
        return f"{_PRODUCTS.get(self.name, self.name)} {self.version}"


def identify(info: dict[str, Any]) -> ServerIdentity:
    """Return the server's identity from INFO server fields (server_name, valkey_version, redis_version)."""
    redis_version = _text(info.get("redis_version", ""))
    name = _text(
        info.get("server_name") or ("valkey" if "valkey_version" in info else "redis")
    ).lower()
    version = _text(info.get(f"{name}_version") or redis_version)
    return ServerIdentity(name=name, version=version, redis_version=redis_version)


def _server_identity(client: Any, server: Any) -> ServerIdentity:
    if (
        server is not None
        and hasattr(server, "version")
        and not isinstance(server, (RedisServer, RedisClusterServer))
    ):
        return ServerIdentity(
            "fakeredis", ".".join(str(p) for p in server.version)
        )  # no INFO there
    info = client.info("server")
    if isinstance(info, dict) and "redis_version" not in info:  # cluster: one dict per node
        info = next(iter(info.values()))
    return identify(info)


def _is_cluster(url: str) -> bool:
    """Return True if the server at url runs in cluster mode; ServerUnavailable if it does not answer."""
    options = {
        **client_defaults(),
        **parse_url(url),
        "retry": None,
        "connection_class": TimedConnection,
    }
    try:
        with redis.Redis(connection_pool=redis.ConnectionPool(**options)) as probe:
            try:
                return str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
            except redis.ResponseError as exc:
                if str(exc).startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
                    raise
                return False
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServerUnavailable(f"cannot use the Redis server at {redacted(url)}: {exc}") from exc


def _make_mode(mode: str | Mode, think_s: float) -> Mode:
    """Return a Mode for Lab.client's mode argument."""
    if isinstance(mode, Mode):
        return mode
    if mode == "straight":
        return Mode()
    if mode == "think":
        return Think(think_s)
    raise ValueError(
        f"unknown client mode {mode!r}: use 'straight', 'think' or a Mode "
        f"(gated clients are made by run_schedule and explore)"
    )


@dataclass
class Lab:
    """The backend in use: hands out clients of one server, and this run's key namespace."""

    kind: str
    ns: Namespace
    owns_server: bool
    url: str | None = None
    _server: Any = None
    _clients: list[Any] = field(default_factory=list)
    version: str = ""  # the server's own version (Valkey's valkey_version, not its redis_version)
    caps: Capabilities = field(default_factory=Capabilities)
    server: ServerIdentity = field(default_factory=lambda: ServerIdentity("", ""))
    # None: redis-py's default (hiredis when installed); PYTHON_PARSER: redis-py's own parser
    parser_class: type | None = None

    def client(
        self,
        mode: str | Mode = "straight",
        think_s: float = 0.0,
        decode_responses: bool = True,
        node: tuple[str, int] | None = None,
        rtt_ms: float = 0.0,
        **kwargs: Any,
    ) -> Any:
        """Return a new independent client (its own connections) of the backend's server.

        ``mode`` decides the timing of its round trips (``helpers.backend.modes``): "straight"
        (as they are), "think" (wait think_s seconds before each), or a Mode object. On a
        cluster, ``node=(host, port)`` gives a plain client of that one node instead of a client
        that routes by key (what forced schedules need for WATCH and MULTI on one connection).
        A client of a real server times out (``client_defaults()``: NoReply after 5 s, no silent
        retry) unless kwargs say otherwise. ``rtt_ms`` is a network delay, whatever the mode: the
        client waits that many milliseconds before each round trip (``helpers.backend.modes``).
        """
        mode = _make_mode(mode, think_s)
        rtt_s = check_rtt_ms(rtt_ms)
        if self.kind == "embedded":
            base = embedded.connection_class()
            c = embedded.new_client(
                self._server,
                decode_responses=decode_responses,
                connection_class=connection_class_for(base, mode, rtt_s),
                **kwargs,
            )
        elif (self.caps.cluster or self.kind == "cluster") and node is None:
            c = GuardedRedisCluster.from_url(
                self.url,
                decode_responses=decode_responses,
                racelab_owned=self.owns_server,
                connection_class=self._connection_class(mode, rtt_s),
                **{**client_defaults(), **kwargs},
            )
            c.racelab_mode, c.racelab_rtt_s = mode, rtt_s
        else:
            single = kwargs.pop("single_connection_client", False)
            where = {} if node is None else {"host": node[0], "port": node[1]}
            options = {**client_defaults(), **parse_url(self.url), **where, **kwargs}
            pool = redis.ConnectionPool(
                **options,
                decode_responses=decode_responses,
                connection_class=self._connection_class(mode, rtt_s),
            )
            c = GuardedRedis(
                connection_pool=pool,
                single_connection_client=single,
                racelab_owned=self.owns_server,
            )
            c.auto_close_connection_pool = True  # close() disconnects the pool made here
        self._clients.append(c)
        return c

    def _connection_class(self, mode: Mode, rtt_s: float) -> type:
        """Return the connection class of a real server's client: timed, counted, lab's parser."""
        cls = connection_class_for(TimedConnection, mode, rtt_s)
        cls.racelab_parser_class = self.parser_class
        return cls

    @property
    def parser(self) -> str:
        """Return which reply parser the lab's clients use: hiredis (its version) or Python's."""
        return parser_description(self.kind, self.parser_class)

    def key(self, name: str) -> str:
        """Return this run's key for a short name."""
        return self.ns.key(name)

    def script(self, name: str, client: Any = None) -> Any:
        """Return lua/<name>.lua as a callable Script bound to client (default: a new client)."""
        return load_script(client if client is not None else self.client(), name)

    def describe(self) -> str:
        """Return a short human description: backend, server version, capabilities."""
        where = {
            "embedded": "fakeredis in this process (no server needed)",
            "real": "a real server",
            "cluster": "a real cluster",
        }[self.kind]
        owner = (
            "started by the suite"
            if self.owns_server and self.kind != "embedded"
            else (
                "in-process"
                if self.kind == "embedded"
                else "NOT started by the suite: only our keys are touched"
            )
        )
        reported = (
            f" (INFO redis_version {self.server.redis_version})"
            if self.server.redis_version not in ("", self.version)
            else ""
        )
        return (
            f"backend: {self.kind} ({where}, {owner})\nserver: {self.server.label()}{reported}\n"
            f"key prefix: {self.ns.prefix}\ncapabilities:\n{self.caps.table()}"
        )

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

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()
        self.close()


def connect(
    notebook: str = "adhoc",
    backend: str | None = None,
    url: str | None = None,
    run_id: str | None = None,
    owned: bool | None = None,
) -> Lab:
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
        lab = Lab(
            kind="cluster" if _is_cluster(url) else "real",
            ns=ns,
            url=url,
            owns_server=is_owned_url(url) if owned is None else owned,
        )
    elif backend == "embedded":
        lab = Lab(kind="embedded", ns=ns, owns_server=True, _server=embedded.new_server())
    elif backend == "real":
        server = RedisServer().start()
        lab = Lab(kind="real", ns=ns, owns_server=True, url=server.url, _server=server)
    else:
        cluster = RedisClusterServer().start()
        lab = Lab(kind="cluster", ns=ns, owns_server=True, url=cluster.url, _server=cluster)
    if os.environ.get("RACELAB_PARSER", "").lower() == "python":  # hiredis off (lab.parser says so)
        lab.parser_class = PYTHON_PARSER
    probe = lab.client()
    try:
        lab.server = _server_identity(probe, lab._server)
        lab.version = lab.server.version
        lab.caps = probe_capabilities(
            probe, ns.key("__probe__"), cluster=lab.kind == "cluster", server=lab.server.label()
        )
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        lab.close()  # a server this call started must not outlive the failure
        raise ServerUnavailable(
            f"cannot use the Redis server at {redacted(lab.url or '')}: {exc}"
        ) from exc
    except BaseException:
        lab.close()
        raise
    finally:
        lab._close_client(probe)
    return lab
