"""Somebody else's data: fill a server with it, then prove the suite left it alone.

The suite may be pointed at a shared Redis. This module plants data that is not the suite's
(every type, with and without TTLs, a function library, keys that merely look like the
suite's), takes a snapshot, and later checks that every byte and every TTL survived and that
no suite key was left behind. ``make test`` runs the notebooks' real-server and cluster passes
on servers filled this way (``python -m helpers run [--cluster] --shared -- ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpers.backend.namespace import SUITE_PREFIX, escape_glob

FOREIGN_LIBRARY = "someone_elses_lib"
FOREIGN_LIBRARY_CODE = (
    f"#!lua name={FOREIGN_LIBRARY}\n"
    "redis.register_function('someone_elses_fn', function(keys, args) return 'theirs' end)\n"
)
# A foreign key that looks like a suite key of another run: cleanup must not touch it either.
LOOKALIKE_KEY = f"{SUITE_PREFIX}:someone:deadbeef:counter"


@dataclass(frozen=True)
class Snapshot:
    """Every foreign key's type, DUMP payload and whether it has a TTL, plus the libraries."""

    keys: dict[bytes, tuple[bytes, bytes, bool]]
    libraries: frozenset[str]


def fill_foreign(client: Any) -> None:
    """Write unrelated data of every common type, a foreign library and a look-alike key."""
    client.set("app:config", "do-not-touch")
    client.set("app:session:42", "alive", ex=3600)
    client.set("*", "a key named star")  # glob metacharacters in names must not match our SCAN
    client.set("racelab", "not under the prefix: the bare word")
    client.set(LOOKALIKE_KEY, "7")
    client.hset("app:user:1", mapping={"name": "Ada", "role": "admin"})
    client.rpush("app:queue", "job-1", "job-2")
    client.sadd("app:tags", "a", "b")
    client.zadd("app:scores", {"x": 1.0, "y": 2.0})
    client.xadd("app:events", {"kind": "login"})
    client.function_load(FOREIGN_LIBRARY_CODE, replace=True)


def _library_names(client: Any) -> frozenset[str]:
    names = set()
    for lib in client.function_list():
        name = lib.get("library_name") if isinstance(lib, dict) else None
        if name is None:  # RESP2 list form: [b'library_name', b'x', ...]
            pairs = dict(zip(lib[::2], lib[1::2]))
            name = pairs.get(b"library_name") or pairs.get("library_name")
        names.add(name.decode() if isinstance(name, bytes) else str(name))
    return frozenset(names)


def snapshot(client: Any) -> Snapshot:
    """Return a snapshot of every key not under the suite's prefix (use a decode_responses=False client)."""
    keys = {}
    for key in client.scan_iter(count=1000):
        name = key if isinstance(key, bytes) else key.encode()
        if name.startswith(f"{SUITE_PREFIX}:".encode()) and name != LOOKALIKE_KEY.encode():
            continue
        keys[name] = (client.type(name), client.dump(name), client.pttl(name) > 0)
    return Snapshot(keys=keys, libraries=_library_names(client))


def suite_leftovers(client: Any) -> list[str]:
    """Return suite keys still present (under racelab:, excluding the foreign look-alike), then suite libraries."""
    found = client.scan_iter(match=escape_glob(f"{SUITE_PREFIX}:") + "*", count=1000)
    names = (k.decode(errors="backslashreplace") if isinstance(k, bytes) else k for k in found)
    libraries = sorted(n for n in _library_names(client) if n.startswith(SUITE_PREFIX))
    return sorted(n for n in names if n != LOOKALIKE_KEY) + [f"function library {n!r}" for n in libraries]


def compare(before: Snapshot, after: Snapshot) -> list[str]:
    """Return one line per difference between two snapshots (empty when nothing changed)."""
    problems = []
    for key, (kind, payload, has_ttl) in before.keys.items():
        now = after.keys.get(key)
        if now is None:
            problems.append(f"foreign key {key!r} was deleted")
        elif now[:2] != (kind, payload):
            problems.append(f"foreign key {key!r} was modified")
        elif now[2] != has_ttl:
            problems.append(f"foreign key {key!r} had its TTL changed")
    for key in after.keys.keys() - before.keys.keys():
        problems.append(f"a key outside the suite's prefix was created: {key!r}")
    for lib in before.libraries - after.libraries:
        problems.append(f"function library {lib!r} was deleted")
    return problems
