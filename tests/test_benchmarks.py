"""benchmarks: the runner finds every module; the harness report computes its ratios and mode overheads."""

from __future__ import annotations

from functools import partial

import pytest

from benchmarks import harness_overhead
from benchmarks.__main__ import benchmark_names, main
from helpers import run_clients


def test_runner_lists_every_benchmark_module(capsys: pytest.CaptureFixture[str]) -> None:
    assert "harness_overhead" in benchmark_names()
    assert all(not n.startswith("_") for n in benchmark_names())
    assert main(["--list"]) == 0 and "harness_overhead" in capsys.readouterr().out


def test_runner_rejects_an_unknown_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no_such_benchmark"]) == 2
    assert "unknown benchmark 'no_such_benchmark'" in capsys.readouterr().err


def test_harness_report_prints_medians_and_ratios() -> None:
    samples = {
        "redis-py bare loop, 1 thread": [10_000.0, 12_000.0, 11_000.0],
        "run_clients, 1 thread": [9_000.0, 9_500.0, 9_900.0],
        "run_clients, 8 threads": [9_800.0],
        "run_processes, 8 processes": [30_000.0],
        "redis-benchmark -c 1": [18_000.0, 19_000.0, 20_000.0],
        "redis-benchmark -c 8": [80_000.0],
    }
    text = harness_overhead.report(samples)
    row = next(line for line in text.splitlines() if line.startswith("run_clients, 1 thread "))
    assert row.split()[-2:] == ["9,500", "9,000-9,900"]
    assert "ratio run_clients, 1 thread / redis-benchmark -c 1: 0.50" in text
    assert "ratio run_processes, 8 processes / redis-benchmark -c 8: 0.38" in text
    assert "ratio run_clients, 1 thread / redis-py bare loop, 1 thread: 0.86" in text


def test_mode_report_gives_each_mode_its_paired_overhead_in_ns_and_per_round_trip() -> None:
    modes = {
        harness_overhead.BASELINE: [20_000.0, 30_000.0, 20_000.0],
        "straight": [21_000.0, 31_500.0, 21_000.0],  # paired differences 1,000 / 1,500 / 1,000
        "think, 0 s": [22_000.0, 32_000.0, 22_000.0],
        harness_overhead.GATED: [60_000.0, 70_000.0, 60_000.0],
    }
    rows = {
        line.split("  ")[0].strip(): line
        for line in harness_overhead.mode_report(modes).splitlines()
    }
    assert rows["straight"].split()[-2:] == [
        "1,000",
        "5.0%",
    ]  # median 1,000 ns of a 20,000 ns round trip
    assert rows["think, 0 s"].split()[-2:] == ["2,000", "10.0%"]
    assert rows["gated (ScheduleRun.step)"].split()[-2:] == ["40,000", "200.0%"]
    assert rows[harness_overhead.BASELINE].split()[-2:] == ["-", "-"]
    assert "20.0 µs" in harness_overhead.mode_report(modes)


def test_every_client_mode_is_measured_on_the_same_counter(lab) -> None:
    key = lab.key("counter")
    measured = harness_overhead.mode_ns_per_call(lab, key, blocks=3, block=5)
    assert list(measured) == list(harness_overhead.MODES)
    assert all(len(values) == 3 and all(v > 0 for v in values) for values in measured.values())
    assert lab.client().get(key) == str(4 * 3 * 5)  # every mode sent its INCRs, the gated one too


def test_run_clients_runs_the_benchmark_strategy(lab) -> None:
    key = lab.key("counter")
    result = run_clients(lab, partial(harness_overhead.incr_once, key=key), clients=2, iterations=5)
    assert sorted(v for _, _, v in result.outcomes) == list(range(1, 11))
    assert result.round_trips == 10
