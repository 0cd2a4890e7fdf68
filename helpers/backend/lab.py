"""One entry point to the backend in use: ``lab = connect("05_get_then_incr")``.

Selection order:

1. ``REDIS_URL`` set: that real server (or cluster, detected with INFO). The suite does not
   own it, so destructive commands are refused (``helpers.backend.guard``) and only keys under this
   run's prefix are touched. Any URL redis-py takes: ``redis://``, ``rediss://`` (TLS), ``unix://``.
2. ``RACELAB_BACKEND=real`` (or ``cluster``): a throwaway redis-server (or 3-node cluster) on
   loopback, started now and stopped by ``lab.close()`` or at exit.
3. Otherwise the embedded backend: one shared fakeredis ``FakeServer`` pinned to 8.4.

``connect(backend=...)`` overrides the environment. ``RACELAB_PARSER=python`` makes every client
use redis-py's Python reply parser even when hiredis is installed (``lab.parser`` says which).
Capabilities are probed on the server (``helpers.backend.capabilities``), never read from a
version table; which server answers is ``helpers.backend.identity``. Every client's connections
are ``helpers.backend.connection.LabConnection``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import fakeredis
import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

from helpers.backend import embedded
from helpers.backend.capabilities import Capabilities, probe_capabilities
from helpers.backend.connection import (
    NoReply,
    ServerUnavailable,
    new_pool,
    pool_factory,
    unavailable,
)
from helpers.backend.guard import GuardedRedis, GuardedRedisCluster
from helpers.backend.identity import ServerIdentity, server_identity
from helpers.backend.modes import Mode, Wiring, check_rtt_ms, make_modes
from helpers.backend.namespace import LEARNER_NAME, SHARED_USER, Namespace, new_run_id
from helpers.backend.redispy import (
    HIREDIS_PARSER,
    PYTHON_PARSER,
    hiredis_version,
    quiet_experimental_warnings,
)
from helpers.backend.runs import LEASE_VARIABLE, Heartbeat
from helpers.backend.scripts import load_script
from helpers.backend.server import RedisClusterServer, RedisServer, is_owned_url
from helpers.backend.setupcell import setup_done, setup_failed
from helpers.backend.urls import MalformedURL, redacted, url_options
from helpers.errors import RaceLabError

__all__ = [
    "Capabilities",
    "PYTHON_PARSER",
    "Lab",
    "NoReply",
    "ServerUnavailable",
    "connect",
    "hiredis_version",
    "redacted",
]

Client = redis.Redis | redis.cluster.RedisCluster

BACKENDS = ("embedded", "real", "cluster")

# Every client of a real server has these, so a frozen or dead server is a clear error within
# 10 s, never a minute of redis-py's retries (5 s timeout x 3 retries with backoff, twice).
CONNECT_TIMEOUT_S = 2.0  # to open a TCP connection
REPLY_TIMEOUT_S = 5.0  # to wait for one reply; a blocking command needs a longer socket_timeout
# No silent retry: a command whose connection broke raises (the next command reconnects, and the
# client's mode counts it). A retry would hide a server restart from a run, and would reopen the
# connections a run closes to stop its clients.
RECONNECT_RETRIES = 0


class ServerRefused(RaceLabError, redis.ResponseError):
    """connect() reached the server, but its ACL refused this user (a forbidden database, no access)."""


def heartbeat_wanted(lab: Lab) -> bool:
    """Return True if the run beats a heartbeat: a learner's run, or any on a server not owned with RACELAB_LEASE_S set."""
    return not lab.owns_server and bool(lab.ns.learner or os.environ.get(LEASE_VARIABLE))


def learner_of(url: str) -> str:
    """Return the learner a URL's user names ('' for no user, 'default' or the self-study user).

    A learner's own ACL user (``python -m helpers acl --learners``) may touch only keys under
    ``racelab:@<learner>:``, so the namespace puts that name first.
    """
    user = url_options(url).get("username") or ""
    if user in ("", "default", SHARED_USER):
        return ""
    if not LEARNER_NAME.match(user):
        raise _malformed(
            url,
            f"the user {user!r} is no learner name (1-32 of A-Z a-z 0-9 _ -), see python -m helpers acl",
        )
    return user


def _malformed(url: str, why: str) -> MalformedURL:
    return MalformedURL(f"malformed Redis URL {redacted(url)}: {why}")


