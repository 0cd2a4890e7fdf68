"""Prefix sharing: a replay answers the steps it shares with the last one from that replay's record.

A stateless search (``helpers.instruments.explore``) replays every schedule from the start, and
each replay repeats a prefix an earlier one already ran: in 2 actors of 8 round trips, 205,920
steps are replayed for 48,618 distinct prefixes. With ``PrefixSharing`` (embedded backend only)
the actors' code still runs through the shared prefix, through redis-py exactly as a library's
does, but its round trips are not written: each reply comes from the record of the replay that
ran that prefix (``LabConnection`` asks its mode's ``replies``). Where the replay leaves the
record, the embedded server's keyspace is put back as it was at that point (a copy kept when
that replay passed it), and the rest runs live, recorded for the next replay.

A point can be shared only when nothing but the keyspace carries the past: every actor is
parked between round trips with no WATCH or MULTI open on its connection, none waits on a
blocking call or a thread, no actor started a thread, and no round trip so far changed a
connection's or the server's own state (``SELECT``, ``CLIENT``, ``CONFIG``, ``SCRIPT``...).
Before the first point that is not, the replay shares its prefix; from it on, it runs live.
A race with clocks or fault steps, several servers, a real server, or an embedded server
holding more than ``MAX_KEYS`` keys or ``MAX_MEMBERS`` members runs every replay live
(``why_not`` says why).

A replayed round trip must send what the record says it sent. An actor that sends another
value on each replay (a lock's random token) would be answered with the last replay's values,
so the replay is discarded and run again live, and so is every replay of the search after it
(``diverged``; ``explore._search``).
"""

from __future__ import annotations

import copy
import heapq
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from fakeredis._core._database import Item  # what the embedded keyspace holds (see _item)
from fakeredis.model import Hash  # a hash's value (see _value_key)

from helpers.backend.modes import Command, command_name
from helpers.instruments.dpor import NotDeterministic

MAX_KEYS = 256  # an embedded server holding more keys is not copied at every step: live replays
MAX_MEMBERS = 4096  # ... nor one whose hashes, lists, sets and sorted sets hold more members
# Round trips that change what the keyspace does not hold: a connection's state, or the server's.
STATEFUL = frozenset(
    (
        "SELECT", "CLIENT", "HELLO", "AUTH", "RESET", "READONLY", "READWRITE", "ASKING",
        "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE",
        "MONITOR", "CONFIG", "SCRIPT", "FUNCTION", "DEBUG", "ACL", "SWAPDB", "QUIT",
        "REPLICAOF", "SLAVEOF", "FAILOVER", "SHUTDOWN", "SAVE", "BGSAVE", "BGREWRITEAOF",
    )
)  # fmt: skip


def why_not(lab: Any, actors: dict[str, Any], faults: int, servers: Sequence[str]) -> str:
    """Return why a search of these actors must replay live, or '' when it may share prefixes."""
    from helpers.instruments.schedule import Clock  # (schedule imports the search's parts)

    if lab.kind != "embedded":
        return f"a {lab.kind} server's state cannot be put back in process"
    if any(isinstance(fn, Clock) for fn in actors.values()):
        return "a clock step acts on the server outside the actors' round trips"
    if faults:
        return "fault steps act on the server outside the actors' round trips"
    if servers:
        return "the actors dial further servers"
    items = [item for db in lab.fake_server.dbs.values() for item in db._dict.values()]
    if len(items) > MAX_KEYS:
        return (
            f"the embedded server holds {len(items):,} keys (copied at every step above {MAX_KEYS})"
        )
    members = sum(_members(item.value) for item in items)
    if members > MAX_MEMBERS:
        return f"its keys hold {members:,} members (copied at every step above {MAX_MEMBERS:,})"
    return ""


def _members(value: Any) -> int:
    """Return how many members a value copies (a string is shared, never copied: none)."""
    if isinstance(value, (bytes, int, float)):
        return 0
    try:
        return len(value)
    except TypeError:
        return 1


class _Step:
    """One step of the last replay: what it sent, what it heard, the keyspace before it."""

    __slots__ = ("sent", "heard", "before", "text")

    def __init__(self, before: dict[int, dict[bytes, Any]] | None) -> None:
        self.sent: list[list[Command]] = []
        self.heard: list[tuple[bool, Any]] = []  # (raised, reply or ResponseError), read order
        self.before = before  # the keyspace before this step, when it could be shared
        self.text = ""  # (sent, heard) as text (``_told``), made once asked (PrefixSharing.state)


