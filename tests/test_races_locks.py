"""races/locks.py: every lock function on embedded and real, the forced and explored answers of
notebook 02, the threaded load that breaks the naive releases in every run, and the one function
object that is interleaved, explored, threaded and benchmarked."""

from __future__ import annotations

import ast
import itertools
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis

from benchmarks import lock_release_cost
from helpers import Lab, explore, lease_expires, run_clients, run_schedule
from helpers.instruments.history import lease_span, overlaps
from helpers.instruments.load import RunResult
from races import GaveUp, locks

MINE, THEIRS = "a" * 40, "b" * 40
LEASE_MS = 10_000
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_blind_del.ipynb"
NAIVE = ("release_blind", "release_check_then_del")
SAFE = ("release_lua", "release_lua_checked", "release_watch", "release_delex", "release_digest")
# Notebook 02's threaded load (its "Under load" cell): 6 workers x 10 turns, 10 ms per round trip,
# a 40 ms lease, 15-25 ms of work, and every 5th turn stalls for twice the lease.
THINK_S, TTL_MS, CLIENTS, TURNS = 0.010, 40, 6, 10
WORK_S = [0.025, 0.020, 0.025, 0.015, 0.080]


def _needs(lab: Lab, release: Any) -> None:
    if release in (locks.release_delex, locks.release_digest) and not lab.caps.delex:
        pytest.skip(f"{lab.kind} backend has no DELEX")


def _released(name: str, client: Any, key: str, token: Any) -> bool:
    """Call a release by name; True if it deleted the key (the checked one says "released")."""
    answer = getattr(locks, name)(client, key, token)
    return answer == locks.RELEASED if name == "release_lua_checked" else answer


# ------------------------------------------------------------------ notebook 02's actors and load


def _holder(client: Any, release: Any, key: str) -> Any:
    if not locks.acquire(client, key, "tok-A", LEASE_MS):
        return "busy"
    return release(client, key, "tok-A")


def _story(lab: Lab, release: Any, takers: str = "BC") -> dict[str, Any]:
    key = lab.key("lock")
    actors = {
        "A": partial(_holder, release=release, key=key),
        "T": lease_expires(key, value="tok-A"),
    }
    return actors | {
        n: partial(locks.acquire, key=key, token=f"tok-{n}", ttl_ms=LEASE_MS) for n in takers
    }


def _b_keeps_its_lock(lab: Lab) -> Any:
    return lambda client, results: (
        results["B"] is not True or client.get(lab.key("lock")) == "tok-B"
    )


def _explore(lab: Lab, release: Any) -> Any:
    return explore(lab, _story(lab, release, "B"), _b_keeps_its_lock(lab), watch=[lab.key("lock")])


def _run_load(lab: Lab, release: Any, clients: int = CLIENTS, turns: int = TURNS) -> RunResult:
    turn = partial(
        locks.lock_turn,
        release=release,
        key=lab.key("load-lock"),
        ttl_ms=TTL_MS,
        work=itertools.cycle(WORK_S),
    )
    return run_clients(lab, turn, clients=clients, iterations=turns, mode="think", think_s=THINK_S)


def _violations(run: RunResult) -> list[Any]:
    spans = (lease_span(op.client_id, *op.result[:3], TTL_MS * 1_000_000) for op in run.history)
    return overlaps([s for s in spans if s is not None])


# ------------------------------------------------------------------ tokens, digests, acquire


def test_new_token_is_20_random_bytes_as_hex() -> None:
    tokens = {locks.new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) == 40 and int(t, 16) >= 0 for t in tokens)


@pytest.mark.parametrize("value", ["tok", "91", "é" * 3, b"\x00\xff" * 100, "x" * 10_000])
def test_token_digest_is_what_digest_answers(lab: Lab, value: Any) -> None:
    if not lab.caps.digest:
        pytest.skip(f"{lab.kind} backend has no DIGEST")
    c, key = lab.client(decode_responses=False), lab.key("lock")
    c.set(key, value)
    assert c.execute_command("DIGEST", key).decode() == locks.token_digest(value)


def test_token_digest_keeps_leading_zeros() -> None:
    assert locks.token_digest("91") == "004901d6d0084f13"


