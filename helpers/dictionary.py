"""A shared string -> id dictionary in Redis, registered five ways, and a checker for its invariant.

The dictionary is three hashes sharing the hash tag ``{dict:<name>}`` (see ``dict_keys``):
``ids`` (id -> string), ``index`` (string -> id) and ``meta`` (field ``last_id``, the counter).
The HGETALL + HSETNX strategy uses ``ids`` alone, as the production code it reproduces did.

Each ``register_*`` function registers one string and returns a ``Registration``: the id, the
round trips it cost (one per command or pipeline sent) and how many times it retried. Strategies
that have a read-then-write window take ``think``, a callable run inside that window (the race
lab's ``ctx.think``), so a race shows up under load on every backend.

- ``register_hgetall_hsetnx``: HGETALL, search, HSETNX the next id, retry if taken. Correct, but
  O(N) per attempt and retries under contention.
- ``register_counter_naive``: HGET the index, then HINCRBY + HSET + HSET. Races: two workers that
  both miss give one string two ids (duplicates).
- ``register_lua`` / ``register_function``: lua/dict_get_or_put.lua by EVALSHA, or the
  racelab_dict library by FCALL. One round trip, atomic, O(1).
- ``register_watch_multi``: optimistic WATCH/MULTI/EXEC with bounded retries.

``check_dictionary`` verifies the invariant: a bijection with dense ids 1..N (and, for the
indexed layout, an index that is its exact inverse and a counter equal to N), and that every
worker got the same id for the same string.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from helpers.namespace import Namespace

COUNTER_FIELD = "last_id"
SCRIPT = "dict_get_or_put"          # lua/dict_get_or_put.lua
BATCH_SCRIPT = "dict_get_or_put_batch"  # lua/dict_get_or_put_batch.lua
LIBRARY = "dict_library"            # lua/dict_library.lua, library racelab_dict
FUNCTION = "racelab_dict_get_or_put"

Think = Callable[[], None]
Text = str | bytes


class RetriesExhausted(RuntimeError):
    """A retrying strategy gave up after its maximum number of attempts."""


@dataclass(frozen=True)
class DictKeys:
    """The three keys of one dictionary; they share one hash tag, so one cluster slot."""

    ids: str
    index: str
    meta: str

    def all(self) -> list[str]:
        """Return [ids, index, meta], the KEYS order of the script and the function."""
        return [self.ids, self.index, self.meta]


@dataclass(frozen=True)
class Registration:
    """What one registration returned and cost."""

    id: int
    round_trips: int
    retries: int = 0
    read_ns: int = 0  # time spent in HGETALL (HGETALL + HSETNX strategy only)


def dict_keys(ns: Namespace, name: str) -> DictKeys:
    """Return the keys of dictionary `name` under ns, all tagged {dict:<name>}."""
    tag = f"dict:{name}"
    return DictKeys(ns.tagged(tag, "ids"), ns.tagged(tag, "index"), ns.tagged(tag, "meta"))


def as_bytes(value: Text | int) -> bytes:
    """Return value as bytes (str as UTF-8, int as its decimal text)."""
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def _no_think() -> None:
    return None


def register_hgetall_hsetnx(client: Any, keys: DictKeys, text: Text, think: Think | None = None,
                            max_attempts: int = 1000) -> Registration:
    """Return text's id found by HGETALL of ids, else claimed by HSETNX of id N+1 (retried if taken)."""
    think = think or _no_think
    wanted = as_bytes(text)
    round_trips = read_ns = 0
    for attempt in range(max_attempts):
        start = time.perf_counter_ns()
        snapshot = client.hgetall(keys.ids)
        read_ns += time.perf_counter_ns() - start
        round_trips += 1
        for field_, value in snapshot.items():
            if as_bytes(value) == wanted:
                return Registration(int(field_), round_trips, attempt, read_ns)
        next_id = len(snapshot) + 1
        think()
        round_trips += 1
        if client.hsetnx(keys.ids, next_id, text):
            return Registration(next_id, round_trips, attempt, read_ns)
    raise RetriesExhausted(f"HGETALL + HSETNX: no free id after {max_attempts} attempts")


