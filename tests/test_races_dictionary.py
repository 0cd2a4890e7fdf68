"""helpers/dictionary.py: registration strategies, their costs, and the invariant checker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import ResponseError

from helpers import Lab
from helpers.dictionary import (
    COUNTER_FIELD, LIBRARY, STRATEGIES, DictKeys, RetriesExhausted, Registration, check_dictionary, counter_program,
    dict_keys, dict_script, dictionary_invariant, function_program, hgetall_hsetnx_program, latency_by_size,
    lua_program, prefill, register_batch_lua, register_counter_naive, register_function, register_hgetall_hsetnx,
    register_lua, register_watch_multi, run_workload, strategy, truncate, vocabulary, workload,
)
from helpers.instruments.explore import explore
from helpers.instruments.race import run_clients
from helpers.instruments.schedule import run_schedule
from helpers.backend.scripts import delete_library, load_library, load_script


def _keys(lab: Lab) -> DictKeys:
    return dict_keys(lab.ns, "d")


def test_dict_keys_are_under_the_prefix_and_share_one_hash_tag(lab: Lab) -> None:
    keys = _keys(lab)
    assert all(lab.ns.owns(k) for k in keys.all())
    assert all("{dict:d}" in k for k in keys.all())
    assert len(set(keys.all())) == 3


def test_hgetall_hsetnx_numbers_strings_densely_and_costs_one_trip_on_a_hit(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    first = register_hgetall_hsetnx(client, keys, "a")
    assert (first.id, first.round_trips, first.retries) == (1, 2, 0)
    assert first.read_ns > 0
    assert register_hgetall_hsetnx(client, keys, "b").id == 2
    hit = register_hgetall_hsetnx(client, keys, "a")
    assert (hit.id, hit.round_trips, hit.retries) == (1, 1, 0)
    assert check_dictionary(client, keys, with_index=False).ok


def test_hgetall_hsetnx_retries_when_its_id_is_taken_in_the_window(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    stolen = iter(["intruder"])
    reg = register_hgetall_hsetnx(client, keys, "mine",
                                  think=lambda: register_hgetall_hsetnx(other, keys, next(stolen, "intruder")))
    assert (reg.id, reg.retries, reg.round_trips) == (2, 1, 4)
    assert client.hgetall(keys.ids) == {"1": "intruder", "2": "mine"}


def test_hgetall_hsetnx_finds_the_string_another_worker_registered_in_the_window(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    done: list[Registration] = []
    reg = register_hgetall_hsetnx(client, keys, "same",
                                  think=lambda: done or done.append(register_hgetall_hsetnx(other, keys, "same")))
    assert (reg.id, reg.retries, reg.round_trips) == (1, 1, 3)
    assert check_dictionary(client, keys, [("same", reg.id), ("same", done[0].id)], with_index=False).ok


def test_hgetall_hsetnx_gives_up_after_max_attempts(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    counter = iter(range(1000))
    with pytest.raises(RetriesExhausted, match="3 attempts"):
        register_hgetall_hsetnx(client, keys, "mine", max_attempts=3,
                                think=lambda: register_hgetall_hsetnx(other, keys, f"x{next(counter)}"))


def test_naive_counter_gives_one_string_two_ids_when_another_worker_slips_in(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    theirs: list[Registration] = []
    mine = register_counter_naive(client, keys, "price",
                                  think=lambda: theirs.append(register_counter_naive(other, keys, "price")))
    assert (theirs[0].id, mine.id, mine.round_trips) == (1, 2, 4)
    check = check_dictionary(client, keys, [("price", mine.id), ("price", theirs[0].id)])
    assert not check.ok
    assert check.duplicated == {b"price": [1, 2]}
    assert check.duplicates == 1
    assert "workers got different ids for 'price': [1, 2]" in check.summary()


def test_naive_counter_alone_is_correct_and_a_hit_costs_one_trip(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    assert [register_counter_naive(client, keys, w).id for w in "abca"] == [1, 2, 3, 1]
    assert register_counter_naive(client, keys, "b").round_trips == 1
    assert check_dictionary(client, keys).ok


def test_lua_function_and_watch_multi_agree_on_one_dictionary(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    script = load_script(client, "dict_get_or_put")
    load_library(client, LIBRARY)
    try:
        regs = [register_lua(client, keys, "a", script), register_function(client, keys, "b"),
                register_watch_multi(client, keys, "c"), register_lua(client, keys, "c", script),
                register_function(client, keys, "a"), register_watch_multi(client, keys, "b")]
    finally:
        delete_library(client, LIBRARY)
    assert [r.id for r in regs] == [1, 2, 3, 3, 1, 2]
    assert [r.round_trips for r in regs] == [1, 1, 5, 1, 1, 1]
    assert check_dictionary(client, keys).ok


def test_watch_multi_retries_when_the_counter_moves_in_the_window(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    script = load_script(client, "dict_get_or_put")
    once = iter(["intruder"])
    reg = register_watch_multi(client, keys, "mine",
                               think=lambda: [register_lua(other, keys, w, script) for w in once])
    assert (reg.id, reg.retries, reg.round_trips) == (2, 1, 9)
    assert check_dictionary(client, keys).ok


def test_watch_multi_returns_the_id_another_worker_registered_in_the_window(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    script = load_script(client, "dict_get_or_put")
    once = iter(["same"])
    reg = register_watch_multi(client, keys, "same",
                               think=lambda: [register_lua(other, keys, w, script) for w in once])
    assert (reg.id, reg.retries, reg.round_trips) == (1, 1, 8)
    assert check_dictionary(client, keys).ok


def test_watch_multi_gives_up_after_max_attempts(lab: Lab) -> None:
    client, other, keys = lab.client(), lab.client(), _keys(lab)
    script = load_script(client, "dict_get_or_put")
    counter = iter(range(1000))
    with pytest.raises(RetriesExhausted, match="2 times"):
        register_watch_multi(client, keys, "mine", max_attempts=2,
                             think=lambda: register_lua(other, keys, f"x{next(counter)}", script))


def test_batch_registration_returns_ids_in_order(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    script = load_script(client, "dict_get_or_put_batch")
    assert register_batch_lua(client, keys, ["a", "b", "a"], script) == [1, 2, 1]
    assert register_batch_lua(client, keys, ["c", "b"], script) == [3, 2]


def test_an_empty_batch_returns_no_ids_and_writes_nothing(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    script = load_script(client, "dict_get_or_put_batch")
    assert register_batch_lua(client, keys, [], script) == []
    assert not any(client.exists(k) for k in keys.all())


@pytest.mark.parametrize("with_index", [True, False])
def test_prefill_writes_a_valid_dictionary_of_the_given_size(lab: Lab, with_index: bool) -> None:
    client, keys = lab.client(), _keys(lab)
    assert prefill(client, keys, 4321, with_index=with_index, chunk=1000) == 4321
    check = check_dictionary(client, keys, with_index=with_index)
    assert check.ok, check.summary()
    assert check.size == 4321
    if with_index:
        assert register_lua(client, keys, "new", load_script(client, "dict_get_or_put")).id == 4322
    else:
        assert register_hgetall_hsetnx(client, keys, "new").id == 4322


def test_vocabulary_and_workload_are_deterministic_and_overlap() -> None:
    words = vocabulary(100)
    assert len(set(words)) == 100 and words[0] == "column_0000"
    plan = workload(50, 10, words, seed=7)
    assert plan == workload(50, 10, words, seed=7)
    assert plan != workload(50, 10, words, seed=8)
    assert all(len(set(mine)) == 10 for mine in plan)
    assert len({w for mine in plan for w in mine}) < 50 * 10  # workers share strings


def test_check_dictionary_reports_holes_bad_fields_index_and_counter_mismatch(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    client.hset(keys.ids, mapping={"1": "a", "3": "b", "x": "c"})
    client.hset(keys.index, mapping={"a": "1", "b": "2"})
    client.hset(keys.meta, COUNTER_FIELD, 7)
    check = check_dictionary(client, keys, [("a", 3)])
    text = check.summary()
    assert not check.ok
    for needle in ("not a positive id: 'x'", "not dense 1..2: missing [2]", "index is not the inverse",
                   "counter last_id is 7, expected 2", "got id 3 for 'a' but ids[3] holds 'b'"):
        assert needle in text


def test_check_dictionary_accepts_an_empty_dictionary_and_agreeing_answers(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    assert check_dictionary(client, keys).ok
    register_counter_naive(client, keys, "a")
    check = check_dictionary(client, keys, [("a", 1), (b"a", 1)])
    assert check.ok and check.size == 1 and check.duplicates == 0
    assert check.summary() == "ok: 1 strings, a bijection with dense ids 1..1"


def _concurrent(lab: Lab, keys: DictKeys, register: Callable[[Any, str], Registration],
                workers: int = 24) -> list[tuple[str, int]]:
    plan = workload(workers, 8, vocabulary(20), seed=1)

    def register_mine(ctx: Any) -> list[tuple[str, int]]:
        return [(w, register(ctx.client, w).id) for w in plan[ctx.client_id]]

    result = run_clients(lab, register_mine, clients=workers, iterations=1, timeout=120)
    return [pair for _client, _iteration, pairs in result.outcomes for pair in pairs]

def test_hgetall_hsetnx_and_watch_multi_stay_correct_under_concurrency(lab: Lab) -> None:
    a, b = dict_keys(lab.ns, "a"), dict_keys(lab.ns, "b")
    answers_a = _concurrent(lab, a, lambda c, w: register_hgetall_hsetnx(c, a, w))
    answers_b = _concurrent(lab, b, lambda c, w: register_watch_multi(c, b, w))
    client = lab.client()
    check_a = check_dictionary(client, a, answers_a, with_index=False)
    check_b = check_dictionary(client, b, answers_b)
    assert check_a.ok, check_a.summary()
    assert check_b.ok, check_b.summary()


def test_watch_multi_works_on_a_cluster(cluster_lab: Lab) -> None:
    client, keys = cluster_lab.client(), _keys(cluster_lab)
    assert [register_watch_multi(client, keys, w).id for w in "aba"] == [1, 2, 1]
    assert check_dictionary(client, keys).ok


def test_summary_lists_at_most_limit_findings(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    client.hset(keys.ids, mapping={str(i): "same" for i in range(1, 31)})
    check = check_dictionary(client, keys, with_index=False)
    assert check.duplicates == 29
    lines = check.summary(limit=3).splitlines()
    assert lines[0] == "BROKEN: 30 ids, 1 strings stored under 2+ ids (29 extra ids)"
    assert len(lines) == 1 + len(check.problems[:3]) + (len(check.problems) > 3)


def test_strategy_binds_each_name_and_rejects_unknown_ones(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    load_library(client, LIBRARY)
    try:
        got = {name: strategy(name, keys)(client, f"s-{name}", None).id for name in STRATEGIES
               if name != "hgetall_hsetnx"}
    finally:
        delete_library(client, LIBRARY)
    assert got == {"counter": 1, "lua": 2, "function": 3, "watch": 4}
    assert check_dictionary(client, keys).ok
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        strategy("nope", keys)


def test_run_workload_collects_every_answer_and_its_cost(lab: Lab) -> None:
    keys = _keys(lab)
    plan = workload(12, 4, vocabulary(10), seed=3)
    result = run_workload(lab, plan, strategy("lua", keys))
    assert result.count == 48 and len(result.answers) == 48
    assert result.round_trips_per_registration == 1.0 and result.retries == 0
    check = check_dictionary(lab.client(), keys, result.answers)
    assert check.ok and check.size == len({w for row in plan for w in row})


def test_run_workload_refuses_a_ragged_plan(lab: Lab) -> None:
    with pytest.raises(ValueError, match="same number of strings"):
        run_workload(lab, [["a"], ["a", "b"]], strategy("lua", _keys(lab)))


def test_truncate_returns_a_dictionary_to_its_size(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    prefill(client, keys, 5)
    for word in ["x", "y"]:
        register_lua(client, keys, word, dict_script())
    assert truncate(client, keys, 5) == 2
    check = check_dictionary(client, keys)
    assert check.ok and check.size == 5
    assert register_lua(client, keys, "x", dict_script()).id == 6


def test_latency_by_size_times_both_strategies_and_leaves_a_valid_dictionary(lab: Lab) -> None:
    client, keys = lab.client(), _keys(lab)
    rows = latency_by_size(client, keys, [30, 10], repeats=2, lua_number=2)
    assert set(rows) == {STRATEGIES["hgetall_hsetnx"], STRATEGIES["lua"]}
    for series in rows.values():
        assert [r["size"] for r in series] == [10, 30]
        assert all(r["median"] > 0 and r["n"] == 2 for r in series)
    check = check_dictionary(client, keys)
    assert check.ok and check.size == 30


def test_counter_program_forced_schedule_makes_a_duplicate(lab: Lab) -> None:
    keys = _keys(lab)
    trace = run_schedule(lab, {"A": counter_program(keys, "price"), "B": counter_program(keys, "price")},
                         "ABAAABBB", watch=keys.all())
    assert trace.results == {"A": 1, "B": 2}
    check = check_dictionary(lab.client(), keys, [("price", 1), ("price", 2)])
    assert check.duplicated == {b"price": [1, 2]}


def test_hgetall_hsetnx_program_retries_on_a_taken_id(lab: Lab) -> None:
    keys = _keys(lab)
    trace = run_schedule(lab, {"A": hgetall_hsetnx_program(keys, "price"),
                               "B": hgetall_hsetnx_program(keys, "volume")}, "ABABBB", watch=[keys.ids])
    assert trace.results == {"A": 1, "B": 2}
    assert [r.reply for r in trace.rows if r.command.startswith("HSETNX")] == ["1", "0", "1"]


def test_explorer_counts_bad_schedules_per_strategy(lab: Lab) -> None:
    keys = _keys(lab)
    texts = {"A": "price", "B": "price"}
    naive = explore(lab, {n: counter_program(keys, t) for n, t in texts.items()},
                    dictionary_invariant(keys, texts), watch=keys.all())
    scan = explore(lab, {n: hgetall_hsetnx_program(keys, t) for n, t in texts.items()},
                   dictionary_invariant(keys, texts, with_index=False), watch=keys.all())
    lua = explore(lab, {n: lua_program(keys, t) for n, t in texts.items()},
                  dictionary_invariant(keys, texts), watch=keys.all())
    assert (naive.total, naive.bad_count) == (70, 68)
    assert sorted(naive.good) == ["AAAAB", "BBBBA"]
    assert (scan.total, scan.bad_count) == (6, 0)
    assert (lua.total, lua.bad_count) == (2, 0)


def test_function_program_is_one_step(lab: Lab) -> None:
    keys = _keys(lab)
    client = lab.client()
    load_library(client, LIBRARY)
    try:
        texts = {"A": "x", "B": "x"}
        found = explore(lab, {n: function_program(keys, t) for n, t in texts.items()},
                        dictionary_invariant(keys, texts), watch=keys.all())
    finally:
        delete_library(client, LIBRARY)
    assert (found.total, found.bad_count) == (2, 0)


def test_invariant_fails_when_a_client_gave_up(lab: Lab) -> None:
    keys = _keys(lab)
    invariant = dictionary_invariant(keys, {"A": "x"})
    assert invariant(lab.client(), {"A": "gave-up"}) is False
    assert invariant(lab.client(), {}) is True


def test_function_strategy_survives_another_run_deleting_the_shared_library(lab: Lab) -> None:
    # Two runs of the suite on one server share racelab_dict; the other run's cleanup deletes it.
    client, other_run, keys = lab.client(), lab.client(), _keys(lab)
    load_library(client, LIBRARY)
    try:
        assert register_function(client, keys, "a").id == 1
        assert delete_library(other_run, LIBRARY) is True
        assert register_function(client, keys, "b").id == 2
        assert delete_library(other_run, LIBRARY) is True
        trace = run_schedule(lab, {"A": function_program(keys, "c")}, "A", watch=[keys.ids], reset=[])
        assert trace.results == {"A": 3}
        broken = DictKeys(keys.ids, keys.index + ":not-a-hash", keys.meta)
        client.set(broken.index, "x")
        with pytest.raises(ResponseError, match="WRONGTYPE"):  # other errors still propagate
            register_function(client, broken, "d")
    finally:
        delete_library(client, LIBRARY)
    assert check_dictionary(client, keys).ok
