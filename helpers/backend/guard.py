"""The client-side guard: refuse commands that reach beyond the run's keys on a server the suite does not own.

On a shared Redis the real boundary is the server's ACL: the workshop user that
``python -m helpers acl`` prints (``helpers.tools.acl``) may touch only keys under ``racelab:*``
or with ``racelab:`` after a separator (the ``lock:racelab:...`` a library derives from a run's
name), a learner's user only keys with its ``racelab:@<learner>:`` first or after a library's
head, and both run only the commands the notebooks need, whatever a client sends or a script
computes.
This guard is the second line, on the client, so a mistake gets a clear error before anything
is sent. On a server the suite started itself (``helpers.backend.server``) or on the embedded
backend it is off.

What it checks, on every client a ``Lab`` hands out for a server it does not own:

* command names, normalised (str, bytes, bytearray or memoryview, any case, the subcommand in
  the same argument or the next) before they are looked up in ``_WHOLE_SERVER``;
* at the client (``execute_command`` of the client, its pipelines and transactions), and again
  in the connection (``helpers.backend.connection``), so every other way a client sends a command is covered too: pubsub,
  MONITOR, a cluster's node clients, ``send_command`` and hand-packed ``send_packed_command``
  on a pooled connection (bytes that are not complete RESP arrays are refused, unread);
* COPY with a DB argument, MIGRATE and RESET (they reach another database or server);
* library names: FUNCTION LOAD/DELETE only of ``racelab*`` libraries, and FUNCTION LOAD REPLACE
  or FUNCTION DELETE only when the library on the server the connection reaches is absent, or
  byte for byte the suite's (``lua/``) or loaded by this process (``ForeignLibraryError``
  otherwise; asked on a side connection, so it is no round trip of the client);
* script bodies (EVAL, SCRIPT LOAD, FUNCTION LOAD) that name FLUSHALL, FLUSHDB, SWAPDB, MOVE,
  SELECT or MIGRATE as a string literal.

What it cannot see: a name a script computes at run time (``redis.call(ARGV[1])``,
``'FLUSH'..'ALL'``), bytes written straight to a socket. It does not check key names either:
keeping writes to the run's keys is the ACL user's job, and the namespace's by construction
(``Namespace.owns``: the prefix, or a library's head and then the prefix).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import redis
import redis.client
import redis.cluster

from helpers.backend.modes import Wiring
from helpers.backend.namespace import Namespace, escape_glob
from helpers.backend.redispy import cluster_pipeline
from helpers.errors import RaceLabError

# Command name (upper case, with subcommand where it matters) -> why it is refused.
_WHOLE_SERVER = {
    "FLUSHALL": "deletes every key in every database",
    "FLUSHDB": "deletes every key in the database",
    "FUNCTION FLUSH": "deletes every function library, other people's included",
    "FUNCTION RESTORE": "can replace every function library",
    "SCRIPT FLUSH": "empties the script cache that every client shares",
    "SCRIPT KILL": "kills whatever script is running, maybe somebody else's",
    "SCRIPT DEBUG": "debugs scripts in a forked or blocked server",
    "FUNCTION KILL": "kills whatever function is running, maybe somebody else's",
    "SHUTDOWN": "stops the server",
    "DEBUG": "can crash, pause or reload the server",
    "CONFIG SET": "changes the server's configuration for everybody",
    "CONFIG RESETSTAT": "resets everybody's statistics",
    "SWAPDB": "swaps whole databases",
    "MOVE": "moves a key to another database",
    "MIGRATE": "moves keys to another server or database",
    "RESET": "resets the connection to database 0 and no user state, where the run's cleanup does not look",
    "MONITOR": "streams every client's commands, other people's included",
    "SYNC": "streams the whole dataset",
    "PSYNC": "streams the whole dataset",
    "CLIENT KILL": "disconnects other clients",
    "CLIENT PAUSE": "pauses every client",
    "CLIENT UNBLOCK": "interrupts another client's blocking command",
    "REPLICAOF": "turns the server into a replica, discarding its data",
    "SLAVEOF": "turns the server into a replica, discarding its data",
    "CLUSTER RESET": "resets cluster state",
    "CLUSTER FLUSHSLOTS": "removes slot ownership",
    "CLUSTER FAILOVER": "changes which node is the primary",
    "CLUSTER FORGET": "removes a node from the cluster",
    "CLUSTER MEET": "adds a node to the cluster",
    "CLUSTER SETSLOT": "moves slot ownership",
    "CLUSTER ADDSLOTS": "changes slot ownership",
    "CLUSTER ADDSLOTSRANGE": "changes slot ownership",
    "CLUSTER DELSLOTS": "removes slot ownership",
    "CLUSTER DELSLOTSRANGE": "removes slot ownership",
    "CLUSTER REPLICATE": "turns a node into a replica, discarding its data",
    "FAILOVER": "hands the primary role to a replica",
    "KEYS": "walks every key of the database, blocking the server meanwhile (the suite SCANs its prefix)",
    "SELECT": "switches the connection to another database, where the run's prefix and cleanup do not reach",
    "CONFIG REWRITE": "rewrites the server's configuration file",
    "ACL SETUSER": "changes a user's permissions",
    "ACL DELUSER": "deletes users",
    "ACL LOAD": "replaces every user from the ACL file",
    "ACL SAVE": "rewrites the ACL file",
    "MODULE LOAD": "loads code into the server",
    "MODULE LOADEX": "loads code into the server",
    "MODULE UNLOAD": "unloads a module somebody may use",
    "SAVE": "blocks the whole server while it writes the dataset to disk",
    "BGSAVE": "forks the server to write the dataset to disk",
    "BGREWRITEAOF": "forks the server to rewrite its append-only file",
    "LATENCY RESET": "resets everybody's latency statistics",
    "SLOWLOG RESET": "deletes everybody's slow log",
}

# Redis lets a Lua script call these (unlike CONFIG SET or SCRIPT FLUSH), so a script body with
# one of them as a string literal ('flushall', "FLUSHDB", [[select]]) is refused too, however it
# would be called (redis.call('x'), redis.call 'x', redis['call']('x'), local cmd = 'x'). A name
# assembled at run time is not seen: the ACL user refuses those.
_SCRIPT_REFUSED = re.compile(
    rb"""(['"]|\[=*\[)\s*(flushall|flushdb|swapdb|move|select|migrate)\s*(['"]|\]=*\])""",
    re.IGNORECASE,
)
# Where the script body is among the normalised words: EVAL body ..., SCRIPT LOAD body, FUNCTION LOAD [REPLACE] body.
_SCRIPT_BODY = {"EVAL": 1, "EVAL_RO": 1, "SCRIPT LOAD": -1, "FUNCTION LOAD": -1}

SUITE_LIBRARY_PREFIX = "racelab"


class UnsafeCommandError(RaceLabError, redis.RedisError):
    """A command that reaches beyond the run's keys was about to be sent to a server the suite does not own."""


class ForeignLibraryError(UnsafeCommandError):
    """A racelab* library on the server is not the suite's code: the suite will not replace or delete it."""


def _as_bytes(x: Any) -> bytes:
    """Return one command argument as the bytes redis-py would send (str as UTF-8)."""
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    if isinstance(x, str):
        return x.encode("utf-8", "surrogateescape")
    return str(x).encode()


def command_words(args: Iterable[Any]) -> list[bytes]:
    """Return a command's arguments as bytes, the first split on whitespace (case left as sent).

    redis-py splits a first argument such as "FUNCTION FLUSH" into two; splitting every kind of
    first argument (bytes, bytearray, memoryview too) is never less strict than that.
    """
    args = list(args)
    if not args:
        return []
    return _as_bytes(args[0]).split() + [_as_bytes(a) for a in args[1:]]


def _name(words: list[bytes]) -> tuple[str, str]:
    """Return the command name and 'name subcommand', upper-cased as Redis compares them (ASCII only)."""
    one = words[0].upper().decode("latin-1") if words else ""
    two = f"{one} {words[1].upper().decode('latin-1')}" if len(words) > 1 else one
    return one, two


def _library_name(code: bytes) -> str:
    first = code.lstrip().split(b"\n", 1)[0] if code.strip() else b""
    for part in first.split():
        if part.startswith(b"name="):
            return part[5:].decode("utf-8", "replace")
    return ""


def _reason(words: list[bytes]) -> tuple[str, str] | None:
    """Return (what is refused, why) for a command that must not run on a server the suite does not own."""
    one, two = _name(words)
    if two in _WHOLE_SERVER:
        return two, _WHOLE_SERVER[two]
    if one in _WHOLE_SERVER:
        return one, _WHOLE_SERVER[one]
    if one == "COPY" and any(w.upper() == b"DB" for w in words[3:]):
        return (
            "COPY ... DB",
            "copies a key into another database, where the run's prefix and cleanup do not reach",
        )
    what = two if two in _SCRIPT_BODY else one
    body_at = _SCRIPT_BODY.get(what)
    if body_at is not None and len(words) > (1 if body_at > 0 else 2):
        found = _SCRIPT_REFUSED.search(words[body_at])
        if found:
            return (
                what,
                f"runs a Lua script that calls {found.group(2).decode().upper()}, which can reach every key",
            )
    if two == "FUNCTION DELETE" and len(words) > 2:
        lib = words[2].decode("utf-8", "replace")
        if not lib.startswith(SUITE_LIBRARY_PREFIX):
            return (
                two,
                f"deletes library {lib!r}, which is not one of the suite's ({SUITE_LIBRARY_PREFIX}*)",
            )
    if two == "FUNCTION LOAD" and len(words) > 2:
        lib = _library_name(words[-1])
        if not lib.startswith(SUITE_LIBRARY_PREFIX):
            return two, (
                f"loads library {lib!r}; the suite only loads libraries named "
                f"{SUITE_LIBRARY_PREFIX}*, so it cannot replace somebody else's"
            )
    return None


_PLAIN_NAME = re.compile(r"[A-Za-z_]+")


def _first_words() -> frozenset[str]:
    return frozenset(
        {name.split()[0] for name in _WHOLE_SERVER}
        | {"COPY", "EVAL", "EVAL_RO", "SCRIPT", "FUNCTION"}
    )


_CHECKED_FIRST_WORDS = (
    _first_words()
)  # a command whose name is none of these passes without more ado


def check_command(args: Iterable[Any], owned: bool) -> None:
    """Raise UnsafeCommandError if args must not run on a server the suite does not own."""
    if owned:
        return
    args = tuple(args)
    first = args[0] if args else ""
    if (
        isinstance(first, str)
        and _PLAIN_NAME.fullmatch(first)
        and first.upper() not in _CHECKED_FIRST_WORDS
    ):
        return  # the common case (GET, SET, EVALSHA, ...), decided without decoding anything
    words = command_words(args)
    refused = _reason(words) if words else None
    if refused:
        what, why = refused
        raise UnsafeCommandError(
            f"refusing {what}: it {why}, and this server was not started by the suite. "
            f"The suite only touches keys under its own prefix on a server it does not own. "
            f"Run against a throwaway server (RACELAB_BACKEND=real) or the embedded backend instead."
        )


# ----------------------------------------------------------------------------------------------
# Library names: a racelab* library on the server that is not the suite's code is not the suite's.

_LOADED_HERE: dict[
    str, set[bytes]
] = {}  # library name -> code this process sent with FUNCTION LOAD


# (library name, server) this process loaded onto a server that lacked it
_BROUGHT_HERE: set[tuple[str, str]] = set()


def server_of(options: dict[str, Any]) -> str:
    """Return 'host:port' or the socket path a connection's options reach."""
    return str(options.get("path") or f"{options.get('host')}:{options.get('port')}")


def brought_here(name: str, client: Any) -> bool:
    """Return True if this process loaded library name onto client's server (any cluster node) that lacked it."""
    if hasattr(client, "get_nodes"):  # a cluster client: its nodes
        places = {f"{n.host}:{n.port}" for n in client.get_nodes()}
    else:
        places = {server_of(client.connection_pool.connection_kwargs)}
    return any((name, where) in _BROUGHT_HERE for where in places)


def suite_libraries() -> dict[str, bytes]:
    """Return {library name: code} of every function library in lua/ ('#!lua name=...' files)."""
    from luaload import libraries  # local: the loader is the one place that knows lua/

    return {name: code.encode() for name, code in libraries().items()}  # assembled, as loaded


def is_suite_code(name: str, code: bytes) -> bool:
    """Return True if code is byte for byte the suite's library name (lua/) or what this process loaded."""
    return code == suite_libraries().get(name) or code in _LOADED_HERE.get(name, set())


_STRING_NAME = re.compile(r"""(?m)^\s*(?:local\s+)?([A-Za-z_]\w*)\s*=\s*(["'])([^"'\n]+)\2""")
_REGISTERED = re.compile(
    r"""register_function\s*(?:\(\s*(["'])(?P<plain>[^"'\n]+)\1"""
    r"""|\{[^}]*?function_name\s*=\s*(?:(["'])(?P<named>[^"'\n]+)\3|(?P<var>[A-Za-z_]\w*)))"""
)


def library_functions(code: str | bytes) -> list[str]:
    """Return the function names a library's code registers, as written (a literal or a string variable).

    A name computed at run time is not seen; the server refuses a name another library holds.
    """
    text = code.decode("utf-8", "replace") if isinstance(code, bytes) else code
    strings = {m.group(1): m.group(3) for m in _STRING_NAME.finditer(text)}
    found = []
    for m in _REGISTERED.finditer(text):
        name = m.group("plain") or m.group("named") or strings.get(m.group("var") or "", "")
        if name:
            found.append(name)
    return found


def _suite_functions() -> dict[str, str]:
    """Return {function name: library name} of every function the suite's libraries register."""
    return {f: lib for lib, code in suite_libraries().items() for f in library_functions(code)}


def _foreign_suite_code(name: str, code: bytes) -> str | None:
    """Return why new library code must not be loaded on a shared server: it poses as the suite's."""
    ours = suite_libraries()
    if name in ours and code != ours[name]:
        return (
            f"library {name!r} is the suite's (lua/) and this code is not byte for byte the suite's, "
            f"so everyone calling it would run something else"
        )
    taken = {f: lib for f, lib in _suite_functions().items() if lib != name}
    squatted = sorted(set(library_functions(code)) & set(taken))
    if squatted and code != ours.get(name):
        return (
            f"library {name!r} registers {', '.join(squatted)}, a function of the suite's library "
            f"{taken[squatted[0]]!r}, so a FCALL of it would run this code instead"
        )
    return None


def _library_fields(entry: Any) -> dict[bytes, Any]:
    if isinstance(entry, dict):
        return {_as_bytes(k): v for k, v in entry.items()}
    return {_as_bytes(k): v for k, v in zip(entry[::2], entry[1::2])}


def library_code(connection_class: type, options: dict[str, Any], name: str) -> bytes | None:
    """Return the code of library name on the server that options (a connection's kwargs) reach, None if absent.

    Asked on a connection of its own, so a client's counted round trips and its gate never see it.
    """
    side = redis.ConnectionPool(
        connection_class=connection_class, **{**options, "decode_responses": False}
    )
    try:
        listing = redis.Redis(connection_pool=side).execute_command(
            "FUNCTION", "LIST", "LIBRARYNAME", escape_glob(name), "WITHCODE"
        )
    finally:
        side.disconnect()
    for entry in listing or []:
        fields = _library_fields(entry)
        if _as_bytes(fields.get(b"library_name", b"")) == name.encode():
            return _as_bytes(fields.get(b"library_code", b""))
    return None


def check_library_change(
    args: tuple[Any, ...], code_on_server: Callable[[str], bytes | None], where: str = ""
) -> None:
    """Raise ForeignLibraryError before FUNCTION LOAD REPLACE or FUNCTION DELETE of a library that is not the suite's.

    code_on_server(name) returns the library's code on the server the command goes to (None if
    absent). A new FUNCTION LOAD (no REPLACE) is left to the server, which refuses a name already taken.
    """
    first = args[0] if args else ""
    if (
        not _as_bytes(first if not isinstance(first, str) else first[:16])
        .lstrip()
        .upper()
        .startswith(b"FUNCTION")
    ):
        return
    words = command_words(args)
    two = _name(words)[1]
    if two == "FUNCTION LOAD" and len(words) > 2:
        name, doing = _library_name(words[-1]), "replace"
        posing = _foreign_suite_code(name, words[-1])
        if posing:
            raise ForeignLibraryError(
                f"refusing FUNCTION LOAD: {posing}. Load your own code on the embedded backend or "
                f"a throwaway server (RACELAB_BACKEND=real), under a name of your own."
            )
        _LOADED_HERE.setdefault(name, set()).add(words[-1])
        if b"REPLACE" not in (w.upper() for w in words[2:-1]):
            return
    elif two == "FUNCTION DELETE" and len(words) == 3:
        name, doing = words[2].decode("utf-8", "replace"), "delete"
    else:
        return
    if not name.startswith(SUITE_LIBRARY_PREFIX):
        return  # check_command refuses those outright
    if doing == "delete":
        _BROUGHT_HERE.discard((name, where))  # once deleted, a later load decides again
    code = code_on_server(name)
    if code is None and doing == "replace":
        _BROUGHT_HERE.add(
            (name, where)
        )  # absent until this process loaded it: its cleanup may delete it
    if code is not None and not is_suite_code(name, code):
        raise ForeignLibraryError(
            f"refusing to {doing} function library {name!r}: the server holds a library of that name whose "
            f"code is not byte for byte the suite's (lua/), so it belongs to somebody else (or to another "
            f"version of the suite). It was left as it is. Ask its owner to remove it, or use a throwaway "
            f"server (RACELAB_BACKEND=real)."
        )


# ----------------------------------------------------------------------------------------------
# Hand-packed commands: what send_packed_command is given when no pack_command made it.


def packed_commands(data: Any) -> list[list[bytes]]:
    """Return the commands in RESP bytes (arrays of bulk strings); ValueError if that is not all they are."""
    if isinstance(data, (list, tuple)):
        data = b"".join(_as_bytes(chunk) for chunk in data)
    data, commands, i = _as_bytes(data), [], 0
    while i < len(data):
        if data[i : i + 1] != b"*":
            raise ValueError("not a RESP array (an inline command)")
        end = data.index(b"\r\n", i)
        count, i, args = int(data[i + 1 : end]), end + 2, []
        for _ in range(count):
            if data[i : i + 1] != b"$":
                raise ValueError("an array element that is not a bulk string")
            end = data.index(b"\r\n", i)
            size = int(data[i + 1 : end])
            start, i = end + 2, end + 2 + size + 2
            if size < 0 or i > len(data) or data[i - 2 : i] != b"\r\n":
                raise ValueError("an incomplete bulk string")
            args.append(data[start : start + size])
        commands.append(args)
    return commands


# ----------------------------------------------------------------------------------------------
# The guarded clients: the same check before a command is queued, so a pipeline fails at the line
# that queued it; the connections they use check again (and the library names) before sending.


if TYPE_CHECKING:

    class _Client:
        """What _Guarded is put before: a redis-py client or pipeline (execute_command untyped there)."""

        def execute_command(self, *args: Any, **options: Any) -> Any:
            """Send the command, or queue it in a pipeline."""

else:
    _Client = object


class _Guarded(_Client):
    """Mixin: check every command before it is sent or queued, and record the run's keys it names."""

    racelab_owned: bool = False
    # The run whose keys the client's commands name (Lab.client): each key it owns is recorded
    # for cleanup, so a library's lock:<prefix>... is deleted where the user may not SCAN.
    racelab_namespace: Namespace | None = None

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Check the command, record the run's keys it names, then send or queue it."""
        check_command(args, self.racelab_owned)
        if self.racelab_namespace is not None:
            self.racelab_namespace.record(args)
        return super().execute_command(*args, **options)


class GuardedPipeline(_Guarded, redis.client.Pipeline):
    """A redis-py pipeline that refuses destructive commands on a server the suite does not own."""

    def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        """Check commands the pipeline sends at once (SCRIPT LOAD of a Script, WATCH mode) too."""
        check_command(args, self.racelab_owned)
        if self.racelab_namespace is not None:
            self.racelab_namespace.record(args)
        return super().immediate_execute_command(*args, **options)


class GuardedRedis(_Guarded, redis.Redis):
    """A redis-py client that refuses destructive commands on a server the suite does not own."""

    def __init__(
        self,
        *args: Any,
        racelab_owned: bool = False,
        racelab_namespace: Namespace | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.racelab_owned = racelab_owned
        self.racelab_namespace = racelab_namespace

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> GuardedPipeline:
        """Return a pipeline that carries the same guard (and records into the same run)."""
        pipe = GuardedPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.racelab_owned = self.racelab_owned
        pipe.racelab_namespace = self.racelab_namespace
        return pipe


class GuardedClusterPipeline(_Guarded, redis.cluster.ClusterPipeline):
    """A cluster pipeline with the same guard."""


class GuardedRedisCluster(_Guarded, redis.cluster.RedisCluster):
    """A redis-py cluster client that refuses destructive commands on a cluster the suite does not own.

    Its node connections are Lab connections (``connection_pool_class``, given by ``Lab.client``),
    which guard again; ``racelab_wiring`` is kept here, where ``mode_of`` finds it.
    """

    def __init__(
        self,
        *args: Any,
        racelab_owned: bool = False,
        racelab_wiring: Wiring,
        racelab_namespace: Namespace | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.racelab_owned = racelab_owned
        self.racelab_wiring = racelab_wiring
        self.racelab_namespace = racelab_namespace

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> GuardedClusterPipeline:
        """Return a cluster pipeline that carries the same guard (and records into the same run)."""
        if shard_hint:
            raise redis.cluster.RedisClusterException("shard_hint is deprecated in cluster mode")
        pipe = cluster_pipeline(GuardedClusterPipeline, self, transaction)
        pipe.racelab_owned = self.racelab_owned
        pipe.racelab_namespace = self.racelab_namespace
        return pipe
