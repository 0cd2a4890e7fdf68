"""What the server in use can do, probed on the server without harm (never read from a version table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import redis
import redis.cluster

from helpers.backend.guard import check_command


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


def raw_command(client: redis.Redis | redis.cluster.RedisCluster, *args: Any) -> Any:
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


def text(value: Any) -> str:
    """Return a reply value as text (bytes decoded as UTF-8)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def command_known(client: redis.Redis | redis.cluster.RedisCluster, name: str) -> bool | None:
    """Return whether COMMAND INFO knows name ('script|kill' for a subcommand); None if it cannot say."""
    try:
        reply = raw_command(client, "COMMAND", "INFO", name)
    except redis.ResponseError:  # no COMMAND INFO (an ACL user without it, a partial emulation)
        return None
    if isinstance(reply, dict):  # RESP3 servers may answer with a map
        return bool(reply)
    return bool(reply) and reply[0] is not None


def argument_tokens(
    client: redis.Redis | redis.cluster.RedisCluster, command: str
) -> set[str] | None:
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
                if text(item) == "token" and i + 1 < len(node):
                    tokens.add(text(node[i + 1]).upper())
                walk(item)
            return
        for key, value in items or []:
            if text(key) == "token":
                tokens.add(text(value).upper())
            walk(value)

    walk(docs)
    return tokens if docs else None


def _probe(call: Callable[[], Any], known: bool | None, what: str, server: str) -> tuple[bool, str]:
    """Return (usable, note) for one capability from a harmless call and what COMMAND INFO said."""
    error: redis.RedisError
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
    client: redis.Redis | redis.cluster.RedisCluster,
    probe_key: str,
    cluster: bool,
    server: str = "this server",
) -> Capabilities:
    """Return the capabilities of the server behind client; writes nothing that survives.

    COMMAND INFO and COMMAND DOCS say whether a command or an option exists. A harmless call then
    checks that it works: an error that says "refused now" (OOM, READONLY, BUSY, ...) is not a
    missing command. Where the server cannot answer COMMAND DOCS (the embedded backend), the
    call alone decides.
    """
    notes: list[tuple[str, str]] = []

    def check(name: str, command: str, call: Callable[[], Any], what: str) -> bool:
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
