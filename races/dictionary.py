"""A shared string -> id dictionary: "get or put if absent", seven ways, and its checker.

Many workers turn strings (column names, group names) into small integer ids through one
dictionary in Redis: the same string must always get the same id, and ids stay dense (1..N).
A dictionary is three hashes that share one hash tag ``{dict:<name>}`` (``DictKeys``): ``ids``
(id -> string), ``index`` (string -> id) and ``meta`` (field ``last_id``, the id counter).

Each strategy takes a redis-py client first, then the string and the dictionary's keys, and
returns the string's id. Strings are binary-safe: ``str`` or any ``bytes``.

- ``hgetall_hsetnx_get_or_put``: HGETALL ``ids``, search, HSETNX the next id, start over if it
  was taken. Correct, but every attempt reads the whole dictionary (O(N)) and callers collide.
- ``naive_get_or_put``: HGET the index; on a miss HINCRBY the counter, then HSET both ways.
  Racy: two callers that both miss give one string two ids.
- ``lua_get_or_put``: lua/dict_get_or_put.lua, one atomic round trip, O(1).
- ``function_get_or_put``: the same logic as the Function library lua/dict_library.lua (FCALL).
- ``batch_get_or_put``: lua/dict_get_or_put_batch.lua, a whole batch of strings in one call.
- ``watch_get_or_put``: optimistic WATCH/MULTI/EXEC, started over when a watched key changed.
- ``hincrby_hsetnx_get_or_put``: HGET the index; on a miss HINCRBY the counter, then HSETNX the
  index: one id per string without a script, but a caller that loses the HSETNX leaves its id
  unused, so the ids have gaps (not 1..N).

``check_dictionary`` is the checker: what is wrong with a dictionary (strings with two ids,
ids not dense, an index that is not the inverse, a wrong counter, answers callers were given
that the dictionary contradicts); an empty list means all is well. ``dense=False`` accepts gaps.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import redis
from redis.typing import EncodableT

from luaload import lua, lua_source
from races import GaveUp, Namespace
from races.workload import Request, Workload

Text = str | bytes
GET_OR_PUT = lua("dict_get_or_put")
GET_OR_PUT_BATCH = lua("dict_get_or_put_batch")
LIBRARY, FUNCTION = "dict_library", "racelab_dict_get_or_put"  # lua/dict_library.lua


class DictKeys(NamedTuple):
    """The keys of one dictionary, in the scripts' KEYS order; one hash tag, so one cluster slot."""

    ids: str    # id -> string: what readers use
    index: str  # type: ignore[assignment]  # string -> id: one HGET answers "is it registered?"
    meta: str   # field last_id: the id counter

    def all(self) -> list[str]:
        """Return [ids, index, meta]."""
        return list(self)


def dict_keys(ns: Namespace, name: str) -> DictKeys:
    """Return the keys of dictionary `name`, all tagged {dict:<name>}."""
    tag = f"dict:{name}"
    return DictKeys(ns.tagged(tag, "ids"), ns.tagged(tag, "index"), ns.tagged(tag, "meta"))


# --- the strategies ----------------------------------------------------------------------

def hgetall_hsetnx_get_or_put(client: redis.Redis, text: Text, keys: DictKeys,
                              max_attempts: int = 100) -> int:
    """Return text's id: HGETALL ids and search; if absent, HSETNX the next id; if taken, again."""
    wanted = text.encode() if isinstance(text, str) else text
    for _ in range(max_attempts):
        # Undecoded: the strings may be any bytes, which a decoding client would refuse.
        snapshot = client.execute_command("HGETALL", keys.ids, NEVER_DECODE=True)
        for field, value in snapshot.items():
            if value == wanted:
                return int(field)
        next_id = len(snapshot) + 1
        if client.hsetnx(keys.ids, next_id, text):
            return next_id
    raise GaveUp(max_attempts, "another caller took the next id every time")


def naive_get_or_put(client: redis.Redis, text: Text, keys: DictKeys) -> int:
    """Return text's id: HGET the index; on a miss HINCRBY the counter, HSET both ways. Racy."""
    found = client.hget(keys.index, text)
    if found is not None:
        return int(found)
    new_id = client.hincrby(keys.meta, "last_id", 1)
    client.hset(keys.ids, new_id, text)
    client.hset(keys.index, text, new_id)
    return new_id


def lua_get_or_put(client: redis.Redis, text: Text, keys: DictKeys) -> int:
    """Return text's id from lua/dict_get_or_put.lua: lookup and registration in one script."""
    return GET_OR_PUT(keys=keys, args=[text], client=client)


def function_get_or_put(client: redis.Redis, text: Text, keys: DictKeys) -> int:
    """Return text's id from FCALL racelab_dict_get_or_put; load lua/dict_library.lua if missing."""
    try:
        return client.fcall(FUNCTION, 3, *keys, text)
    except redis.ResponseError as exc:
        if "function not found" not in str(exc).lower():
            raise
    # Not loaded here yet (a new server, or somebody deleted it): deploy it, call once more.
    client.function_load(lua_source(LIBRARY), replace=True)
    return client.fcall(FUNCTION, 3, *keys, text)


def batch_get_or_put(client: redis.Redis, texts: Sequence[Text], keys: DictKeys) -> list[int]:
    """Return the ids of texts, in order, from one call of lua/dict_get_or_put_batch.lua."""
    if not texts:
        return []  # the script refuses an empty batch
    return GET_OR_PUT_BATCH(keys=keys, args=list(texts), client=client)


