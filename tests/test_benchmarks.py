"""benchmarks: the runner finds every module, and the harness report computes its ratios."""

from __future__ import annotations

import pytest

from benchmarks import harness_overhead
from benchmarks.__main__ import benchmark_names, main


def test_runner_lists_every_benchmark_module(capsys: pytest.CaptureFixture[str]) -> None:
    assert "harness_overhead" in benchmark_names()
    assert all(not n.startswith("_") for n in benchmark_names())
    assert main(["--list"]) == 0 and "harness_overhead" in capsys.readouterr().out


def test_runner_rejects_an_unknown_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no_such_benchmark"]) == 2
    assert "unknown benchmark 'no_such_benchmark'" in capsys.readouterr().err


def test_harness_report_prints_medians_and_ratios() -> None:
    samples = {"redis-py bare loop, 1 thread": [10_000.0, 12_000.0, 11_000.0],
               "run_clients, 1 thread": [9_000.0, 9_500.0, 9_900.0],
               "run_clients, 8 threads": [9_800.0], "run_processes, 8 processes": [30_000.0],
               "redis-benchmark -c 1": [18_000.0, 19_000.0, 20_000.0], "redis-benchmark -c 8": [80_000.0]}
    text = harness_overhead.report(samples)
    row = next(line for line in text.splitlines() if line.startswith("run_clients, 1 thread "))
    assert row.split()[-2:] == ["9,500", "9,000-9,900"]
    assert "ratio run_clients, 1 thread / redis-benchmark -c 1: 0.50" in text
    assert "ratio run_processes, 8 processes / redis-benchmark -c 8: 0.38" in text
    assert "ratio run_clients, 1 thread / redis-py bare loop, 1 thread: 0.86" in text
