"""Redis 8.4 ``SET`` compare-and-set for the embedded backend, as a small extension of fakeredis.

What it adds: ``SET key value [NX|XX|IFEQ v|IFNE v|IFDEQ d|IFDNE d] [GET] [EX|PX|EXAT|PXAT n|KEEPTTL]``.
fakeredis 2.41 already has ``DELEX`` and ``DIGEST`` at server version 8.4 but answers the four
``IF*`` conditions of ``SET`` with a syntax error, and they are half of the native fixes the
notebooks teach (compare-and-set on a value, lock extension). Nothing else is changed.

Why this shape: fakeredis dispatches a command by looking the method up on the socket object, so
a ``FakeSocket`` subclass that overrides ``set_`` changes ``SET`` only for connections of the
embedded backend (plain ``fakeredis.FakeRedis`` clients and fakeredis' global command table are
untouched), and the override also serves ``redis.call('SET', ...)`` in Lua and ``SET`` queued in
MULTI. ``Redis84Connection`` makes ``FakeRedis(connection_class=...)`` use that socket. The socket
can also count every command it runs (``tally``: what ``count_work`` reads on the embedded backend).

Every rule below was measured on a real redis-server 8.6.3 (tests/test_differential.py keeps
checking it), not taken from the documentation:

* Options are read left to right; an option is a syntax error when an option it excludes came
  before it: NX/XX exclude each other; each IF* condition is refused after NX, XX or another kind
  of condition (but NX/XX *after* a condition are accepted, and a repeated condition of the same
  kind replaces the earlier one); EX/PX/EXAT/PXAT/KEEPTTL exclude each other but not themselves.
  Option names compare case-insensitively up to the first NUL byte, as Redis' C code does.
* The expiry is validated first, then GET reads the old value (WRONGTYPE on a non-string), then
  NX on an existing key, or XX/IFEQ/IFDEQ on a missing key, skip the write; IFNE/IFDNE create a
  missing key. Only then does a condition look at the value: WRONGTYPE on a non-string, and a
  digest argument that is not exactly 16 bytes long is an error (a 16-byte argument that is not
  hex simply never matches; matching ignores case).
* Reply: OK, or null when the write is skipped; with GET, always the old value.

One difference is deliberate: real Redis 8.6.3 answers ``SET k v IFDEQ|IFDNE <bad digest> GET``
on an existing string key with two replies (the old value, then the error), which desynchronises
the connection. Here that form gets only the error (see docs/divergences.md).
"""

from __future__ import annotations

from typing import Any

from fakeredis import FakeRedisConnection
from fakeredis import _msgs as msgs
from fakeredis._command_args_parsing import Int
from fakeredis._core import CommandItem
from fakeredis._helpers import OK, SimpleError, null_terminate
from fakeredis._socket import FakeSocket

SET_CONDITIONS_SINCE = (8, 4)
_LLONG_MAX = 2**63 - 1
_EXPIRIES = frozenset({b"ex", b"px", b"exat", b"pxat"})
_CONDITIONS = frozenset({b"ifeq", b"ifne", b"ifdeq", b"ifdne"})
_TAKES_A_VALUE = _EXPIRIES | _CONDITIONS
# For each SET option: the options that, when seen before it, make it a syntax error (Redis 8.6.3).
_REFUSED_AFTER: dict[bytes, frozenset[bytes]] = {
    b"nx": frozenset({b"xx"}),
    b"xx": frozenset({b"nx"}),
    b"get": frozenset(),
    b"keepttl": _EXPIRIES,
    **{e: (_EXPIRIES | {b"keepttl"}) - {e} for e in _EXPIRIES},
    **{c: (_CONDITIONS | {b"nx", b"xx"}) - {c} for c in _CONDITIONS},
}
_NEEDS_EXISTING_KEY = frozenset({b"xx", b"ifeq", b"ifdeq"})


def parse_set_options(
    args: tuple[bytes, ...], conditions_allowed: bool = True
) -> tuple[set[bytes], tuple[bytes, bytes] | None, tuple[bytes, bytes] | None]:
    """Return (flags seen, (expiry option, raw value) or None, (condition, operand) or None) for SET's options."""
    seen: set[bytes] = set()
    expiry: tuple[bytes, bytes] | None = None
    condition: tuple[bytes, bytes] | None = None
    i = 0
    while i < len(args):
        opt = null_terminate(args[i])  # lower-cased, cut at the first NUL
        refused = _REFUSED_AFTER.get(opt)
        if (
            refused is None
            or seen & refused
            or (opt in _TAKES_A_VALUE and i + 1 >= len(args))
            or (opt in _CONDITIONS and not conditions_allowed)
        ):
            raise SimpleError(msgs.SYNTAX_ERROR_MSG)
        seen.add(opt)
        if opt in _EXPIRIES:
            expiry = (opt, args[i + 1])
            i += 1
        elif opt in _CONDITIONS:
            condition = (opt, args[i + 1])
            i += 1
        i += 1
    return seen, expiry, condition


