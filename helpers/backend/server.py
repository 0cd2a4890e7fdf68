"""Throwaway real Redis servers and clusters on loopback, started and stopped by the suite.

A server started here is *owned* by the suite: it has no persistence, listens only on
127.0.0.1, lives in a temporary directory, and is stopped when its context ends, when
``stop()`` is called, or when the interpreter exits. Only on such a server may the suite run
destructive commands (see ``helpers.backend.guard``).

It also dies with the process that started it, however that process ends (``kill -9`` of a
Jupyter kernel included): a watchdog (``sh``) holds the read end of a pipe whose write end only
the starting process holds; when that process is gone, the read returns and the watchdog kills
the server. ``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that started the server
ends, and a server started from a worker thread would die early.

``RACELAB_REDIS_SERVER`` names the server binary to use instead of searching .redis/bin and PATH
(``python -m helpers run --binary`` sets it, so a matrix pass sees only the server under test);
``RACELAB_REDIS_SERVER=none`` hides every binary, as on a machine without Redis (.ci/run's first leg).

The command line (``python -m helpers``, see helpers/__main__.py) wraps this module.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from helpers.backend.urls import url_options
from helpers.errors import RaceLabError
from helpers.instruments.progress import progress, tick

MIN_VERSION = (8, 4, 0)
VALKEY_FORKED_FROM = (7, 2, 4)  # the Redis release Valkey forked from (its INFO redis_version)
PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOCAL_BIN = PROJECT_ROOT / ".redis" / "bin"
BINARY_VARIABLE = "RACELAB_REDIS_SERVER"
NO_BINARY = "none"  # $RACELAB_REDIS_SERVER=none: find no binary at all (a fresh machine)
# The watchdog: waits for EOF on stdin (the starting process is gone), then kills the server ($1),
# if that pid still runs a command line with its port ($2) in it: a pid the system gave to another
# process since is left alone. It ignores SIGINT and SIGHUP, so that a Ctrl-C the starting process
# survives leaves it on guard.
_WATCHDOG = (
    'trap "" INT HUP; while read -r _; do :; done; '
    'tr "\\0" " " < "/proc/$1/cmdline" 2>/dev/null | grep -q -- "$2" && kill -KILL "$1"'
)

_LIVE: list[RedisServer] = []


class ServerNotFound(RaceLabError, RuntimeError):
    """No redis-server of the version asked for (>= 8.4 by default) is available on this machine."""


def parse_version(text: str) -> tuple[int, ...]:
    """Return a version string such as '8.6.3' as a tuple of ints."""
    return tuple(int(p) for p in text.strip().split(".") if p.isdigit())


def binary_identity(path: str | Path) -> tuple[str, tuple[int, ...]] | None:
    """Return (product, version) of a server binary, e.g. ('valkey', (9, 1, 2)); None if it does not run."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in out.split():
        if word.startswith("v="):
            return out.split(" ", 1)[0].lower(), parse_version(word[2:])
    return None


def binary_version(path: str | Path) -> tuple[int, ...] | None:
    """Return the version of a redis-server binary, or None if it does not run."""
    identity = binary_identity(path)
    return identity[1] if identity else None


def redis_equivalent(product: str, version: tuple[int, ...]) -> tuple[int, ...]:
    """Return the Redis version whose commands a server binary has: its own for Redis; for Valkey,
    the Redis release it forked from and reports as redis_version (7.2.4): Valkey 9 is not Redis 9."""
    return version if product == "redis" else VALKEY_FORKED_FROM if product == "valkey" else ()


def _version_text(version: tuple[int, ...] | None) -> str:
    return ".".join(map(str, version)) if version else "does not run"


def _found_text(identity: tuple[str, tuple[int, ...]] | None) -> str:
    if identity is None:
        return "does not run"
    product, version = identity
    if product == "redis":
        return _version_text(version)
    return f"{product.title()} {_version_text(version)} (Redis {_version_text(redis_equivalent(product, version))})"


