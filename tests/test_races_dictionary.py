"""races/dictionary.py: each get-or-put strategy, its schedules, its threaded breakage or soundness, the checker.

Every test runs on the embedded backend and on a real Redis (the ``lab`` fixture); a few on a cluster.
"""

from __future__ import annotations

import ast
import json
import random
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis

from benchmarks import dictionary_latency as bench
from helpers import Lab, client_stats, explore, run_clients, run_schedule
from helpers.backend.scripts import delete_library
from races import GaveUp
from races.dictionary import (
    FUNCTION,
    DictKeys,
    batch_get_or_put,
    check_dictionary,
    dict_keys,
    function_get_or_put,
    hgetall_hsetnx_get_or_put,
    hincrby_hsetnx_get_or_put,
    lua_get_or_put,
    naive_get_or_put,
    watch_get_or_put,
)

SINGLE = [
    hgetall_hsetnx_get_or_put,
    naive_get_or_put,
    lua_get_or_put,
    function_get_or_put,
    watch_get_or_put,
    hincrby_hsetnx_get_or_put,
]
ALL = [*SINGLE, batch_get_or_put]
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03_hgetall_hsetnx.ipynb"
# The notebook's workload: 50 workers x 8 strings of 30, the clients in lockstep (rounds of round trips).
WORDS = [f"column_{i:02d}" for i in range(30)]
PLAN = [random.Random(worker).sample(WORDS, 8) for worker in range(50)]


@pytest.fixture
def lab(lab: Lab) -> Iterator[Lab]:
    """The conftest's lab; afterwards racelab_dict is deleted (a library is global on a server)."""
    yield lab
    delete_library(lab.client(), "dict_library")


@pytest.fixture
def cluster_lab(cluster_lab: Lab) -> Iterator[Lab]:
    """The conftest's cluster lab; afterwards racelab_dict is deleted from every primary."""
    yield cluster_lab
    delete_library(cluster_lab.client(), "dict_library")


def _keys(lab: Lab, name: str = "d") -> DictKeys:
    return dict_keys(lab.ns, name)


def _indexed(fn: Callable[..., Any]) -> bool:
    """Return True if fn keeps index and counter (all but HGETALL + HSETNX, which uses ids alone)."""
    return fn is not hgetall_hsetnx_get_or_put


def _register(fn: Callable[..., Any], client: Any, text: Any, keys: DictKeys) -> int:
    """Register one string with any strategy (the batch strategy gets a batch of one)."""
    return fn(client, [text], keys)[0] if fn is batch_get_or_put else fn(client, text, keys)


def _pair(fn: Callable[..., Any], keys: DictKeys, a: Any, b: Any) -> dict[str, Any]:
    """Return actors A and B of one strategy (a batch strategy takes lists)."""
    name = "texts" if fn is batch_get_or_put else "text"
    return {"A": partial(fn, keys=keys, **{name: a}), "B": partial(fn, keys=keys, **{name: b})}


def _sound(
    keys: DictKeys, texts: dict[str, Any], indexed: bool = True, dense: bool = True
) -> Callable[[Any, dict[str, Any]], bool]:
    """Return an explorer invariant: every actor got its ids and check_dictionary finds nothing."""

    def invariant(client: Any, results: dict[str, Any]) -> bool:
        answers: list[tuple[Any, Any]] = []
        for name, got in results.items():
            mine = texts[name]
            answers += zip(mine, got) if isinstance(mine, list) else [(mine, got)]
        return len(results) == len(texts) and not check_dictionary(
            client, keys, answers, indexed, dense
        )

    return invariant


def _load(lab: Lab, fn: Callable[..., Any], keys: DictKeys) -> tuple[Any, list[str], int]:
    """Return (RunResult, problems, ids) of the notebook's workload run by fn in lockstep."""
    batch = fn is batch_get_or_put
    run = run_clients(
        lab,
        partial(fn, keys=keys),
        inputs=[[row] for row in PLAN] if batch else PLAN,
        mode="lockstep",
        timeout=120,
    )
    answers: list[tuple[Any, Any]] = []
    for worker, i, got in run.outcomes:
        answers += zip(PLAN[worker], got) if batch else [(PLAN[worker][i], got)]
    client = lab.client()
    return run, check_dictionary(client, keys, answers, _indexed(fn)), client.hlen(keys.ids)