def register_counter_naive(client: Any, keys: DictKeys, text: Text, think: Think | None = None) -> Registration:
    """Return text's id from the index, else a fresh HINCRBY id written with two HSETs (races: duplicates)."""
    found = client.hget(keys.index, text)
    if found is not None:
        return Registration(int(found), 1)
    (think or _no_think)()
    new_id = int(client.hincrby(keys.meta, COUNTER_FIELD, 1))
    client.hset(keys.ids, new_id, text)
    client.hset(keys.index, text, new_id)
    return Registration(new_id, 4)


def register_lua(client: Any, keys: DictKeys, text: Text, script: Any) -> Registration:
    """Return text's id from lua/dict_get_or_put.lua (script = load_script(any client, SCRIPT))."""
    return Registration(int(script(keys=keys.all(), args=[text], client=client)), 1)


def register_function(client: Any, keys: DictKeys, text: Text) -> Registration:
    """Return text's id from FCALL racelab_dict_get_or_put (library lua/dict_library.lua loaded)."""
    return Registration(int(client.fcall(FUNCTION, 3, *keys.all(), text)), 1)


def register_batch_lua(client: Any, keys: DictKeys, texts: Sequence[Text], script: Any) -> list[int]:
    """Return the ids of texts, in order, from one call of lua/dict_get_or_put_batch.lua."""
    return [int(i) for i in script(keys=keys.all(), args=list(texts), client=client)]


def register_watch_multi(client: Any, keys: DictKeys, text: Text, think: Think | None = None,
                         max_attempts: int = 1000) -> Registration:
    """Return text's id: HGET fast path, else WATCH index+meta, read, MULTI/EXEC the writes; retried."""
    think = think or _no_think
    found = client.hget(keys.index, text)
    round_trips = 1
    if found is not None:
        return Registration(int(found), round_trips)
    with client.pipeline(transaction=True) as pipe:  # a cluster pipeline WATCHes only in this mode
        for attempt in range(max_attempts):
            try:
                pipe.watch(keys.index, keys.meta)
                found = pipe.hget(keys.index, text)
                round_trips += 2
                if found is not None:
                    pipe.unwatch()
                    return Registration(int(found), round_trips + 1, attempt)
                new_id = int(pipe.hget(keys.meta, COUNTER_FIELD) or 0) + 1
                round_trips += 1
                think()
                pipe.multi()
                pipe.hset(keys.meta, COUNTER_FIELD, new_id)
                pipe.hset(keys.ids, new_id, text)
                pipe.hset(keys.index, text, new_id)
                round_trips += 1
                pipe.execute()
                return Registration(new_id, round_trips, attempt)
            except redis.WatchError:
                continue
    raise RetriesExhausted(f"WATCH/MULTI: EXEC aborted {max_attempts} times in a row")


def prefill(client: Any, keys: DictKeys, count: int, with_index: bool = True, chunk: int = 2000,
            prefix: str = "field") -> int:
    """Write strings f'{prefix}{i}' under ids 1..count (and index + counter if with_index); return count."""
    for start in range(1, count + 1, chunk):
        numbers = range(start, min(start + chunk, count + 1))
        pipe = client.pipeline(transaction=False)
        pipe.hset(keys.ids, mapping={n: f"{prefix}{n}" for n in numbers})
        if with_index:
            pipe.hset(keys.index, mapping={f"{prefix}{n}": n for n in numbers})
        pipe.execute()
    if with_index and count:
        client.hset(keys.meta, COUNTER_FIELD, count)
    return count


