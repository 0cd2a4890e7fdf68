"""benchmarks/ratelimit_cost.py: throughput per strategy, naive overshoot, and the cost-ratio report."""

from __future__ import annotations

from benchmarks import ratelimit_cost as bench
from benchmarks.__main__ import benchmark_names
from helpers import Lab
from helpers.instruments.measure import summarize


def test_runner_finds_the_ratelimit_benchmark() -> None:
    assert "ratelimit_cost" in benchmark_names()


def test_report_prints_medians_and_cost_ratios_against_naive() -> None:
    throughput = {"naive": {1: summarize([1000.0, 900.0, 1100.0]), 8: summarize([4000.0])},
                  "lua": {1: summarize([500.0]), 8: summarize([8000.0])}}
    text = bench.report("real", "8.6.3", throughput, {"8 threads": [3, 5, 7]})
    lua = next(line for line in text.splitlines() if line.startswith("lua "))
    assert "500 (500-500)" in lua and "2.00x" in lua and "0.50x" in lua
    naive = next(line for line in text.splitlines() if line.startswith("naive "))
    assert "1,000 (910-1,090)" in naive and naive.count("1.00x") == 2
    assert text.endswith("naive overshoot, 8 threads: 3/3 runs over the limit; +3..+7 requests "
                         "(median 5% of the limit of 100)")


def test_measure_throughput_covers_every_strategy_and_client_count(lab: Lab) -> None:
    names = bench.strategies_for(lab)
    table = bench.measure_throughput(lab, names, clients=[1, 2], requests=8, repeats=1)
    assert list(table) == list(names)
    assert all(set(per) == {1, 2} and all(s.n == 1 and s.median > 0 for s in per.values())
               for per in table.values())


def test_naive_overshoots_in_every_threaded_run(lab: Lab) -> None:
    overs = bench.measure_overshoot(lab, runs=2)
    assert len(overs) == 2 and all(o > 0 for o in overs)
