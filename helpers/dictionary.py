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

``strategy(name, keys)`` binds one of them to a dictionary; ``run_workload`` runs it from many
threads (``helpers.race.run_clients``); ``latency_by_size`` times a registration against the
dictionary's size. The ``*_program`` functions are the same strategies as schedule programs for
``helpers.instruments.schedule`` / ``helpers.instruments.explore`` (one step per Redis command; the script and the
function are one step each).

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
from redis.commands.core import Script

from helpers.backend.namespace import Namespace
from helpers.instruments.race import RunResult, run_clients
from helpers.instruments.schedule import Program, call, cmd
from helpers.backend.scripts import fcall_reloading, lua_source

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


def dict_script(name: str = SCRIPT) -> Script:
    """Return lua/<name>.lua as a Script bound to no client: call it with client=... (EVALSHA, NOSCRIPT-safe)."""
    return Script(None, lua_source(name).encode())


def register_lua(client: Any, keys: DictKeys, text: Text, script: Any) -> Registration:
    """Return text's id from lua/dict_get_or_put.lua (script = dict_script() or load_script(c, SCRIPT))."""
    return Registration(int(script(keys=keys.all(), args=[text], client=client)), 1)


def fcall_get_or_put(client: Any, keys: DictKeys, text: Text) -> Any:
    """Return the reply of FCALL racelab_dict_get_or_put, loading the library first if another run deleted it."""
    return fcall_reloading(client, LIBRARY, FUNCTION, keys.all(), [text])


def register_function(client: Any, keys: DictKeys, text: Text) -> Registration:
    """Return text's id from FCALL racelab_dict_get_or_put (lua/dict_library.lua; reloaded if another run deleted it)."""
    return Registration(int(fcall_get_or_put(client, keys, text)), 1)


def register_batch_lua(client: Any, keys: DictKeys, texts: Sequence[Text], script: Any) -> list[int]:
    """Return the ids of texts, in order, from one call of lua/dict_get_or_put_batch.lua.

    An empty batch returns [] without a call (the script refuses zero strings as invalid-arguments).
    """
    if not texts:
        return []
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


Register = Callable[[Any, Text, Think | None], Registration]
STRATEGIES = {
    "hgetall_hsetnx": "HGETALL + HSETNX",
    "counter": "counter (naive)",
    "lua": "Lua script",
    "function": "Function (FCALL)",
    "watch": "WATCH/MULTI",
}


def strategy(name: str, keys: DictKeys) -> Register:
    """Return register(client, text, think) for one of STRATEGIES' names, bound to the dictionary keys."""
    if name == "hgetall_hsetnx":
        return lambda client, text, think=None: register_hgetall_hsetnx(client, keys, text, think)
    if name == "counter":
        return lambda client, text, think=None: register_counter_naive(client, keys, text, think)
    if name == "lua":
        script = dict_script()
        return lambda client, text, think=None: register_lua(client, keys, text, script)
    if name == "function":
        return lambda client, text, think=None: register_function(client, keys, text)
    if name == "watch":
        return lambda client, text, think=None: register_watch_multi(client, keys, text, think)
    raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


@dataclass
class Workload:
    """A threaded run of registrations: every answer and what each registration cost."""

    run: RunResult
    answers: list[tuple[str, int]]
    registrations: list[Registration]

    @property
    def count(self) -> int:
        """Return how many registrations completed."""
        return len(self.registrations)

    @property
    def round_trips_per_registration(self) -> float:
        """Return the mean number of round trips per registration."""
        return sum(r.round_trips for r in self.registrations) / max(1, self.count)

    @property
    def retries(self) -> int:
        """Return the total number of retries."""
        return sum(r.retries for r in self.registrations)

    @property
    def read_s(self) -> float:
        """Return the total time spent in HGETALL, in seconds, summed over workers."""
        return sum(r.read_ns for r in self.registrations) / 1e9

    @property
    def throughput(self) -> float:
        """Return registrations per second of wall time."""
        return self.run.throughput


def run_workload(lab: Any, plan: Sequence[Sequence[str]], register: Register, think_time: float = 0.0,
                 timeout: float = 120.0) -> Workload:
    """Return the Workload of one thread per plan row registering its strings in order (all start together)."""
    def client_fn(ctx: Any) -> tuple[str, Registration]:
        text = plan[ctx.client_id][ctx.iteration]
        reg = register(ctx.client, text, ctx.think)
        if reg.retries:
            ctx.retry(reg.retries)
        return text, reg

    iterations = {len(row) for row in plan}
    if len(iterations) != 1:
        raise ValueError("every worker of the plan must register the same number of strings")
    run = run_clients(lab, client_fn, clients=len(plan), iterations=iterations.pop(), think_time=think_time,
                      timeout=timeout)
    pairs = [value for _, _, value in run.outcomes]
    return Workload(run, [(text, reg.id) for text, reg in pairs], [reg for _, reg in pairs])