# --- the keys ------------------------------------------------------------------------------


def test_dict_keys_are_under_the_prefix_share_one_hash_tag_and_come_in_the_scripts_order(
    lab: Lab,
) -> None:
    keys = _keys(lab)
    assert list(keys) == keys.all() == [keys.ids, keys.index, keys.meta]
    assert all(lab.ns.owns(k) and "{dict:d}" in k for k in keys)
    assert [k.rsplit(":", 1)[1] for k in keys] == ["ids", "index", "meta"]


# --- each strategy alone -----------------------------------------------------------------


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_each_strategy_numbers_strings_densely_and_answers_the_same_id_again(
    lab: Lab, fn: Callable[..., Any]
) -> None:
    client, keys = lab.client(), _keys(lab)
    texts = ["price", "volume", "", "prix €", "price", "volume"]
    ids = [_register(fn, client, t, keys) for t in texts]
    assert ids == [1, 2, 3, 4, 1, 2]
    assert check_dictionary(client, keys, list(zip(texts, ids)), _indexed(fn)) == []


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_each_strategy_is_binary_safe_on_a_decoding_client(
    lab: Lab, fn: Callable[..., Any]
) -> None:
    # Texts that are not UTF-8: a decoding client (decode_responses=True, the default) must cope.
    client, keys = lab.client(), _keys(lab)
    texts = [
        b"\xff\xfe",
        "price",
        b"\x00",
        b"\xff\xfe",
        b"price",
        "\udcff".encode("utf-8", "surrogatepass"),
    ]
    ids = [_register(fn, client, t, keys) for t in texts]
    assert ids == [1, 2, 3, 1, 2, 4]
    assert check_dictionary(client, keys, list(zip(texts, ids)), _indexed(fn)) == []
    raw = lab.client(decode_responses=False)
    assert raw.hget(keys.ids, 1) == b"\xff\xfe" and raw.hget(keys.ids, 3) == b"\x00"


def test_hgetall_hsetnx_reads_non_utf8_strings_that_another_caller_stored(lab: Lab) -> None:
    # The old version decoded HGETALL's reply and raised UnicodeDecodeError here.
    client, keys = lab.client(), _keys(lab)
    lab.client(decode_responses=False).hset(keys.ids, mapping={1: b"\x80abc", 2: b"ok"})
    assert hgetall_hsetnx_get_or_put(client, "new", keys) == 3
    assert hgetall_hsetnx_get_or_put(client, b"\x80abc", keys) == 1