def vocabulary(size: int, prefix: str = "column_") -> list[str]:
    """Return `size` distinct strings, e.g. column_0000, column_0001, ..."""
    width = max(4, len(str(size - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(size)]


def workload(workers: int, per_worker: int, words: Sequence[str], seed: int = 0) -> list[list[str]]:
    """Return, for each worker, `per_worker` distinct strings drawn from words (overlapping between workers)."""
    rng = random.Random(seed)
    count = min(per_worker, len(words))
    return [rng.sample(list(words), count) for _ in range(workers)]


@dataclass(frozen=True)
class DictCheck:
    """The result of check_dictionary: size, duplicated strings and every problem found."""

    size: int
    duplicated: dict[bytes, list[int]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Return True if the invariant holds."""
        return not self.problems

    @property
    def duplicates(self) -> int:
        """Return how many extra ids duplicated strings occupy (0 for a bijection)."""
        return sum(len(ids) - 1 for ids in self.duplicated.values())

    def summary(self, limit: int = 8) -> str:
        """Return a headline and up to `limit` findings, one per line, or a single 'ok' line."""
        if self.ok:
            return f"ok: {self.size} strings, a bijection with dense ids 1..{self.size}"
        lines = [f"BROKEN: {self.size} ids, {len(self.duplicated)} strings stored under 2+ ids "
                 f"({self.duplicates} extra ids)"] + [f"  {p}" for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more findings")
        return "\n".join(lines)


def _show(value: bytes) -> str:
    return repr(value.decode("utf-8", errors="backslashreplace"))


def _ids_problems(stored: dict[bytes, bytes]) -> tuple[dict[int, bytes], list[str]]:
    problems, by_id = [], {}
    for raw_id, value in stored.items():
        text = raw_id.decode("ascii", errors="replace")
        if not text.isdigit() or text.startswith("0"):
            problems.append(f"ids has a field that is not a positive id: {_show(raw_id)}")
        else:
            by_id[int(text)] = value
    missing = sorted(set(range(1, len(by_id) + 1)) - by_id.keys())
    if missing:
        problems.append(f"ids are not dense 1..{len(by_id)}: missing {missing[:10]}")
    return by_id, problems


def _index_problems(client: Any, keys: DictKeys, by_id: dict[int, bytes]) -> list[str]:
    index = {as_bytes(k): as_bytes(v) for k, v in client.hgetall(keys.index).items()}
    inverse = {value: as_bytes(i) for i, value in by_id.items()}
    problems = []
    wrong = sum(1 for text, i in index.items() if inverse.get(text) != i)
    unindexed = sum(1 for text in inverse if text not in index)
    if wrong or unindexed or len(index) != len(by_id):
        problems.append(f"index is not the inverse of ids: {wrong} wrong entries, {unindexed} strings "
                        f"missing, {len(index)} entries for {len(by_id)} ids")
    last = client.hget(keys.meta, COUNTER_FIELD)
    if int(last or 0) != len(by_id):
        problems.append(f"counter last_id is {int(last or 0)}, expected {len(by_id)}")
    return problems


def _answer_problems(answers: Iterable[tuple[Text, int]], by_id: dict[int, bytes]) -> list[str]:
    seen: dict[bytes, set[int]] = defaultdict(set)
    for text, given in answers:
        seen[as_bytes(text)].add(int(given))
    problems = []
    for text, given in sorted(seen.items()):
        if len(given) > 1:
            problems.append(f"workers got different ids for {_show(text)}: {sorted(given)}")
        for i in sorted(given):
            if by_id.get(i) != text:
                problems.append(f"a worker got id {i} for {_show(text)} but ids[{i}] holds "
                                f"{_show(by_id[i]) if i in by_id else 'nothing'}")
    return problems


def check_dictionary(client: Any, keys: DictKeys, answers: Iterable[tuple[Text, int]] = (),
                     with_index: bool = True) -> DictCheck:
    """Return a DictCheck: bijection, dense ids, index/counter consistency, and agreement of answers."""
    stored = {as_bytes(k): as_bytes(v) for k, v in client.hgetall(keys.ids).items()}
    by_id, problems = _ids_problems(stored)
    owners: dict[bytes, list[int]] = defaultdict(list)
    for i, text in sorted(by_id.items()):
        owners[text].append(i)
    duplicated = {text: ids for text, ids in owners.items() if len(ids) > 1}
    for text, ids in sorted(duplicated.items())[:10]:
        problems.append(f"{_show(text)} is stored under {len(ids)} ids: {ids}")
    if with_index:
        problems += _index_problems(client, keys, by_id)
    problems += _answer_problems(answers, by_id)
    return DictCheck(size=len(by_id), duplicated=duplicated, problems=tuple(problems))
