"""One server per address: a library given several URLs talks to as many servers of the lab.

The library is redlock-py (pinned in the ``cases`` extra), called as its README shows, with
three masters. Its URLs point at ports where nothing listens, so a round trip that escaped the
race would fail instead of passing unseen. On the embedded backend and on a real server.
"""

from __future__ import annotations

import logging
from functools import partial

import pytest
import redis
import redlock

from helpers import Invariant, Lab, Race, explore, run_schedule
from helpers.instruments.adopt import ActorRefused, Refusal
from helpers.instruments.explore import results_at_most
from helpers.instruments.servers import MAX_SERVERS, UnmappedServer

MASTERS = ["redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0", "redis://127.0.0.1:3/0"]
ADDRESSES = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
LEASE_MS = 10_000
ONE_HOLDER = Invariant("one holder", "at most one taker holds the lock", results_at_most(True, 1))


def take(client: redis.Redis, name: str, retries: int) -> bool:
    """Return whether redlock-py, given three masters, got the lock on name."""
    dlm = redlock.Redlock(MASTERS, retry_count=retries)
    return dlm.lock(name, LEASE_MS) is not False


def takers(lab: Lab) -> tuple[str, dict[str, partial[bool]]]:
    """Return the lock's key and two takers: A tries once, B retries once after a miss."""
    name = lab.key("res")
    return name, {
        "A": partial(take, name=name, retries=1),
        "B": partial(take, name=name, retries=2),
    }


def test_a_redlock_of_three_masters_grants_the_lock_on_each_master(lab: Lab) -> None:
    name, actors = takers(lab)
    trace = run_schedule(lab, {"A": actors["A"]}, "AAA", watch=[name])
    assert trace.results == {"A": True}
    assert [row.server for row in trace.rows] == ADDRESSES  # one SET NX PX on each master
    assert all(row.command.startswith("SET res ") and row.reply == "b'OK'" for row in trace.rows)
    assert trace.table().splitlines()[0].split()[:3] == ["step", "client", "server"]


def test_three_masters_keep_mutual_exclusion_when_no_fault_happens(lab: Lab) -> None:
    name, actors = takers(lab)
    found = explore(lab, actors, results_at_most(True, 1), watch=[name])
    assert (found.bad_count, found.total) == (0, 44)
    # Evidence, not silence: each taker gets the lock in some schedules and misses in others.
    assert found.returned() == {"A": {"True": 28, "False": 16}, "B": {"False": 28, "True": 16}}