def test_acquire_takes_a_free_lock_with_its_lease_and_not_a_held_one(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    assert locks.acquire(c, key, MINE, 30_000) is True
    assert c.get(key) == MINE and 0 < c.pttl(key) <= 30_000
    assert locks.acquire(c, key, THEIRS, 30_000) is False
    assert c.get(key) == MINE


# ------------------------------------------------------------------ releases


def test_release_blind_deletes_another_clients_lock(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, THEIRS, px=30_000)
    assert locks.release_blind(c, key, MINE) is True
    assert c.exists(key) == 0


def test_release_check_then_del_leaves_a_foreign_lock_when_nothing_comes_between(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, THEIRS, px=30_000)
    assert locks.release_check_then_del(c, key, MINE) is False
    assert c.get(key) == THEIRS


@pytest.mark.parametrize("name", NAIVE + SAFE)
def test_a_release_deletes_its_own_lock(lab: Lab, name: str) -> None:
    _needs(lab, getattr(locks, name))
    c, key = lab.client(), lab.key("lock")
    c.set(key, MINE, px=30_000)
    assert _released(name, c, key, MINE) is True
    assert c.exists(key) == 0


@pytest.mark.parametrize("name", SAFE)
def test_a_safe_release_leaves_a_foreign_lock_and_its_ttl(lab: Lab, name: str) -> None:
    _needs(lab, getattr(locks, name))
    c, key = lab.client(), lab.key("lock")
    c.set(key, THEIRS, px=30_000)
    assert _released(name, c, key, MINE) is False
    assert c.get(key) == THEIRS and 0 < c.pttl(key) <= 30_000


@pytest.mark.parametrize("name", SAFE)
def test_a_safe_release_of_a_missing_lock_deletes_and_creates_nothing(lab: Lab, name: str) -> None:
    _needs(lab, getattr(locks, name))
    c, key = lab.client(), lab.key("lock")
    assert _released(name, c, key, MINE) is False
    assert c.exists(key) == 0


@pytest.mark.parametrize("name", SAFE + ("release_check_then_del",))
def test_a_checking_release_compares_binary_tokens_byte_for_byte(lab: Lab, name: str) -> None:
    _needs(lab, getattr(locks, name))
    c, key = lab.client(decode_responses=False), lab.key("lock")
    token = b"\x00\xff" + bytes(range(40))
    c.set(key, token, px=30_000)
    assert _released(name, c, key, token[:-1] + b"\x00") is False
    assert _released(name, c, key, token) is True


@pytest.mark.parametrize("name", SAFE)
def test_a_safe_release_of_a_key_that_is_not_a_lock_raises_and_keeps_it(
    lab: Lab, name: str
) -> None:
    _needs(lab, getattr(locks, name))
    c, key = lab.client(), lab.key("lock")
    c.rpush(key, MINE)
    with pytest.raises(redis.ResponseError):
        getattr(locks, name)(c, key, MINE)
    assert c.lrange(key, 0, -1) == [MINE]


def test_release_lua_checked_tells_released_expired_and_stolen_apart(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    assert locks.release_lua_checked(c, key, MINE) == locks.EXPIRED
    c.set(key, THEIRS, px=30_000)
    assert locks.release_lua_checked(c, key, MINE) == locks.STOLEN
    assert locks.release_lua_checked(c, key, THEIRS) == locks.RELEASED


def test_release_watch_checks_again_when_exec_finds_the_lock_taken(lab: Lab) -> None:
    key = lab.key("lock")
    trace = run_schedule(lab, _story(lab, locks.release_watch), "AAATBAC", watch=[key], finish=True)
    commands = [(row.client, row.command.split()[0], row.reply) for row in trace.rows]
    assert commands[5] == ("A", "MULTI,", "nil")  # EXEC answered nil: the key changed after WATCH
    assert [c for c in commands[6:] if c[0] == "A"] == [
        ("A", "WATCH", "'OK'"),
        ("A", "GET", "'tok-B'"),
        ("A", "UNWATCH", "'OK'"),
    ]
    assert trace.results["A"] is False and lab.client().get(key) == "tok-B"


def test_release_watch_gives_up_when_the_key_changes_every_time(lab: Lab) -> None:
    key = lab.key("lock")

    def meddler(client: Any) -> None:
        for _ in range(2):
            client.set(key, MINE, px=30_000)  # the same value, but a write: EXEC aborts

    actors = {"A": partial(locks.release_watch, key=key, token=MINE, max_attempts=2), "M": meddler}
    with pytest.raises(GaveUp, match="gave up after 2 attempts"):
        run_schedule(
            lab, actors, "AAMAAAMA", setup=lambda c: c.set(key, MINE, px=30_000), watch=[key]
        )
    assert lab.client().get(key) == MINE


def test_release_watch_refuses_zero_attempts(lab: Lab) -> None:
    with pytest.raises(ValueError):
        locks.release_watch(lab.client(), lab.key("lock"), MINE, max_attempts=0)


# ------------------------------------------------------------------ extend


def _extenders(lab: Lab) -> list[Any]:
    return [locks.extend_lua] + ([locks.extend_ifeq] if lab.caps.set_ifeq else [])


def test_extend_renews_only_the_owners_lease_and_never_brings_a_lock_back(lab: Lab) -> None:
    c, key, gone = lab.client(), lab.key("lock"), lab.key("gone")
    for extend in _extenders(lab):
        c.set(key, MINE, px=1_000)
        assert extend(c, key, MINE, 120_000) is True
        assert c.get(key) == MINE and 60_000 < c.pttl(key) <= 120_000
        c.set(key, THEIRS, px=30_000)
        assert extend(c, key, MINE, 600_000) is False
        assert c.get(key) == THEIRS and 0 < c.pttl(key) <= 30_000
        assert extend(c, gone, MINE, 600_000) is False and c.exists(gone) == 0


# ------------------------------------------------------------------ fencing


def test_acquire_fenced_hands_out_increasing_fences_and_none_when_held(lab: Lab) -> None:
    c = lab.client()
    key, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    first = locks.acquire_fenced(c, key, fence, MINE, 30_000)
    assert locks.acquire_fenced(c, key, fence, THEIRS, 30_000) is None
    c.delete(key)
    second = locks.acquire_fenced(c, key, fence, THEIRS, 30_000)
    assert first is not None and second is not None and second > first
    assert c.get(key) == THEIRS


@pytest.mark.parametrize("corrupt", ["abc", "9" * 25, "hash"])
def test_acquire_fenced_with_a_corrupt_fence_raises_and_leaves_the_lock_free(
    lab: Lab, corrupt: str
) -> None:
    c = lab.client()
    key, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    c.hset(fence, "n", "1") if corrupt == "hash" else c.set(fence, corrupt)
    with pytest.raises(redis.ResponseError):
        locks.acquire_fenced(c, key, fence, MINE, 30_000)
    assert c.exists(key) == 0
    c.set(key, THEIRS, px=30_000)  # and another holder's lock is left alone
    with pytest.raises(redis.ResponseError):
        locks.acquire_fenced(c, key, fence, MINE, 30_000)
    assert c.get(key) == THEIRS


def test_write_fenced_refuses_a_stale_fence_and_write_unfenced_does_not(lab: Lab) -> None:
    c = lab.client()
    resource, seen = lab.ns.tagged("job", "resource"), lab.ns.tagged("job", "resource:fence")
    assert locks.write_fenced(c, resource, seen, 34, "new holder") is True
    assert locks.write_fenced(c, resource, seen, 33, "late zombie") is False
    assert c.get(resource) == "new holder"
    assert locks.write_unfenced(c, resource, "late zombie") is True
    assert c.get(resource) == "late zombie"


@pytest.mark.parametrize(
    "fenced, a_result, report",
    [
        (False, "fence 1, wrote", "tok-A's report"),
        (True, "fence 1, write refused", "tok-B's report"),
    ],
)
def test_fencing_refuses_the_stalled_holders_late_write(
    lab: Lab, fenced: bool, a_result: str, report: str
) -> None:
    lock, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    res, seen = lab.ns.tagged("job", "report"), lab.ns.tagged("job", "report:fence")

    def writer(client: Any, token: str) -> str:
        number = locks.acquire_fenced(client, lock, fence, token, LEASE_MS)
        text = f"{token}'s report"
        wrote = (
            locks.write_fenced(client, res, seen, number, text)
            if fenced
            else locks.write_unfenced(client, res, text)
        )
        locks.release_lua(client, lock, token)
        return f"fence {number}, {'wrote' if wrote else 'write refused'}"

    actors = {n: partial(writer, token=f"tok-{n}") for n in "AB"} | {"T": lease_expires(lock)}
    trace = run_schedule(lab, actors, "ATBBAAB", watch=[lock, res], reset=[lock, fence, res, seen])
    assert trace.results["A"] == a_result and trace.results["B"] == "fence 2, wrote"
    assert lab.client().get(res) == report


# ------------------------------------------------------------------ lock_turn


def test_lock_turn_returns_when_it_asked_got_and_let_go_and_what_the_release_said(lab: Lab) -> None:
    key = lab.key("lock")
    turn = partial(locks.lock_turn, lab.client(), locks.release_lua, key, 30_000, iter([0.0, 0.02]))
    asked, got, letting_go, released = turn()
    assert asked <= got <= letting_go and released is True
    asked, got, letting_go, released = turn()
    assert letting_go - got >= 20_000_000  # time.sleep never returns early: the turn worked 20 ms
    assert released is True and lab.client().exists(key) == 0


def test_lock_turn_gives_up_on_a_lock_that_never_expires(lab: Lab) -> None:
    key = lab.key("lock")
    lab.client().set(key, "stuck forever")  # no TTL: nobody can ever take this lock
    with pytest.raises(GaveUp, match="gave up after 3 attempts"):
        locks.lock_turn(
            lab.client(),
            locks.release_lua,
            key,
            1_000,
            itertools.repeat(0.0),
            retry_s=0.0,
            max_attempts=3,
        )
    assert lab.client().get(key) == "stuck forever"


# ------------------------------------------------------------------ forced schedules and the explorer


def test_blind_del_forced_schedule_leaves_b_and_c_both_holding(lab: Lab) -> None:
    key = lab.key("lock")
    trace = run_schedule(lab, _story(lab, locks.release_blind), "ATBAC", watch=[key])
    assert trace.rows[3].command == "DEL lock" and trace.rows[3].reply == "1"
    assert trace.results == {"A": True, "T": "TTL ran out: key expired", "B": True, "C": True}


def test_check_then_del_forced_schedule_deletes_bs_lock_after_a_true_check(lab: Lab) -> None:
    trace = run_schedule(
        lab, _story(lab, locks.release_check_then_del), "AATBAC", watch=[lab.key("lock")]
    )
    assert trace.rows[1].reply == "'tok-A'" and trace.rows[4].command == "DEL lock"
    assert trace.results["B"] is True and trace.results["C"] is True


@pytest.mark.parametrize("name", SAFE)
def test_a_safe_release_in_the_forced_schedule_leaves_b_holding(lab: Lab, name: str) -> None:
    release = getattr(locks, name)
    _needs(lab, release)
    trace = run_schedule(lab, _story(lab, release), "ATBAC", watch=[lab.key("lock")], finish=True)
    assert trace.results["B"] is True and trace.results["C"] is False
    assert trace.results["A"] == (locks.STOLEN if name == "release_lua_checked" else False)
    assert lab.client().get(lab.key("lock")) == "tok-B"


@pytest.mark.parametrize(
    "name, total, bad", [("release_blind", 11, ["ATBA"]), ("release_check_then_del", 17, ["AATBA"])]
)
def test_explorer_finds_exactly_the_schedule_that_breaks_a_naive_release(
    lab: Lab, name: str, total: int, bad: list[str]
) -> None:
    found = _explore(lab, getattr(locks, name))
    assert (found.total, found.bad) == (total, bad)


@pytest.mark.parametrize("name", SAFE)
def test_explorer_finds_no_bad_schedule_for_a_safe_release(lab: Lab, name: str) -> None:
    release = getattr(locks, name)
    _needs(lab, release)
    found = _explore(lab, release)
    assert found.total == (30 if name == "release_watch" else 11) and found.bad == []


def test_the_clock_ends_only_the_lease_of_the_named_holder(lab: Lab) -> None:
    key = lab.key("lock")
    actors = {
        "B": partial(locks.acquire, key=key, token="tok-B", ttl_ms=LEASE_MS),
        "T": lease_expires(key, value="tok-A"),
    }
    trace = run_schedule(lab, actors, "BT", watch=[key])
    assert trace.results["T"] == "another holder's lease: nothing expires"
    assert lab.client().get(key) == "tok-B"


# ------------------------------------------------------------------ threaded load


@pytest.mark.parametrize("name", NAIVE)
def test_a_naive_release_breaks_mutual_exclusion_in_every_run_of_the_load(
    lab: Lab, name: str
) -> None:
    # The window is built into the timing, not left to luck: stalls last twice the lease (the
    # blind DEL), and a lease with less than 10 ms left at the GET ends during the 10 ms before
    # the DEL (check-then-DEL; the varied work puts some turns there however late the threads
    # wake). Measured: 6-31 violations per run, with the machine near idle and at load 15 on 2 cores.
    run = _run_load(lab, getattr(locks, name))
    assert run.calls == CLIENTS * TURNS
    assert _violations(run)


@pytest.mark.parametrize("name", SAFE)
def test_a_safe_release_keeps_mutual_exclusion_under_the_same_load(lab: Lab, name: str) -> None:
    release = getattr(locks, name)
    _needs(lab, release)
    run = _run_load(lab, release)
    assert run.calls == CLIENTS * TURNS
    assert _violations(run) == []


# ------------------------------------------------------------------ one function object everywhere


@pytest.mark.parametrize("name", NAIVE + SAFE)
def test_one_release_object_is_interleaved_explored_threaded_and_benchmarked(
    lab: Lab, name: str
) -> None:
    release = getattr(locks, name)
    _needs(lab, release)
    trace = run_schedule(lab, _story(lab, release), "ATBAC", watch=[lab.key("lock")], finish=True)
    explored = _explore(lab, release)
    threaded = _run_load(lab, release, clients=2, turns=2)
    bench_name = next(n for n, r in lock_release_cost.RELEASES.items() if r is release)
    benchmarked = lock_release_cost.measure(lab, {bench_name: release}, turns=3, repeats=1)
    used = [
        trace.actors["A"],
        explored.actors["A"],
        threaded.fn,
        benchmarked[bench_name].runs[0].fn,
    ]
    assert all(fn.keywords["release"] is release for fn in used)


def _notebook_code() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return "\n".join(
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "code" and "solution" not in c["metadata"].get("tags", [])
    )


def test_notebook_02_runs_the_releases_of_races_locks_and_defines_none_of_its_own() -> None:
    tree = ast.parse(_notebook_code())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    used = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "locks"
    }
    assert set(NAIVE + SAFE) <= used
    assert defined.isdisjoint(vars(locks))  # no second copy of anything races.locks defines


def test_the_benchmark_times_the_releases_of_races_locks() -> None:
    assert set(lock_release_cost.RELEASES.values()) == {getattr(locks, n) for n in NAIVE + SAFE}


def test_benchmark_counts_round_trips_per_release_exactly(lab: Lab) -> None:
    costs = lock_release_cost.measure(lab, lock_release_cost.releases_for(lab), turns=5, repeats=2)
    expected = {
        "DEL (blind)": 1,
        "GET + DEL": 2,
        "Lua": 1,
        "Lua, checked": 1,
        "WATCH": 3,
        "DELEX IFEQ": 1,
        "DELEX IFDEQ": 1,
    }
    assert {n: c.round_trips for n, c in costs.items()} == {n: expected[n] for n in costs}
    text = lock_release_cost.report(lab.kind, lab.version, costs)
    assert "WATCH" in text and "1.00x" in text


# ------------------------------------------------------------------ cluster


def test_lock_functions_work_on_a_cluster(cluster_lab: Lab) -> None:
    c = cluster_lab.client()
    key, fence = cluster_lab.ns.tagged("job", "lock"), cluster_lab.ns.tagged("job", "fence")
    assert locks.acquire_fenced(c, key, fence, MINE, 30_000) == 1
    assert locks.release_lua(c, key, THEIRS) is False
    assert locks.extend_lua(c, key, MINE, 60_000) is True
    assert locks.release_lua_checked(c, key, MINE) == locks.RELEASED
    for name in ("release_delex", "release_digest", "release_watch", "release_check_then_del"):
        assert locks.acquire(c, key, MINE, 30_000) and getattr(locks, name)(c, key, MINE) is True


def test_explorer_answers_hold_on_a_cluster(cluster_lab: Lab) -> None:
    assert _explore(cluster_lab, locks.release_blind).bad == ["ATBA"]
    assert _explore(cluster_lab, locks.release_lua).bad == []
