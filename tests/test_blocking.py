"""Blocking commands: an actor waits (not runs) until its call can be answered, then times out."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from helpers import Lab
from helpers.instruments.blocking import call_of
from helpers.instruments.explore import explore
from helpers.instruments.schedule import ScheduleError, run_schedule


def _consumer(key: str, timeout: float) -> Any:
    def consume(client: Any) -> Any:
        """Wait for a job on the list (BLPOP)."""
        return client.blpop([key], timeout=timeout)

    return consume


def _producer(key: str) -> Any:
    def produce(client: Any) -> int:
        """Push one job."""
        return int(client.rpush(key, "job"))

    return produce


def test_the_calls_that_can_wait_are_known_with_their_keys_and_timeouts() -> None:
    assert call_of([("BLPOP", "a", "b", "5")]).keys == ("a", "b")  # type: ignore[union-attr]
    assert call_of([("BLMOVE", "s", "d", "LEFT", "RIGHT", "0")]).keys == ("s",)  # type: ignore[union-attr]
    assert call_of([("BLMPOP", "2", "2", "a", "b", "LEFT")]).timeout_s == 2.0  # type: ignore[union-attr]
    xread = call_of([("XREAD", "COUNT", "1", "BLOCK", "500", "STREAMS", "s", "$")])
    assert xread is not None and (xread.keys, xread.stream_ids, xread.timeout_s) == (
        ("s",),
        ("$",),
        0.5,
    )
    assert call_of([("XREAD", "STREAMS", "s", "0")]) is None  # no BLOCK: it never waits
    assert call_of([("MULTI",), ("BLPOP", "a", "0"), ("EXEC",)]) is None  # in MULTI it cannot block
    assert call_of([("BLPOP", "a", "5")]).timed_out() == ("BLPOP", "a", "0.001")  # type: ignore[union-attr]


@pytest.mark.parametrize("reduce", [False, True])
def test_a_consumer_waits_until_the_producer_pushed(lab: Lab, reduce: bool) -> None:
    key = lab.key("jobs")
    actors = {"A": _consumer(key, timeout=5), "B": _producer(key)}
    found = explore(lab, actors, lambda c, r: r["A"] == (key, "job"), watch=[key], reduce=reduce)
    # A's BLPOP cannot be answered before B's RPUSH, so B always goes first: one schedule.
    assert (found.total, found.bad_count, found.good) == (1, 0, ["BA"])


def test_a_call_nothing_can_answer_times_out_logically(lab: Lab) -> None:
    key = lab.key("jobs")
    start = time.monotonic()
    found = explore(
        lab, {"A": _consumer(key, timeout=30)}, lambda c, r: r["A"] is None, watch=[key]
    )
    assert (found.total, found.bad_count) == (1, 0)
    assert time.monotonic() - start < 10  # not the 30 s the call asked for
    trace = str(run_schedule(lab, {"A": _consumer(key, timeout=30)}, "A", watch=[key]))
    assert "BLPOP jobs 30 (times out: nothing else can run)" in trace


def test_a_logical_timeout_moves_the_actors_clock_just_past_the_timeout(lab: Lab) -> None:
    # A library that times its own wait (redis-limiters' semaphore: elapsed > max_sleep) must
    # see the wait run out, as it would on a real server, not 0 s of waiting.
    key = lab.key("jobs")

    def timed(client: Any) -> float:
        began = time.monotonic()
        client.blpop([key], timeout=7)
        return round(time.monotonic() - began, 6)

    trace = run_schedule(lab, {"A": timed}, "A", watch=[key])
    assert trace.results["A"] == 7.001


def test_a_call_that_blocks_forever_ends_its_schedule_blocked(lab: Lab) -> None:
    key = lab.key("jobs")
    actors = {"A": _consumer(key, timeout=0), "B": _consumer(key, timeout=0), "C": _producer(key)}
    found = explore(lab, actors, lambda c, r: len(r) == 3, watch=[key])
    # C's one job wakes A or B; the other waits forever, so every schedule ends with it blocked.
    assert found.total == 2 and found.bad_count == 2
    assert sorted(o.result_text for o in found.outcomes) == [
        "A=('jobs', 'job')  B=(blocked)  C=1",
        "A=(blocked)  B=('jobs', 'job')  C=1",
    ]


def test_a_schedule_cannot_name_a_client_that_is_waiting(lab: Lab) -> None:
    key = lab.key("jobs")
    actors = {"A": _consumer(key, timeout=5), "B": _producer(key)}
    with pytest.raises(ScheduleError, match="A is waiting in BLPOP jobs 5"):
        run_schedule(lab, actors, "AB", watch=[key])
    trace = run_schedule(lab, actors, "BA", watch=[key])
    assert trace.results == {"A": (key, "job"), "B": 1}


def _semaphore_holder(key: str, inside: str) -> Any:
    def hold(client: Any) -> int:
        """Take the one permit (BLPOP), count who is inside, leave, give the permit back."""
        permit = client.blpop([key], timeout=0)
        together = int(client.incr(inside))
        client.decr(inside)
        client.rpush(key, permit[1])
        return together

    return hold


@pytest.mark.parametrize("reduce", [False, True])
def test_a_blpop_permit_keeps_mutual_exclusion_and_explores_to_the_end(
    lab: Lab, reduce: bool
) -> None:
    key, inside = lab.key("permit"), lab.key("inside")
    actors = {n: _semaphore_holder(key, inside) for n in "ABC"}
    found = explore(
        lab,
        actors,
        lambda c, r: sorted(r.values()) == [1, 1, 1],
        setup=lambda c: c.rpush(key, "permit"),
        watch=[key, inside],
        reduce=reduce,
    )
    # Whoever holds the permit runs its 4 steps while the others wait: 3! orders of holders.
    assert (found.total, found.bad_count) == (6, 0)
    assert "AAAABBBBCCCC" in found.good and found.complete


def test_xread_block_waits_for_an_entry_after_the_last_id_it_saw(lab: Lab) -> None:
    stream = lab.key("events")

    def reader(client: Any) -> int:
        """Wait for an event newer than any there when it asked ($)."""
        got = client.xread({stream: "$"}, count=1, block=5_000)
        return len(got[0][1]) if got else 0

    def writer(client: Any) -> bool:
        """Add one event (its id, the server's clock, would differ in every replay)."""
        return bool(client.xadd(stream, {"n": 1}))

    found = explore(
        lab,
        {"A": reader, "B": writer},
        lambda c, r: r["A"] == 1,
        setup=lambda c: c.xadd(stream, {"n": 0}),  # an old entry: "$" is after it
        watch=[stream],
    )
    assert (found.total, found.bad_count, found.good) == (1, 0, ["BA"])


def test_wait_for_a_replica_that_is_not_there_times_out_logically(lab: Lab) -> None:
    key = lab.key("n")

    def write_then_wait(client: Any) -> int:
        """Write, then wait for 1 replica for up to 10 s (WAIT)."""
        client.incr(key)
        return int(client.wait(1, 10_000))

    if lab.kind == "embedded":
        pytest.skip("fakeredis has no WAIT (docs/divergences.md: no_wait)")
    if lab.kind == "cluster":
        pytest.skip("a cluster node has replicas of its own")
    start = time.monotonic()
    found = explore(lab, {"A": write_then_wait}, lambda c, r: r["A"] == 0, watch=[key])
    assert (found.total, found.bad_count) == (1, 0) and time.monotonic() - start < 8


def test_python_redis_lock_s_blocking_acquire_explores_to_the_end(lab: Lab) -> None:
    redis_lock = pytest.importorskip("redis_lock")  # the 'cases' extra pins it
    logging.getLogger("redis_lock").setLevel(logging.ERROR)
    name = lab.key("job")  # the library keys it lock:<name> and lock-signal:<name>
    inside = lab.key("inside")

    def take_work_release(client: Any) -> int:
        """Acquire as the README shows (blocking: BLPOP on its signal list), work, release."""
        lock = redis_lock.Lock(client, name, expire=60)
        lock.acquire()  # blocking=True: parks in BLPOP until the holder's release signals
        together = int(client.incr(inside))
        client.decr(inside)
        lock.release()
        return together

    found = explore(
        lab,
        {"A": take_work_release, "B": take_work_release},
        lambda c, r: sorted(r.values()) == [1, 1],
        watch=[f"lock:{name}", f"lock-signal:{name}", inside],
    )
    # Before: B's BLPOP blocked the step until a wall-clock timeout. Now B waits (out of the
    # runnable set) until A's release pushes the signal, and every schedule runs to its end.
    assert found.total > 1 and found.bad_count == 0 and found.complete
    waited = [s for s in found.good if len(s) == 12]  # SET NX refused, then BLPOP, then again
    trace = found.trace(waited[0])
    assert any(row.command.startswith("BLPOP lock-signal:job") for row in trace.rows)
