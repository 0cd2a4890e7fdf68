"""Differential tests: the embedded backend (fakeredis + helpers.backend.fake84) against a real Redis >= 8.4.

Hypothesis generates short sequences of commands over three keys -- SET with every option
combination (valid and invalid: conflicting, repeated, dangling, odd spelling, NUL-suffixed),
GET, DEL, DELEX with each condition, DIGEST, EXPIRE/PEXPIRE with their flags, TYPE, HSET (to make
wrong-type keys), INCR, and the suite's other commands (HSETNX, HGETALL, HINCRBY, INCRBY, SETNX,
GETDEL, PERSIST, EXISTS, ZADD), some grouped in transactions ([WATCH], [a write from a second
connection], MULTI, commands, EXEC or DISCARD) -- and runs each step on both backends, comparing

* the replies, every one of them: each command is followed by ``ECHO <sentinel>`` and every reply
  before the sentinel is collected, so a server that answers twice is caught, not just desynced;
* the keyspace after the step: TYPE, the value (GET / HGETALL / ZRANGE) and the TTL of every key.
  (Inside MULTI each command is read as exactly one reply, QUEUED or an error; an error inside
  EXEC's array compares as the reply of its own command would, messages by class only.)

Normalisation, and nothing else:

* errors compare by class: the redis-py exception type plus the error code (``ERR``, ``WRONGTYPE``,
  ...; redis-py strips a leading ``ERR ``, so a message starting with another known code keeps it).
  Messages must also match word for word for SET, DELEX, DIGEST, EVAL and FCALL (the 8.4 surface
  the suite teaches, and the suite's own scripts). Two kinds of difference are accepted:
  the registered ones in ``REGISTERED_ERROR_DIFFERENCES`` (fakeredis words EXPIRE's option errors
  differently, and checks the key's type before a bad number in HINCRBY/ZADD; each pinned in
  tests/test_divergences.py), counted per divergence id; and, for the other commands only, a new
  wording of the same error class, which is listed as NOT YET REGISTERED in the terminal summary. An error raised
  by ``redis.call`` inside a script carries `` script: <sha|function>, on @user_script:<line>.``
  on real Redis (fakeredis adds it for FCALL, not for EVAL); that suffix is removed from both
  before comparing (a registered divergence);
* a TTL compares exactly when it is -1/-2, else to within ``TTL_TOLERANCE_MS`` (the two servers
  set it a few milliseconds apart), plus 2**-50 of its size (fakeredis stores expiry times as float
  seconds, so ``PXAT 9223372036854775807`` comes back about 2 s off: a registered divergence).
  Generated expiries are either >= 100 s away or already in the past, so no key expires during a
  sequence on one backend and not on the other;
* the real server's defect (``SET k v IFDEQ|IFDNE <digest not 16 bytes> GET`` on an existing string
  key answers twice: the old value, then the error) is accepted only in exactly that shape, where
  the embedded backend answers the error alone, and counted (docs/divergences.md).

Each generated sequence uses fresh keys under this run's namespace, deleted afterwards.
``RACELAB_DIFF_EXAMPLES`` (default 2000) sets the number of sequences; the count actually run is
asserted and written to the terminal summary (CI log). Every ordered choice of one to three SET
option groups is also run exhaustively from three starting states. The Lua part runs every
lua/*.lua script with generated arguments the same way (``LUA_CASES``: key names and argument
strategies by file stem; a stem without an entry is skipped with a visible reason). Function
libraries (``#!lua name=...``) are loaded with FUNCTION LOAD REPLACE and called with FCALL/FCALL_RO,
on a private server this module starts, so nothing shared is touched.
"""

from __future__ import annotations

import itertools
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import xxhash
from fakeredis._helpers import SimpleError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import Lab, connect
from helpers.backend.fake84 import parse_set_options
from helpers.backend.scripts import LUA_DIR, lua_source
from helpers.backend.server import RedisServer, ServerNotFound, find_binary

MIN_SEQUENCES = 2000
N_SEQUENCES = int(os.environ.get("RACELAB_DIFF_EXAMPLES", str(MIN_SEQUENCES)))
LUA_SEQUENCES = int(os.environ.get("RACELAB_DIFF_LUA_EXAMPLES", "100"))
TTL_TOLERANCE_MS = 1500
KEY_SLOTS = 3

# Error codes Redis puts first in an error line (redis-py strips a leading "ERR ", keeps the others).
ERROR_CODES = frozenset(
    {
        "WRONGTYPE",
        "NOSCRIPT",
        "BUSY",
        "BUSYKEY",
        "EXECABORT",
        "NOTBUSY",
        "UNKILLABLE",
        "CROSSSLOT",
        "OOM",
        "READONLY",
        "NOPERM",
        "NOAUTH",
        "LOADING",
        "NOREPLICAS",
    }
)
# Commands whose error messages must match word for word (the Redis 8.4 surface the suite teaches);
# for the others only the error class must match, and message differences are counted and reported.
EXACT_MESSAGE_COMMANDS = frozenset({b"SET", b"DELEX", b"DIGEST", b"EVAL", b"FCALL", b"FCALL_RO"})


# ---------------------------------------------------------------------------------------------
# Running one command on one backend, and reading its keyspace
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Err:
    """An error reply: the redis-py exception class and its message."""

    kind: str
    message: str

    @property
    def error_class(self) -> tuple[str, str]:
        """Return (exception class, error code), e.g. ('ResponseError', 'WRONGTYPE') or (..., 'ERR')."""
        word = self.message.split(" ", 1)[0]
        return self.kind, word if word in ERROR_CODES else "ERR"


def _freeze(reply: Any) -> Any:
    if isinstance(reply, list):
        return tuple(_freeze(r) for r in reply)
    if isinstance(reply, redis.ResponseError):  # an error inside an array (EXEC)
        return Err(type(reply).__name__, str(reply))
    return reply


