"""Faults as explored steps: each of crash, pause, restart and failover changes a race's verdict.

Each race is safe without faults and broken with one, and the explorer finds the breaking
schedules itself. Crash and pause run on the embedded backend and on the session's real server
(``lab``); restart and failover need a throwaway server of the test's own (``connect(backend=
"real")``) and are refused, with the reason, everywhere else.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from conftest import need_server_binary
from programs import take_forever

from helpers import Lab, connect, explore
from helpers.instruments.faults import FaultUnavailable, available
from helpers.instruments.schedule import parse_schedule, run_schedule
from races import locks

LEASE_MS = 60_000  # long: in these schedules only a pause (A~) ends a lease


def _guarded_increment(client: Any, lock: str, counter: str, token: str) -> str:
    """Take the lock, read the counter, write it back plus one, release: "counted" or "busy"."""
    if not locks.acquire(client, lock, token, LEASE_MS):
        return "busy"
    count = int(client.get(counter) or 0)
    client.set(counter, count + 1)
    locks.release_lua(client, lock, token)
    return "counted"


def _every_count_kept(counter: str) -> Any:
    def holds(client: Any, results: dict[str, Any]) -> bool:
        counted = sum(r == "counted" for r in results.values())
        return int(client.get(counter) or 0) == counted

    return holds


def _counting_race(lab: Lab) -> tuple[dict[str, Any], Any, list[str]]:
    lock, counter = lab.key("lock"), lab.key("counter")
    actors = {n: partial(_guarded_increment, lock=lock, counter=counter, token=n) for n in "AB"}
    return actors, _every_count_kept(counter), [lock, counter]


def test_the_token_checked_lock_is_safe_until_a_holder_pauses(lab: Lab) -> None:
    actors, invariant, keys = _counting_race(lab)
    calm = explore(lab, actors, invariant, watch=keys)
    assert (calm.total, calm.bad_count) == (8, 0)  # a B that finds the lock taken is "busy"
    paused = explore(lab, actors, invariant, watch=keys, faults=("pause",))
    # A~ after A's GET ends A's lease: B takes the lock and counts 1 meanwhile, A writes 1 too.
    # A pause is offered only while its actor holds a lease, so never before its SET NX.
    assert (paused.total, paused.bad_count) == (124, 48)
    assert all("~" in s for s in paused.bad) and "A A A~ B B A A B B" in paused.bad
    assert "A A~ B B B B A A A" in paused.good  # A read after B's write: nothing is lost
    trace = str(paused.trace("A A A~ B B A A B B"))
    row = next(line for line in trace.splitlines() if "(pause)" in line).split()
    assert row[:2] == ["3", "A"] and row[-7:] == [
        "lease",
        "of",
        "lock",
        "ran",
        "out",
        "lock=nil,",
        "counter=nil",
    ]
    assert "results: A -> 'counted'  B -> 'counted'" in trace and trace.count("counter=1") == 4


def test_reduction_keeps_every_broken_class_under_pauses(lab: Lab) -> None:
    actors, invariant, keys = _counting_race(lab)
    options = {"watch": keys, "faults": ("pause",)}
    every = explore(lab, actors, invariant, reduce=False, classes=True, **options)
    fewer = explore(lab, actors, invariant, reduce=True, **options)
    assert set(fewer.bad_classes) == set(every.bad_classes) and fewer.bad_count > 0
    assert fewer.runs == fewer.classes == every.classes < every.total
    assert (fewer.total, fewer.bad, fewer.good) == (every.total, every.bad, every.good)


def test_a_crash_between_round_trips_leaves_a_lock_nobody_frees(lab: Lab) -> None:
    key = lab.key("lock")
    actors = {"A": partial(take_forever, key=key, token="a")}

    def freed(client: Any, results: dict[str, Any]) -> bool:
        return client.exists(key) == 0

    assert explore(lab, actors, freed, watch=[key]).bad_count == 0
    found = explore(lab, actors, freed, watch=[key], faults=("crash",))
    assert (sorted(found.good), found.bad) == (["A!", "AA"], ["A A!"])
    synonym = explore(lab, actors, freed, watch=[key], crashes=1)
    assert [o.schedule for o in synonym.outcomes] == [o.schedule for o in found.outcomes]


def test_fault_options_are_checked(lab: Lab) -> None:
    key = lab.key("lock")
    actors = {"A": partial(take_forever, key=key, token="a")}
    with pytest.raises(ValueError, match="unknown fault 'reboot'"):
        explore(lab, actors, lambda c, r: True, watch=[key], faults=("reboot",))
    with pytest.raises(ValueError, match="pass one of them"):
        explore(lab, actors, lambda c, r: True, watch=[key], faults=("pause",), crashes=1)
    with pytest.raises(ValueError, match="max_faults must be"):
        explore(lab, actors, lambda c, r: True, watch=[key], faults=("crash",), max_faults=-1)
    # A pause is a step of its actor: "A~" in a schedule, also after a crash letter is parsed.
    assert parse_schedule("A A~ B restart A! failover") == [
        "A", "A~", "B", "restart", "A!", "failover"
    ]  # fmt: skip


def test_two_faults_per_schedule_when_max_faults_allows(lab: Lab) -> None:
    key = lab.key("lock")
    actors = {"A": partial(take_forever, key=key, token="a")}
    found = explore(lab, actors, lambda c, r: True, watch=[key], faults=("crash",), max_faults=2)
    assert sorted(o.schedule for o in found.outcomes) == ["A A!", "A!", "AA"]  # a dead A is done


@pytest.mark.parametrize("fault", ["restart", "failover"])
def test_server_faults_are_refused_off_a_throwaway_server(lab: Lab, fault: str) -> None:
    key = lab.key("lock")
    actors = {"A": partial(locks.acquire, key=key, token="a", ttl_ms=LEASE_MS)}
    why = available(lab, fault)
    assert why.startswith(f"{fault} needs a real throwaway server that this suite started")
    assert ("embedded backend" if lab.kind == "embedded" else "not started by the suite") in why
    with pytest.raises(FaultUnavailable, match="RACELAB_BACKEND=real"):
        explore(lab, actors, lambda c, r: True, watch=[key], faults=(fault,))
    with pytest.raises(FaultUnavailable, match="throwaway server"):
        run_schedule(lab, actors, f"{fault} A", watch=[key])


# --------------------------------------------------- restart and failover: a server of our own


@pytest.fixture
def own_lab(request: pytest.FixtureRequest) -> Any:
    """A lab on a throwaway redis-server this test starts (restart and failover may hit it)."""
    need_server_binary()
    lab = connect(request.node.originalname[:40], backend="real")
    try:
        yield lab
    finally:
        lab.cleanup()
        lab.close()


def _acquire(client: Any, key: str, token: str) -> str:
    """Take the lock (SET NX PX): "acquired" or "busy"."""
    return "acquired" if locks.acquire(client, key, token, LEASE_MS) else "busy"


@pytest.mark.real
def test_a_restart_without_persistence_grants_the_lock_twice(own_lab: Lab) -> None:
    key = own_lab.key("lock")
    actors = {n: partial(_acquire, key=key, token=n) for n in "AB"}

    def one_holder(client: Any, results: dict[str, Any]) -> bool:
        return sum(r == "acquired" for r in results.values()) <= 1

    assert explore(own_lab, actors, one_holder, watch=[key]).bad_count == 0
    found = explore(own_lab, actors, one_holder, watch=[key], faults=("restart",))
    # restart before both, or between them: the lock A took is gone, so B takes it too.
    assert sorted(found.good) == ["AB", "BA", "restart A B", "restart B A"]
    assert sorted(found.bad) == ["A restart B", "B restart A"]
    trace = str(found.trace("A restart B"))
    assert "(server)  restart" in trace and "data and script cache lost" in trace
    assert "results: A -> 'acquired'  B -> 'acquired'" in trace
    reduced = explore(own_lab, actors, one_holder, watch=[key], faults=("restart",), reduce=True)
    assert sorted(reduced.bad) == ["A restart B", "B restart A"] and reduced.total == 6


@pytest.mark.real
def test_a_restart_loses_the_script_cache_and_the_actor_reloads(own_lab: Lab) -> None:
    key = own_lab.key("lock")

    def take_and_release(client: Any) -> bool:
        locks.acquire(client, key, "a", LEASE_MS)
        return locks.release_lua(client, key, "a")

    found = explore(
        own_lab, {"A": take_and_release}, lambda c, r: True, watch=[key], faults=("restart",)
    )
    assert sorted(o.schedule for o in found.outcomes) == ["A restart A", "AA", "restart A A"]
    # after the restart between SET and EVALSHA, the lock is gone and the script reloads (NOSCRIPT)
    assert found.outcomes[[o.schedule for o in found.outcomes].index("A restart A")].results == {
        "A": False
    }


def _take_fenced(client: Any, key: str, fence: str, token: str) -> int | None:
    """Take the lock with a fencing token (races.locks.acquire_fenced)."""
    return locks.acquire_fenced(client, key, fence, token, LEASE_MS)


@pytest.mark.real
def test_a_failover_loses_a_grant_and_its_fence_is_handed_out_again(own_lab: Lab) -> None:
    key, fence = own_lab.key("lock"), own_lab.key("fence")
    actors = {n: partial(_take_fenced, key=key, fence=fence, token=n) for n in "AB"}

    def fences_never_repeat(client: Any, results: dict[str, Any]) -> bool:
        fences = [r for r in results.values() if r is not None]
        return len(fences) == len(set(fences))

    def an_earlier_grant(client: Any) -> None:
        client.set(fence, 1)  # X held the lock before: the replica has its fence

    race = {"watch": [key, fence], "setup": an_earlier_grant}
    assert explore(own_lab, actors, fences_never_repeat, **race).bad_count == 0
    found = explore(own_lab, actors, fences_never_repeat, faults=("failover",), **race)
    assert sorted(found.good) == ["AB", "BA", "failover A B", "failover B A"]
    assert sorted(found.bad) == ["A failover B", "B failover A"]
    trace = found.trace("A failover B")
    assert trace.results == {"A": 2, "B": 2}
    assert "the replica, which missed the schedule's writes, is the primary" in str(trace)
    assert own_lab.client().info("replication")["role"] == "master"  # the lab's server again