def watch_get_or_put(client: redis.Redis, text: Text, keys: DictKeys, max_attempts: int = 100) -> int:
    """Return text's id: HGET; on a miss WATCH, look again, MULTI/HSETs/EXEC; again if EXEC fails."""
    found = client.hget(keys.index, text)
    if found is not None:
        return int(found)
    with client.pipeline(transaction=True) as pipe:  # a cluster pipeline WATCHes in this mode only
        for _ in range(max_attempts):
            try:
                pipe.watch(keys.index, keys.meta)
                found = pipe.hget(keys.index, text)
                if found is not None:
                    pipe.unwatch()
                    return int(found)
                new_id = int(pipe.hget(keys.meta, "last_id") or 0) + 1
                pipe.multi()
                pipe.hset(keys.meta, "last_id", new_id)
                pipe.hset(keys.ids, new_id, text)
                pipe.hset(keys.index, text, new_id)
                pipe.execute()  # WatchError if index or meta changed since the WATCH
                return new_id
            except redis.WatchError:
                continue
    raise GaveUp(max_attempts)


def hincrby_hsetnx_get_or_put(client: redis.Redis, text: Text, keys: DictKeys) -> int:
    """Return text's id: HGET; on a miss HINCRBY an id, HSETNX the index; a loser's id is a gap."""
    found = client.hget(keys.index, text)
    if found is not None:
        return int(found)
    new_id = client.hincrby(keys.meta, "last_id", 1)
    if client.hsetnx(keys.index, text, new_id):  # the index decides: one id per string
        client.hset(keys.ids, new_id, text)
        return new_id
    # Another caller registered text since our HGET: take its id; new_id stays unused (a gap).
    winner = client.hget(keys.index, text)
    assert winner is not None, "HSETNX found text in the index"
    return int(winner)


# --- the checker -------------------------------------------------------------------------

def _raw(client: redis.Redis, key: str) -> dict[bytes, bytes]:
    return client.execute_command("HGETALL", key, NEVER_DECODE=True)


def _shown(text: Text) -> str:
    return repr(text.decode() if isinstance(text, bytes) and text.isascii() else text)


def check_dictionary(client: redis.Redis, keys: DictKeys, answers: Iterable[tuple[Text, int]] = (),
                     indexed: bool = True, dense: bool = True) -> list[str]:
    """Return what is wrong with the dictionary and the (text, id) answers callers got; [] if nothing.

    Checks: every string has one id, each answer matches ids; with dense, that the ids are
    exactly 1..N; with indexed, that index is the exact inverse of ids and the counter is N
    (without dense: that no id is above the counter).
    """
    ids = _raw(client, keys.ids)
    problems = []
    owners: dict[bytes, list[int]] = defaultdict(list)
    for field, value in ids.items():
        owners[value].append(int(field) if field.isdigit() else -1)
    problems += [f"{_shown(text)} has {len(got)} ids: {sorted(got)}"
                 for text, got in sorted(owners.items()) if len(got) > 1]
    if dense and sorted(ids) != sorted(str(i).encode() for i in range(1, len(ids) + 1)):
        problems.append(f"the ids are not exactly 1..{len(ids)}")
    if indexed:
        index = _raw(client, keys.index)
        if len(index) != len(ids) or index != {text: field for field, text in ids.items()}:
            problems.append("index is not the inverse of ids")
        last_id = int(client.hget(keys.meta, "last_id") or 0)
        if dense and last_id != len(ids):
            problems.append(f"the counter says {last_id}, ids holds {len(ids)}")
        if not dense and any(int(f) > last_id for f in ids if f.isdigit()):
            problems.append(f"an id is above the counter ({last_id})")
    for text, given in answers:
        wanted = text.encode() if isinstance(text, str) else text
        if not isinstance(given, int) or ids.get(str(given).encode()) != wanted:
            problems.append(f"a caller got {given!r} for {_shown(text)}")
    return problems


# --- the reference workload: what each strategy costs (benchmarks, relative_cost) -------------

DICTIONARY_SIZE = 100  # strings in each dictionary when a run starts


def _reference_keys(ns: Namespace, label: str) -> DictKeys:
    """Return the keys of label's own dictionary, e.g. dictionary "ref-hgetallhsetnx"."""
    return dict_keys(ns, "ref-" + "".join(c for c in label.lower() if c.isalnum()))


def _reference_request(ns: Namespace, fn: Callable[..., int], label: str) -> Request:
    """Return one request: register a string the dictionary has not seen (it grows in a run)."""
    keys, serial = _reference_keys(ns, label), itertools.count()
    return lambda client: fn(client, f"new-{next(serial)}", keys)


def _reference_reset(ns: Namespace, labels: Sequence[str]) -> Request:
    """Return a reset: every label's dictionary back to the same DICTIONARY_SIZE strings."""
    def reset(client: redis.Redis) -> None:
        for label in labels:
            keys = _reference_keys(ns, label)
            client.delete(*keys)
            ids: dict[EncodableT, EncodableT] = {
                i: f"word-{i}" for i in range(1, DICTIONARY_SIZE + 1)
            }
            client.hset(keys.ids, mapping=ids)
            client.hset(keys.index, mapping={w: i for i, w in ids.items()})
            client.hset(keys.meta, "last_id", DICTIONARY_SIZE)

    return reset


REFERENCE = Workload(
    name="dictionary_cost",
    title="Dictionary get-or-put",
    what=f"registering a new string in a dictionary of {DICTIONARY_SIZE} (grows during a run)",
    baseline="naive",
    strategies={
        "naive": naive_get_or_put,
        "HGETALL + HSETNX": hgetall_hsetnx_get_or_put,
        "HINCRBY + HSETNX": hincrby_hsetnx_get_or_put,
        "Lua": lua_get_or_put,
        "Function": function_get_or_put,
        "WATCH": watch_get_or_put,
    },
    request=_reference_request,
    reset=_reference_reset,
    needs={"Function": "functions"},
    libraries=(LIBRARY,),
)