def find_binary(name: str = "redis-server", min_version: tuple[int, ...] = MIN_VERSION) -> Path:
    """Return the path of a usable redis binary: $RACELAB_REDIS_SERVER, else .redis/bin, then PATH.

    min_version is a Redis version: a Valkey binary counts as the Redis it forked from (7.2.4).
    """
    chosen = os.environ.get(BINARY_VARIABLE)
    candidates = [LOCAL_BIN / name]
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    if chosen == NO_BINARY:
        candidates = []  # a machine without Redis: .redis/bin and PATH are not looked at
    elif chosen and name == "redis-server":
        candidates = [Path(chosen)]  # the server under test, and no other
    elif chosen:
        candidates.insert(0, Path(chosen).with_name(name))  # its own redis-cli first, if it has one
    seen = []
    for cand in candidates:
        if not cand.exists():
            continue
        server = cand if name == "redis-server" else cand.with_name("redis-server")
        identity = binary_identity(server)
        seen.append(f"{_found_text(identity)} at {server}")
        if identity and redis_equivalent(*identity) >= min_version:
            return cand
    wanted = ".".join(map(str, min_version))
    where = (
        f"${BINARY_VARIABLE}={chosen}"
        if chosen == NO_BINARY or (chosen and name == "redis-server")
        else f"{LOCAL_BIN} and PATH"
    )
    raise ServerNotFound(
        f"no {name} >= {wanted} (found: {'; '.join(seen) or 'none'}; looked in {where}). "
        f"Run `make redis` to build one."
    )


def server_description(binary: str | Path) -> str:
    """Return e.g. 'redis-server 8.6.3' or 'valkey-server 9.1.2' from the binary's --version line."""
    identity = binary_identity(binary)
    if identity is None:
        return f"{binary} (does not run)"
    return f"{identity[0]}-server {_version_text(identity[1])}"


def port_is_free(port: int) -> bool:
    """Return True if 127.0.0.1:port can be bound now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(cluster: bool = False) -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    A cluster node also needs its bus port (port + 10000) free, so its port must be <= 55535.
    """
    if not cluster:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    for _ in range(200):
        port = random.randint(20000, 55535)
        if port_is_free(port) and port_is_free(port + 10000):
            return port
    raise RuntimeError("found no free port pair (port, port+10000) for a cluster node")


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """Write a throwaway certificate for 127.0.0.1 and its key into directory; return (cert, key).

    Made with the openssl command line (a day's validity, subjectAltName IP:127.0.0.1, so hostname
    checking passes); the certificate is also the CA a client trusts (``ssl_ca_certs``).
    """
    cert, key = directory / "tls.crt", directory / "tls.key"
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ServerNotFound(
            "a TLS throwaway server needs the openssl command (Debian package openssl)"
        )
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def has_tls(binary: str | Path) -> bool:
    """Return True if the redis-server binary was built with TLS (BUILD_TLS=yes links OpenSSL)."""
    try:
        return b"SSL_CTX_new" in Path(binary).read_bytes()
    except OSError:
        return False


class _Where(TypedDict, total=False):
    """The redis.Redis keyword arguments that reach a RedisServer."""

    host: str
    port: int
    ssl: bool
    ssl_ca_certs: str


