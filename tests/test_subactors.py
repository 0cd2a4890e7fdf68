"""Threads an actor's call starts are its sub-actors (A1, A2, ...), stepped like the actor itself.

A thread pool's workers, a lease renewer or a leaker thread do a library's real work; under a
greenlet run (the explorer's, and a forced schedule's) each becomes a sub-actor with its own
letter in the trace, and a wait on a thread primitive (a future, an event, a join) parks whoever
waits until another step makes it true. On the embedded backend and on a real server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest
import redis

from helpers import Lab, explore, run_schedule
from helpers.instruments.actors import CRASHED
from helpers.instruments.schedule import TIMED_OUT, ScheduleError


def pool_increments(key: str, workers: int = 2):
    """Return an actor that has a thread pool read-modify-write key, once per worker."""

    def actor(client):
        def increment() -> int:
            value = int(client.get(key) or 0)
            client.set(key, value + 1)
            return value

        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(increment) for _ in range(workers)]
            return sorted(f.result() for f in futures)

    return actor


def test_a_pool_s_workers_are_sub_actors_and_lose_an_update_in_a_forced_order(lab: Lab) -> None:
    key = lab.key("n")
    actors = {"A": pool_increments(key)}
    lost = run_schedule(lab, actors, "A1 A2 A1 A2", watch=[key])
    assert [r.client for r in lost.rows] == ["A1", "A2", "A1", "A2"]
    assert lost.results == {"A": [0, 0]} and lab.client().get(key) == "1"
    kept = run_schedule(lab, actors, "A1A1A2A2", watch=[key])  # digits join the name before
    assert kept.results == {"A": [0, 1]} and lab.client().get(key) == "2"


def test_a_letter_whose_actor_waits_for_its_threads_steps_the_first_that_can_run(lab: Lab) -> None:
    key = lab.key("n")
    trace = run_schedule(lab, {"A": pool_increments(key)}, "AAAA", watch=[key])
    assert [r.client for r in trace.rows] == ["A1", "A1", "A2", "A2"]
    assert trace.results == {"A": [0, 1]}


def test_the_explorer_finds_the_pool_s_lost_update_and_its_reduction_agrees(lab: Lab) -> None:
    key = lab.key("n")
    actors = {"A": pool_increments(key), "B": lambda client: client.incr(key)}
    every = explore(lab, actors, lambda c, r: int(c.get(key)) == 3, watch=[key], reduce=False)
    reduced = explore(lab, actors, lambda c, r: int(c.get(key)) == 3, watch=[key])
    assert every.total == 30  # 4 worker steps (2 orders of each pair) and B's one: 6 * 5
    assert 0 < every.bad_count < every.total
    assert (reduced.total, reduced.bad_count) == (every.total, every.bad_count)
    assert {o.schedule for o in every.outcomes} >= {"A1 A2 A1 A2 B", "B A1 A1 A2 A2"}


def test_a_pool_that_bails_out_leaves_its_worker_to_finish_after_the_actor(lab: Lab) -> None:
    """pottery's BailOutExecutor: the actor returns at quorum; the rest still reaches Redis."""
    key = lab.key("n")

    def first_of_two(client):
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        futures = [pool.submit(client.incr, key) for _ in range(2)]
        first = next(concurrent.futures.as_completed(futures)).result()
        pool.shutdown(wait=False)
        return first

    actors = {"A": first_of_two, "B": lambda client: client.get(key)}
    trace = run_schedule(lab, actors, "A1 B A2", watch=[key])
    assert [r.client for r in trace.rows] == ["A1", "B", "A2"]
    assert trace.results == {"A": 1, "B": "1"}  # A had returned before its second INCR
    assert lab.client().get(key) == "2"


def test_a_crash_takes_the_client_s_threads_with_it(lab: Lab) -> None:
    key = lab.key("n")
    actors = {"A": pool_increments(key), "B": lambda client: client.incr(key)}
    trace = run_schedule(lab, actors, "A1 A! B", watch=[key])
    assert trace.result_text["A"] == CRASHED and trace.results == {"B": 1}
    assert lab.client().get(key) == "1"  # neither worker wrote


def test_a_wait_with_a_timeout_times_out_only_once_nothing_else_can_run(lab: Lab) -> None:
    key, seen = lab.key("n"), []

    def leaves_a_renewer(client):
        stop = threading.Event()  # never set: the renewer outlives the actor

        def renew() -> None:
            while not stop.wait(2.0):
                seen.append(time.monotonic())
                client.incr(key)

        threading.Thread(target=renew, daemon=True).start()
        return client.set(key, 0)

    with pytest.raises(ScheduleError, match="A1 waits, with a timeout: another client can still"):
        run_schedule(lab, {"A": leaves_a_renewer}, "A1")
    seen.clear()
    trace = run_schedule(lab, {"A": leaves_a_renewer}, "A A1 A1 A1", watch=[key], finish=True)
    assert [r.client for r in trace.rows[:4]] == ["A", "A1", "A1", "A1"]
    assert trace.rows[1].reply == TIMED_OUT and trace.rows[2].command == "INCRBY n 1"
    assert [b - a for a, b in zip(seen, seen[1:], strict=False)][:3] == [2.0, 2.0, 2.0]
    assert len(seen) == 20  # each timed-out wait counts as a sleep: the spin bound ends the loop


