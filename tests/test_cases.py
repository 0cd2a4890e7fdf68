"""cases.py (notebook 08): the installed libraries' verdicts on embedded and real, the pins they
were checked against, and what the module may import.

The verdicts are the notebook's, recomputed: mutual exclusion holds and the token-checked release
refuses in every explored lock, the blind DEL control breaks, a lease that runs out lets two
holders overlap, the limiters hold their limit, and what no step controls (portalocker's
subscription) is refused, never given a verdict. pottery's thread pool is explored: its workers
are the actors' sub-actors.
"""

from __future__ import annotations

import ast
import concurrent.futures
import re
import sys
import tomllib
from functools import partial
from importlib.metadata import metadata, version
from pathlib import Path

import aiocache.lock
import pottery.redlock
import pytest
import walrus
from packaging.requirements import Requirement

import cases
from exercises import WRONG, check
from helpers import Lab
from helpers.instruments.aio import is_async_actor

ROOT = Path(__file__).resolve().parent.parent
EXPLORED = ["redis-py Lock", "python-redis-lock", "redlock-py", "pottery Redlock"]
EXPLORED += ["pottery AIORedlock"]
THIRD_PARTY = {"redis", "greenlet", "limits", "portalocker", "pottery", "redis_lock"}
THIRD_PARTY |= {"redis_rate_limit", "redlock", "redis_limiters"}
THIRD_PARTY |= {"redis.asyncio"}  # redis-py's own asyncio client (pottery's AIORedlock)
THIRD_PARTY |= {"walrus", "pyrate_limiter", "aiocache", "aiocache.lock"}  # the optional part's