def parser_description(kind: str, parser_class: type | None = None) -> str:
    """Return e.g. 'hiredis 3.2.1' or 'Python parser (hiredis not installed)' for a backend."""
    if kind == "embedded":
        return "none: the embedded backend hands replies over in-process (no hiredis needed)"
    version = hiredis_version()
    if parser_class is not None and parser_class is not HIREDIS_PARSER:
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


def _is_cluster(url: str) -> bool:
    """Return True if the server at url runs in cluster mode; ServerUnavailable if it does not answer."""
    options = {**client_defaults(), **url_options(url), "retry": None}
    try:
        with redis.Redis(connection_pool=new_pool(Wiring(), **options)) as probe:
            try:
                return str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
            except redis.ResponseError as exc:
                if str(exc).startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
                    raise ServerRefused(
                        f"the Redis server at {redacted(url)} refused this user: {exc}"
                    ) from exc
                return False
    except ServerUnavailable:
        raise
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise unavailable(redacted(url), exc) from exc


@dataclass
class Lab:
    """The backend in use: hands out clients of one server, and this run's key namespace."""

    kind: str
    ns: Namespace
    owns_server: bool
    url: str | None = field(default=None, repr=False)  # it may hold a password
    _server: fakeredis.FakeServer | RedisServer | RedisClusterServer | None = None
    _clients: list[Client] = field(default_factory=list)
    _heartbeat: Heartbeat | None = None
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
    ) -> Client:
        """Return a new independent client (its own connections) of the backend's server.

        ``mode`` decides the timing of its round trips (``helpers.backend.modes``): "straight"
        (as they are), "think" (wait think_s seconds before each), or a Mode object. On a
        cluster, ``node=(host, port)`` gives a plain client of that one node instead of a client
        that routes by key (what forced schedules need for WATCH and MULTI on one connection).
        A client of a real server times out (``client_defaults()``: NoReply after 5 s, no silent
        retry) unless kwargs say otherwise. ``rtt_ms`` is a network delay, whatever the mode: the
        client waits that many milliseconds before each round trip (``helpers.backend.modes``).
        """
        wiring = Wiring(
            mode=make_modes(mode, think_s=think_s)[0],
            rtt_s=check_rtt_ms(rtt_ms),
            guarded=not self.owns_server,
            parser_class=self.parser_class,
        )
        single = kwargs.pop("single_connection_client", False)
        # A key name that is not UTF-8 (somebody's binary key a SCAN meets) decodes to a str that
        # encodes back to the same bytes, instead of a UnicodeDecodeError.
        kwargs.setdefault("encoding_errors", "surrogateescape")
        c: Client
        if self.kind == "embedded":
            c = embedded.new_client(
                self.fake_server,
                wiring,
                decode_responses=decode_responses,
                single_connection_client=single,
                **kwargs,
            )
        elif (self.caps.cluster or self.kind == "cluster") and node is None:
            c = GuardedRedisCluster.from_url(
                self.url or "",  # as below: a cluster lab has one (connect() gives it)
                decode_responses=decode_responses,
                racelab_owned=self.owns_server,
                racelab_wiring=wiring,
                racelab_namespace=self.ns,  # its keys are recorded for cleanup
                connection_pool_class=pool_factory(wiring),
                **{**client_defaults(), **kwargs},
            )
        else:
            where = {} if node is None else {"host": node[0], "port": node[1]}
            options = {**client_defaults(), **url_options(self.url or ""), **where, **kwargs}
            pool = new_pool(wiring, **options, decode_responses=decode_responses)
            c = GuardedRedis(
                connection_pool=pool,
                single_connection_client=single,
                racelab_owned=self.owns_server,
                racelab_namespace=self.ns,  # its keys are recorded for cleanup
            )
            c.auto_close_connection_pool = True  # close() disconnects the pool made here
        self._clients.append(c)
        return c

    @property
    def fake_server(self) -> fakeredis.FakeServer:
        """Return the in-process server of an embedded lab; TypeError on any other backend."""
        if not isinstance(self._server, fakeredis.FakeServer):
            raise TypeError(f"a {self.kind} lab has no in-process server")
        return self._server

    @property
    def throwaway_server(self) -> RedisServer | None:
        """Return the single redis-server process this lab started itself, else None."""
        if self.owns_server and isinstance(self._server, RedisServer):
            return self._server
        return None

    @property
    def parser(self) -> str:
        """Return which reply parser the lab's clients use: hiredis (its version) or Python's."""
        return parser_description(self.kind, self.parser_class)

    def key(self, name: str) -> str:
        """Return this run's key for a short name."""
        return self.ns.key(name)

    def script(self, name: str, client: Client | None = None) -> Any:
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
        learner = (
            f"learner: {self.ns.learner}, on a shared server: the instructor loaded the suite's "
            "scripts; Lua you write yourself runs on the embedded backend (check() does that)\n"
            if self.ns.learner
            else ""
        )
        return (
            f"backend: {self.kind} ({where}, {owner})\nserver: {self.server.label()}{reported}\n"
            f"{learner}key prefix: {self.ns.prefix}\ncapabilities:\n{self.caps.table()}"
        )

    def cleanup(self) -> int:
        """Delete this run's keys (and nothing else); return how many were deleted."""
        c = self.client(decode_responses=False)  # binary key names must not break cleanup
        try:
            return self.ns.cleanup(c)
        finally:
            self._close_client(c)

    def _own_client(self) -> Client:
        """Return a client the lab does not hand out or close at close() (the heartbeat's)."""
        c = self.client()
        self._clients.remove(c)
        return c

    def release(self, c: Client) -> None:
        """Close one client handed out by client() now, instead of at close(); returns nothing."""
        self._close_client(c)

    def _close_client(self, c: Client) -> None:
        if c in self._clients:
            self._clients.remove(c)
        c.close()

    def close(self) -> None:
        """Close every client handed out and stop a server the lab started. Safe to call twice."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
        for c in list(self._clients):
            self._close_client(c)
        if isinstance(self._server, (RedisServer, RedisClusterServer)):
            self._server.stop()

    def __enter__(self) -> Lab:
        """Return the lab itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Delete this run's keys and close the lab."""
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
    only a server this process started (helpers.backend.server) counts as owned. In IPython, a
    kernel's first connect() that fails stops each later cell with one sentence
    (``helpers.backend.setupcell``).
    """
    try:
        lab = _open(notebook, backend, url, run_id, owned)
    except Exception as exc:
        setup_failed(exc)
        raise
    setup_done()
    return lab


def _open(
    notebook: str, backend: str | None, url: str | None, run_id: str | None, owned: bool | None
) -> Lab:
    """Return a Lab as connect() says (connect's body, apart from the notebook's setup cell)."""
    quiet_experimental_warnings()
    url = url if url is not None else (os.environ.get("REDIS_URL") if backend is None else None)
    if url is not None and not url.strip():
        raise MalformedURL(
            "REDIS_URL is set but empty: unset it (unset REDIS_URL) for the embedded backend, "
            "or give the server's URL (redis://user:password@host:6379/0)"
        )
    backend = backend or ("real" if url else os.environ.get("RACELAB_BACKEND", "embedded"))
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    ns = Namespace(notebook, run_id or new_run_id(), learner=learner_of(url) if url else "")
    if url:
        url_options(url)  # MalformedURL, naming it, before anything connects
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
        fake = embedded.EMBEDDED_VERSION if lab.kind == "embedded" else None
        lab.server = server_identity(probe, fake)
        lab.version = lab.server.version
        lab.caps = probe_capabilities(
            probe, ns.key("__probe__"), cluster=lab.kind == "cluster", server=lab.server.label()
        )
        if heartbeat_wanted(lab):  # an abandoned run can be swept (helpers.backend.runs)
            lab._heartbeat = Heartbeat(lab._own_client(), ns).start()  # None if refused (OOM)
    except ServerUnavailable:
        lab.close()  # a server this call started must not outlive the failure
        raise
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        lab.close()
        raise unavailable(redacted(lab.url or ""), exc) from exc
    except redis.exceptions.NoPermissionError as exc:
        lab.close()
        raise ServerRefused(
            f"the Redis server at {redacted(lab.url or '')} refused this user: {exc} "
            "(a database or command the user's ACL does not allow; python -m helpers acl prints one that works)"
        ) from exc
    except BaseException:
        lab.close()
        raise
    finally:
        lab._close_client(probe)
    return lab
