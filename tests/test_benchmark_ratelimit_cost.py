"""benchmarks/ratelimit_cost.py: throughput per strategy, naive overshoot, and the cost-ratio report."""

from __future__ import annotations

from functools import partial

import pytest

from benchmarks import ratelimit_cost as bench
from benchmarks.__main__ import benchmark_names
from helpers import Lab
from helpers.instruments.measure import compare_strategies, summarize
from races import ratelimit as rl


def test_runner_finds_the_ratelimit_benchmark() -> None:
    assert "ratelimit_cost" in benchmark_names()


def test_the_benchmark_times_the_limiters_of_races_ratelimit_themselves() -> None:
    assert bench.STRATEGIES == {
        "naive": rl.naive_allow,
        "lua": rl.lua_allow,
        "watch": rl.watch_allow,
        "incr-first": rl.incr_first_allow,
        "multi": rl.multi_allow,
        "ifeq": rl.ifeq_allow,
    }


def test_report_prints_medians_cost_ratios_round_trips_and_retries() -> None:
    point = lambda samples, rt, retries: bench.Point(summarize(samples), rt, retries)  # noqa: E731
    table = {
        "naive": {1: point([1000.0, 900.0, 1100.0], 2.0, 0.0), 8: point([4000.0], 2.0, 0.0)},
        "lua": {1: point([500.0], 1.0, 0.0), 8: point([8000.0], 1.0, 0.0)},
        "watch": {1: point([250.0], 3.0, 0.0), 8: point([400.0], 4.5, 0.5)},
    }
    text = bench.report("real", "8.6.3", table, {"8 threads": [3, 5, 7]})
    lua = next(line for line in text.splitlines() if line.startswith("lua "))
    assert "500 (500-500)" in lua and "2.00x" in lua and "0.50x" in lua
    naive = next(line for line in text.splitlines() if line.startswith("naive "))
    assert "1,000 (910-1,090)" in naive and naive.count("1.00x") == 2
    watch = next(line for line in text.splitlines() if line.startswith("watch "))
    assert watch.split()[-2:] == ["4.50", "0.50"] and watch.split()[4:6] == ["3.00", "0.00"]
    assert text.endswith(
        "naive overshoot, 8 threads: 3/3 runs over the limit; +3..+7 requests "
        "(median 5% of the limit of 100)"
    )


def test_measure_throughput_covers_every_strategy_and_client_count(lab: Lab) -> None:
    strategies = bench.strategies_for(lab)
    table = bench.measure_throughput(lab, strategies, clients=[1, 2], requests=8, repeats=1)
    assert list(table) == list(strategies)
    assert all(
        set(per) == {1, 2}
        and all(p.throughput.n == 1 and p.throughput.median > 0 for p in per.values())
        for per in table.values()
    )
    # One client, every request admitted: the round trips per request are exact (first hit included).
    alone = {name: per[1].round_trips for name, per in table.items()}
    expected = {
        "naive": 2 + 1 / 8,
        "lua": 1,
        "watch": 3,
        "incr-first": 1 + 1 / 8,
        "multi": 1,
        "ifeq": 2,
    }
    assert alone == {name: expected[name] for name in alone}
    assert all(per[1].retries == 0 for per in table.values())


def test_naive_overshoots_in_every_threaded_run(lab: Lab) -> None:
    overs = bench.measure_overshoot(lab, runs=2)
    assert len(overs) == 2 and all(o > 0 for o in overs)


def test_compare_strategies_keeps_repeats_runs_per_strategy_and_client_count(lab: Lab) -> None:
    key, resets = lab.key("w"), []
    fns = {
        name: partial(fn, key=key, limit=10**6, window=60)
        for name, fn in (("naive", rl.naive_allow), ("lua", rl.lua_allow))
    }
    runs = compare_strategies(
        lab, fns, (1, 2), requests=4, repeats=2, reset=lambda c: resets.append(c.delete(key))
    )
    assert {name: {n: len(rs) for n, rs in per.items()} for name, per in runs.items()} == {
        "naive": {1: 2, 2: 2},
        "lua": {1: 2, 2: 2},
    }
    assert all(
        r.count(True) == 4 and r.clients == n
        for per in runs.values()
        for n, rs in per.items()
        for r in rs
    )
    assert (
        len(resets) == 2 * 2 * 3
    )  # strategies x client counts x (warm-up + repeats), before every run
    with pytest.raises(ValueError):
        compare_strategies(lab, fns, (0,), requests=4, repeats=1)