@dataclass
class Side:
    """One backend: a dedicated raw connection (no reply callbacks, no decoding)."""

    name: str
    lab: Lab
    conn: Any = None
    sentinel: bytes = field(
        default_factory=lambda: b"racelab-sentinel-" + uuid.uuid4().hex.encode()
    )

    def __post_init__(self) -> None:
        client = self.lab.client(decode_responses=False)
        self.conn = client.connection_pool.get_connection()

    def _read(self) -> Any:
        try:
            return _freeze(self.conn.read_response())
        except redis.ResponseError as exc:
            return Err(type(exc).__name__, str(exc))

    def exchange(self, *args: Any, sentinel: bool = True) -> list[Any]:
        """Return every reply the server sends to one command (normally exactly one).

        Inside MULTI the sentinel would only be queued, so there (sentinel=False) exactly one reply is read.
        """
        self.conn.send_command(*args)
        if not sentinel:
            return [self._read()]
        self.conn.send_command("ECHO", self.sentinel)
        replies = []
        for _ in range(5):
            reply = self._read()
            if reply == self.sentinel:
                return replies
            replies.append(reply)
        raise AssertionError(f"{self.name}: no sentinel after 5 replies to {args!r}: {replies!r}")

    def exchange_many(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Return every reply to a batch of commands sent in one round trip (sentinel-terminated)."""
        for cmd in commands:
            self.conn.send_command(*cmd)
        self.conn.send_command("ECHO", self.sentinel)
        replies = []
        for _ in range(len(commands) + 5):
            reply = self._read()
            if reply == self.sentinel:
                return replies
            replies.append(reply)
        raise AssertionError(
            f"{self.name}: no sentinel after the replies to {commands!r}: {replies!r}"
        )

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Return one reply per command, sent in one round trip."""
        for cmd in commands:
            self.conn.send_command(*cmd)
        return [self._read() for _ in commands]

    def snapshot(self, keys: list[bytes]) -> list[tuple[Any, Any, Any]]:
        """Return (type, value, pttl) for each key."""
        head = self.pipeline([c for k in keys for c in (("TYPE", k), ("PTTL", k))])
        types, ttls = head[0::2], head[1::2]
        reads = [
            ("GET", k)
            if t == b"string"
            else ("HGETALL", k)
            if t == b"hash"
            else ("ZRANGE", k, 0, -1, "WITHSCORES")
            if t == b"zset"
            else ("EXISTS", k)
            for k, t in zip(keys, types)
        ]
        values = self.pipeline(reads)
        values = [_hash_items(v) if t == b"hash" else v for t, v in zip(types, values)]
        return list(zip(types, values, ttls))


def _hash_items(reply: Any) -> tuple[tuple[bytes, bytes], ...]:
    # Read below redis-py's callbacks, HGETALL may come as a dict or as a flat array: accept both.
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[0::2], reply[1::2])
    return tuple(sorted(pairs))


# Real Redis appends where a script's redis.call error was raised; fakeredis only under FCALL (registered).
SCRIPT_ERROR_WHERE = re.compile(r" script: \S+, on @user_(script|function):\d+\.$")


def strip_script_location(reply: Any) -> Any:
    """Return an error reply without real Redis' ' script: <sha>, on @user_script:<line>.' suffix."""
    if isinstance(reply, Err):
        return Err(reply.kind, SCRIPT_ERROR_WHERE.sub("", reply.message))
    return reply


# Error replies that differ in a registered way (helpers.tools.divergences id): (commands, real, embedded).
REGISTERED_ERROR_DIFFERENCES: list[tuple[frozenset[bytes], str, str, str]] = [
    (
        frozenset({b"EXPIRE", b"PEXPIRE"}),
        r"GT and LT options at the same time are not compatible",
        r"NX and XX, GT or LT options at the same time are not compatible",
        "expire_option_error_wording",
    ),
    (
        frozenset({b"EXPIRE", b"PEXPIRE"}),
        r"Unsupported option .*|NX and XX, GT or LT .*|GT and LT .*",
        r"value is not an integer or out of range",
        "expire_option_error_wording",
    ),
    (
        frozenset({b"HINCRBY"}),
        r"value is not an integer or out of range",
        r"WRONGTYPE .*",
        "argument_checked_before_type",
    ),
    (
        frozenset({b"ZADD"}),
        r"value is not a valid float",
        r"WRONGTYPE .*",
        "argument_checked_before_type",
    ),
]


def registered_difference(command: bytes, real: Err, fake: Err) -> str | None:
    """Return the divergence id if this pair of error replies is a registered difference."""
    for commands, real_pattern, fake_pattern, divergence_id in REGISTERED_ERROR_DIFFERENCES:
        if (
            command in commands
            and re.fullmatch(real_pattern, real.message)
            and re.fullmatch(fake_pattern, fake.message)
        ):
            return divergence_id
    return None


def same_replies(
    command: bytes,
    real: list[Any],
    fake: list[Any],
    stats: Stats,
    queued: list[bytes] | None = None,
    lenient: bool = False,
) -> bool:
    """Return whether two reply lists agree (error messages: see EXACT_MESSAGE_COMMANDS).

    For EXEC, queued names the commands whose replies its array holds; inside it (lenient) an
    error compares by class, or as a registered difference of its own command.
    """
    command = command.upper()
    if len(real) != len(fake):
        return False
    if command in (b"EVAL", b"FCALL", b"FCALL_RO"):
        real = [strip_script_location(r) for r in real]
        fake = [strip_script_location(f) for f in fake]  # fakeredis adds it for FCALL, not for EVAL
    for r, f in zip(real, fake):
        if isinstance(r, Err) and isinstance(f, Err) and r != f:
            divergence_id = registered_difference(command, r, f)
            if divergence_id is not None:
                stats.registered[divergence_id] += 1
            elif r.error_class != f.error_class or (
                command in EXACT_MESSAGE_COMMANDS and not lenient
            ):
                return False
            else:
                stats.message_differences[(command.decode(), r.message, f.message)] += 1
        elif (
            isinstance(r, tuple)
            and isinstance(f, tuple)
            and command == b"EXEC"
            and queued is not None
        ):
            if len(r) != len(f) or not all(
                same_replies(q, [ri], [fi], stats, lenient=True) for q, ri, fi in zip(queued, r, f)
            ):
                return False
        elif r != f:
            return False
    return True


def same_ttl(real: int, fake: int) -> bool:
    """Return whether two PTTL replies agree: -1/-2 exactly, else to within the tolerance."""
    if real < 0 or fake < 0:
        return real == fake
    # fakeredis keeps an expiry as float seconds: near 2**63 ms it is off by a few seconds.
    return abs(real - fake) <= TTL_TOLERANCE_MS + abs(real) * 2.0**-50


