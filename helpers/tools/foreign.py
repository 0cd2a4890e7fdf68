"""Somebody else's data: fill a server with it, then prove the suite left it alone.

The suite may be pointed at a shared Redis. This module plants data that is not the suite's
and takes a snapshot of it; after a run, ``compare`` reports every difference and
``suite_leftovers`` every suite key or library still there. ``make test`` runs the notebooks'
real-server and cluster passes on servers filled this way, as the workshop ACL user
(``python -m helpers run [--cluster] --shared -- ...``, see helpers.tools.cli).

What is planted (``plant_keys`` into one database, ``plant_server_wide`` once per server):

* at least ``FOREIGN_KEYS`` keys of every type: strings, hashes (some with hash-field TTLs),
  lists, sets, sorted sets and streams (some with a consumer group); one in five has a TTL;
* binary key names (not UTF-8, NUL bytes, glob characters), look-alike ``racelab:`` keys that
  no run of the suite created, and keys that nearly look like a library's key of a run
  (``lock:something``, ``lock:racelab-other:...``: ``LIBRARY_LOOKALIKE_KEYS``);
* a foreign function library, a foreign library named like the suite's (``racelab_*``), and a
  script in the script cache.

A snapshot holds each key's type, DUMP payload (which carries hash-field TTLs as absolute
times) and absolute expiry (PEXPIRETIME), the libraries with their code, whether the cached
script is still cached, CONFIG GET * and ACL LIST.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import redis
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster

from helpers.backend.namespace import SUITE_PREFIX, escape_glob, library_head

Client = redis.Redis | RedisCluster  # a server's client, or a cluster's (keys go by slot)

FOREIGN_KEYS = 2000  # planted into database 0 of a server (spread over the nodes of a cluster)
SECOND_DB = 3  # a second database, planted too on a server that has databases (not a cluster)
SECOND_DB_KEYS = 200
TTL_S = 6 * 3600  # long enough never to expire during a run: a changed expiry is a change

FOREIGN_LIBRARY = "someone_elses_lib"
FOREIGN_LIBRARY_CODE = (
    f"#!lua name={FOREIGN_LIBRARY}\n"
    "redis.register_function('someone_elses_fn', function(keys, args) return 'theirs' end)\n"
)
# Named like the suite's libraries (racelab*), but not one of them: the suite must leave it alone.
LOOKALIKE_LIBRARY = f"{SUITE_PREFIX}_someone_elses"
LOOKALIKE_LIBRARY_CODE = (
    f"#!lua name={LOOKALIKE_LIBRARY}\n"
    "redis.register_function('racelab_someone_elses_fn', function(keys, args) return 'theirs too' end)\n"
)
FOREIGN_SCRIPT = "return 'a script somebody else keeps in the script cache'"
FOREIGN_SCRIPT_SHA = hashlib.sha1(FOREIGN_SCRIPT.encode()).hexdigest()

# Foreign keys that look like suite keys of other runs: cleanup must not touch them either.
LOOKALIKE_KEY = f"{SUITE_PREFIX}:someone:deadbeef:counter"
LOOKALIKE_KEYS: tuple[bytes, ...] = (
    LOOKALIKE_KEY.encode(),
    f"{SUITE_PREFIX}:01_get_then_incr:00000000:counter".encode(),
    f"{SUITE_PREFIX}:03_hgetall_hsetnx:0badc0de:{{dict}}:ids".encode(),
    f"{SUITE_PREFIX}:*".encode(),
    f"{SUITE_PREFIX}:".encode() + b"\xff\xfe binary",
    f"{SUITE_PREFIX}:someone:deadbeef:lock".encode(),
)
# Foreign keys that nearly look like a library's key of a run (lock:<prefix>..., the keys
# python-redis-lock, pottery or limits derive from a run's names): no run owns any of them, not even
# racelab:someone:deadbeef: or racelab:@someone:nb:deadbeef:, whose prefixes they name.
LIBRARY_LOOKALIKE_KEYS: tuple[bytes, ...] = (
    b"lock:something",
    b"lock-signal:something",
    b"redlock:racelab",
    b"rate_limit:racelab_api_client1",
    b"LIMITS:LIMITER/racelab/10/1/minute",
    b"lock:racelab-other:someone:deadbeef:job",
    f"lock:{SUITE_PREFIX}:someone:deadbeefX:job".encode(),  # another run id
    f"lock:{SUITE_PREFIX}:@someone:nb:deadbee:job".encode(),  # a learner's, another run id
    f"my app:{SUITE_PREFIX}:someone:deadbeef:job".encode(),  # a space: no library's head
    f"lock{SUITE_PREFIX}:someone:deadbeef:job".encode(),  # no separator before the prefix
    f"{SUITE_PREFIX}:@other:lock:{SUITE_PREFIX}:someone:deadbeef:job".encode(),  # a learner's key
    f"Racelab-app:{SUITE_PREFIX}:someone:deadbeef:job".encode(),  # 'racelab' in the head
    b"\xff:" + f"{SUITE_PREFIX}:someone:deadbeef:job".encode(),  # a binary head
)
BINARY_KEYS: tuple[bytes, ...] = (
    b"\x00\x01\x02 nul and control bytes",
    b"\xff\xfe\xfd not utf-8",
    b"*",
    b"app:[glob]?*",
    b"racelab",
    b"app:\xe2\x98\x83 snowman",
    b"\x80" * 16,
    b"app:line\r\nbreak",
)

KINDS = ("string", "hash", "list", "set", "zset", "stream")
_SHARE = {"string": 30, "hash": 20, "list": 13, "set": 13, "zset": 13, "stream": 11}  # percent


def _plant_one(pipe: Pipeline | ClusterPipeline, kind: str, key: bytes, i: int) -> None:
    if kind == "string":
        pipe.set(key, f"value {i}".encode() + bytes([i % 256]))
    elif kind == "hash":
        pipe.hset(
            key, mapping={"name": f"user {i}", "role": "admin" if i % 7 == 0 else "member", "n": i}
        )
    elif kind == "list":
        pipe.rpush(key, *[f"job-{i}-{j}" for j in range(1 + i % 4)])
    elif kind == "set":
        pipe.sadd(key, *[f"tag-{j}" for j in range(1 + i % 5)])
    elif kind == "zset":
        pipe.zadd(key, {f"member-{j}": j * 1.5 + i for j in range(1 + i % 4)})
    else:
        for j in range(1 + i % 3):
            pipe.xadd(key, {"kind": "login", "n": f"{i}.{j}"})
        if i % 4 == 0:
            pipe.xgroup_create(key, "readers", id="0")


def has_field_ttls(client: Client) -> bool:
    """Return True if the server knows HPERSIST (hash-field TTLs: Redis >= 7.4, Valkey >= 9); writes nothing."""
    try:
        client.execute_command("HPERSIST", "app:no-such-hash", "FIELDS", 1, "f")
        return True
    except redis.ResponseError as exc:
        if "unknown command" in str(exc).lower():
            return False
        raise


def plant_keys(
    client: Client, count: int = FOREIGN_KEYS, label: str = "app", field_ttls: bool | None = None
) -> Counter:
    """Write count foreign keys of every type into client's database; return how many of each (and with TTLs, ...).

    client may be a cluster client (keys land on the node that owns their slot). The count
    includes the binary names and, with label "app", the look-alike racelab: keys. Half the
    hashes get a hash-field TTL where the server has them (field_ttls None: ask it).
    """
    if field_ttls is None:
        field_ttls = has_field_ttls(client)
    planted: Counter = Counter()
    pipe = client.pipeline(transaction=False)
    special = [(k, "binary name") for k in BINARY_KEYS]
    if label == "app":
        special += [(k, "look-alike racelab: key") for k in LOOKALIKE_KEYS]
        special += [(k, "look-alike library key") for k in LIBRARY_LOOKALIKE_KEYS]
    plain = max(count - len(special), 0)
    i = 0
    for kind in KINDS:
        for _ in range(plain * _SHARE[kind] // 100 + (plain * _SHARE[kind] % 100 > 0)):
            key = f"{label}:{kind}:{i}".encode()
            _plant_one(pipe, kind, key, i)
            planted[kind] += 1
            if kind == "hash" and field_ttls and i % 2 == 0:
                pipe.hexpire(key, TTL_S + i, "name")  # a hash-field TTL
                planted["hash with field TTLs"] += 1
            if i % 5 == 0:
                pipe.expire(key, TTL_S + i)
                planted["with a TTL"] += 1
            i += 1
            if len(pipe) >= 500:
                pipe.execute()
    for n, (key, what) in enumerate(special):
        kind = KINDS[n % len(KINDS)]
        _plant_one(pipe, kind, key, n)
        planted[kind] += 1
        planted[what] += 1
    pipe.execute()
    planted["keys"] = sum(planted[k] for k in KINDS)
    return planted


def plant_server_wide(client: Client) -> None:
    """Load a foreign function library, a foreign library named like the suite's, and cache a foreign script."""
    client.function_load(FOREIGN_LIBRARY_CODE, replace=True)
    client.function_load(LOOKALIKE_LIBRARY_CODE, replace=True)
    client.script_load(FOREIGN_SCRIPT)