@dataclass
class RedisServer:
    """One redis-server process on 127.0.0.1 with no persistence, owned by the suite.

    ``tls=True``: it listens only on TLS, with a self-signed certificate made at start (``url`` is
    then ``rediss://...?ssl_ca_certs=...``). ``unix_socket=True``: it also listens on a Unix socket
    in its directory (``unix_url``).
    """

    extra_args: list[str] = field(default_factory=list)
    port: int = 0
    binary: Path | None = None
    startup_timeout: float = 10.0
    process: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    tls: bool = False
    unix_socket: bool = False
    _lifeline: int | None = None  # write end of the watchdog's pipe: open while this process lives

    @property
    def url(self) -> str:
        """Return the redis:// URL of this server (rediss://, trusting its certificate, with TLS)."""
        if self.tls:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.certificate}"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> Path | None:
        """Return the path of its Unix socket (None without unix_socket or before start)."""
        return self.workdir / "redis.sock" if self.unix_socket and self.workdir else None

    @property
    def unix_url(self) -> str:
        """Return the unix:// URL of its socket; ValueError if it has none."""
        if self.socket_path is None:
            raise ValueError("this server was started without unix_socket=True")
        return f"unix://{self.socket_path}?db=0"

    @property
    def certificate(self) -> Path | None:
        """Return its TLS certificate (also the CA to trust), None without TLS or before start."""
        return self.workdir / "tls.crt" if self.tls and self.workdir else None

    def _listen_args(self, workdir: Path) -> list[str]:
        """Return the command-line arguments that say where it listens (its files in workdir)."""
        args = ["--port", str(self.port)]
        if self.tls:
            cert, key = self_signed_certificate(workdir)
            args = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert),
                    "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
                    "--tls-auth-clients", "no"]  # fmt: skip
        if self.unix_socket:
            args += ["--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        return args

    def _where(self) -> _Where:
        """Return redis.Redis keyword arguments that reach this server."""
        where: _Where = {"host": "127.0.0.1", "port": self.port}
        if self.tls:
            where.update({"ssl": True, "ssl_ca_certs": str(self.certificate)})
        return where

    def start(self) -> RedisServer:
        """Start the process and wait until it answers PING; return self."""
        self.binary = self.binary or find_binary()
        chosen = self.port  # a port the caller chose is never swapped for another
        with progress(f"starting {Path(self.binary).name}"):
            return self._start(chosen)

    def _start(self, chosen: int) -> RedisServer:
        """Start the process, trying up to 3 free ports if none was chosen; return self."""
        last_log = ""
        for _attempt in range(3 if not chosen else 1):
            workdir = self.workdir = Path(tempfile.mkdtemp(prefix="racelab-redis-"))
            self.port = self.port or free_port(cluster="--cluster-enabled" in self.extra_args)
            args = [
                str(self.binary),
                *self._listen_args(workdir),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
                "--daemonize",
                "no",
                # The server's timer runs 100 times a second, not 10: a blocked call's timeout
                # and a key's expiry are acted on at the next tick, so a search whose actors
                # time out waits up to 10 ms a replay instead of 100 (08's semaphore: 46 s -> 9 s).
                "--hz",
                "100",
                "--loglevel",
                "warning",
                "--logfile",
                str(workdir / "redis.log"),
                *self.extra_args,
            ]
            process = self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            _LIVE.append(self)
            self._start_watchdog(process)
            if self._wait_ready(process):
                return self
            last_log = self.log_tail()
            self.stop()
            self.port = chosen  # 0: maybe the port was taken in between, so try another
        raise RuntimeError(
            f"redis-server on port {self.port or 'auto'} did not answer PING within "
            f"{self.startup_timeout}s; last log:\n{last_log}"
        )

    def _start_watchdog(self, process: subprocess.Popen[bytes]) -> None:
        """Start the sh process that kills the server once this process is gone (see module docstring)."""
        read_end, self._lifeline = (
            os.pipe()
        )  # both non-inheritable: no later child holds the write end
        try:
            self.watchdog = subprocess.Popen(
                ["sh", "-c", _WATCHDOG, "racelab-watchdog", str(process.pid), str(self.port)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        finally:
            os.close(read_end)

    def _stop_watchdog(self) -> None:
        """Stop the watchdog before the server, so it can never kill a later process that reuses the pid."""
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait(timeout=5)
            self.watchdog = None
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        client = redis.Redis(
            **self._where(),
            socket_timeout=1,
            socket_connect_timeout=1,
            retry=Retry(ExponentialBackoff(), 0),
        )
        try:
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    return False
                try:
                    # The pid check makes sure it is *our* process that answers, not a
                    # server that already held the port.
                    if client.info("server")["process_id"] == process.pid:
                        return True
                    time.sleep(0.02)
                except redis.ConnectionError:
                    time.sleep(0.02)
                tick()
            return False
        finally:
            client.close()

    def log_tail(self, lines: int = 20) -> str:
        """Return the last lines of the server's log file."""
        log = self.workdir / "redis.log" if self.workdir else None
        if log and log.exists():
            return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def client(self, **kwargs: Any) -> redis.Redis:
        """Return a new plain client of this server (timeouts and at most one reconnect unless kwargs say)."""
        kwargs.setdefault("socket_connect_timeout", 2.0)
        kwargs.setdefault("socket_timeout", 5.0)
        kwargs.setdefault(
            "retry",
            Retry(
                ExponentialBackoff(cap=0.5, base=0.05), 1, supported_errors=(redis.ConnectionError,)
            ),
        )
        options: dict[str, Any] = {**self._where(), **kwargs}  # kwargs win
        return redis.Redis(**options)

    def is_running(self) -> bool:
        """Return True while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Stop the process (TERM, then KILL) and remove its directory. Safe to call twice."""
        self._stop_watchdog()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.process is not None and self.process.stderr:
            self.process.stderr.close()
        if self in _LIVE:
            _LIVE.remove(self)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> RedisServer:
        return self.start() if not self.is_running() else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class RedisClusterServer:
    """A cluster of redis-server processes on loopback (3 primaries, no replicas), owned by the suite."""

    nodes: int = 3
    servers: list[RedisServer] = field(default_factory=list)
    binary: Path | None = None  # every node's redis-server (default: find_binary())

    @property
    def url(self) -> str:
        """Return the redis:// URL of the first node (any node works as a cluster seed)."""
        return self.servers[0].url

    @property
    def ports(self) -> list[int]:
        """Return the port of every node."""
        return [s.port for s in self.servers]

    def start(self) -> RedisClusterServer:
        """Start the nodes, join them with `redis-cli --cluster create`, wait for cluster_state:ok."""
        sibling = Path(self.binary).with_name("redis-cli") if self.binary else None
        cli = sibling if sibling and sibling.exists() else find_binary("redis-cli")
        with progress(f"starting a {self.nodes}-node cluster"):
            return self._start(cli)

    def _start(self, cli: Path) -> RedisClusterServer:
        """Start and join the nodes with cli; return self (every node stopped if it fails)."""
        try:
            for _ in range(self.nodes):
                server = RedisServer(
                    extra_args=["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"],
                    binary=self.binary,
                )
                self.servers.append(server)
                server.start()
            addresses = [f"127.0.0.1:{p}" for p in self.ports]
            done = subprocess.run(
                [
                    str(cli),
                    "--cluster",
                    "create",
                    *addresses,
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"redis-cli --cluster create failed:\n{done.stdout}\n{done.stderr}"
                )
            self._wait_ok()
            return self
        except BaseException:
            self.stop()
            raise

    def _wait_ok(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for server in self.servers:
                with server.client(decode_responses=True) as c:
                    states.append(c.cluster("info")["cluster_state"])
            if all(s == "ok" for s in states):
                return
            time.sleep(0.1)
            tick()
        raise RuntimeError(f"the cluster did not reach cluster_state:ok within {timeout}s")

    def stop(self) -> None:
        """Stop every node. Safe to call twice."""
        for server in self.servers:
            server.stop()

    def is_running(self) -> bool:
        """Return True while every node's process is alive."""
        return bool(self.servers) and all(s.is_running() for s in self.servers)

    def __enter__(self) -> RedisClusterServer:
        return self.start() if not self.is_running() else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def is_owned_url(url: str) -> bool:
    """Return True if url points at a server this process started and still runs, as the suite
    connects to it (any scheme, no user: a URL naming a user, such as the workshop's ACL user, is
    somebody else's view of the server)."""
    options = url_options(url)
    if options.get("username") or options.get("password"):
        return False
    path, port = options.get("path"), options.get("port", 6379)
    host = options.get("host", "localhost")
    for s in _LIVE:
        if not s.is_running():
            continue
        if path is not None and s.socket_path is not None and Path(path) == s.socket_path:
            return True
        if path is None and host in ("127.0.0.1", "localhost") and port == s.port:
            return True
    return False