@dataclass
class SharingStats:
    """How a search's replays ran: steps answered from the record and run live, or why live."""

    shared_steps: int = 0
    live_steps: int = 0
    off: str = ""  # why every replay ran live ('' when prefixes were shared)
    walked: int = 0  # replays that ended in the graph of states met before (states.py)


class PrefixSharing:
    """The record of the last replay, and the replay in progress (see the module docstring).

    It counts the steps of every replay it sees into stats, kept or thrown away.
    """

    def __init__(self, server: Any, stats: SharingStats) -> None:
        self.server = server  # the embedded FakeServer
        self.stats = stats
        self.steps: list[_Step] = []
        self.canned_until = 0  # this replay's steps before this one are answered from the record
        self._step: _Step | None = None
        self._index = 0
        self._replies: deque[tuple[bool, Any]] = deque()
        self._sent = 0  # round trips of a replayed step checked so far
        self._tainted = False  # this replay changed more than the keyspace: no point after shares
        self.diverged = False  # a replayed round trip sent other commands than the record's

    def begin(self, shared: int) -> None:
        """Start a replay whose first shared steps are those of the last replay."""
        until = min(shared, len(self.steps) - 1)  # the keyspace before step shared is kept too
        while until > 0 and self.steps[until].before is None:
            until -= 1
        self.canned_until = max(until, 0)
        self._tainted, self._index, self._step, self._sent = False, 0, None, 0

    @property
    def restores(self) -> bool:
        """Return True when this replay starts from the record: the keyspace the server holds
        now is replaced, at step ``canned_until``, by the copy kept there (set by ``begin``)."""
        return self.canned_until > 0

    def before_step(self, index: int, point: Callable[[], tuple[bool, bool]]) -> None:
        """Called before step index runs; point() is ``ScheduleRun.share_point`` (clean: nothing
        but the keyspace carries the past now; spoilt: nothing will for the rest of the replay),
        asked of a live step only (a replayed one comes before a point kept clean)."""
        self._index, self._sent = index, 0
        if index < self.canned_until:
            self._step = self.steps[index]
            self._replies = deque(self._step.heard)
            self.stats.shared_steps += 1
            return
        clean, spoilt = point()
        self._tainted = self._tainted or spoilt
        before = None
        if index == self.canned_until and index > 0:
            before = self.steps[index].before
            assert before is not None  # begin() stops only where one was kept
            _restore(self.server, before)
        elif clean and not self._tainted and index > 0:
            before = _copy(self.server)
        del self.steps[index:]
        self._step = _Step(before)
        self.steps.append(self._step)
        self.stats.live_steps += 1

    # --- what a gated connection asks (``Mode.replies``) ---------------------------------------

    def replayed(self, commands: list[Command]) -> bool:
        """Return True when this round trip is answered from the record (it is not written)."""
        step = self._step
        if step is None:  # not inside a step (a reset, a handshake): live, unrecorded
            return False
        if self._index >= self.canned_until:
            step.sent.append(list(commands))
            if any(command_name(c) in STATEFUL for c in commands):
                self._tainted = True
            return False
        expected = step.sent[self._sent] if self._sent < len(step.sent) else None
        self._sent += 1
        if self.diverged or expected != list(commands):
            # Another value than last time (a random token): the record does not answer it.
            # Sent live to a server in the wrong state, it starts a replay the search discards
            # (the actors stop at their next step) and runs again live (``explore._search``).
            self.diverged = True
            return False
        return True

    def next_reply(self) -> tuple[bool, Any]:
        """Return the next recorded reply of a replayed step: (raised, reply or a fresh error)."""
        if not self._replies:  # more than last time: only after a divergence, so any will do
            self.diverged = True
            return True, NotDeterministic("the replay left its record")
        raised, reply = self._replies.popleft()
        return raised, _fresh(reply)

    def heard(self, raised: bool, reply: Any) -> None:
        """Record a live reply (or the ResponseError it carried) of the step in progress."""
        if self._step is not None and self._index >= self.canned_until:
            self._step.heard.append((raised, _fresh(reply)))

    def broken(self) -> None:
        """A live round trip failed outside the protocol (its connection dropped): no point after
        this one is shared."""
        self._tainted = True

    def end(self) -> None:
        """End the replay: no step is in progress."""
        self._step = None

    def state(self, run: Any, times: Sequence[int]) -> Hashable | None:
        """Return the state after run's steps so far (run.names), or None when it cannot be told.

        The state is what decides everything after this point: the keyspace (``keyspace_key``),
        what each actor has seen (the round trips it sent, their replies, and the run's clock
        during each of its steps: times[i] after step i, what an actor's code read then; its code
        is deterministic, so these decide where it stands and what it holds), and the run's
        clocks and each actor's standing (``ScheduleRun.standing``). Two replays in the same
        state go on alike (``helpers.instruments.states``). None where more than that could
        carry the past: a point that is not clean (WATCH or MULTI open, a wait, a thread, a
        connection's or the server's own state changed), sub-actors, or a value kept in a type
        ``keyspace_key`` does not know.
        """
        names = run.names
        if self._tainted or self.diverged or not len(self.steps) == len(names) == len(times):
            return None
        clean, spoilt = run.share_point()
        if not clean or spoilt:
            return None
        standing = run.standing()
        keyspace = keyspace_key(self.server)
        if standing is None or keyspace is None:
            return None
        seen: dict[str, list[tuple[str, int]]] = {}
        for name, step, time in zip(names, self.steps, times):
            if not step.text:
                step.text = repr(
                    (step.sent, [(raised, _told(reply)) for raised, reply in step.heard])
                )
            seen.setdefault(name, []).append((step.text, time))
        return keyspace, standing, tuple(sorted((n, tuple(t)) for n, t in seen.items()))


