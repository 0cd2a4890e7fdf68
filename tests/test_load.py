"""helpers.instruments.load: N clients x M calls of one strategy function, with a barrier,
one Op per call, round trips counted by the client layer, errors re-raised, no stray threads."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from functools import partial

import pytest
import redis
from programs import incr_first_limiter, naive_limiter, watch_increment

from helpers import Lab
from helpers.backend.limits import CONNECTIONS_PER_LEARNER
from helpers.instruments.history import FAIL, INFO, OK, Op
from helpers.instruments.load import (
    ClientProcessError,
    RunResult,
    RunTimeout,
    repeat_runs,
    run_clients,
    run_processes,
)


def _client_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("racelab-client-")]


def test_every_client_runs_every_iteration_exactly_once(lab: Lab) -> None:
    key = lab.key("n")
    result = run_clients(lab, lambda c: c.incr(key), clients=4, iterations=25)
    assert sorted((c, i) for c, i, _ in result.outcomes) == [
        (c, i) for c in range(4) for i in range(25)
    ]
    assert result.calls == 100 and len(result.latencies_ns) == 100
    assert int(lab.client().get(key)) == 100
    assert sorted(v for _, _, v in result.outcomes) == list(
        range(1, 101)
    )  # INCR replies: all distinct


def test_the_result_keeps_the_very_function_it_ran(lab: Lab) -> None:
    fn = partial(naive_limiter, key=lab.key("n"), limit=5)
    result = run_clients(lab, fn, clients=2, iterations=3)
    assert result.fn is fn and result.fn.func is naive_limiter


def test_each_client_has_its_own_connection(lab: Lab) -> None:
    def who(client) -> int:
        return id(client) if lab.kind == "embedded" else client.client_id()

    result = run_clients(lab, who, clients=5, iterations=3)
    per_client = {c: {v for cc, _, v in result.outcomes if cc == c} for c in range(5)}
    assert all(len(ids) == 1 for ids in per_client.values())
    assert len(set().union(*per_client.values())) == 5


def test_clients_start_together_after_connecting(lab: Lab) -> None:
    result = run_clients(lab, lambda c: time.monotonic_ns(), clients=4, iterations=1)
    starts = [op.start_ns for op in result.history]
    assert len(starts) == 4 and max(starts) - min(starts) < 5e9  # all after one barrier


def test_one_op_per_call_with_start_end_label_result_and_status(lab: Lab) -> None:
    key = lab.key("n")
    result = run_clients(
        lab, partial(incr_first_limiter, key=key, limit=6), clients=3, iterations=4
    )
    ops = result.ops("incr_first_limiter")
    assert len(ops) == 12 and all(isinstance(o, Op) and o.status == OK for o in ops)
    assert all(o.start_ns <= o.end_ns and o.duration_ns == o.end_ns - o.start_ns for o in ops)
    assert sorted(o.result for o in ops) == ["allowed"] * 6 + ["rejected"] * 6
    assert [o.start_ns for o in result.history] == sorted(o.start_ns for o in result.history)
    assert (
        len(result.op_latencies_ns("incr_first_limiter")) == 12
        and result.op_latencies_ns("other") == []
    )


def test_a_call_that_raises_is_recorded_fail_or_info_and_propagates(lab: Lab) -> None:
    key = lab.key("h")
    lab.client().hset(key, "f", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        run_clients(lab, lambda c: c.incr(key), clients=1, iterations=1)
    from helpers.instruments.load import _status_of

    assert _status_of(redis.ResponseError("x")) == FAIL  # Redis said no: it did not take effect
    assert _status_of(redis.ConnectionError("x")) == INFO  # unknown: it may have reached the server


def test_round_trips_commands_and_retries_are_counted_by_the_client(lab: Lab) -> None:
    key = lab.key("n")
    naive = run_clients(lab, partial(naive_limiter, key=key, limit=10**6), clients=2, iterations=5)
    assert (naive.round_trips, naive.commands, naive.retries) == (20, 20, 0)  # GET + INCR per call
    lab.client().delete(key)
    watch = run_clients(lab, partial(watch_increment, key=key), clients=1, iterations=5)
    assert (watch.round_trips, watch.commands, watch.retries) == (
        15,
        25,
        0,
    )  # WATCH, GET, MULTI/SET/EXEC
    assert "round trips=15" in watch.summary() and "retries=0" in watch.summary()


def test_an_aborted_exec_counts_as_a_retry(lab: Lab) -> None:
    key = lab.key("n")
    writer = lab.client()

    def interrupted(client) -> str:
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            writer.incr(key)  # somebody else writes between WATCH and EXEC
            pipe.multi()
            pipe.incr(key)
            try:
                pipe.execute()
            except redis.WatchError:
                return "aborted"
        return "committed"

    result = run_clients(lab, interrupted, clients=1, iterations=3)
    assert result.count("aborted") == 3 and result.retries == 3


def test_outcome_counts_and_throughput(lab: Lab) -> None:
    key = lab.key("n")
    result = run_clients(
        lab, partial(incr_first_limiter, key=key, limit=6), clients=3, iterations=4
    )
    assert result.count("allowed") == 6 and result.counts() == {"allowed": 6, "rejected": 6}
    assert result.elapsed_s > 0 and result.throughput == pytest.approx(12 / result.elapsed_s)
    assert "3 clients x 4 iterations" in result.summary()


def test_exception_in_one_client_is_reraised_and_no_thread_survives(lab: Lab) -> None:
    before = set(threading.enumerate())
    calls = iter(range(10**9))

    def fn(client) -> None:
        if next(calls) == 7:
            raise ValueError("one call failed")
        client.ping()

    with pytest.raises(ValueError, match="one call failed"):
        run_clients(lab, fn, clients=4, iterations=10_000)
    assert _client_threads() == []
    assert set(threading.enumerate()) <= before


def test_timeout_raises_and_joins_every_thread(lab: Lab) -> None:
    with pytest.raises(RunTimeout, match="did not finish within 0.3s"):
        run_clients(
            lab,
            lambda c: c.ping(),
            clients=3,
            iterations=100_000,
            mode="think",
            think_s=0.01,
            timeout=0.3,
        )
    assert _client_threads() == []


def test_timeout_unblocks_a_client_waiting_on_the_server(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("blocking commands need a server socket to close")
    key = lab.key("never-filled")
    with pytest.raises(RunTimeout, match="all stopped"):
        run_clients(lab, lambda c: c.blpop([key], timeout=0), clients=2, iterations=1, timeout=0.5)
    assert _client_threads() == []


def test_clients_are_released_after_the_run(lab: Lab) -> None:
    before = len(lab._clients)
    run_clients(lab, lambda c: None, clients=6, iterations=1)
    with pytest.raises(ZeroDivisionError):
        run_clients(lab, lambda c: 1 / 0, clients=6, iterations=1)
    assert len(lab._clients) == before


def test_invalid_sizes_and_modes_are_rejected(lab: Lab) -> None:
    with pytest.raises(ValueError):
        run_clients(lab, lambda c: None, clients=0)
    with pytest.raises(ValueError):
        run_clients(lab, lambda c: None, iterations=-1)
    with pytest.raises(ValueError, match="unknown client mode"):
        run_clients(lab, lambda c: None, mode="gated")
    if lab.kind != "embedded":
        with pytest.raises(ValueError, match="lockstep"):
            run_processes(lab, lambda c: None, mode="lockstep")


def test_think_mode_delays_every_round_trip_of_every_client(lab: Lab) -> None:
    # Think mode widens the window but cannot promise a race on a busy machine (lockstep does).
    key = lab.key("window")
    result = run_clients(
        lab,
        partial(naive_limiter, key=key, limit=100),
        clients=4,
        iterations=5,
        mode="think",
        think_s=0.01,
    )
    assert result.round_trips == 40 and min(result.latencies_ns) >= 2 * 0.01e9
    assert int(lab.client().get(key)) == result.count("allowed")


def test_lockstep_mode_makes_the_naive_limiter_overshoot_on_every_run(lab: Lab) -> None:
    # Rounds, not timing: every client's GET of a round is answered before any INCR of the next.
    key = lab.key("window")
    observer = lab.client()
    for _ in range(5):
        observer.delete(key)
        result = run_clients(
            lab,
            partial(naive_limiter, key=key, limit=100),
            clients=8,
            iterations=50,
            mode="lockstep",
        )
        assert result.count("allowed") > 100 and int(observer.get(key)) == result.count("allowed")


def test_lockstep_mode_leaves_a_single_command_limiter_exact(lab: Lab) -> None:
    key = lab.key("window")
    result = run_clients(
        lab,
        partial(incr_first_limiter, key=key, limit=100),
        clients=8,
        iterations=50,
        mode="lockstep",
    )
    assert result.count("allowed") == 100 and result.count("rejected") == 300


def test_lockstep_clients_with_different_numbers_of_round_trips_all_finish(lab: Lab) -> None:
    key = lab.key("n")

    def uneven(client) -> int:
        for _ in range(1 + client.incr(key) % 3):  # one to three round trips more, varying
            client.ping()
        return 0

    result = run_clients(lab, uneven, clients=5, iterations=20, mode="lockstep", timeout=30)
    assert result.calls == 100


def test_a_failing_lockstep_client_does_not_leave_the_others_waiting(lab: Lab) -> None:
    calls = iter(range(10**9))

    def fn(client) -> None:
        client.ping()
        if next(calls) == 3:
            raise KeyError("one call failed")

    with pytest.raises(KeyError, match="one call failed"):
        run_clients(lab, fn, clients=4, iterations=100, mode="lockstep", timeout=30)
    assert _client_threads() == []


def test_a_single_command_limiter_never_overshoots_under_the_same_load(lab: Lab) -> None:
    key = lab.key("window")
    result = run_clients(
        lab,
        partial(incr_first_limiter, key=key, limit=100),
        clients=8,
        iterations=50,
        mode="think",
        think_s=0.002,
    )
    assert result.count("allowed") == 100 and result.count("rejected") == 300


def test_repeat_runs_resets_before_each_run_and_returns_one_metric_per_run(lab: Lab) -> None:
    key = lab.key("window")
    resets: list[int] = []

    def reset(client) -> None:
        resets.append(1)
        client.delete(key)

    admitted = repeat_runs(
        lab,
        partial(incr_first_limiter, key=key, limit=10),
        runs=3,
        reset=reset,
        metric=lambda result, client: (result.count("allowed"), int(client.get(key))),
        clients=4,
        iterations=5,
    )
    assert admitted == [(10, 20)] * 3 and len(resets) == 3
    results = repeat_runs(lab, lambda c: None, runs=2, clients=2, iterations=1)
    assert all(isinstance(r, RunResult) for r in results)


def test_run_processes_refuses_the_embedded_backend(lab: Lab) -> None:
    if lab.kind != "embedded":
        pytest.skip("embedded only")
    with pytest.raises(ValueError, match="real server"):
        run_processes(lab, lambda c: None)


def test_run_processes_runs_each_client_in_its_own_process(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")
    key = lab.key("n")

    def fn(client) -> tuple[int, int]:
        return client.incr(key), os.getpid()

    result = run_processes(lab, fn, clients=3, iterations=20)
    assert result.mode == "processes" and result.calls == 60 and result.round_trips == 60
    pids = {pid for *_, (_, pid) in result.outcomes}
    assert len(pids) == 3 and os.getpid() not in pids
    assert sorted(n for *_, (n, _) in result.outcomes) == list(range(1, 61))
    assert multiprocessing.active_children() == []


def test_run_processes_reraises_a_client_failure_with_its_traceback(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")

    def fn(client) -> None:
        if os.getpid() % 1 == 0:
            raise ValueError("process client failed")

    with pytest.raises(ClientProcessError, match="(?s)process client failed.*Traceback"):
        run_processes(lab, fn, clients=2, iterations=3)
    assert multiprocessing.active_children() == []


def test_run_processes_says_when_a_result_cannot_be_sent_back(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")
    with pytest.raises(ClientProcessError, match="cannot be sent to the parent"):
        run_processes(lab, lambda c: threading.Lock(), clients=2, iterations=1)
    assert multiprocessing.active_children() == []


def test_run_processes_timeout_kills_every_process(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")
    with pytest.raises(RunTimeout):
        run_processes(lab, lambda c: time.sleep(30), clients=2, iterations=1, timeout=0.5)
    assert multiprocessing.active_children() == []


def test_run_clients_on_a_cluster(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("n", "counter")
    result = run_clients(cluster_lab, lambda c: c.incr(key), clients=4, iterations=10)
    assert sorted(v for *_, v in result.outcomes) == list(range(1, 41)) and result.round_trips == 40
    assert _client_threads() == []


def test_timeout_cuts_a_long_think_short_and_leaves_no_thread_behind(lab: Lab) -> None:
    # Regression: a client thinking past timeout + the 5 s grace was left running after the raise.
    before = set(threading.enumerate())
    with pytest.raises(RunTimeout, match="all stopped"):
        run_clients(
            lab, lambda c: c.ping(), clients=4, iterations=2, mode="think", think_s=60, timeout=0.3
        )
    assert _client_threads() == []
    assert set(threading.enumerate()) <= before


def test_a_failing_client_stops_the_others_in_their_think(lab: Lab) -> None:
    calls = iter(range(10**9))

    def fn(client) -> None:
        if next(calls) == 0:
            raise KeyError("the first call failed")
        client.ping()  # think mode: a 60 s wait before this round trip

    with pytest.raises(KeyError, match="the first call failed"):
        run_clients(lab, fn, clients=8, iterations=1, mode="think", think_s=60, timeout=30)
    assert _client_threads() == []


def test_200_clients_hammering_one_key_lose_no_increment(lab: Lab) -> None:
    """200 clients embedded; on a shared server, a learner's share of maxclients (the most one call opens)."""
    key = lab.key("hits")
    clients = 200 if lab.kind == "embedded" else CONNECTIONS_PER_LEARNER
    result = run_clients(lab, lambda c: c.incr(key), clients=clients, iterations=5)
    assert result.calls == clients * 5
    assert sorted(v for _, _, v in result.outcomes) == list(range(1, clients * 5 + 1))
    assert _client_threads() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"think_s": -0.1},
        {"think_s": float("nan")},
        {"think_s": float("inf")},
        {"timeout": 0},
        {"timeout": -1},
        {"timeout": float("nan")},
    ],
)
def test_bad_think_time_or_timeout_is_rejected_before_any_thread_starts(lab: Lab, kwargs) -> None:
    before = len(lab._clients)
    with pytest.raises(ValueError, match="think_s|timeout"):
        run_clients(lab, lambda c: None, clients=2, iterations=1, mode="think", **kwargs)
    assert _client_threads() == [] and len(lab._clients) == before