def same_keyspace(real: list[tuple[Any, Any, Any]], fake: list[tuple[Any, Any, Any]]) -> bool:
    """Return whether two snapshots agree (TTLs to within TTL_TOLERANCE_MS)."""
    for (rt, rv, rttl), (ft, fv, fttl) in zip(real, fake, strict=True):
        if rt != ft or rv != fv or not same_ttl(rttl, fttl):
            return False
    return True


def is_bad_digest_get(args: tuple[Any, ...]) -> bool:
    """Return whether args is SET ... IFDEQ|IFDNE <not 16 bytes> ... GET (the real server's double reply)."""
    if len(args) < 3 or bytes(args[0]).upper() != b"SET":
        return False
    try:
        flags, _, condition = parse_set_options(tuple(args[3:]))
    except SimpleError:  # a syntax error: not that form
        return False
    return (
        b"get" in flags
        and condition is not None
        and condition[0] in (b"ifdeq", b"ifdne")
        and len(condition[1]) != 16
    )


@dataclass
class Stats:
    """What the differential runs did."""

    sequences: int = 0
    commands: int = 0
    errors_compared: int = 0
    double_replies: int = 0
    message_differences: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    registered: Counter[str] = field(default_factory=Counter)
    transactions: int = 0
    transactions_aborted: int = 0


@dataclass
class Pair:
    """The two backends under comparison and a per-example key factory."""

    real: Side
    fake: Side
    prefix: str
    stats: Stats = field(default_factory=Stats)
    counter: int = 0
    real_other: Side | None = None  # a second connection per backend (WATCH demos)
    fake_other: Side | None = None

    def __post_init__(self) -> None:
        self.real_other = Side("real-2", self.real.lab)
        self.fake_other = Side("embedded-2", self.fake.lab)

    def fresh_keys(self, names: list[str], tag: bool = False) -> list[bytes]:
        """Return new keys (never used before in this run) for one example."""
        self.counter += 1
        base = f"{self.prefix}d{self.counter}:" + ("{t}:" if tag else "")
        return [(base + n).encode() for n in names]

    def run_step(self, args: tuple[Any, ...], keys: list[bytes], history: list[Any]) -> None:
        """Run one command on both backends and assert same replies and same keyspace."""
        self.compare(args, keys, history)
        self.compare_keyspace(keys, history)

    def run_transaction(self, tx: Tx, keys: list[bytes], history: list[Any]) -> None:
        """Run [WATCH], [a write from another connection], MULTI, commands, EXEC|DISCARD on both backends."""
        if tx.watch is not None:
            self.compare((b"WATCH", keys[tx.watch]), keys, history)
        if tx.intruder is not None:
            self.compare(resolve(tx.intruder, keys), keys, history, other=True)
        self.compare((b"MULTI",), keys, history, in_multi=True)
        for cmd in tx.commands:
            self.compare(resolve(cmd, keys), keys, history, in_multi=True)
        self.compare(
            (tx.end,), keys, history, in_multi=True, queued=[bytes(c[0]) for c in tx.commands]
        )
        self.stats.transactions += 1
        self.stats.transactions_aborted += history[-1][1] == [
            None
        ]  # EXEC's nil: a WATCHed key changed
        if tx.end == b"DISCARD" and tx.watch is not None:
            self.compare((b"UNWATCH",), keys, history)
        self.compare_keyspace(keys, history)

    def compare_keyspace(self, keys: list[bytes], history: list[Any]) -> None:
        """Assert both backends hold the same keys, values and TTLs."""
        real_snap, fake_snap = self.real.snapshot(keys), self.fake.snapshot(keys)
        assert same_keyspace(real_snap, fake_snap), (
            _explain(history) + f"\nkeyspace real:     {real_snap}\nkeyspace embedded: {fake_snap}"
        )

    def compare(
        self,
        args: tuple[Any, ...],
        keys: list[bytes],
        history: list[Any],
        other: bool = False,
        in_multi: bool = False,
        queued: list[bytes] | None = None,
    ) -> None:
        """Run one command on both backends (on their second connection if other) and compare replies."""
        real, fake = (self.real_other, self.fake_other) if other else (self.real, self.fake)
        before = self.fake.snapshot(keys) if is_bad_digest_get(args) else []
        real_replies = real.exchange(*args, sentinel=not in_multi)
        fake_replies = fake.exchange(*args, sentinel=not in_multi)
        self.stats.commands += 1
        history.append((args, real_replies, fake_replies))
        if len(real_replies) == 2 and is_bad_digest_get(args) and isinstance(real_replies[1], Err):
            # The real server's defect: the GET reply, then the error. Accept exactly that shape.
            key_index = keys.index(args[1]) if args[1] in keys else None
            assert key_index is not None and before[key_index][0] == b"string", history
            assert real_replies[0] == before[key_index][1], history
            real_replies = real_replies[1:]
            self.stats.double_replies += 1
        assert same_replies(bytes(args[0]), real_replies, fake_replies, self.stats, queued), (
            _explain(history)
        )
        self.stats.errors_compared += isinstance(real_replies[0], Err)

    def reset(self) -> None:
        """Leave any MULTI and WATCH on every connection (replies ignored: there may be none to leave)."""
        for side in (self.real, self.fake, self.real_other, self.fake_other):
            side.exchange("DISCARD")
            side.exchange("UNWATCH")

    def cleanup(self, keys: list[bytes]) -> None:
        """Delete one example's keys on both backends."""
        for side in (self.real, self.fake):
            side.exchange("DEL", *keys)