def keyspace_key(server: Any) -> Hashable | None:
    """Return the embedded keyspace as a value equal for equal keyspaces, or None when a key holds
    a type this does not know (its hidden parts could differ where its repr does not)."""
    keys = []
    for n, db in server.dbs.items():
        for k, item in db._dict.items():
            value = _value_key(item.value)
            if value is None or type(item) is not Item:
                return None
            keys.append((n, k, value, item.expireat))
    keys.sort(key=lambda entry: (entry[0], entry[1]))
    return tuple(keys)


def _value_key(value: Any) -> Hashable | None:
    """Return a fakeredis value as a hashable equal for equal values (None: a type not known)."""
    kind = type(value)
    if kind is bytes or kind is int or kind is float:
        return kind.__name__, value
    if kind is list:
        return "list", repr(value)
    if kind is set:
        return "set", repr(sorted(value, key=repr))
    if kind is Hash and not value._expired_fields:
        return "hash", repr(sorted(value._values.items())), repr(sorted(value._expirations.items()))
    return None


def _told(reply: Any) -> Any:
    """Return a reply as a value whose repr tells it from every other reply.

    redis-py's errors print their kind only (``server:ResponseError``), not their message, so
    WRONGTYPE and "value is not an integer" would look alike: an error is told by its class and
    its arguments, also inside an array (a transaction's replies).
    """
    if isinstance(reply, BaseException):
        return "raised", type(reply).__module__, type(reply).__qualname__, reply.args
    if isinstance(reply, list):
        return [_told(r) for r in reply]
    if isinstance(reply, tuple):
        return tuple(_told(r) for r in reply)
    if isinstance(reply, dict):
        return [(_told(k), _told(v)) for k, v in reply.items()]
    return reply


def _fresh(value: Any) -> Any:
    """Return a copy of a reply that no caller's change to it can reach the record through."""
    if isinstance(value, (bytes, str, int, float)) or value is None:
        return value
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, BaseException):
        return copy.copy(value)  # raised again: a new traceback, not one that grows
    return copy.deepcopy(value)


def _copy(server: Any) -> dict[int, dict[bytes, Any]]:
    """Return a copy of the embedded server's keyspace: every database's items and expiries."""
    return {n: {k: _item(v) for k, v in db._dict.items()} for n, db in server.dbs.items()}


def _item(item: Any) -> Any:
    value = item.value
    if not isinstance(value, (bytes, int, float)):
        value = copy.deepcopy(value)
    if type(item) is not Item:  # (fakeredis keeps Items: a value and its expiry, no more)
        clone = copy.copy(item)
        clone.value = value
        return clone
    clone = Item(value)
    clone.expireat = item.expireat
    return clone


def _restore(server: Any, keyspace: dict[int, dict[bytes, Any]]) -> None:
    """Put the embedded server's keyspace back to a copy made by ``_copy`` (which stays intact)."""
    for n in list(server.dbs):
        if n not in keyspace:
            server.dbs[n]._dict.clear()
            server.dbs[n]._expiry_heap.clear()
    for n, items in keyspace.items():
        db = server.dbs[n]
        db._dict = {k: _item(v) for k, v in items.items()}
        db._expiry_heap = [(v.expireat, k) for k, v in db._dict.items() if v.expireat is not None]
        heapq.heapify(db._expiry_heap)