def test_cases_imports_only_the_libraries_redis_and_the_learner_surface() -> None:
    tree = ast.parse((ROOT / "cases.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    outside = {m for m in found if m.split(".")[0] not in sys.stdlib_module_names}
    assert outside <= THIRD_PARTY | {"helpers"}, sorted(outside - THIRD_PARTY)
    assert "helpers" in outside, "the case file asks a Race, from the learner's surface"


def test_every_pinned_library_has_a_case_and_is_installed_at_its_pin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [Requirement(r) for r in project["optional-dependencies"]["cases"]]
    every = (*cases.LOCKS.values(), *cases.LIMITERS.values(), *cases.SEMAPHORES.values())
    every += (*cases.MORE_LOCKS.values(), *cases.MORE_LIMITERS.values())
    named = {c.distribution for c in (*every, *cases.QUEUES.values())}
    assert {r.name for r in pins} == (named - {"redis"}) | {"portalocker"}
    for req in pins:
        (spec,) = req.specifier
        assert spec.operator == "==" and version(req.name) == spec.version, req


def test_the_lock_keys_are_the_runs_own(lab: Lab) -> None:
    name, log, api = cases.names(lab)
    locks = (cases.LOCKS | cases.MORE_LOCKS).values()
    keys = [k.format(name=name) for c in locks for k in c.keys]
    keys += [c.key.format(name=api) for c in (cases.LIMITERS | cases.MORE_LIMITERS).values()]
    slots, jobs = cases.more_names(lab)
    keys += [k.format(name=slots) for c in cases.SEMAPHORES.values() for k in c.keys]
    assert all(lab.ns.owns(k) for k in [*keys, log, jobs])


@pytest.mark.parametrize("library", EXPLORED)
def test_mutual_exclusion_and_the_token_checked_release_hold(lab: Lab, library: str) -> None:
    exclusion = cases.case_file(lab, library, "exclusion")
    release = cases.case_file(lab, library, "release")
    assert (exclusion.bad, release.bad) == (0, 0)
    assert exclusion.total > 1 and release.total > 1


@pytest.mark.parametrize("library", EXPLORED)
def test_a_lease_that_runs_out_lets_two_holders_overlap(lab: Lab, library: str) -> None:
    lease = cases.case_file(lab, library, "lease")
    assert 0 < lease.bad < lease.total
    # T, then B takes and goes in, then A writes on (a worker's step, "B1", counted as B's)
    assert "TBBA" in re.sub(r"\d+", "", lease.example.replace(" ", ""))


def test_the_blind_del_control_breaks_the_release_story(lab: Lab) -> None:
    blind = cases.case_file(lab, "redis-py Lock", "release", release=cases.release_blind)
    assert blind.bad > 0 and blind.example == "ATBA"


def test_the_limiters_hold_their_limit(lab: Lab) -> None:
    for library in cases.LIMITERS:
        every = cases.verdict(cases.limiter_race(lab, library))
        assert every.explored and every.bad == 0 and every.total == 6, (library, every)


def test_what_no_step_controls_is_refused_not_judged(lab: Lab) -> None:
    portalocker = cases.verdict(cases.portalocker_race(lab))
    assert portalocker.reason.startswith("refused: it subscribes")
    assert portalocker.cell() == "refused"


def test_pottery_s_redlock_is_explored_through_its_pool_s_worker_threads(lab: Lab) -> None:
    """Each take and release submits to a thread pool: its workers are sub-actors (A1, A2, ...)."""
    trace = cases.lock_race(lab, "pottery Redlock", "exclusion").run("AB", finish=True)
    assert trace.results == {"A": "released", "B": "busy"}
    steps = [(r.client, r.command.split()[0]) for r in trace.rows]
    assert steps == [("A1", "SET"), ("B1", "SET"), ("A", "RPUSH"), ("A", "RPUSH"),
                     ("B2", "EVALSHA"), ("A2", "EVALSHA")]  # fmt: skip
    for story, expected in {"exclusion": (0, 20), "release": (0, 7), "lease": (48, 216)}.items():
        found = cases.case_file(lab, "pottery Redlock", story)
        assert (found.bad, found.total) == expected, story  # AIORedlock's and redlock-py's
    assert found.example == "A1 A T B1 B A B A2 B2"  # A's take, its RPUSH, then B's take...


def test_a_verdict_says_its_counts_or_why_it_has_none() -> None:
    assert str(cases.Verdict(2, 9, "ABAB")) == "2 of 9 schedules break it, e.g. ABAB"
    assert cases.Verdict(0, 6).cell() == "0/6"
    assert cases.Verdict(reason="not explored: x").cell() == "no verdict"


def test_the_exercise_refuses_a_library_no_schedule_can_step(lab: Lab) -> None:
    verdict = check(lab, "08.own_library", (cases.take_portalocker, cases.release_blind))
    assert verdict.status == WRONG and "cannot step this library" in verdict.message
    assert "subscribes" in verdict.message
    assert check(lab, "08.own_library", (cases.take_pottery, cases.release_pottery))
    assert check(lab, "08.own_library", (cases.take_redlock_py, cases.release_redlock_py))


# --- stories past one-holder locks (issue 35) ----------------------------------------------------


def test_a_semaphore_admits_at_most_its_capacity_and_the_third_times_out(lab: Lab) -> None:
    race = cases.semaphore_race(lab, "redis-limiters", "capacity")
    capacity = cases.verdict(race, reduce=True)
    assert capacity.explored and capacity.bad == 0 and capacity.total > 100
    # The third enterer waits in BLPOP until its logical timeout, then sees max_sleep ran out.
    trace = race.run("AAABBBCC", finish=True)
    assert trace.results["C"] is False and "times out" in str(trace)


def test_a_semaphore_whose_keys_expire_under_its_holders_admits_one_too_many(lab: Lab) -> None:
    race = cases.semaphore_race(lab, "redis-limiters", "lease")
    trace = race.run("AAABBBTCCC")  # the flag expires, C's script makes new permits
    assert [name for name, got_in in trace.results.items() if got_in is True] == ["A", "B", "C"]
    if lab.kind == "embedded":  # every schedule: on a real server each of the search's logical
        # timeouts waits for the server's timer (up to 100 ms at Redis's default hz 10, 10 ms at
        # the throwaway servers' hz 100): 232 s for this search at hz 10
        lease = cases.verdict(race, reduce=True)
        assert 0 < lease.bad < lease.total and lease.example.endswith("TCCC")


def test_a_queue_hands_each_job_to_one_consumer_and_loses_none(lab: Lab) -> None:
    handoff = cases.verdict(cases.queue_race(lab, "pottery queue"), reduce=True)
    assert handoff.explored and handoff.bad == 0 and handoff.total > 100


def test_the_hand_off_invariant_sees_a_job_taken_twice_or_lost(lab: Lab) -> None:
    _, jobs = cases.more_names(lab)
    check = cases.each_job_once(lambda client, name: 0, jobs)
    client = lab.client()
    assert check(client, {"A": "job-1", "B": "job-2"})
    assert not check(client, {"A": "job-1", "B": "job-1"})  # taken twice
    assert not check(client, {"A": "job-1", "B": None})  # job-2 gone, nobody has it


def test_the_finder_lists_the_keys_a_library_derives_from_a_name(lab: Lab) -> None:
    slots, _ = cases.more_names(lab)
    enter = partial(cases.enterer, enter=cases.enter_redis_limiters, name=slots, kept=[])
    found = cases.keys_named(lab, enter)
    assert found == sorted(k.format(name=slots) for k in cases.SEMAPHORES["redis-limiters"].keys)
    assert not any(lab.client().exists(k) for k in found)  # the race starts from nothing


def test_the_taker_keeps_its_lock_object_until_the_story_ends(lab: Lab) -> None:
    kept: list[object] = []
    name, _, _ = cases.names(lab)
    assert cases.taker(lab.client(), cases.take_redis_py, name, kept)
    assert len(kept) == 1 and kept[0] is not None


def test_pottery_s_get_nowait_waits_forever_when_the_queue_is_empty(lab: Lab) -> None:
    # pottery 3.0.1 sends XREAD BLOCK 0 ("no timeout") for get_nowait(): the second consumer
    # of one job is blocked, where its docstring promises QueueEmptyError.
    one_job = cases.queue_race(lab, "pottery queue", jobs=("job-1",))
    trace = one_job.run("PAAAB", finish=True)
    assert trace.result_text["A"] == "'job-1'" and trace.result_text["B"] == "(blocked)"
    assert cases.verdict(one_job, reduce=True).bad == 0  # no job twice, none lost


# --- an asyncio lock: pottery's AIORedlock (issue 35, item 5) -----------------------------------


class Inline(concurrent.futures.Executor):
    """An executor that runs each call at once in the caller's thread (pottery's pool, one master).

    With one master, pottery's sync Redlock sends its one SET NX PX (and its release script) from
    a pool thread that no step controls; run inline, it is explorable, the sync twin of AIORedlock.
    """

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # a RedisError of the master: pottery counts it
            future.set_exception(error)
        return future


@pytest.mark.parametrize("story", ["exclusion", "release", "lease"])
def test_aioredlock_gives_pottery_s_sync_redlock_s_verdicts_schedule_for_schedule(
    lab: Lab, story: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    aio = cases.lock_race(lab, "pottery AIORedlock", story)
    assert all(is_async_actor(fn) for n, fn in aio.actors.items() if n != "T")
    found = aio.explore()
    monkeypatch.setattr(pottery.redlock, "BailOutExecutor", Inline)
    sync = cases.lock_race(lab, "pottery Redlock", story).explore()
    assert [(o.schedule, o.results) for o in found.outcomes] == [
        (o.schedule, o.results) for o in sync.outcomes
    ]
    verdicts = [
        cases.case_file(lab, lib, story) for lib in ("pottery AIORedlock", "pottery Redlock")
    ]
    assert verdicts[0] == verdicts[1] and verdicts[0].explored
    assert verdicts[0] == cases.case_file(lab, "redlock-py", story)  # Redlock, sync, one master
    expected = {"exclusion": (0, 20), "release": (0, 7), "lease": (48, 216)}[story]
    assert (verdicts[0].bad, verdicts[0].total) == expected
    if story == "release":  # A's late release is refused by the token check, not a DEL
        assert "refused (ReleaseUnlockedLock)" in {o.results["A"] for o in found.outcomes}


def test_aioredlock_takes_through_the_race_and_a_busy_take_runs_its_release_script(
    lab: Lab,
) -> None:
    # AIORedlock's client is built from URL, as its README does: each round trip below is in the
    # race's trace, on the lab's keys. A take that misses quorum runs the token-checked release
    # script (pottery's _acquire_masters), which deletes nothing of A's.
    trace = cases.lock_race(lab, "pottery AIORedlock", "exclusion").run("AB", finish=True)
    assert trace.results == {"A": "released", "B": "busy"}
    steps = [(r.client, r.command.split()[0]) for r in trace.rows]
    assert steps == [("A", "SET"), ("B", "SET"), ("A", "RPUSH"), ("A", "RPUSH"),
                     ("A", "EVALSHA"), ("B", "EVALSHA")]  # fmt: skip
    assert trace.rows[-1].reply == "0"


def test_the_stepper_plays_aioredlock_s_first_break_and_its_late_release_is_refused(
    lab: Lab,
) -> None:
    lease = cases.case_file(lab, "pottery AIORedlock", "lease")
    with cases.lock_race(lab, "pottery AIORedlock", "lease").stepper() as late:
        late.play(lease.example)
        assert late.finished and late.broken_at == 5  # B's first RPUSH, while A is inside
        assert late.results["A"] == "refused (ReleaseUnlockedLock)"
        assert late.results["B"] == "released"


# --- more case files: walrus, pyrate-limiter, aiocache (issue 35 item 5) ---------------------------


def test_walrus_s_rate_limit_lets_three_in_at_a_limit_of_two_and_its_lua_twin_does_not(
    lab: Lab,
) -> None:
    counts_then_pushes = cases.verdict(cases.limiter_race(lab, "walrus RateLimit"), reduce=True)
    assert (counts_then_pushes.bad, counts_then_pushes.total) == (1224, 1884)
    trace = cases.limiter_race(lab, "walrus RateLimit").run(counts_then_pushes.example)
    assert trace.results == {"A": True, "B": True, "C": True}
    assert [r.command.split()[0] for r in trace.rows if r.client == "B"] == [
        "LLEN",
        "LPUSH",
        "PEXPIRE",
    ]
    one_script = cases.verdict(cases.limiter_race(lab, "walrus RateLimitLua"))
    assert (one_script.bad, one_script.total) == (0, 6)


def test_walrus_s_race_needs_no_explorer_two_clients_show_it(lab: Lab) -> None:
    client, name = lab.client(), lab.key("walrus")
    assert cases.walrus_two_clients(client.connection_pool, name) == {"A": True, "B": True}
    assert client.llen(f"{name}:user-1") == 2  # both logged: a limit of 1 admitted two
    client.delete(f"{name}:user-1")
    limiter = walrus.Database(connection_pool=client.connection_pool).rate_limit(name, 1, 60)
    assert [limiter.limit("user-1") for _ in "AB"] == [False, True]  # one after the other: B waits
    client.delete(f"{name}:user-1")


# --- the window story: time passes between requests (issue 35 item 4) -----------------------------


def test_the_window_story_fixed_windows_burst_at_the_boundary_moving_ones_hold(lab: Lab) -> None:
    found = {
        library: cases.verdict(cases.window_race(lab, library))
        for library in ("limits", "limits fixed window", "python-redis-rate-limit")
    }
    assert {n: (v.bad, v.total) for n, v in found.items()} == {
        "limits": (0, 360),
        "limits fixed window": (24, 360),
        "python-redis-rate-limit": (24, 360),
    }
    burst = cases.window_race(lab, "limits fixed window").run(found["limits fixed window"].example)
    admitted = sorted(at for at, ok in (burst.results[n] for n in "ABCD") if ok)
    assert admitted[-3:][-1] - admitted[-3:][0] < cases.WINDOW_S  # three inside one minute
    readme = " ".join(str(metadata("limits").get_payload()).split())  # its README, as published
    assert "Burst traffic that bypasses the rate limit may occur at window boundaries." in readme


def test_walrus_lua_forgets_its_log_seconds_after_the_limit_and_lets_a_third_in(lab: Lab) -> None:
    found = cases.verdict(cases.window_race(lab, "walrus RateLimitLua"))
    assert (found.bad, found.total) == (48, 360)
    trace = cases.window_race(lab, "walrus RateLimitLua").run(found.example)
    admitted = sorted(at for at, ok in (trace.results[n] for n in "ABCD") if ok)
    assert len(admitted) == 3 and admitted[-1] - admitted[0] < cases.WINDOW_S
    client, name = lab.client(), lab.key("walrus")
    left = cases.walrus_lua_forgets(client, name)  # no explorer: the TTL its script sets
    assert left["admitted"] == [True, True, False]
    assert 0 < left["ttl_s"] <= 2 * cases.LIMIT < left["window_s"]
    client.delete(f"{name}:user-1")


def test_pyrate_limiter_s_asyncio_bucket_holds_its_limit(lab: Lab) -> None:
    race = cases.limiter_race(lab, "pyrate-limiter")
    assert all(is_async_actor(actor) for actor in race.actors.values())
    every = cases.verdict(race)
    assert (every.bad, every.total) == (0, 90)
    assert race.run("ABC", finish=True).results == {"A": True, "B": True, "C": False}


def test_aiocache_s_redlock_lets_a_second_taker_in_as_its_docstring_warns(lab: Lab) -> None:
    assert "do NOT use this if you need real resource exclusion" in " ".join(
        aiocache.lock.RedLock.__doc__.split()
    )
    found = {
        s: cases.case_file(lab, "aiocache RedLock", s) for s in ("exclusion", "release", "lease")
    }
    assert {s: (v.bad, v.total) for s, v in found.items()} == {
        "exclusion": (36, 70), "release": (1, 6), "lease": (324, 630)
    }  # fmt: skip
    assert found["exclusion"].example == "AABBAABB"  # B's SET NX fails, and B goes in
    trace = cases.lock_race(lab, "aiocache RedLock", "exclusion").run("AABB", finish=True)
    assert [(r.client, r.reply) for r in trace.rows][2:4] == [("B", "nil"), ("B", "2")]


def test_pottery_s_first_lease_break_steps_in_the_stepper_its_workers_named(lab: Lab) -> None:
    race = cases.lock_race(lab, "pottery Redlock", "lease")
    with race.stepper() as stepper:
        stepper.play("A1 A T B1 B A B A2 B2")  # the explorer's first breaking schedule
        assert [r.client for r in stepper.trace.rows][:4] == ["A1", "A", "T", "B1"]
        assert stepper.invariant_holds is False and stepper.finished