def expiry_ms(option: bytes, raw: bytes, now_ms: int) -> int:
    """Return the absolute expiry in ms of SET's EX/PX/EXAT/PXAT value, or raise Redis' error."""
    n = Int.decode(raw)
    seconds = option in (b"ex", b"exat")
    if n <= 0 or (seconds and n > _LLONG_MAX // 1000):
        raise SimpleError(msgs.INVALID_EXPIRE_MSG_REDIS_8.format("set"))
    ms = n * 1000 if seconds else n
    if option in (b"ex", b"px"):
        ms += now_ms
    if ms > _LLONG_MAX:  # Redis detects the signed overflow of this addition
        raise SimpleError(msgs.INVALID_EXPIRE_MSG_REDIS_8.format("set"))
    return ms


# What Redis 8 defines in the ``redis`` table for replication control (script_lua.c): kept as no-ops.
LUA_REPLICATION = """
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function() return true end
redis.set_repl = function(flags)
    if type(flags) ~= "number" or flags < 0 or flags > 3 then
        error("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
    end
end
"""


class Redis84Socket(FakeSocket):
    """A fakeredis socket whose SET also understands Redis 8.4's IFEQ/IFNE/IFDEQ/IFDNE, and whose
    EXEC aborts when a WATCHed key expired after the WATCH, as Redis does since 6.0.9.

    Redis records, for each watched key, whether it was already expired when WATCH ran; EXEC fails
    if any key that was alive then has expired since (``isWatchedKeyExpired`` in multi.c). fakeredis
    2.41 lets such an EXEC run, which leaves, e.g., an INCRed counter without a TTL.
    """

    def __init__(self, *args: Any, tally: dict[str, int] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = (
            tally  # command name ('client|setinfo') -> times run here, scripts' calls included
        )
        self._watched_expiry: dict[
            tuple[bytes, Any], float
        ] = {}  # (key, db) -> expiry seen at WATCH

    def _get_server_runtime(self, server: Any) -> Any:
        """Return the server's Lua runtime, with the ``redis.*`` replication calls Redis 8 keeps.

        Redis 7 and 8 still answer ``redis.replicate_commands()`` (true: effects replication is
        the only kind) and ``redis.set_repl(flags)`` with ``redis.REPL_*`` in every script; fakeredis
        2.41 has neither, so a library script that starts with the first (redis-limiters', many
        written for Redis 3.2 to 6) fails on the embedded backend only.
        """
        fresh = not hasattr(server, "_lua_runtime")
        runtime = super()._get_server_runtime(server)
        if fresh:
            runtime.execute(LUA_REPLICATION)
        return runtime

    def _run_command(self, func: Any, sig: Any, args: list[Any], from_script: bool) -> Any:
        if self.tally is not None:
            name = sig.name.lower().replace(" ", "|")
            self.tally[name] = self.tally.get(name, 0) + 1
        return super()._run_command(func, sig, args, from_script)

    def watch(self, *keys: CommandItem) -> Any:
        """WATCH, remembering the expiry of every watched key that has one and is alive now."""
        reply = super().watch(*keys)
        for key in keys:
            item = self._db._dict.get(key.key)
            if item is not None and item.expireat is not None and not self._db.expired(item):
                self._watched_expiry[(key.key, self._db)] = item.expireat
        return reply

    def _clear_watches(self) -> None:
        self._watched_expiry.clear()
        super()._clear_watches()

    def exec_(self, *conditions: bytes) -> Any:
        """EXEC; nil (aborted) if a key alive at WATCH has expired since (a TTL change would have
        been a write, which aborts anyway)."""
        if self._transaction is not None and any(
            expiry < db.time for (_, db), expiry in self._watched_expiry.items()
        ):
            self._watch_notified = True
        return super().exec_(*conditions)

    def xdel(self, key: CommandItem, *ids: bytes) -> int:
        """XDEL, which (as in Redis) touches the stream for WATCH when it deleted an entry.

        fakeredis 2.41 leaves a watched stream untouched by XDEL, so two consumers that read the
        same entry under WATCH (pottery's queue) could both commit their MULTI/XDEL/EXEC.
        """
        deleted: int = super().xdel(key, *ids)
        if deleted:
            key.updated()
        return deleted

    def _condition_holds(self, condition: bytes, operand: bytes, current: bytes) -> bool:
        """Return whether an existing string value satisfies a SET condition (digest length checked)."""
        if condition in (b"ifeq", b"ifne"):
            return (current == operand) == (condition == b"ifeq")
        if len(operand) != 16:
            raise SimpleError(msgs.DIGEST_INVALID_LENGTH_MSG)
        return (self._digest(current) == operand.lower()) == (condition == b"ifdeq")

    def set_(self, key: CommandItem, value: bytes, *args: bytes) -> Any:
        """SET with Redis 8.4 semantics; returns OK, None (write skipped) or the old value (GET)."""
        flags, expiry, condition = parse_set_options(args, self.version >= SET_CONDITIONS_SINCE)
        expire_at = expiry_ms(expiry[0], expiry[1], int(self._db.time * 1000)) if expiry else None
        get = b"get" in flags
        if get and key.value is not None and type(key.value) is not bytes:
            raise SimpleError(msgs.WRONGTYPE_MSG)
        old_value = key.value if get else None
        skipped = old_value if get else None
        if b"nx" in flags and key:
            return skipped
        if not key and flags & _NEEDS_EXISTING_KEY:
            return skipped
        if condition is not None and key:
            if type(key.value) is not bytes:
                raise SimpleError(msgs.WRONGTYPE_MSG)
            if not self._condition_holds(condition[0], condition[1], key.value):
                return skipped
        if b"keepttl" in flags or expire_at is not None:
            key.update(value)
        else:
            key.value = value  # a plain SET drops the old TTL
        if expire_at is not None:
            key.expireat = expire_at / 1000.0
        return old_value if get else OK


class Redis84Connection(FakeRedisConnection):
    """A fakeredis connection that talks through ``Redis84Socket`` (counting on ``tally`` if set)."""

    tally: dict[str, int] | None = None  # command name -> times its sockets ran it

    def _connect(self) -> Redis84Socket:
        server = self._server
        assert server is not None  # fakeredis's __init__ always sets it (typed Optional there)
        if not server.connected:
            raise self._connection_error_class(msgs.CONNECTION_ERROR_MSG)
        return Redis84Socket(
            server,
            db=self.db,
            client_class=self._client_class,
            lua_modules=self._lua_modules,
            client_info=self._client_info,
            tally=self.tally,
        )