def test_a_thread_starts_after_its_starter_s_sleeps_and_a_waiter_wakes_after_its_waker_s(
    lab: Lab,
) -> None:
    key = lab.key("n")

    def actor(client):
        start = time.time()
        time.sleep(5)  # the thread is started after this

        def work() -> float:
            began = time.time() - start
            client.incr(key)
            time.sleep(3)  # then it sets its future's result: the waiter wakes after this
            return began

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            began = pool.submit(work).result()
        return began, time.time() - start

    found = explore(lab, {"A": actor}, lambda c, r: True, watch=[key])
    assert [o.results["A"] for o in found.outcomes] == [(5.0, 8.0)]


def test_the_embedded_server_s_own_wait_in_a_worker_s_blocking_call_is_no_step(lab: Lab) -> None:
    """fakeredis waits for a blocking command on a Condition, timed by the wall clock: parked as
    the worker's wait, it was a step on a fast machine and none on a loaded one (the fuzzer
    saw "actors are not deterministic" once)."""
    key = lab.key("q")

    def actor(client):
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(lambda: client.blpop([key], timeout=1)).result()

    trace = run_schedule(lab, {"A": actor}, "A1", watch=[key], finish=True)
    assert [r.command for r in trace.rows] == ["BLPOP q 1 (times out: nothing else can run)"]
    assert not trace.results["A"]
    found = explore(lab, {"A": actor}, lambda c, r: True, watch=[key])
    assert [o.schedule for o in found.outcomes] == ["A1"]


def test_a_thread_that_loops_on_sleep_is_cut_by_the_spin_bound(lab: Lab) -> None:
    key = lab.key("n")

    def leaky(client):
        def leak() -> None:
            while True:
                time.sleep(1.0)
                client.decr(key)

        threading.Thread(target=leak, daemon=True).start()
        return client.set(key, 5)

    every = explore(lab, {"A": leaky}, lambda c, r: True, watch=[key], reduce=False)
    assert every.total == 21  # A's one step before, between or after A1's 20
    assert {o.schedule.split().count("A1") for o in every.outcomes} == {20}
    assert all(o.results == {"A": True} for o in every.outcomes)  # a sub-actor's is apart


def test_a_worker_left_idle_when_the_run_ends_is_stopped_without_a_word(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    """A pool never shut down leaves its worker waiting for work: the run ends it quietly."""
    key, kept = lab.key("n"), []

    def unclosed(client):
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        kept.append(pool)  # alive after the actor: its worker waits for more work
        return pool.submit(client.incr, key).result()

    trace = run_schedule(lab, {"A": unclosed}, "A1", watch=[key])
    assert trace.results == {"A": 1}
    assert [r.getMessage() for r in caplog.records if r.name == "concurrent.futures"] == []


def test_an_async_actor_s_run_in_executor_is_a_sub_actor_as_a_sync_pool_s_worker_is(
    lab: Lab,
) -> None:
    """asyncio's default executor is a thread pool: its worker is the async actor's A1."""
    key = lab.key("n")

    async def offloaded(client):
        def read_then_write() -> int:  # a sync client of its own, as blocking code has
            sync = redis.Redis.from_url("redis://localhost:6379/0", decode_responses=True)
            value = int(sync.get(key) or 0)
            sync.set(key, value + 1)
            return value

        return await asyncio.get_running_loop().run_in_executor(None, read_then_write)

    def sync_twin(client):
        def read_then_write() -> int:
            value = int(client.get(key) or 0)
            client.set(key, value + 1)
            return value

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(read_then_write).result()

    lost = run_schedule(lab, {"A": offloaded, "B": offloaded}, "A1 B1 A1 B1", watch=[key])
    assert [r.client for r in lost.rows] == ["A1", "B1", "A1", "B1"]
    assert lost.results == {"A": 0, "B": 0} and lab.client().get(key) == "1"
    counts = {}
    for name, actor in {"async": offloaded, "sync": sync_twin}.items():
        every = explore(lab, {"A": actor, "B": actor}, lambda c, r: c.get(key) == "2", watch=[key])
        counts[name] = (every.bad_count, every.total)
    assert counts == {"async": (4, 6), "sync": (4, 6)}  # notebook 01's lost update: 4 of 6