def test_timeout_while_clients_are_busy_with_commands_raises_run_timeout_and_joins_them(
    lab: Lab,
) -> None:
    # Regression: on the embedded backend, closing a connection in the middle of a command raised
    # ValueError ("generator already executing") out of run_clients, and no thread was joined.
    before = set(threading.enumerate())
    key = lab.key("n")
    for _ in range(3):
        with pytest.raises(RunTimeout, match="all stopped"):
            run_clients(lab, lambda c: c.incr(key), clients=8, iterations=10**8, timeout=0.3)
        assert _client_threads() == []
    assert set(threading.enumerate()) <= before


def test_a_connection_lost_and_reopened_during_a_run_is_an_error_not_a_count(lab: Lab) -> None:
    from helpers.instruments.load import ConnectionLost

    key = lab.key("n")
    dropped = iter(range(10**9))

    def fn(client) -> int:
        if next(dropped) == 5:
            client.connection_pool.disconnect()  # as a server restart would: redis-py reconnects
        return client.incr(key)

    with pytest.raises(ConnectionLost, match="reconnected"):
        run_clients(lab, fn, clients=2, iterations=10)
    assert _client_threads() == []


def test_connecting_and_opening_more_connections_is_not_a_reconnection(lab: Lab) -> None:
    def two_connections(client) -> None:
        with client.pipeline(transaction=True) as pipe:  # holds one connection...
            pipe.watch(lab.key("n"))
            client.ping()  # ...so this command opens a second one

    result = run_clients(lab, two_connections, clients=3, iterations=2)
    assert [s.reconnects for s in result.stats_by_client] == [0, 0, 0]


def test_an_infinite_timeout_means_no_time_limit(lab: Lab) -> None:
    # Regression: timeout=float("inf") raised OverflowError from Thread.join and Barrier.wait.
    result = run_clients(lab, lambda c: c.ping(), clients=3, iterations=2, timeout=float("inf"))
    assert result.calls == 6 and _client_threads() == []
    if lab.kind != "embedded":
        assert (
            run_processes(
                lab, lambda c: c.ping(), clients=2, iterations=2, timeout=float("inf")
            ).calls
            == 4
        )