def _explain(history: list[Any]) -> str:
    lines = ["sequence (args -> real | embedded):"]
    for args, real, fake in history:
        lines.append(f"  {' '.join(repr(a) for a in args)}\n      -> {real!r} | {fake!r}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def pair(real_url: str) -> Iterator[Pair]:
    """The embedded backend and the session's real server, with this module's namespace."""
    real_lab = connect("differential", url=real_url, owned=False)
    fake_lab = connect("differential", backend="embedded", run_id=real_lab.ns.run_id)
    the_pair = Pair(Side("real", real_lab), Side("embedded", fake_lab), prefix=real_lab.ns.prefix)
    try:
        yield the_pair
    finally:
        for lab in (real_lab, fake_lab):
            lab.cleanup()
            lab.close()


class SummaryLines:
    """A pytest plugin registered at run time: prints the differential figures in the terminal summary."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Write the collected lines under their own heading (so the CI log shows the counts)."""
        if self.lines:
            terminalreporter.write_sep("-", "racelab differential tests")
            for line in self.lines:
                terminalreporter.write_line(line)


def _report(request: pytest.FixtureRequest, line: str) -> None:
    manager = request.config.pluginmanager
    plugin = manager.get_plugin("racelab-differential-summary")
    if plugin is None:
        plugin = SummaryLines()
        manager.register(plugin, "racelab-differential-summary")
    plugin.lines.append(line)


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


class Slot(int):
    """A placeholder for the n-th key of an example."""

    def __repr__(self) -> str:
        return f"K{int(self)}"


VALUES = [
    b"v",
    b"w",
    b"",
    b"1",
    b"123",
    b"-1",
    b"9223372036854775807",
    b"a\x00b",
    b"NX",
    b"ifeq",
    b"0123456789abcdef",
]
values = st.one_of(st.sampled_from(VALUES), st.sampled_from(VALUES), st.binary(max_size=3))


def _digest(v: bytes) -> bytes:
    return xxhash.xxh3_64_hexdigest(v).encode()


digests = st.one_of(
    st.sampled_from(VALUES).map(_digest),
    st.sampled_from(VALUES).map(lambda v: _digest(v).upper()),
    st.text(alphabet="0123456789abcdefABCDEF", min_size=16, max_size=16).map(str.encode),
    st.binary(min_size=16, max_size=16),
    st.binary(max_size=20).filter(lambda b: len(b) != 16),
)
EX_VALUES = [
    b"100",
    b"1000",
    b"0",
    b"-1",
    b"abc",
    b"1.5",
    b"",
    b"01",
    b"9223372036854775807",
    b"9223372036854775",
    b"9223372036854776",
]
PX_VALUES = [
    b"100000",
    b"5000000",
    b"0",
    b"-5",
    b"x",
    b"9223372036854775807",
    b"9223372036854775000",
]
EXAT_VALUES = [
    b"1",
    b"1000000000",
    b"4102444800",
    b"0",
    b"-1",
    b"9223372036854775",
    b"9223372036854776",
]
PXAT_VALUES = [b"1", b"4102444800000", b"0", b"-3", b"9223372036854775807"]
slots = st.integers(0, KEY_SLOTS - 1).map(Slot)


def spelled(name: bytes) -> st.SearchStrategy[bytes]:
    """Return a strategy for an option name: mostly upper case, sometimes lower/mixed/NUL-suffixed."""
    return st.one_of(
        st.just(name),
        st.just(name),
        st.just(name),
        st.sampled_from([name.lower(), name[:1] + name[1:].lower(), name + b"\x00junk"]),
    )


def option(
    name: bytes, arg: st.SearchStrategy[bytes] | None = None
) -> st.SearchStrategy[list[bytes]]:
    """Return a strategy for one option token group: [name] or [name, arg]."""
    if arg is None:
        return spelled(name).map(lambda n: [n])
    return st.tuples(spelled(name), arg).map(list)


set_options = st.one_of(
    option(b"NX"),
    option(b"XX"),
    option(b"GET"),
    option(b"KEEPTTL"),
    option(b"EX", st.sampled_from(EX_VALUES)),
    option(b"PX", st.sampled_from(PX_VALUES)),
    option(b"EXAT", st.sampled_from(EXAT_VALUES)),
    option(b"PXAT", st.sampled_from(PXAT_VALUES)),
    option(b"IFEQ", values),
    option(b"IFNE", values),
    option(b"IFDEQ", digests),
    option(b"IFDNE", digests),
    # Dangling option names (a value-taking option at the end, or eating the next token) and junk.
    st.sampled_from([[b"IFEQ"], [b"IFDNE"], [b"EX"], [b"PXAT"], [b"FOO"], [b"NXX"], [b""]]),
)


def _flat(groups: list[list[bytes]]) -> list[bytes]:
    return [token for group in groups for token in group]


# Option lists of every length 0..4 equally often (st.lists alone favours very short lists).
set_commands = st.builds(
    lambda k, v, opts: (b"SET", k, v, *_flat(opts)),
    slots,
    values,
    st.integers(0, 4).flatmap(lambda n: st.lists(set_options, min_size=n, max_size=n)),
)
conditions = st.one_of(
    option(b"IFEQ", values),
    option(b"IFNE", values),
    option(b"IFDEQ", digests),
    option(b"IFDNE", digests),
)
expiries = st.one_of(
    option(b"EX", st.sampled_from(EX_VALUES)),
    option(b"PX", st.sampled_from(PX_VALUES)),
    option(b"EXAT", st.sampled_from(EXAT_VALUES)),
    option(b"PXAT", st.sampled_from(PXAT_VALUES)),
    option(b"KEEPTTL"),
)
# The compare-and-set forms the notebooks use: one condition, maybe GET, maybe an expiry, any order.
cas_set_commands = st.builds(
    lambda k, v, groups: (b"SET", k, v, *_flat(groups)),
    slots,
    values,
    st.tuples(conditions, st.booleans(), st.none() | expiries).flatmap(
        lambda t: st.permutations([t[0], *([[b"GET"]] if t[1] else []), *([t[2]] if t[2] else [])])
    ),
)
plain_set_commands = st.builds(lambda k, v: (b"SET", k, v), slots, st.sampled_from(VALUES))
# The form that meets the real server's double-reply defect, so every run exercises its handling.
bad_digest_get_commands = st.builds(
    lambda k, v, cond, d, get_first: (
        b"SET",
        k,
        v,
        *((b"GET", cond, d) if get_first else (cond, d, b"GET")),
    ),
    slots,
    values,
    st.sampled_from([b"IFDEQ", b"IFDNE"]),
    st.binary(max_size=20).filter(lambda b: len(b) != 16),
    st.booleans(),
)
delex_commands = st.one_of(
    st.builds(lambda k: (b"DELEX", k), slots),
    st.builds(
        lambda k, c, v: (b"DELEX", k, c, v), slots, spelled(b"IFEQ") | spelled(b"IFNE"), values
    ),
    st.builds(
        lambda k, c, d: (b"DELEX", k, c, d), slots, spelled(b"IFDEQ") | spelled(b"IFDNE"), digests
    ),
    st.builds(
        lambda k, c, v: (b"DELEX", k, c, v), slots, st.sampled_from([b"IFXX", b"NX", b""]), values
    ),
    st.builds(lambda k, c: (b"DELEX", k, c), slots, st.sampled_from([b"IFEQ", b"IFDEQ"])),
)
TTL_NUMBERS = [b"100", b"2000", b"0", b"-1", b"abc", b"9223372036854775807", b"9223372036854775"]
expire_commands = st.builds(
    lambda cmd, k, n, flags: (cmd, k, n, *flags),
    st.sampled_from([b"EXPIRE", b"PEXPIRE"]),
    slots,
    st.sampled_from(TTL_NUMBERS).map(lambda n: n if n != b"2000" else b"200000"),
    st.lists(st.sampled_from([b"NX", b"XX", b"GT", b"LT", b"gt", b"FOO"]), max_size=2),
)
other_commands = st.one_of(
    st.builds(lambda k: (b"GET", k), slots),
    st.builds(lambda k: (b"TYPE", k), slots),
    st.builds(lambda k: (b"DIGEST", k), slots),
    st.builds(lambda k: (b"INCR", k), slots),
    st.builds(lambda ks: (b"DEL", *ks), st.lists(slots, min_size=1, max_size=3)),
    st.builds(lambda k, f, v: (b"HSET", k, f, v), slots, st.sampled_from([b"f", b"g"]), values),
    st.sampled_from([(b"SET", Slot(0)), (b"DIGEST", Slot(0), b"x"), (b"DELEX",), (b"GET",)]),
)
# Further commands the notebooks' races and fixes use (dictionary, counters, rate limits).
# (This branch found argument_checked_before_type: HINCRBY/ZADD on a key of another type.)
suite_commands = st.one_of(
    st.builds(lambda k, f, v: (b"HSETNX", k, f, v), slots, st.sampled_from([b"f", b"g"]), values),
    st.builds(lambda k: (b"HGETALL", k), slots),
    st.builds(
        lambda k, f, n: (b"HINCRBY", k, f, n),
        slots,
        st.sampled_from([b"f", b"n"]),
        st.sampled_from([b"1", b"-3", b"x", b"9223372036854775807"]),
    ),
    st.builds(
        lambda k, n: (b"INCRBY", k, n),
        slots,
        st.sampled_from([b"5", b"-1", b"1.5", b"9223372036854775807"]),
    ),
    st.builds(lambda k, v: (b"SETNX", k, v), slots, values),
    st.builds(lambda k: (b"GETDEL", k), slots),
    st.builds(lambda k: (b"PERSIST", k), slots),
    st.builds(lambda ks: (b"EXISTS", *ks), st.lists(slots, min_size=1, max_size=3)),
    st.builds(
        lambda k, sc, m: (b"ZADD", k, sc, m),
        slots,
        st.sampled_from([b"1", b"2.5", b"x"]),
        st.sampled_from([b"a", b"b"]),
    ),
)
commands = st.one_of(
    plain_set_commands,
    plain_set_commands,
    set_commands,
    set_commands,
    cas_set_commands,
    cas_set_commands,
    bad_digest_get_commands,
    delex_commands,
    expire_commands,
    other_commands,
    suite_commands,
)
sequences = st.lists(commands, min_size=1, max_size=8)


def resolve(args: tuple[Any, ...], keys: list[bytes]) -> tuple[Any, ...]:
    """Return args with each Slot replaced by its key."""
    return tuple(keys[a] if isinstance(a, Slot) else a for a in args)


@dataclass(frozen=True)
class Tx:
    """A transaction step: [WATCH slot], [a command from another connection], MULTI, commands, EXEC|DISCARD."""

    watch: Slot | None
    intruder: tuple[Any, ...] | None
    commands: tuple[tuple[Any, ...], ...]
    end: bytes = b"EXEC"


# The real server's double-reply form is kept out of transactions: inside MULTI it corrupts EXEC's array.
tx_inner = commands.filter(lambda c: not is_bad_digest_get(c))
transactions = st.builds(
    Tx,
    st.none() | slots,
    st.none() | tx_inner,
    st.lists(tx_inner, max_size=3).map(tuple),
    st.sampled_from([b"EXEC", b"EXEC", b"EXEC", b"DISCARD"]),
)
# One step in four is a transaction (st.one_of would flatten the command branches and make them rare).
steps = st.integers(0, 3).flatmap(lambda i: transactions if i == 0 else commands)
sequences_with_transactions = st.lists(steps, min_size=1, max_size=6)


def run_sequence(pair: Pair, seq: list[Any]) -> None:
    """Run one generated sequence on fresh keys, on both backends, comparing every step."""
    keys = pair.fresh_keys([f"k{i}" for i in range(KEY_SLOTS)])
    history: list[Any] = []
    try:
        for step in seq:
            if isinstance(step, Tx):
                pair.run_transaction(step, keys, history)
            else:
                pair.run_step(resolve(step, keys), keys, history)
    except BaseException:
        pair.reset()  # a failure may leave a connection inside MULTI or WATCHing
        raise
    finally:
        pair.cleanup(keys)
    pair.stats.sequences += 1


# ---------------------------------------------------------------------------------------------
# The generated run
# ---------------------------------------------------------------------------------------------


def test_generated_command_sequences_get_the_same_replies_and_keyspace(
    pair: Pair, request: pytest.FixtureRequest
) -> None:
    start, before = time.perf_counter(), pair.stats.sequences

    @settings(
        max_examples=N_SEQUENCES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(seq=sequences_with_transactions)
    def check(seq: list[Any]) -> None:
        run_sequence(pair, seq)

    check()
    ran = pair.stats.sequences - before
    _report(
        request,
        f"differential (commands): {ran} generated sequences, {pair.stats.commands} commands "
        f"({pair.stats.transactions} MULTI/EXEC|DISCARD, {pair.stats.transactions_aborted} aborted "
        f"by a WATCHed write), "
        f"{pair.stats.errors_compared} error replies compared, {pair.stats.double_replies} "
        f"double replies from the real server's IFDEQ+GET defect, "
        f"{time.perf_counter() - start:.1f} s",
    )
    for divergence_id, n in sorted(pair.stats.registered.items()):
        _report(request, f"  registered divergence {divergence_id}: {n} error replies")
    for (command, real_msg, fake_msg), n in sorted(pair.stats.message_differences.items()):
        _report(
            request,
            f"  NOT YET REGISTERED: same error class, other wording ({command}, {n}x): "
            f"real {real_msg!r} / embedded {fake_msg!r}",
        )
    assert ran >= min(N_SEQUENCES, MIN_SEQUENCES)


# ---------------------------------------------------------------------------------------------
# Shrunk counterexamples that found bugs (in the extension, in the harness, or a divergence)
# ---------------------------------------------------------------------------------------------

K0, K1 = Slot(0), Slot(1)
REGRESSION_SEQUENCES: dict[str, list[Any]] = {
    # While the rules were being measured on the server (each was wrong in a first draft):
    "nx_after_a_condition_is_accepted": [
        (b"SET", K0, b"v"),
        (b"SET", K0, b"w", b"IFEQ", b"v", b"NX"),
        (b"SET", K1, b"w", b"IFNE", b"v", b"NX"),
    ],
    "repeated_condition_last_wins": [
        (b"SET", K0, b"v"),
        (b"SET", K0, b"w", b"IFEQ", b"x", b"IFEQ", b"v"),
    ],
    "bad_digest_on_missing_key_is_not_checked": [
        (b"SET", K0, b"w", b"IFDEQ", b"abc"),
        (b"SET", K0, b"w", b"IFDNE", b"abc"),
    ],
    "sixteen_non_hex_bytes_never_match": [
        (b"SET", K0, b"v"),
        (b"SET", K0, b"w", b"IFDEQ", b"z" * 16),
        (b"SET", K0, b"w", b"IFDNE", b"z" * 16),
    ],
    "bad_digest_with_get_double_reply": [
        (b"SET", K0, b"v"),
        (b"SET", K0, b"w", b"IFDEQ", b"abc", b"GET"),
        (b"GET", K0),
    ],
    "expiry_error_before_condition": [(b"SET", K0, b"w", b"IFEQ", b"x", b"EX", b"0")],
    "wrongtype_before_digest_length": [
        (b"HSET", K0, b"f", b"v"),
        (b"SET", K0, b"w", b"IFDEQ", b"abc"),
    ],
    # Found by the generated runs:
    "hash_snapshot_shape": [(b"HSET", K0, b"f", b"v")],
    "pxat_near_2_63_float_seconds": [(b"SET", K0, b"123", b"PXAT", b"9223372036854775807")],
    "expire_gt_lt_wording": [(b"SET", K0, b"v"), (b"EXPIRE", K0, b"100", b"GT", b"LT")],
    "expire_bad_number_and_bad_option": [(b"EXPIRE", K0, b"abc", b"FOO")],
    "hincrby_bad_number_on_a_string": [(b"INCR", K0), (b"HINCRBY", K0, b"f", b"x")],
    "zadd_bad_score_on_a_string": [(b"SET", K0, b"v"), (b"ZADD", K0, b"x", b"a")],
    "registered_difference_inside_exec": [
        Tx(None, None, ((b"SET", K0, b"v"), (b"HINCRBY", K0, b"f", b"x")))
    ],
    "watched_key_written_by_another_connection_aborts_exec": [
        (b"SET", K0, b"v"),
        Tx(K0, (b"SET", K0, b"w", b"IFEQ", b"v"), ((b"INCR", K1),)),
    ],
    "queue_time_error_aborts_exec": [Tx(None, None, ((b"SET", K0, b"v"), (b"DELEX",)))],
    "script_error_location_suffix": [
        (b"SET", K0, b"a"),
        (b"EVAL", b"return redis.call('INCR', KEYS[1])", 1, K0),
    ],
}


@pytest.mark.parametrize("name", sorted(REGRESSION_SEQUENCES))
def test_regression_sequence_gets_the_same_replies_and_keyspace(pair: Pair, name: str) -> None:
    run_sequence(pair, REGRESSION_SEQUENCES[name])


def test_the_bad_digest_regression_really_meets_the_real_servers_double_reply(pair: Pair) -> None:
    before = pair.stats.double_replies
    run_sequence(pair, REGRESSION_SEQUENCES["bad_digest_with_get_double_reply"])
    assert pair.stats.double_replies == before + 1


# ---------------------------------------------------------------------------------------------
# Every ordered combination of up to three SET options, from three starting states
# ---------------------------------------------------------------------------------------------

OPTION_GROUPS: list[tuple[bytes, ...]] = [
    (b"NX",),
    (b"XX",),
    (b"GET",),
    (b"KEEPTTL",),
    (b"EX", b"100"),
    (b"PX", b"200000"),
    (b"EXAT", b"4102444800"),
    (b"PXAT", b"4102444800000"),
    (b"IFEQ", b"v"),
    (b"IFNE", b"v"),
    (b"IFDEQ", _digest(b"v")),
    (b"IFDNE", _digest(b"v").upper()),
    (b"IFDEQ", b"abc"),
    (b"IFEQ",),
]
START_STATES: dict[str, list[tuple[bytes, ...]]] = {
    "missing": [],
    "string v, ttl 300 s": [(b"SET", b"{k}", b"v", b"EX", b"300")],
    "hash": [(b"HSET", b"{k}", b"f", b"v")],
}


def option_combinations() -> Iterator[tuple[tuple[bytes, ...], ...]]:
    """Yield every ordered choice (repetition allowed) of 1 to 3 option groups."""
    for n in (1, 2, 3):
        yield from itertools.product(OPTION_GROUPS, repeat=n)


def test_every_ordered_combination_of_up_to_three_set_options_matches(
    pair: Pair, request: pytest.FixtureRequest
) -> None:
    start, cases, doubles = time.perf_counter(), 0, pair.stats.double_replies
    for combo in option_combinations():
        opts = tuple(token for group in combo for token in group)
        for state, setup in START_STATES.items():
            (key,) = pair.fresh_keys(["k"])
            batch = [
                (b"DEL", key),
                *[tuple(key if a == b"{k}" else a for a in cmd) for cmd in setup],
                (b"SET", key, b"w", *opts),
                (b"TYPE", key),
                (b"GET", key),
                (b"PTTL", key),
                (b"DEL", key),
            ]
            real, fake = pair.real.exchange_many(batch), pair.fake.exchange_many(batch)
            set_at = 1 + len(setup)
            if len(real) == len(fake) + 1 and is_bad_digest_get((b"SET", key, b"w", *opts)):
                assert state.startswith("string") and real[set_at] == b"v", (state, opts, real)
                del real[set_at]  # the real server's defect: the GET reply before the error
                pair.stats.double_replies += 1
            ttl_real, ttl_fake = real.pop(-2), fake.pop(-2)
            assert same_replies(b"SET", real, fake, pair.stats), (state, opts, real, fake)
            assert same_ttl(ttl_real, ttl_fake), (state, opts, ttl_real, ttl_fake)
            cases += 1
    _report(
        request,
        f"differential (SET option grammar): {cases} cases (every ordered choice of 1-3 of "
        f"{len(OPTION_GROUPS)} option groups x {len(START_STATES)} starting states), "
        f"{pair.stats.double_replies - doubles} double replies from the real server's "
        f"IFDEQ+GET defect, {time.perf_counter() - start:.1f} s",
    )
    assert cases == sum(len(OPTION_GROUPS) ** n for n in (1, 2, 3)) * len(START_STATES)


# ---------------------------------------------------------------------------------------------
# The suite's own Lua scripts, with generated arguments
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LuaCase:
    """How to call one lua/<stem>.lua: its key names and a strategy for ARGV given the keys."""

    keys: tuple[str, ...]
    argv: Any  # Callable[[list[bytes]], SearchStrategy[list[bytes]]]
    functions: tuple[str, ...] = ()  # function libraries: the functions to FCALL / FCALL_RO


def _argv(*parts: st.SearchStrategy[bytes]) -> Any:
    """Return an ARGV builder: the given strategies in order, sometimes one short or one extra."""
    exact = st.tuples(*parts).map(list)
    return lambda keys: st.one_of(
        exact, exact, exact, exact.map(lambda a: a[:-1]), exact.map(lambda a: [*a, b"extra"])
    )


def numbers(*good: bytes) -> st.SearchStrategy[bytes]:
    """Return a strategy for a number-ish argument: the given good values and classic bad ones."""
    return st.one_of(
        st.sampled_from(list(good)),
        st.sampled_from(
            [
                b"0",
                b"-1",
                b"01",
                b"1e3",
                b" 5",
                b"5 ",
                b"0x10",
                b"abc",
                b"",
                b"1.5",
                b"inf",
                b"nan",
                b"9007199254740993",
                b"99999999999999999999",
            ]
        ),
    )


TOKENS = st.sampled_from([b"tok-a", b"tok-b", b""])
STRINGS = st.one_of(
    st.sampled_from([b"a", b"b", b"", b"\x00", b"3.99", b"v"]), st.binary(max_size=4)
)
LUA_CASES: dict[str, LuaCase] = {
    "anatomy_add_points": LuaCase(("score",), _argv(numbers(b"1", b"7", b"1000", b"1001"))),
    "anatomy_echo": LuaCase(("a", "b"), lambda keys: st.lists(STRINGS, max_size=3)),
    "anatomy_hidden_key": LuaCase(
        ("a",), lambda keys: st.tuples(st.just(keys[0][:-1] + b"hidden"), STRINGS).map(list)
    ),
    "anatomy_tonumber": LuaCase(
        (), lambda keys: st.lists(numbers(b"42", b"3.5", b"-7"), max_size=3)
    ),
    "delivery_record_score": LuaCase(("score",), _argv(numbers(b"1", b"999999999", b"1000000000"))),
    "dict_get_or_put": LuaCase(("ids", "index", "meta"), _argv(STRINGS)),
    "dict_get_or_put_batch": LuaCase(
        ("ids", "index", "meta"), lambda keys: st.lists(STRINGS, max_size=4)
    ),
    "errors_call_vs_pcall": LuaCase(
        ("counter",), _argv(st.sampled_from([b"call", b"pcall", b"CALL"]))
    ),
    "errors_write_then_fail": LuaCase(("order", "counter"), _argv(STRINGS)),
    "fenced_write": LuaCase(
        ("resource", "fence"), _argv(numbers(b"1", b"2", b"33", b"999999999999999"), STRINGS)
    ),
    "lock_extend": LuaCase(
        ("lock",), _argv(TOKENS, numbers(b"100000", b"250000", b"999999999999"))
    ),
    "lock_release": LuaCase(("lock",), _argv(TOKENS)),
    "lock_release_checked": LuaCase(("lock",), _argv(TOKENS)),
    "rate_limit_fixed_window": LuaCase(
        ("window",),
        _argv(numbers(b"1", b"2", b"1000000000"), numbers(b"100", b"31536000", b"31536001")),
    ),
    "rate_limit_sliding_window": LuaCase(
        ("log",),
        _argv(
            # Windows (PEXPIRE of the log) of at least 100 s: no key may expire between the two snapshots.
            numbers(b"1", b"3", b"100000"),
            numbers(b"100000", b"86400000", b"86400001"),
            numbers(b"1700000000000", b"1700000000500", b"9007199254740991"),
            st.sampled_from([b"r1", b"r2", b"", b"x" * 129]),
        ),
    ),
    "reserve_seats": LuaCase(
        ("left", "bookings"),
        _argv(
            st.sampled_from([b"b1", b"b-2", b"", b"bad id", b"x" * 65]),
            numbers(b"1", b"2", b"10", b"11"),
        ),
    ),
    "demo_library": LuaCase(
        ("counter",),
        _argv(numbers(b"1", b"5", b"1000", b"1001")),
        functions=("racelab_demo_hit", "racelab_demo_peek"),
    ),
    "dict_library": LuaCase(
        ("ids", "index", "meta"), _argv(STRINGS), functions=("racelab_dict_get_or_put",)
    ),
    "return_conversions": LuaCase(
        (),
        _argv(
            st.sampled_from(
                [
                    b"nil",
                    b"false",
                    b"true",
                    b"integer",
                    b"float",
                    b"negative_float",
                    b"numeric_string",
                    b"array",
                    b"array_with_hole",
                    b"nested",
                    b"named_fields",
                    b"status",
                    b"error",
                    b"nope",
                ]
            )
        ),
    ),
}
# Stems deliberately not run here, and why (the divergence tests pin what they show).
LUA_NOT_DIFFERENTIAL: dict[str, str] = {
    "runaway_spin": "a deliberate busy loop: fakeredis has no script time limit (no BUSY, no SCRIPT KILL)",
    "runaway_fill": "fills memory on purpose (maxmemory demo); fakeredis has no maxmemory",
    "sandbox_open_file": "fakeredis' Lua is not sandboxed (io exists): a registered divergence",
    "sandbox_probe": "fakeredis' Lua is not sandboxed (os, io, require exist): a registered divergence",
    "sandbox_set_global": "fakeredis' Lua is not sandboxed (globals can be created): a registered divergence",
}


def setup_commands(names: tuple[str, ...]) -> st.SearchStrategy[tuple[Any, ...]]:
    """Return a strategy for a plain command that puts one of a script's keys into an interesting state."""
    slot = st.integers(0, max(len(names) - 1, 0)).map(Slot)
    return st.one_of(
        st.builds(
            lambda k, v: (b"SET", k, v),
            slot,
            st.one_of(STRINGS, TOKENS, numbers(b"0", b"5", b"10")),
        ),
        st.builds(lambda k, v: (b"SET", k, v, b"PX", b"300000"), slot, TOKENS),
        st.builds(
            lambda k, f, v: (b"HSET", k, f, v),
            slot,
            st.sampled_from([b"1", b"a", b"last_id", b"b1"]),
            st.one_of(STRINGS, numbers(b"1", b"2")),
        ),
        st.builds(lambda k: (b"DEL", k), slot),
    )


def lua_stems() -> list[str]:
    """Return the stems of the lua/*.lua scripts that exist now (not _shared.lua: it holds the
    canonical copies of shared functions, checked by tests/test_lua_style.py)."""
    return sorted(p.stem for p in LUA_DIR.glob("*.lua") if not p.stem.startswith("_"))


@pytest.fixture(scope="module")
def library_pair(real_url: str) -> Iterator[Pair]:
    """Like ``pair``, but the real side is a private server of this module: FUNCTION LOAD touches
    nothing shared (real_url is requested only for its skip-or-fail rule when no server exists)."""
    try:
        find_binary()
    except ServerNotFound as exc:  # e.g. CI against an external REDIS_URL with no local binary
        pytest.skip(f"function libraries need a private redis-server for FUNCTION LOAD: {exc}")
    with RedisServer() as server:
        real_lab = connect("differential_fn", url=server.url, owned=True)
        fake_lab = connect("differential_fn", backend="embedded", run_id=real_lab.ns.run_id)
        try:
            yield Pair(
                Side("real", real_lab), Side("embedded", fake_lab), prefix=real_lab.ns.prefix
            )
        finally:
            for lab in (real_lab, fake_lab):
                lab.cleanup()
                lab.close()


@pytest.mark.parametrize("stem", lua_stems())
def test_lua_script_gets_the_same_replies_and_keyspace(
    stem: str, request: pytest.FixtureRequest
) -> None:
    source = lua_source(stem).encode()  # assembled: what Redis runs
    library = source.startswith(b"#!lua")
    if stem in LUA_NOT_DIFFERENTIAL:
        pytest.skip(f"lua/{stem}.lua: {LUA_NOT_DIFFERENTIAL[stem]}")
    if stem not in LUA_CASES:
        pytest.skip(f"lua/{stem}.lua has no entry in LUA_CASES yet (add its argument strategies)")
    case = LUA_CASES[stem]
    if library and not case.functions:
        pytest.skip(
            f"lua/{stem}.lua is a function library but its LUA_CASES entry names no function"
        )
    pair: Pair = request.getfixturevalue("library_pair" if library else "pair")
    if library:
        loaded = [
            side.exchange("FUNCTION", "LOAD", "REPLACE", source) for side in (pair.real, pair.fake)
        ]
        assert loaded[0] == loaded[1] and not isinstance(loaded[0][0], Err), loaded
    start, before = time.perf_counter(), pair.stats.sequences

    @settings(
        max_examples=LUA_SEQUENCES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        names = case.keys or ("unused",)
        keys = pair.fresh_keys(list(names), tag=True)
        script_keys = keys[: len(case.keys)]
        steps = data.draw(
            st.lists(
                st.one_of(st.just("call"), st.just("call"), setup_commands(names)),
                min_size=1,
                max_size=6,
            ),
            label="steps",
        )
        history: list[Any] = []
        try:
            for step in steps:
                if step == "call":
                    argv = data.draw(case.argv(keys), label="argv")
                    if library:
                        how = data.draw(st.sampled_from([b"FCALL", b"FCALL_RO"]), label="command")
                        name = data.draw(st.sampled_from(case.functions), label="function")
                        args = (how, name, len(script_keys), *script_keys, *argv)
                    else:
                        args = (b"EVAL", source, len(script_keys), *script_keys, *argv)
                else:
                    args = resolve(step, keys)
                pair.run_step(args, keys + _hidden_keys(stem, keys), history)
        finally:
            pair.cleanup(keys + _hidden_keys(stem, keys))
        pair.stats.sequences += 1

    check()
    ran = pair.stats.sequences - before
    _report(
        request,
        f"differential (lua/{stem}.lua): {ran} generated sequences, "
        f"{time.perf_counter() - start:.1f} s",
    )
    assert ran >= LUA_SEQUENCES


def _hidden_keys(stem: str, keys: list[bytes]) -> list[bytes]:
    """Return keys a script writes without declaring them (anatomy_hidden_key's anti-pattern)."""
    return [keys[0][:-1] + b"hidden"] if stem == "anatomy_hidden_key" else []
