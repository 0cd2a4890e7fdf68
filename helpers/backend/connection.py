"""The one connection class of every Lab client, and the order of its hooks.

``LabConnection`` is put before a redis-py transport (``TRANSPORTS``: TCP, TLS, a Unix socket;
``EmbeddedConnection`` for the in-process fakeredis). What it does besides sending is read from
the client's ``Wiring`` (``helpers.backend.modes``), which the pool hands to each connection as
the keyword argument ``racelab_wiring``. For every command, in this order:

1. **guard** (``Wiring.guarded``, a server the suite does not own): refused before it is packed or
   written if it reaches beyond the run's keys (``helpers.backend.guard``) or carries an argument
   over ``proto-max-bulk-len`` (``helpers.backend.limits``); hand-packed bytes are read back into
   commands first, and refused if they are not plain RESP arrays;
2. **mode** (``Wiring.mode``): the round trip is counted, and waits if the mode says so (think,
   lockstep, or a schedule's gate, ``helpers.instruments.schedule``);
3. **delay** (``Wiring.rtt_s``): the client's network delay is waited;
4. the bytes are written; each reply (or the error it carried) is reported to the mode, which
   counts failed conditional writes (retries); a reply that does not come in time is ``NoReply``,
   naming the server. A search that shares replayed prefixes (the mode's ``replies``) records
   each reply, and answers a round trip it replays from that record instead of writing it;
5. **work counter** (``Wiring.tally``, embedded only): the server counts every command it runs,
   a script's ``redis.call`` included (``count_work``);
6. **replies**: on the embedded backend the socket is fakeredis with Redis 8.4's ``SET IF*``
   (``helpers.backend.fake84``); on a real server, the RESP parser the lab asked for
   (``Wiring.parser_class``: redis-py's own ``parser_class`` argument).

The handshake (AUTH, HELLO, CLIENT SETINFO, the URL's SELECT) is the connection's own: while it
runs (one counter, ``_handshakes``) no hook sees a command or a reply. Each handshake after the
first is a reconnect, which the mode counts.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import TYPE_CHECKING, Any

import redis

from helpers.backend.fake84 import Redis84Connection
from helpers.backend.guard import (
    UnsafeCommandError,
    check_command,
    check_library_change,
    library_code,
    packed_commands,
    server_of,
)
from helpers.backend.limits import check_bulk
from helpers.backend.modes import Command, Wiring
from helpers.backend.urls import redacted
from helpers.errors import RaceLabError

# What a learner does about a server that refused or dropped the connection.
WHAT_TO_DO = (
    "is the server running? start it again (or fix REDIS_URL; make doctor checks it), "
    "then run the cell again"
)
# redis-py's words for a connection the server closed, or a socket that failed under it.
_DROPPED = ("Connection closed by server.", "max number of clients reached", "Error ")


class NoReply(RaceLabError, redis.TimeoutError):
    """The server sent no reply within the client's timeout: it is stopped, paused or overloaded."""


class ServerUnavailable(RaceLabError, redis.ConnectionError):
    """The server refused or dropped the connection (or connect() could not use it): one line."""

    def _render_traceback_(self) -> list[str]:
        """Return the one line IPython shows instead of a traceback."""
        return [f"{type(self).__name__}: {self}"]


def unavailable(where: str, exc: BaseException) -> ServerUnavailable:
    """Return the suite's one-line ServerUnavailable for the server at where (a redacted URL)."""
    text = " ".join(str(exc).split()).rstrip(".")
    return ServerUnavailable(f"cannot use the Redis server at {where}: {text}; {WHAT_TO_DO}")


def dropped(exc: BaseException) -> bool:
    """Return True if exc is redis-py's plain error for a refused, reset or closed connection."""
    if type(exc) is not redis.ConnectionError:  # not AuthenticationError, BusyLoadingError, ours
        return False
    return isinstance(exc.__context__, OSError) or str(exc).startswith(_DROPPED)


if TYPE_CHECKING:
    # A mixin: what super() reaches is the redis-py transport it is put before (TRANSPORTS).
    _Transport = redis.connection.AbstractConnection
else:
    _Transport = object


