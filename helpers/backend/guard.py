"""Refuse destructive commands on a Redis server the suite did not start.

The suite may be pointed at somebody's real Redis (REDIS_URL). On such a server it may touch
only keys under its own prefix, so commands that wipe or reconfigure the whole server raise
``UnsafeCommandError`` before anything is sent. On a server the suite started itself
(``helpers.backend.server``) or on the embedded backend, they are allowed.

The check sits in ``execute_command`` of the client *and* of its pipelines, the two places
through which redis-py sends every command.
"""

from __future__ import annotations

import re
from typing import Any

import redis
import redis.client
import redis.cluster

# Command name (upper case, with subcommand where it matters) -> why it is refused.
_WHOLE_SERVER = {
    "FLUSHALL": "deletes every key in every database",
    "FLUSHDB": "deletes every key in the database",
    "FUNCTION FLUSH": "deletes every function library, other people's included",
    "FUNCTION RESTORE": "can replace every function library",
    "SCRIPT FLUSH": "empties the script cache that every client shares",
    "SCRIPT KILL": "kills whatever script is running, maybe somebody else's",
    "FUNCTION KILL": "kills whatever function is running, maybe somebody else's",
    "SHUTDOWN": "stops the server",
    "DEBUG": "can crash, pause or reload the server",
    "CONFIG SET": "changes the server's configuration for everybody",
    "CONFIG RESETSTAT": "resets everybody's statistics",
    "SWAPDB": "swaps whole databases",
    "MOVE": "moves a key to another database",
    "CLIENT KILL": "disconnects other clients",
    "CLIENT PAUSE": "pauses every client",
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
# assembled at run time is not seen: this is a second fence; the first is that the suite's own
# lua/ files never call them.
_SCRIPT_REFUSED = re.compile(
    r"""(['"]|\[=*\[)\s*(flushall|flushdb|swapdb|move|select|migrate)\s*(['"]|\]=*\])""",
    re.IGNORECASE)
_SCRIPT_BODY = {"EVAL": 1, "EVAL_RO": 1, "SCRIPT LOAD": -1, "FUNCTION LOAD": -1}

SUITE_LIBRARY_PREFIX = "racelab"


class UnsafeCommandError(redis.RedisError):
    """A destructive command was about to be sent to a server the suite does not own."""


def _name(args: tuple[Any, ...]) -> str:
    def text(x: Any) -> str:
        return x.decode(errors="replace") if isinstance(x, (bytes, bytearray)) else str(x)
    # redis-py sends some commands with the subcommand in the first argument ("FUNCTION FLUSH").
    words = " ".join(text(a) for a in args[:2]).upper().split()
    return " ".join(words[:2])


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, (bytes, bytearray)) else str(x)


def _library_name(code: Any) -> str:
    first = _text(code)
    first = first.lstrip().splitlines()[0] if first.strip() else ""
    for part in first.split():
        if part.startswith("name="):
            return part[5:]
    return ""


def check_command(args: tuple[Any, ...], owned: bool) -> None:
    """Raise UnsafeCommandError if args must not run on a server the suite does not own."""
    if owned or not args:
        return
    two = _name(args)
    one = two.split(" ")[0]
    reason = _WHOLE_SERVER.get(two) or _WHOLE_SERVER.get(one)
    body_at = _SCRIPT_BODY.get(two, _SCRIPT_BODY.get(one))
    if reason is None and body_at is not None:
        # args[0] may carry the subcommand ("SCRIPT LOAD", code) or not ("SCRIPT", "LOAD", code).
        found = _SCRIPT_REFUSED.search(_text(args[body_at])) if len(args) > 1 else None
        if found:
            reason = f"runs a Lua script that calls {found.group(2).upper()}, which can reach every key"
    if reason is None and one == "FUNCTION":
        sub = two.split(" ")[1] if " " in two else ""
        if sub == "DELETE":
            lib = args[-1].decode() if isinstance(args[-1], bytes) else str(args[-1])
            if not lib.startswith(SUITE_LIBRARY_PREFIX):
                reason = f"deletes library {lib!r}, which is not one of the suite's ({SUITE_LIBRARY_PREFIX}*)"
        elif sub == "LOAD":
            lib = _library_name(args[-1])
            if not lib.startswith(SUITE_LIBRARY_PREFIX):
                reason = (f"loads library {lib!r}; the suite only loads libraries named "
                          f"{SUITE_LIBRARY_PREFIX}*, so it cannot replace somebody else's")
    if reason:
        raise UnsafeCommandError(
            f"refusing {two.strip()}: it {reason}, and this server was not started by the suite. "
            f"The suite only touches keys under its own prefix on a server it does not own. "
            f"Run against a throwaway server (RACELAB_BACKEND=real) or the embedded backend instead.")


class _Guarded:
    """Mixin: check every command before it is sent or queued."""

    racelab_owned: bool = False

    def execute_command(self, *args, **options):
        check_command(args, self.racelab_owned)
        return super().execute_command(*args, **options)


class GuardedPipeline(_Guarded, redis.client.Pipeline):
    """A redis-py pipeline that refuses destructive commands on a server the suite does not own."""

    def immediate_execute_command(self, *args, **options):
        """Check commands the pipeline sends at once (SCRIPT LOAD of a Script, WATCH mode) too."""
        check_command(args, self.racelab_owned)
        return super().immediate_execute_command(*args, **options)


class GuardedRedis(_Guarded, redis.Redis):
    """A redis-py client that refuses destructive commands on a server the suite does not own."""

    def __init__(self, *args, racelab_owned: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.racelab_owned = racelab_owned

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> GuardedPipeline:
        """Return a pipeline that carries the same guard."""
        pipe = GuardedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.racelab_owned = self.racelab_owned
        return pipe


class GuardedClusterPipeline(_Guarded, redis.cluster.ClusterPipeline):
    """A cluster pipeline with the same guard."""


class GuardedRedisCluster(_Guarded, redis.cluster.RedisCluster):
    """A redis-py cluster client that refuses destructive commands on a cluster the suite does not own."""

    def __init__(self, *args, racelab_owned: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.racelab_owned = racelab_owned

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        """Return a cluster pipeline that carries the same guard."""
        pipe = super().pipeline(transaction=transaction, shard_hint=shard_hint)
        pipe.__class__ = GuardedClusterPipeline
        pipe.racelab_owned = self.racelab_owned
        return pipe