def fill_foreign(client: Client, count: int = FOREIGN_KEYS) -> Counter:
    """Plant count foreign keys into client's database, the libraries and the cached script; return the key counts."""
    planted = plant_keys(client, count)
    plant_server_wide(client)
    return planted


@dataclass(frozen=True)
class Snapshot:
    """One database's keys (type, DUMP payload, absolute expiry in ms or -1), and, for a whole server,
    its libraries (name -> code), whether the foreign script is cached, CONFIG and ACL LIST."""

    keys: dict[bytes, tuple[bytes, bytes, int]]
    libraries: dict[str, bytes] = field(default_factory=dict)
    script_cached: bool | None = None
    config: dict[str, str] = field(default_factory=dict)
    acl: tuple[str, ...] = ()


def _text(x: object) -> str:
    return x.decode("utf-8", "backslashreplace") if isinstance(x, (bytes, bytearray)) else str(x)


def libraries(client: Client) -> dict[str, bytes]:
    """Return {name: code} of every function library on client's server."""
    found = {}
    for lib in client.execute_command("FUNCTION", "LIST", "WITHCODE"):
        fields = lib if isinstance(lib, dict) else dict(zip(lib[::2], lib[1::2]))
        fields = {_text(k): v for k, v in fields.items()}
        code = fields["library_code"]
        found[_text(fields["library_name"])] = (
            code if isinstance(code, bytes) else str(code).encode()
        )
    return found


