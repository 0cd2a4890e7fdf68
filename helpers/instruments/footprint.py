"""Which keys a round trip reads and writes, so the explorer knows which steps commute.

A step's *footprint* is the keys it reads, the keys it writes, or "everything" when its keys
cannot be known. Two steps of different actors are *independent* when neither writes a key the
other reads or writes: running them in either order leaves the same state and the same replies,
so schedules that differ only in their order are equivalent (one Mazurkiewicz trace).

The keys come from the server's own command table (``COMMAND``, read once per explorer run, the
table redis-py's cluster client routes by): the first/last/step key positions of each command,
``COMMAND GETKEYS`` for commands whose keys move (cached by arguments; a server that cannot
answer makes the command conflict with everything), and the declared KEYS of ``EVAL``,
``EVALSHA``, ``FCALL`` and their ``_RO`` forms. A command flagged ``write`` writes its keys;
any other reads them; a script or Function writes its KEYS unless called as ``_RO``. A command
without keys touches nothing when it is a connection or transaction command (``PING``, ``MULTI``,
``EXEC``); any other keyless command (``SCRIPT LOAD``, ``FLUSHALL``, ``KEYS``, ``TIME``) conflicts
with everything, and so does a command the table does not know.

The run's logical clock counts as one more key, ``CLOCK`` (``helpers.instruments.logical_time``
says who reads and who writes it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

Command = tuple[Any, ...]
_SCRIPT_CALLS = {"EVAL": True, "EVALSHA": True, "FCALL": True}  # name: writes its KEYS
_SCRIPT_CALLS |= {"EVAL_RO": False, "EVALSHA_RO": False, "FCALL_RO": False}
_HARMLESS_CATEGORIES = {"@connection", "@transaction"}


def _key(arg: Any) -> bytes:
    """Return a key argument as bytes, the form every footprint compares."""
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg)
    return str(arg).encode()


@dataclass(frozen=True)
class Footprint:
    """The keys one step reads and writes; everything=True when they cannot be known."""

    reads: frozenset[bytes] = frozenset()
    writes: frozenset[bytes] = frozenset()
    everything: bool = False

    def conflicts(self, other: Footprint) -> bool:
        """Return True unless the two steps commute (neither writes what the other touches)."""
        if self.everything or other.everything:
            return True
        writes, theirs = self.writes, other.writes  # (isdisjoint builds no set: asked ~10^6 times)
        return not (
            writes.isdisjoint(other.reads)
            and writes.isdisjoint(theirs)
            and theirs.isdisjoint(self.reads)
        )

    def __or__(self, other: Footprint) -> Footprint:
        return Footprint(
            self.reads | other.reads,
            self.writes | other.writes,
            self.everything or other.everything,
        )

    def describe(self) -> str:
        """Return e.g. 'reads k1; writes k2', or 'everything'."""
        if self.everything:
            return "everything"
        parts = [
            f"{what} {', '.join(sorted(k.decode(errors='replace') for k in keys))}"
            for what, keys in (("reads", self.reads - self.writes), ("writes", self.writes))
            if keys
        ]
        return "; ".join(parts) or "no key"


NOTHING = Footprint()
EVERYTHING = Footprint(everything=True)
# The run's logical clock, as if it were a key: every step of a client may read it (its code
# after the reply reads the time, or not: known only once it ran, so every step counts as a
# read), and a step that brings the run's clock up to an actor's sleep, or a clock step that
# moves it, writes it (``helpers.instruments.logical_time``). No key of Redis has this name.
CLOCK = b"(the run's clock)"
READS_CLOCK = Footprint(frozenset({CLOCK}))
MOVES_CLOCK = Footprint(frozenset({CLOCK}), frozenset({CLOCK}))


def touching(keys: Iterable[Any]) -> Footprint:
    """Return the footprint of a step that reads and writes keys (a clock step on its key)."""
    keyset = frozenset(_key(k) for k in keys)
    return Footprint(keyset, keyset)


class Transactions:
    """One actor's open WATCH and MULTI, across round trips: where a transaction's keys count.

    A command queued after MULTI touches nothing when it is sent: it runs at EXEC, so EXEC's step
    carries its footprint. EXEC also reads every key WATCHed since the last EXEC, DISCARD or
    UNWATCH (another actor's write to one of them aborts it). Kept per actor, not per connection:
    an actor with two connections gets more conflicts, never fewer.
    """

    def __init__(self) -> None:
        self.watched: frozenset[bytes] = frozenset()
        self.queued: Footprint | None = None  # None: no MULTI open

    def footprint(self, table: KeyTable, commands: Sequence[Command]) -> Footprint:
        """Return the footprint of one round trip, updating the open WATCH and MULTI."""
        total = NOTHING
        for command in commands:
            name = _name(command)
            if name == "MULTI":
                self.queued = NOTHING
            elif name == "EXEC":
                total = total | (self.queued or NOTHING) | Footprint(self.watched)
                self.queued, self.watched = None, frozenset()
            elif name == "DISCARD":
                self.queued, self.watched = None, frozenset()
            elif name == "UNWATCH":
                self.watched = frozenset()
            elif self.queued is not None:
                self.queued = self.queued | table.of_command(command)
            else:
                found = table.of_command(command)
                if name == "WATCH":
                    self.watched |= found.reads
                total = total | found
        return total


def _name(command: Command) -> str:
    """Return a command's name in capitals ("SCRIPT LOAD" -> "SCRIPT")."""
    if not command:
        return ""
    first = command[0] if isinstance(command[0], str) else _key(command[0]).decode("latin-1")
    return first.split(" ", 1)[0].upper()


class KeyTable:
    """The server's command table (``COMMAND``), turned into footprints of round trips.

    fakeredis's table gives every variadic command a fixed last key (``MGET`` 1 where Redis says
    -1, last argument). Against such a table, an argument after the named key positions of a
    command of variable arity also counts as a key when it is one of ``known`` (the explorer's
    watch and reset keys, which list every key the actors touch), so ``DEL a b`` touches both.
    """

    def __init__(self, client: Any, known: Iterable[Any] = ()) -> None:
        self.client = client
        self.known = frozenset(_key(k) for k in known)
        try:
            table = client.command()
        except redis.RedisError:
            table = {}  # no table: every command conflicts with everything (no reduction)
        self.commands = {str(name).upper(): info for name, info in table.items()}
        mget = self.commands.get("MGET")
        self.fixed_last_keys = mget is not None and mget["last_key_pos"] > 0
        self._moving: dict[Command, Footprint] = {}
        self._plans: dict[str, Footprint | tuple[str, Any]] = {}

    def footprint(self, commands: Sequence[Command]) -> Footprint:
        """Return the union of the footprints of the commands of one round trip."""
        total = NOTHING
        for command in commands:
            total = total | self.of_command(command)
            if total.everything:
                return total
        return total

    def of_command(self, args: Command) -> Footprint:
        """Return the footprint of one command given as its arguments."""
        if not args:
            return NOTHING
        name = args[0] if isinstance(args[0], str) else _key(args[0]).decode("latin-1")
        if " " in name:  # redis-py sends e.g. "SCRIPT LOAD" as one argument
            args = (*name.split(), *args[1:])
            name = args[0]
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = self._plan(name.upper())
        if isinstance(plan, Footprint):
            return plan
        kind, info = plan
        if kind == "script":
            return self._script(args, writes=info)
        if kind == "movable":
            return self._movable(args, info)
        positions = self._positions(info, args)
        if positions is None:
            return EVERYTHING
        if not positions:
            harmless = _HARMLESS_CATEGORIES & set(info.get("acl_categories", ()))
            return NOTHING if harmless else EVERYTHING
        keys = frozenset(_key(args[p]) for p in positions if p < len(args))
        if self.fixed_last_keys and info["arity"] < 0:
            rest = (_key(a) for a in args[positions[-1] + 1 :] if isinstance(a, (str, bytes)))
            keys |= frozenset(k for k in rest if k in self.known)
        return Footprint(keys, keys) if "write" in info["flags"] else Footprint(keys)

    def _plan(self, name: str) -> Footprint | tuple[str, Any]:
        """Return how to find a command's keys: a fixed footprint, or (kind, what it needs)."""
        if name in _SCRIPT_CALLS:
            return ("script", _SCRIPT_CALLS[name])
        info = self.commands.get(name)
        if info is None:
            return EVERYTHING
        return ("movable", info) if "movablekeys" in info["flags"] else ("positions", info)

    def _positions(self, info: dict[str, Any], args: Command) -> list[int] | None:
        """Return the key positions of a command (a subcommand's, if it has them); None: unknown."""
        first, last, step = info["first_key_pos"], info["last_key_pos"], info["step_count"]
        if first == 0 and info.get("subcommands") and len(args) > 1:
            wanted = f"{info['name']}|{_key(args[1]).decode('latin-1')}".lower()
            for sub in info["subcommands"]:
                sub_name = _key(sub[0]).decode("latin-1").lower()
                if sub_name == wanted:
                    first, last, step = int(sub[3]), int(sub[4]), int(sub[5])
                    break
            else:
                return None
        if first <= 0:
            return []
        if last < 0:
            last = len(args) + last
        return list(range(first, last + 1, max(step, 1)))

    def _script(self, args: Command, writes: bool) -> Footprint:
        """Return the footprint of EVAL/EVALSHA/FCALL (and _RO): its declared KEYS."""
        try:
            numkeys = int(args[2])
        except (IndexError, ValueError):
            return EVERYTHING
        keys = frozenset(_key(k) for k in args[3 : 3 + numkeys])
        return Footprint(keys, keys if writes else frozenset())

    def _movable(self, args: Command, info: dict[str, Any]) -> Footprint:
        """Return the footprint of a command whose keys move, from COMMAND GETKEYS (cached)."""
        if args in self._moving:
            return self._moving[args]
        try:
            keys = frozenset(_key(k) for k in self.client.execute_command("COMMAND GETKEYS", *args))
            found = Footprint(keys, keys) if "write" in info["flags"] else Footprint(keys)
        except redis.RedisError:  # the server cannot say (fakeredis has no GETKEYS)
            found = EVERYTHING
        self._moving[args] = found
        return found