def prefill(client: Any, keys: DictKeys, count: int, with_index: bool = True, chunk: int = 2000,
            prefix: str = "field", start: int = 1) -> int:
    """Write strings f'{prefix}{i}' under ids start..count (and index + counter if with_index); return count."""
    for first in range(start, count + 1, chunk):
        numbers = range(first, min(first + chunk, count + 1))
        pipe = client.pipeline(transaction=False)
        pipe.hset(keys.ids, mapping={n: f"{prefix}{n}" for n in numbers})
        if with_index:
            pipe.hset(keys.index, mapping={f"{prefix}{n}": n for n in numbers})
        pipe.execute()
    if with_index and count:
        client.hset(keys.meta, COUNTER_FIELD, count)
    return count


def truncate(client: Any, keys: DictKeys, size: int) -> int:
    """Remove every id above size (and its index entry), set the counter to size; return how many were removed."""
    last = int(client.hlen(keys.ids))
    extra = list(range(size + 1, last + 1))
    if extra:
        texts = client.hmget(keys.ids, extra)
        client.hdel(keys.ids, *extra)
        stale = [t for t in texts if t is not None]
        if stale:
            client.hdel(keys.index, *stale)
    if client.exists(keys.meta):
        client.hset(keys.meta, COUNTER_FIELD, size)
    return len(extra)


def latency_by_size(client: Any, keys: DictKeys, sizes: Sequence[int], repeats: int = 5,
                    lua_number: int = 20) -> dict[str, list[dict[str, Any]]]:
    """Return {strategy label: tidy rows {size, median, p5, ...} of seconds per new-string registration}.

    One dictionary grows through the sizes (prefill adds only what is missing); at each size the
    Lua script and then HGETALL + HSETNX register fresh strings, and truncate() removes them
    again, so both always see exactly `size` strings. The miss path is timed: the full cost.
    """
    from helpers.instruments.measure import measure  # local: only the sweep needs it

    script = dict_script()
    fresh = iter(range(10**12))
    rows: dict[str, list[dict[str, Any]]] = {STRATEGIES["hgetall_hsetnx"]: [], STRATEGIES["lua"]: []}
    filled = 0
    for size in sorted(sizes):
        prefill(client, keys, size, start=filled + 1)
        filled = size
        lua = measure(lambda: register_lua(client, keys, f"~new{next(fresh)}", script),
                      warmup=2, repeats=repeats, number=lua_number)
        truncate(client, keys, size)
        scan = measure(lambda: register_hgetall_hsetnx(client, keys, f"~new{next(fresh)}"),
                       warmup=1, repeats=repeats)
        truncate(client, keys, size)
        rows[STRATEGIES["lua"]].append({"size": size, **lua.row()})
        rows[STRATEGIES["hgetall_hsetnx"]].append({"size": size, **scan.row()})
    return rows


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


# --- the same strategies as schedule programs (one step per Redis command) ----------------

def _matching_id(snapshot: dict[Any, Any], text: Text) -> int | None:
    wanted = as_bytes(text)
    for field_, value in snapshot.items():
        if as_bytes(value) == wanted:
            return int(field_)
    return None


def hgetall_hsetnx_program(keys: DictKeys, text: Text, max_attempts: int = 4) -> Program:
    """Return a schedule program: HGETALL, search, HSETNX id N+1, again if taken; returns the id."""
    def program():
        for _ in range(max_attempts):
            snapshot = yield cmd("HGETALL", keys.ids)
            found = _matching_id(snapshot, text)
            if found is not None:
                return found
            if (yield cmd("HSETNX", keys.ids, len(snapshot) + 1, text)):
                return len(snapshot) + 1
        return "gave-up"
    return program


def counter_program(keys: DictKeys, text: Text) -> Program:
    """Return a schedule program: HGET index, then HINCRBY, HSET ids, HSET index; returns the id."""
    def program():
        found = yield cmd("HGET", keys.index, text)
        if found is not None:
            return int(found)
        new_id = int((yield cmd("HINCRBY", keys.meta, COUNTER_FIELD, 1)))
        yield cmd("HSET", keys.ids, new_id, text)
        yield cmd("HSET", keys.index, text, new_id)
        return new_id
    return program


def lua_program(keys: DictKeys, text: Text) -> Program:
    """Return a schedule program of ONE step, lua/dict_get_or_put.lua by EVALSHA; returns the id."""
    script = dict_script()

    def program():
        return int((yield call(f"EVALSHA dict_get_or_put {text!s}",
                               lambda client: script(keys=keys.all(), args=[text], client=client))))
    return program


def function_program(keys: DictKeys, text: Text) -> Program:
    """Return a schedule program of ONE step, FCALL racelab_dict_get_or_put; returns the id."""
    def program():
        return int((yield call(f"FCALL {FUNCTION} {text!s}",
                               lambda client: fcall_get_or_put(client, keys, text))))
    return program


def dictionary_invariant(keys: DictKeys, texts: dict[str, Text], with_index: bool = True
                         ) -> Callable[[Any, dict[str, Any]], bool]:
    """Return an explorer invariant: every client got an id, and check_dictionary(...) is ok."""
    def invariant(client: Any, results: dict[str, Any]) -> bool:
        if not all(isinstance(r, int) for r in results.values()):
            return False
        answers = [(texts[name], r) for name, r in results.items()]
        return check_dictionary(client, keys, answers, with_index).ok
    return invariant