def _binary_names(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return args with each str that is not UTF-8 (a binary key name a client decoded with
    surrogateescape) as its original bytes: hiredis's packer encodes str strictly."""
    for a in args:  # (a loop, not all() over a generator: this runs for every command)
        if isinstance(a, str) and not a.isascii():
            break
    else:
        return args
    out = []
    for a in args:
        if isinstance(a, str) and not a.isascii():
            try:
                a.encode()
            except UnicodeEncodeError:
                a = a.encode("utf-8", "surrogateescape")
        out.append(a)
    return tuple(out)


class LabConnection(_Transport):
    """The hooks of the module docstring, in that order, before a redis-py connection class."""

    def __init__(self, *args: Any, racelab_wiring: Wiring | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wiring = racelab_wiring if racelab_wiring is not None else Wiring()
        self.options = kwargs  # what it was made with: where a side connection goes
        self._handshakes = 0  # > 0 while the connection sets itself up
        self._handshaken = 0  # handshakes done: every one after the first is a reconnect
        self._sending: list[Command] | None = None  # the command send_command is writing
        self._packed: tuple[Any, list[Command]] | None = (
            None  # last pack_command(s) and its commands
        )
        self._awaiting: deque[Command] = deque()  # commands written whose replies are not read
        # The last round trip's replies: recorded by (_recording), or answered from (_replayed),
        # a search's shared prefixes (the mode's ``replies``; module docstring, 4).
        self._recording: Any = None
        self._replayed: Any = None

    # -- the handshake -----------------------------------------------------------------------

    def on_connect_check_health(self, check_health: bool = True) -> None:
        """Run redis-py's handshake unseen by the hooks, then count a reconnect if it is one."""
        self._handshakes += 1
        try:
            super().on_connect_check_health(check_health=check_health)
        finally:
            self._handshakes -= 1
        self._handshaken += 1
        if self._handshaken > 1:
            self.wiring.mode.on_reconnect()

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        """Connect; a timeout is NoReply, a refused connection ServerUnavailable, naming the server."""
        try:
            super().connect_check_health(*args, **kwargs)
        except NoReply:
            raise
        except redis.TimeoutError as exc:
            raise self._no_reply(exc, self.socket_connect_timeout, "while connecting") from exc
        except redis.ConnectionError as exc:
            if dropped(exc):
                raise unavailable(self._where(), exc) from exc
            raise

    def _where(self) -> str:
        """Return the server this connection talks to, as a URL without its password."""
        o = self.options
        if isinstance(self, EmbeddedConnection):
            return "the embedded backend (fakeredis in this process)"
        user = o.get("username") or ""
        auth = f"{user}:***@" if o.get("password") else (f"{user}@" if user else "")
        if o.get("path"):
            return redacted(f"unix://{auth}{o['path']}")
        scheme = "rediss" if isinstance(self, redis.SSLConnection) else "redis"
        host, port = o.get("host", "localhost"), o.get("port", 6379)
        return redacted(f"{scheme}://{auth}{host}:{port}/{o.get('db', 0)}")

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        """Close the socket; replies still awaited will never come."""
        self._awaiting.clear()
        self._recording = self._replayed = None
        super().disconnect(*args, **kwargs)

    # -- 1. guard ----------------------------------------------------------------------------

    def _guard(self, commands: list[Command]) -> None:
        if not self.wiring.guarded:
            return
        for args in commands:
            check_bulk(args)  # proto-max-bulk-len: the server would reset the connection
            check_command(args, owned=False)
            check_library_change(args, self._library_code, where=server_of(self.options))

    def _library_code(self, name: str) -> bytes | None:
        """Return library name's code on this connection's server, asked on a side connection."""
        return library_code(type(self), {**self.options, "racelab_wiring": Wiring()}, name)

    def pack_command(self, *args: Any) -> Any:
        """Guard, then pack one command (its bytes are then known to send_packed_command)."""
        args = _binary_names(args)
        if self._handshakes:
            return super().pack_command(*args)
        self._guard([args])
        packed = super().pack_command(*args)
        self._packed = (packed, [args])
        return packed

    def pack_commands(self, commands: Any) -> Any:
        """Guard, then pack several commands (a pipeline or MULTI block: one write)."""
        commands = [_binary_names(tuple(c)) for c in commands]
        if self._handshakes:
            return super().pack_commands(commands)
        self._guard(commands)
        packed = super().pack_commands(commands)
        self._packed = (packed, commands)
        return packed

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        """Guard, then send one command."""
        args = _binary_names(args)
        if self._handshakes:
            return super().send_command(*args, **kwargs)
        self._guard([args])
        self._sending = [args]
        try:
            super().send_command(*args, **kwargs)
        finally:
            self._sending = None

    def _commands_in(self, data: Any) -> list[Command]:
        """Return the commands data (about to be written) carries, guarding hand-packed bytes."""
        packed, self._packed = self._packed, None
        if self._sending is not None:
            return self._sending
        if packed is not None and data is packed[0]:
            return packed[1]
        try:
            commands: list[Command] = [tuple(c) for c in packed_commands(data)]
        except ValueError as exc:
            if not self.wiring.guarded:
                return []
            raise UnsafeCommandError(
                f"refusing hand-packed bytes the guard cannot read ({exc}) on a server the suite "
                f"does not own; send commands as arguments (execute_command) instead"
            ) from None
        self._guard(commands)
        return commands

    # -- 2. mode, 3. delay, then the write -----------------------------------------------------

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """Write one round trip, after the guard, the mode and the delay (module docstring)."""
        if not self._handshakes:
            self._recording = self._replayed = None
            commands = self._commands_in(command)
            if commands:
                mode = self.wiring.mode
                instead = mode.before_round_trip(commands)
                if instead is not None:  # the mode sends these instead (a blocking call's timeout)
                    commands = [_binary_names(tuple(c)) for c in instead]
                    command = super().pack_commands(commands)
                if self.wiring.rtt_s > 0:
                    mode.delay(self.wiring.rtt_s)
                self._awaiting.extend(commands)
                replies = mode.replies
                if replies is not None and replies.replayed(commands):
                    if not self._sock:  # as redis-py's own send would
                        self.connect_check_health(check_health=False)
                    self._replayed = replies  # answered from the record: nothing is written
                    return
                self._recording = replies
        try:
            super().send_packed_command(command, check_health)
        except ServerUnavailable:
            raise
        except redis.ConnectionError as exc:
            if dropped(exc):
                raise unavailable(self._where(), exc) from exc
            raise

    # -- 4. replies ------------------------------------------------------------------------------

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        """Read one reply and report it (or the error it carried) to the mode."""
        if self._replayed is not None and not self._handshakes:
            raised, reply = self._replayed.next_reply()
            self._answered(reply)
            if raised:
                raise reply
            return reply
        recording = None if self._handshakes else self._recording
        try:
            reply = self._read_reply(*args, **kwargs)
        except redis.ResponseError as exc:
            if recording is not None:
                recording.heard(True, exc)
            self._answered(exc)
            raise
        except BaseException:
            if recording is not None:  # a reply the record cannot hold: the prefix ends here
                recording.broken()
            raise
        if recording is not None:
            recording.heard(False, reply)
        self._answered(reply)
        return reply

    def _read_reply(self, *args: Any, **kwargs: Any) -> Any:
        """Read one reply from the transport; timeouts and drops name the server."""
        try:
            return super().read_response(*args, **kwargs)
        except NoReply:
            raise
        except redis.TimeoutError as exc:
            raise self._no_reply(exc, self.socket_timeout, "to a command") from exc
        except redis.ConnectionError as exc:
            if dropped(exc):
                raise unavailable(self._where(), exc) from exc
            raise

    def _answered(self, reply: Any) -> None:
        if self._handshakes:
            return
        try:
            command = self._awaiting.popleft()
        except IndexError:  # disconnect() (maybe from a run stopping its clients) cleared it
            command = ()
        self.wiring.mode.on_reply(command, reply)

    def _no_reply(self, exc: Exception, limit: float | None, doing: str) -> NoReply:
        where = (
            getattr(self, "path", None)
            or f"{getattr(self, 'host', '?')}:{getattr(self, 'port', '?')}"
        )
        return NoReply(
            f"no reply from {where} within {limit} s {doing}: the server is stopped (SIGSTOP), "
            f"paused or overloaded, or a blocking command needs a longer socket_timeout ({exc})"
        )


class TcpConnection(LabConnection, redis.Connection):
    """A Lab connection over TCP (redis://)."""


class TlsConnection(LabConnection, redis.SSLConnection):
    """A Lab connection over TLS (rediss://)."""


class UnixConnection(LabConnection, redis.UnixDomainSocketConnection):
    """A Lab connection over a Unix socket (unix://)."""


class EmbeddedConnection(LabConnection, Redis84Connection):
    """A Lab connection to the in-process fakeredis server (Redis 8.4's SET IF*, the work tally)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = self.wiring.tally  # Redis84Connection's sockets count on it


# redis-py's connection class for a URL (what redis.connection.parse_url names) -> ours.
TRANSPORTS: dict[type, type[TcpConnection | TlsConnection | UnixConnection]] = {
    redis.Connection: TcpConnection,
    redis.SSLConnection: TlsConnection,
    redis.UnixDomainSocketConnection: UnixConnection,
}


def new_pool(wiring: Wiring, **options: Any) -> redis.ConnectionPool:
    """Return a pool of Lab connections wired with wiring (options as redis.ConnectionPool takes them).

    ``options["connection_class"]`` is redis-py's class for the URL (TCP if absent), replaced by
    ours for the same transport; a cluster client makes its node pools with this too.
    """
    base = options.pop("connection_class", redis.Connection)
    cls = base if issubclass(base, LabConnection) else TRANSPORTS[base]
    if wiring.parser_class is not None and cls is not EmbeddedConnection:
        options["parser_class"] = wiring.parser_class
    return redis.ConnectionPool(connection_class=cls, racelab_wiring=wiring, **options)


def pool_factory(wiring: Wiring) -> functools.partial[redis.ConnectionPool]:
    """Return new_pool bound to wiring: what a cluster client makes each node's pool with."""
    return functools.partial(new_pool, wiring)