def test_a_master_that_restarts_without_persistence_lets_two_hold_the_lock(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    name, actors = takers(lab)
    found = explore(lab, actors, results_at_most(True, 1), watch=[name], faults=("crash",))
    assert (found.bad_count, found.total) == (105, 1414)
    # A replay that stops B inside redlock-py's unlock loop (whose bare except swallows the
    # stop) hands it no error to log: 114 "Error unlocking resource" tracebacks before.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    crashes = {step for schedule in found.bad for step in schedule.split() if "(" in step}
    assert crashes == {"crash(127.0.0.1:2)", "crash(127.0.0.1:3)"}  # never the lab's own
    trace = found.first_bad()
    assert trace is not None and trace.results == {"A": True, "B": True}
    # Redlock's own example: A holds two masters of three, one of them forgets its key, B
    # takes that one and the third: two holders at once. Every row names its server.
    assert trace.schedule == "A A B B B A B B B B crash(127.0.0.1:2) B B"
    assert all(row.server in ADDRESSES for row in trace.rows)
    crash = trace.rows[10]
    assert (crash.client, crash.server, crash.command) == ("(server)", "127.0.0.1:2", "crash")
    assert [(r.client, r.server, r.reply) for r in trace.rows[11:]] == [
        ("B", "127.0.0.1:2", "b'OK'"),
        ("B", "127.0.0.1:3", "b'OK'"),
    ]


def test_a_master_that_stalls_past_its_ttls_lets_two_hold_the_lock(lab: Lab) -> None:
    name, actors = takers(lab)
    found = explore(lab, actors, results_at_most(True, 1), watch=[name], faults=("pause",))
    assert (found.bad_count, found.total) == (179, 1130)
    trace = found.first_bad()
    assert trace is not None and trace.results == {"A": True, "B": True}
    assert trace.schedule == "A A B B B A B B B B pause(127.0.0.1:2) B B"
    pause = trace.rows[10]
    assert (pause.client, pause.server, pause.reply) == (
        "(server)",
        "127.0.0.1:2",
        "TTL of res ran out",
    )


def test_a_server_fault_is_a_step_of_a_forced_schedule_too(lab: Lab) -> None:
    name, actors = takers(lab)
    schedule = "A pause(127.0.0.1:3) A crash(127.0.0.1:2) A"
    trace = run_schedule(lab, {"A": actors["A"]}, schedule, watch=[name])
    assert [(r.client, r.server, r.reply) for r in trace.rows] == [
        ("A", "127.0.0.1:1", "b'OK'"),
        ("(server)", "127.0.0.1:3", "no key with a TTL: nothing expires"),
        ("A", "127.0.0.1:2", "b'OK'"),
        (
            "(server)",
            "127.0.0.1:2",
            "restarted without persistence: its keys and script cache are lost",
        ),
        ("A", "127.0.0.1:3", "b'OK'"),
    ]
    assert trace.results == {"A": True}  # the crash came after A's SET there: it still counts


def test_the_reduced_search_answers_as_the_exhaustive_one_across_servers(lab: Lab) -> None:
    key = lab.key("k")

    def read_then_write(client: redis.Redis, read: str, write: str) -> str | None:
        seen = redis.Redis.from_url(read, decode_responses=True).get(key)
        redis.Redis.from_url(write, decode_responses=True).set(key, "x")
        return seen

    # Store buffering across two servers: both read nothing only if both reads come first.
    actors = {
        "A": partial(read_then_write, read=MASTERS[1], write=MASTERS[2]),
        "B": partial(read_then_write, read=MASTERS[2], write=MASTERS[1]),
    }

    def one_sees(client: redis.Redis, results: dict[str, object]) -> bool:
        return results["A"] is not None or results["B"] is not None

    reduced = explore(lab, actors, one_sees, watch=[key])
    every = explore(lab, actors, one_sees, watch=[key], reduce=False)
    assert (every.bad_count, every.total) == (4, 6)
    assert (reduced.bad, reduced.total) == (every.bad, 6)

    # The same key name on two servers is two keys: writes there commute (one class).
    writers = {"A": partial(read_then_write, read=MASTERS[1], write=MASTERS[1])}
    writers["B"] = partial(read_then_write, read=MASTERS[2], write=MASTERS[2])
    apart = explore(lab, writers, lambda client, results: True, watch=[key])
    assert (apart.total, apart.classes) == (6, 1)


def test_a_blocking_call_on_a_further_server_waits_for_that_servers_keys(lab: Lab) -> None:
    key = lab.key("jobs")

    def worker(client: redis.Redis) -> object:
        redis.Redis.from_url(MASTERS[0]).get(key)  # the first address: the lab's own server
        return redis.Redis.from_url(MASTERS[1], decode_responses=True).blpop([key], timeout=1)

    def producer(client: redis.Redis) -> int:
        queue = redis.Redis.from_url(MASTERS[1])
        queue.lpush(key, "job")
        return int(queue.llen(key))

    still_queued = lambda client, results: results["B"] == 1  # noqa: E731
    found = explore(lab, {"A": worker, "B": producer}, still_queued, watch=[key])
    # The worker's BLPOP can go as soon as the job is on its server (server 2), before the
    # producer's LLEN: it is not left waiting for a list on the lab's own server.
    assert (found.bad, found.total) == (["ABAB", "BAAB"], 5)
    assert found.returned()["A"] == {"('jobs', 'job')": 5}  # the worker always gets the job


def test_each_address_has_keys_of_its_own_and_the_first_is_the_labs(lab: Lab) -> None:
    key = lab.key("k")

    def write_one_read_other(client: redis.Redis) -> list[str | None]:
        first, second = (redis.Redis.from_url(url, decode_responses=True) for url in MASTERS[:2])
        first.set(key, "first")
        second.set(key, "second")
        return [first.get(key), second.get(key), client.get(key)]

    trace = run_schedule(lab, {"A": write_one_read_other}, "AAAAA", watch=[key])
    assert trace.results == {"A": ["first", "second", "first"]}
    assert trace.final_state == "k=first"  # the watched key is the lab's own server's
    assert [row.server for row in trace.rows] == [*ADDRESSES[:2], *ADDRESSES[:2], ADDRESSES[0]]


def test_one_url_keeps_the_trace_of_one_server(lab: Lab) -> None:
    key = lab.key("k")

    def one_url(client: redis.Redis) -> int:
        return int(redis.Redis.from_url(MASTERS[0]).incr(key))

    trace = run_schedule(lab, {"A": one_url}, "A", watch=[key])
    assert (trace.servers, [row.server for row in trace.rows]) == ("", [""])
    assert "server" not in trace.table()


def test_a_crash_of_the_labs_own_server_is_refused_with_the_step_to_use(lab: Lab) -> None:
    name, actors = takers(lab)
    with pytest.raises(UnmappedServer, match=r"lab's own server .*'restart'"):
        run_schedule(lab, {"A": actors["A"]}, "A crash(127.0.0.1:1) A A", watch=[name])


def test_more_addresses_than_a_race_may_have_are_refused(lab: Lab) -> None:
    def many(client: redis.Redis) -> str:
        try:
            for port in range(1, MAX_SERVERS + 2):
                redis.Redis(host="127.0.0.1", port=port).get("x")
        except ActorRefused:
            return "swallowed"  # a library that catches the refusal: the race raises it too
        return "all mapped"

    with pytest.raises(ActorRefused, match=f"beyond the {MAX_SERVERS}") as refused:
        run_schedule(lab, {"A": many}, "A" * (MAX_SERVERS + 1), finish=True)
    assert refused.value.reason is Refusal.UNMAPPED


def test_a_second_address_on_a_cluster_lab_is_refused(cluster_lab: Lab) -> None:
    name = cluster_lab.key("res")
    with pytest.raises(ActorRefused, match="a cluster lab has no server") as refused:
        run_schedule(cluster_lab, {"A": partial(take, name=name, retries=1)}, "AA", watch=[name])
    assert refused.value.reason is Refusal.UNMAPPED


def test_the_stepper_shows_each_round_trips_server(lab: Lab) -> None:
    name, actors = takers(lab)
    race = Race(lab, actors, watch=[name], invariant=ONE_HOLDER)
    stepper = race.stepper()
    try:
        for actor in "AAB":
            stepper.step(actor)
        assert stepper.text().splitlines()[0].split()[:3] == ["step", "client", "server"]
        assert [row.server for row in stepper.trace.rows] == [*ADDRESSES[:2], ADDRESSES[0]]
        assert "<th" in stepper.html() and ">server</th>" in stepper.html()
    finally:
        stepper.close()