@pytest.mark.parametrize(
    "fn, new, known",
    [
        (hgetall_hsetnx_get_or_put, 2, 1),
        (naive_get_or_put, 4, 1),
        (lua_get_or_put, 1, 1),
        (function_get_or_put, 1, 1),
        (batch_get_or_put, 1, 1),
        (watch_get_or_put, 5, 1),
        (hincrby_hsetnx_get_or_put, 4, 1),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_round_trips_of_one_registration_alone(
    lab: Lab, fn: Callable[..., Any], new: int, known: int
) -> None:
    client, keys = lab.client(), _keys(lab)
    _register(fn, client, "deploy", _keys(lab, "warm-up"))  # loads the script or library if missing
    counts = []
    for _ in range(2):
        before = client_stats(client)
        _register(fn, client, "price", keys)
        counts.append((client_stats(client) - before).round_trips)
    assert counts == [new, known]


def test_an_empty_batch_returns_no_ids_and_writes_nothing(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    before = client_stats(client)
    assert batch_get_or_put(client, [], keys) == []
    assert (client_stats(client) - before).round_trips == 0
    assert not any(client.exists(k) for k in keys)


def test_a_batch_keeps_its_order_and_gives_a_repeated_string_one_id(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    assert batch_get_or_put(client, ["a", "b", "a"], keys) == [1, 2, 1]
    assert batch_get_or_put(client, ["c", "b"], keys) == [3, 2]
    assert check_dictionary(client, keys) == []


def test_function_survives_another_run_deleting_the_shared_library_and_other_errors_propagate(
    lab: Lab,
) -> None:
    client, other_run, keys = lab.client(), lab.client(), _keys(lab)
    assert function_get_or_put(client, "a", keys) == 1
    other_run.function_delete("racelab_dict")
    before = client_stats(client)
    assert function_get_or_put(client, "b", keys) == 2
    assert (
        client_stats(client) - before
    ).round_trips == 3  # FCALL (not found), FUNCTION LOAD, FCALL
    client.set(keys.index + ":not-a-hash", "x")
    broken = DictKeys(keys.ids, keys.index + ":not-a-hash", keys.meta)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        function_get_or_put(client, "c", broken)
    assert client.fcall(FUNCTION, 3, *keys, "a") == 1


# --- forced schedules and every schedule -------------------------------------------------


def test_forced_schedule_of_the_naive_counter_gives_one_string_two_ids(lab: Lab) -> None:
    keys = _keys(lab)
    trace = run_schedule(
        lab, _pair(naive_get_or_put, keys, "price", "price"), "ABAAABBB", watch=list(keys)
    )
    assert trace.results == {"A": 1, "B": 2}
    assert [row.command.split()[0] for row in trace.rows] == [
        "HGET",
        "HGET",
        "HINCRBY",
        "HSET",
        "HSET",
        "HINCRBY",
        "HSET",
        "HSET",
    ]
    problems = check_dictionary(lab.client(), keys, [("price", 1), ("price", 2)])
    assert "'price' has 2 ids: [1, 2]" in problems and "index is not the inverse of ids" in problems


def test_forced_schedule_of_hgetall_hsetnx_collides_and_starts_over(lab: Lab) -> None:
    keys = _keys(lab)
    trace = run_schedule(
        lab,
        _pair(hgetall_hsetnx_get_or_put, keys, "price", "volume"),
        "ABABBB",
        watch=[keys.ids],
        reset=list(keys),
    )
    assert trace.results == {"A": 1, "B": 2}
    assert [r.reply for r in trace.rows if r.command.startswith("HSETNX")] == ["1", "0", "1"]
    assert trace.rows[4].reply == "{b'1': b'price'}"  # read undecoded: any bytes compare exactly


def test_hgetall_hsetnx_finds_the_string_another_caller_registered_in_its_window(lab: Lab) -> None:
    keys = _keys(lab)
    trace = run_schedule(
        lab,
        _pair(hgetall_hsetnx_get_or_put, keys, "same", "same"),
        "ABABB",
        watch=[keys.ids],
        reset=list(keys),
    )
    assert trace.results == {"A": 1, "B": 1}
    assert check_dictionary(lab.client(), keys, [("same", 1), ("same", 1)], indexed=False) == []


@pytest.mark.parametrize(
    "fn, schedule",
    [(hgetall_hsetnx_get_or_put, "ABAB"), (watch_get_or_put, "ABABABABAB")],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_an_optimistic_strategy_gives_up_after_max_attempts(
    lab: Lab, fn: Callable[..., Any], schedule: str
) -> None:
    keys = _keys(lab)
    actors = {
        "A": partial(fn, text="a", keys=keys),
        "B": partial(fn, text="b", keys=keys, max_attempts=1),
    }
    with pytest.raises(GaveUp, match="gave up after 1 attempts"):
        run_schedule(lab, actors, schedule, watch=list(keys))


@pytest.mark.parametrize(
    "fn, total, bad",
    [
        (naive_get_or_put, 70, 68),
        (hgetall_hsetnx_get_or_put, 6, 0),
        (lua_get_or_put, 2, 0),
        (function_get_or_put, 2, 0),
        (batch_get_or_put, 2, 0),
        (watch_get_or_put, 252, 0),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_explored_answers_for_two_workers_registering_one_string(
    lab: Lab, fn: Callable[..., Any], total: int, bad: int
) -> None:
    keys = _keys(lab)
    _register(fn, lab.client(), "deploy", _keys(lab, "warm-up"))  # the library must be there before
    texts: dict[str, Any] = (
        {"A": ["price", "volume"], "B": ["volume", "price"]}
        if fn is batch_get_or_put
        else {"A": "price", "B": "price"}
    )
    found = explore(
        lab,
        _pair(fn, keys, texts["A"], texts["B"]),
        _sound(keys, texts, _indexed(fn)),
        watch=list(keys),
    )
    assert (found.total, found.bad_count) == (total, bad)
    if fn is naive_get_or_put:
        assert sorted(found.good) == ["AAAAB", "BBBBA"]


def test_hincrby_hsetnx_gives_one_string_one_id_but_the_loser_leaves_a_gap(lab: Lab) -> None:
    keys = _keys(lab)
    trace = run_schedule(
        lab, _pair(hincrby_hsetnx_get_or_put, keys, "price", "price"), "ABABABAB", watch=list(keys)
    )
    assert trace.results == {"A": 1, "B": 1}
    assert [(row.command.split()[0], row.reply) for row in trace.rows[4:6]] == [
        ("HSETNX", "1"),
        ("HSETNX", "0"),
    ]
    client = lab.client()
    assert hincrby_hsetnx_get_or_put(client, "volume", keys) == 3  # id 2 was never used
    assert check_dictionary(client, keys, [("price", 1), ("volume", 3)], dense=False) == []
    assert check_dictionary(client, keys) == [
        "the ids are not exactly 1..2",
        "the counter says 3, ids holds 2",
    ]
    # The script keeps ids dense, and refuses a dictionary with a gap rather than extend it.
    with pytest.raises(redis.ResponseError, match="inconsistent-dictionary"):
        lua_get_or_put(client, "open", keys)


def test_every_schedule_of_hincrby_hsetnx_keeps_one_id_per_string_and_most_leave_a_gap(
    lab: Lab,
) -> None:
    keys = _keys(lab)
    texts = {"A": "price", "B": "price"}
    pair = _pair(hincrby_hsetnx_get_or_put, keys, "price", "price")
    unique = explore(lab, pair, _sound(keys, texts, dense=False), watch=list(keys))
    assert (unique.total, unique.bad_count) == (64, 0)
    dense = explore(lab, pair, _sound(keys, texts), watch=list(keys))
    assert (dense.total, dense.bad_count) == (64, 60)
    assert sorted(dense.good) == ["AAAAB", "AAABA", "BBBAB", "BBBBA"]


def test_check_dictionary_without_dense_still_finds_two_ids_and_an_id_above_the_counter(
    lab: Lab,
) -> None:
    client, keys = lab.client(), _keys(lab)
    client.hset(keys.ids, mapping={"1": "a", "5": "a"})
    client.hset(keys.index, mapping={"a": "1"})
    client.hset(keys.meta, "last_id", 4)
    assert check_dictionary(client, keys, dense=False) == [
        "'a' has 2 ids: [1, 5]",
        "index is not the inverse of ids",
        "an id is above the counter (4)",
    ]


def test_two_different_new_strings_never_break_the_naive_counter(lab: Lab) -> None:
    keys = _keys(lab)
    texts = {"A": "price", "B": "volume"}
    found = explore(
        lab, _pair(naive_get_or_put, keys, "price", "volume"), _sound(keys, texts), watch=list(keys)
    )
    assert (found.total, found.bad_count) == (70, 0)


# --- threaded load -------------------------------------------------------------------------


def test_threaded_naive_counter_breaks_the_bijection_and_hgetall_hsetnx_collides(lab: Lab) -> None:
    run, problems, ids = _load(lab, naive_get_or_put, _keys(lab, "naive"))
    assert ids > 30 and any("ids: [" in p for p in problems)
    assert run.round_trips == run.calls + 3 * ids  # each miss: HGET, then HINCRBY and two HSETs
    run, problems, ids = _load(lab, hgetall_hsetnx_get_or_put, _keys(lab, "scan"))
    assert problems == [] and ids == 30 and run.retries > 0
    assert (
        run.round_trips == run.calls + 2 * run.retries + 30
    )  # a refused HSETNX costs it and a HGETALL


def test_threaded_hincrby_hsetnx_keeps_one_id_per_string_and_wastes_an_id_per_lost_hsetnx(
    lab: Lab,
) -> None:
    keys = _keys(lab)
    run = run_clients(
        lab,
        partial(hincrby_hsetnx_get_or_put, keys=keys),
        inputs=PLAN,
        mode="lockstep",
        timeout=120,
    )
    client = lab.client()
    answers = [(PLAN[worker][i], got) for worker, i, got in run.outcomes]
    assert check_dictionary(client, keys, answers, dense=False) == []
    last_id = int(client.hget(keys.meta, "last_id"))
    assert client.hlen(keys.ids) == 30
    # Round one: all 50 look up and miss (an empty dictionary); round two: 50 HINCRBYs. Only 30
    # strings exist, so at least 20 HSETNXs lose, and each loser's id is never used.
    assert last_id - 30 == run.retries >= 20
    assert run.round_trips == run.calls + 3 * last_id  # a miss adds HINCRBY, HSETNX, HSET or HGET


@pytest.mark.parametrize(
    "fn",
    [lua_get_or_put, function_get_or_put, batch_get_or_put, watch_get_or_put],
    ids=lambda f: f.__name__,
)
def test_threaded_load_keeps_the_fixes_sound(lab: Lab, fn: Callable[..., Any]) -> None:
    client = lab.client()
    _register(fn, client, "deploy", _keys(lab, "warm-up"))  # script cached, library loaded
    run, problems, ids = _load(lab, fn, _keys(lab))
    assert problems == [] and ids == 30
    if fn is watch_get_or_put:
        assert run.retries > 0  # refused EXECs: correct, but not free
    else:
        assert run.round_trips == run.calls and run.retries == 0


def test_a_workload_must_give_every_client_the_same_number_of_inputs(lab: Lab) -> None:
    with pytest.raises(ValueError, match="same length"):
        run_clients(lab, partial(lua_get_or_put, keys=_keys(lab)), inputs=[["a"], ["a", "b"]])


# --- one function object everywhere --------------------------------------------------------


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_the_same_function_is_interleaved_explored_threaded_and_benchmarked(
    lab: Lab, fn: Callable[..., Any]
) -> None:
    keys = _keys(lab)
    _register(fn, lab.client(), "deploy", _keys(lab, "warm-up"))
    a, b = (["x"], ["y"]) if fn is batch_get_or_put else ("x", "y")
    trace = run_schedule(lab, _pair(fn, keys, a, b), "AB", watch=list(keys), finish=True)
    assert trace.actors["A"].func is fn and trace.actors["B"].func is fn
    found = explore(lab, _pair(fn, keys, a, b), lambda client, results: True, watch=list(keys))
    assert all(actor.func is fn for actor in found.actors.values())
    run = run_clients(lab, partial(fn, keys=_keys(lab, "threads")), inputs=[[a], [b]])
    assert run.fn.func is fn and {op.label for op in run.history} == {fn.__name__}
    assert [f for f in bench.STRATEGIES.values() if f is fn] == [fn]
    rows = bench.measure_sizes(
        lab.client(), _keys(lab, "bench"), [5], repeats=1, server=False, strategies=[fn]
    )
    assert list(rows[0].stats) == [fn]


def test_notebook_03_runs_the_strategies_of_races_dictionary_and_defines_none_of_its_own() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    tree = ast.parse("\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code"))
    imported = {
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "races.dictionary"
        for a in node.names
    }
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    names = {fn.__name__ for fn in ALL}
    assert names <= imported
    assert not names & defined


# --- the checker ---------------------------------------------------------------------------


def test_check_dictionary_accepts_an_empty_dictionary_and_agreeing_answers(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    assert check_dictionary(client, keys) == []
    naive_get_or_put(client, "a", keys)
    assert check_dictionary(client, keys, [("a", 1), (b"a", 1)]) == []


def test_check_dictionary_reports_every_kind_of_problem(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    client.hset(keys.ids, mapping={"1": "a", "3": "b", "4": "a", "x": "c"})
    client.hset(keys.index, mapping={"a": "1", "b": "2"})
    client.hset(keys.meta, "last_id", 7)
    problems = check_dictionary(client, keys, [("a", 3), ("b", "oops")])
    assert problems == [
        "'a' has 2 ids: [1, 4]",
        "the ids are not exactly 1..4",
        "index is not the inverse of ids",
        "the counter says 7, ids holds 4",
        "a caller got 3 for 'a'",
        "a caller got 'oops' for 'b'",
    ]
    assert check_dictionary(client, keys, indexed=False) == problems[:2]


def test_check_dictionary_shows_binary_strings_as_bytes(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    lab.client(decode_responses=False).hset(keys.ids, mapping={1: b"\xff", 2: b"\xff"})
    assert check_dictionary(client, keys, indexed=False) == ["b'\\xff' has 2 ids: [1, 2]"]


# --- cluster -------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_each_strategy_works_on_a_cluster(cluster_lab: Lab, fn: Callable[..., Any]) -> None:
    client, keys = cluster_lab.client(), _keys(cluster_lab)
    assert [_register(fn, client, t, keys) for t in ["a", b"\xff", "a"]] == [1, 2, 1]
    assert check_dictionary(client, keys, indexed=_indexed(fn)) == []