def _keys_of(client: redis.Redis) -> dict[bytes, tuple[bytes, bytes, int]]:
    names = list(client.scan_iter(count=1000))
    keys: dict[bytes, tuple[bytes, bytes, int]] = {}
    for start in range(0, len(names), 500):
        batch = names[start : start + 500]
        pipe = client.pipeline(transaction=False)
        for name in batch:
            pipe.type(name)
            pipe.dump(name)
            pipe.pexpiretime(name)
        replies = pipe.execute()
        for n, name in enumerate(batch):
            kind, payload, expiry = replies[3 * n : 3 * n + 3]
            if payload is None:  # gone between SCAN and DUMP: expired, or another run's key deleted
                continue
            raw = name if isinstance(name, bytes) else name.encode()
            keys[raw] = (
                kind if isinstance(kind, bytes) else str(kind).encode(),
                payload,
                int(expiry),
            )
    return keys


def snapshot(client: redis.Redis, server_wide: bool = True) -> Snapshot:
    """Return a snapshot of client's database (a decode_responses=False client of one server or node).

    server_wide=False leaves out what the server shares between databases (libraries, the
    script cache, CONFIG, ACL), for a snapshot of a second database.
    """
    if not server_wide:
        return Snapshot(keys=_keys_of(client))
    config = {_text(k): _text(v) for k, v in client.config_get("*").items()}
    return Snapshot(
        keys=_keys_of(client),
        libraries=libraries(client),
        script_cached=bool(client.script_exists(FOREIGN_SCRIPT_SHA)[0]),
        config=config,
        acl=tuple(_text(line) for line in client.acl_list()),
    )


def _suite_shaped(name: bytes) -> bool:
    """Return True if name is shaped like a suite key: under racelab:, or a library's head and
    then racelab: (lock:racelab:..., helpers.backend.namespace)."""
    return library_head(name, f"{SUITE_PREFIX}:") is not None


def _is_suite_key(name: bytes) -> bool:
    return _suite_shaped(name) and name not in LOOKALIKE_KEYS + LIBRARY_LOOKALIKE_KEYS


def suite_leftovers(
    client: Client, before: Snapshot | None = None, server_wide: bool = True
) -> list[str]:
    """Return suite keys still present (under racelab:, or a library's lock:racelab:...), then
    suite libraries (racelab*).

    Keys and libraries planted as look-alikes, or present in ``before``, are somebody else's.
    server_wide=False leaves the libraries out (for a second database: they are the server's).
    """
    found = client.scan_iter(match="*" + escape_glob(f"{SUITE_PREFIX}:") + "*", count=1000)
    names = sorted(k if isinstance(k, bytes) else k.encode() for k in found)
    theirs = {FOREIGN_LIBRARY, LOOKALIKE_LIBRARY} | set(before.libraries if before else ())
    suite_libraries = sorted(
        n
        for n in (libraries(client) if server_wide else ())
        if n.startswith(SUITE_PREFIX) and n not in theirs
    )
    return [_text(n) for n in names if _is_suite_key(n) and not (before and n in before.keys)] + [
        f"function library {n!r}" for n in suite_libraries
    ]


def compare(before: Snapshot, after: Snapshot) -> list[str]:
    """Return one line per difference between two snapshots (empty when nothing changed)."""
    problems = []
    for key, (kind, payload, expiry) in before.keys.items():
        now = after.keys.get(key)
        if now is None:
            problems.append(f"foreign key {key!r} was deleted")
        elif now[:2] != (kind, payload):
            problems.append(f"foreign key {key!r} was modified")
        elif now[2] != expiry:
            problems.append(
                f"foreign key {key!r} had its TTL changed (expiry {expiry} -> {now[2]} ms)"
            )
    for key in sorted(after.keys.keys() - before.keys.keys()):
        if not _suite_shaped(key):  # a suite key left behind is suite_leftovers' to report
            problems.append(f"a key outside the suite's prefix was created: {key!r}")
    for name, code in sorted(before.libraries.items()):
        if name not in after.libraries:
            problems.append(f"function library {name!r} was deleted")
        elif after.libraries[name] != code:
            problems.append(f"function library {name!r} was replaced")
    if before.script_cached and not after.script_cached:
        problems.append(f"the cached script {FOREIGN_SCRIPT_SHA} was flushed from the script cache")
    changed = sorted(
        k
        for k in before.config.keys() | after.config.keys()
        if before.config.get(k) != after.config.get(k)
    )
    if changed:
        problems.append(f"CONFIG changed: {', '.join(changed)}")
    if before.acl != after.acl:
        problems.append("ACL LIST changed: " + "; ".join(sorted(set(before.acl) ^ set(after.acl))))
    return problems
