"""helpers.instruments.race: concurrent clients with a barrier, per-op history, errors re-raised, no stray threads."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from helpers import Lab
from helpers.instruments.race import (ClientContext, ClientProcessError, Op, RunResult, RunTimeout, repeat_runs,
                          run_clients, run_processes)


def _client_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("racelab-client-")]


def _naive_limiter(key: str, limit: int):
    def request(ctx: ClientContext) -> str:
        count = int(ctx.client.get(key) or 0)
        ctx.think()
        if count < limit:
            ctx.client.incr(key)
            return "allowed"
        return "rejected"
    return request


def _incr_first_limiter(key: str, limit: int):
    def request(ctx: ClientContext) -> str:
        return "allowed" if ctx.client.incr(key) <= limit else "rejected"
    return request


def test_every_client_runs_every_iteration_exactly_once(lab: Lab) -> None:
    key = lab.key("n")
    result = run_clients(lab, lambda ctx: ctx.client.incr(key), clients=4, iterations=25)
    assert sorted((c, i) for c, i, _ in result.outcomes) == [(c, i) for c in range(4) for i in range(25)]
    assert result.calls == 100 and len(result.latencies_ns) == 100
    assert int(lab.client().get(key)) == 100
    assert sorted(v for _, _, v in result.outcomes) == list(range(1, 101))  # INCR replies: all distinct


def test_each_client_has_its_own_connection(lab: Lab) -> None:
    def who(ctx: ClientContext) -> int:
        return id(ctx.client) if lab.kind == "embedded" else ctx.client.client_id()
    result = run_clients(lab, who, clients=5, iterations=3)
    per_client = {c: {v for cc, _, v in result.outcomes if cc == c} for c in range(5)}
    assert all(len(ids) == 1 for ids in per_client.values())
    assert len(set().union(*per_client.values())) == 5


def test_clients_start_together_after_every_prepare(lab: Lab) -> None:
    def prepare(ctx: ClientContext) -> None:
        time.sleep(0.02 * ctx.client_id)  # without a barrier, client 0 would start long before 3
        ctx.local["ready_ns"] = time.monotonic_ns()

    def fn(ctx: ClientContext) -> int:
        if ctx.iteration == 0:
            ctx.record("first", time.monotonic_ns(), time.monotonic_ns(), ctx.local["ready_ns"])
        return ctx.client_id
    result = run_clients(lab, fn, clients=4, iterations=2, prepare=prepare)
    firsts = result.ops("first")
    assert len(firsts) == 4
    assert min(op.start_ns for op in firsts) >= max(op.result for op in firsts)


def test_op_records_start_end_label_and_result(lab: Lab) -> None:
    key = lab.key("n")

    def fn(ctx: ClientContext) -> str:
        with ctx.op("incr") as op:
            op.result = ctx.client.incr(key)
        return "ok"
    result = run_clients(lab, fn, clients=3, iterations=4)
    ops = result.ops("incr")
    assert len(ops) == 12 and all(isinstance(o, Op) for o in ops)
    assert all(o.start_ns <= o.end_ns and o.duration_ns == o.end_ns - o.start_ns for o in ops)
    assert sorted(o.result for o in ops) == list(range(1, 13))
    assert [o.start_ns for o in result.history] == sorted(o.start_ns for o in result.history)
    assert len(result.op_latencies_ns("incr")) == 12 and result.op_latencies_ns("other") == []


def test_op_records_an_error_and_lets_it_propagate(lab: Lab) -> None:
    def fn(ctx: ClientContext) -> None:
        with ctx.op("boom"):
            raise KeyError("inside op")
    with pytest.raises(KeyError, match="inside op"):
        run_clients(lab, fn, clients=1, iterations=1)


def test_retries_outcome_counts_and_throughput(lab: Lab) -> None:
    def fn(ctx: ClientContext) -> str:
        ctx.retry(ctx.client_id)
        return "even" if ctx.iteration % 2 == 0 else "odd"
    result = run_clients(lab, fn, clients=3, iterations=4)
    assert result.retries_by_client == [0, 4, 8] and result.retries == 12
    assert result.count("even") == 6 and result.counts() == {"even": 6, "odd": 6}
    assert result.elapsed_s > 0 and result.throughput == pytest.approx(12 / result.elapsed_s)
    assert "3 clients x 4 iterations" in result.summary() and "retries=12" in result.summary()


def test_exception_in_one_client_is_reraised_and_no_thread_survives(lab: Lab) -> None:
    before = set(threading.enumerate())

    def fn(ctx: ClientContext) -> None:
        if ctx.client_id == 2 and ctx.iteration == 3:
            raise ValueError("client 2 failed")
        ctx.think()
    with pytest.raises(ValueError, match="client 2 failed"):
        run_clients(lab, fn, clients=4, iterations=10_000)
    assert _client_threads() == []
    assert set(threading.enumerate()) <= before


def test_exception_before_the_barrier_stops_everybody(lab: Lab) -> None:
    def prepare(ctx: ClientContext) -> None:
        if ctx.client_id == 0:
            raise RuntimeError("prepare failed")
    with pytest.raises(RuntimeError, match="prepare failed"):
        run_clients(lab, lambda ctx: None, clients=3, iterations=5, prepare=prepare, timeout=30)
    assert _client_threads() == []


def test_timeout_raises_and_joins_every_thread(lab: Lab) -> None:
    with pytest.raises(RunTimeout, match="did not finish within 0.3s"):
        run_clients(lab, lambda ctx: ctx.think(0.01), clients=3, iterations=100_000, timeout=0.3)
    assert _client_threads() == []


def test_timeout_unblocks_a_client_waiting_on_the_server(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("blocking commands need a server socket to close")
    key = lab.key("never-filled")
    with pytest.raises(RunTimeout, match="all stopped"):
        run_clients(lab, lambda ctx: ctx.client.blpop([key], timeout=0), clients=2, iterations=1, timeout=0.5)
    assert _client_threads() == []


def test_clients_are_released_after_the_run(lab: Lab) -> None:
    before = len(lab._clients)
    run_clients(lab, lambda ctx: None, clients=6, iterations=1)
    with pytest.raises(ZeroDivisionError):
        run_clients(lab, lambda ctx: 1 / 0, clients=6, iterations=1)
    assert len(lab._clients) == before


def test_invalid_sizes_are_rejected(lab: Lab) -> None:
    with pytest.raises(ValueError):
        run_clients(lab, lambda ctx: None, clients=0)
    with pytest.raises(ValueError):
        run_clients(lab, lambda ctx: None, iterations=-1)


def test_think_time_opens_the_race_window_so_the_naive_limiter_overshoots(lab: Lab) -> None:
    key = lab.key("window")
    result = run_clients(lab, _naive_limiter(key, 100), clients=8, iterations=50)
    assert result.count("allowed") > 100
    assert int(lab.client().get(key)) == result.count("allowed")


def test_a_single_command_limiter_never_overshoots_under_the_same_load(lab: Lab) -> None:
    key = lab.key("window")
    result = run_clients(lab, _incr_first_limiter(key, 100), clients=8, iterations=50)
    assert result.count("allowed") == 100 and result.count("rejected") == 300


def test_repeat_runs_resets_before_each_run_and_returns_one_metric_per_run(lab: Lab) -> None:
    key = lab.key("window")
    resets: list[int] = []

    def reset(client) -> None:
        resets.append(1)
        client.delete(key)
    admitted = repeat_runs(lab, _incr_first_limiter(key, 10), runs=3, reset=reset,
                           metric=lambda result, client: (result.count("allowed"), int(client.get(key))),
                           clients=4, iterations=5)
    assert admitted == [(10, 20)] * 3 and len(resets) == 3
    results = repeat_runs(lab, lambda ctx: None, runs=2, clients=2, iterations=1)
    assert all(isinstance(r, RunResult) for r in results)


def test_run_processes_refuses_the_embedded_backend(lab: Lab) -> None:
    if lab.kind != "embedded":
        pytest.skip("embedded only")
    with pytest.raises(ValueError, match="real server"):
        run_processes(lab, lambda ctx: None)


def test_run_processes_runs_each_client_in_its_own_process(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")
    key = lab.key("n")

    def fn(ctx: ClientContext) -> int:
        with ctx.op("incr") as op:
            op.result = ctx.client.incr(key)
        return os.getpid()
    result = run_processes(lab, fn, clients=3, iterations=20)
    assert result.mode == "processes" and result.calls == 60
    assert len({pid for _, _, pid in result.outcomes}) == 3 and os.getpid() not in {v for *_, v in result.outcomes}
    assert sorted(o.result for o in result.ops("incr")) == list(range(1, 61))
    assert multiprocessing.active_children() == []


def test_run_processes_reraises_a_client_failure_with_its_traceback(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")

    def fn(ctx: ClientContext) -> None:
        if ctx.client_id == 1:
            raise ValueError("process client failed")
    with pytest.raises(ClientProcessError, match="(?s)process client failed.*Traceback"):
        run_processes(lab, fn, clients=2, iterations=3)
    assert multiprocessing.active_children() == []


def test_run_processes_timeout_kills_every_process(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")
    with pytest.raises(RunTimeout):
        run_processes(lab, lambda ctx: time.sleep(30), clients=2, iterations=1, timeout=0.5)
    assert multiprocessing.active_children() == []


def test_run_clients_on_a_cluster(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("n", "counter")
    result = run_clients(cluster_lab, lambda ctx: ctx.client.incr(key), clients=4, iterations=10)
    assert sorted(v for *_, v in result.outcomes) == list(range(1, 41))
    assert _client_threads() == []


def test_timeout_cuts_a_long_think_short_and_leaves_no_thread_behind(lab: Lab) -> None:
    # Regression: a client sleeping in ctx.think() past timeout + the 5 s grace was left running
    # ("could not be stopped") after run_clients had raised.
    before = set(threading.enumerate())
    with pytest.raises(RunTimeout, match="all stopped"):
        run_clients(lab, lambda ctx: ctx.think(60), clients=4, iterations=1, timeout=0.3)
    assert _client_threads() == []
    assert set(threading.enumerate()) <= before


def test_a_failing_client_stops_the_others_in_their_think(lab: Lab) -> None:
    def fn(ctx: ClientContext) -> None:
        if ctx.client_id == 0:
            raise KeyError("client 0 failed")
        ctx.think(60)
    with pytest.raises(KeyError, match="client 0 failed"):
        run_clients(lab, fn, clients=8, iterations=1, timeout=30)
    assert _client_threads() == []


def test_200_clients_hammering_one_key_lose_no_increment(lab: Lab) -> None:
    key = lab.key("hits")
    result = run_clients(lab, lambda ctx: ctx.client.incr(key), clients=200, iterations=5)
    assert result.calls == 1000
    assert sorted(v for _, _, v in result.outcomes) == list(range(1, 1001))
    assert _client_threads() == []


@pytest.mark.parametrize("kwargs", [{"think_time": -0.1}, {"think_time": float("nan")}, {"timeout": 0},
                                    {"timeout": -1}, {"timeout": float("nan")}])
def test_negative_think_time_or_non_positive_timeout_is_rejected_before_any_thread_starts(lab: Lab,
                                                                                          kwargs) -> None:
    before = len(lab._clients)
    with pytest.raises(ValueError, match="think_time|timeout"):
        run_clients(lab, lambda ctx: ctx.think(), clients=2, iterations=1, **kwargs)
    assert _client_threads() == [] and len(lab._clients) == before


def test_timeout_while_clients_are_busy_with_commands_raises_run_timeout_and_joins_them(lab: Lab) -> None:
    # Regression: on the embedded backend, closing a connection in the middle of a command raised
    # ValueError ("generator already executing") out of run_clients, and no thread was joined.
    before = set(threading.enumerate())
    key = lab.key("n")
    for _ in range(3):
        with pytest.raises(RunTimeout, match="all stopped"):
            run_clients(lab, lambda ctx: ctx.client.incr(key), clients=8, iterations=10**8, timeout=0.3)
        assert _client_threads() == []
    assert set(threading.enumerate()) <= before
