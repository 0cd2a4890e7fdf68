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


def test_harness_report_prints_medians_and_ratios_to_redis_benchmark() -> None:
    samples = {
        "redis-py bare loop, 1 thread [hiredis]": [10_000.0, 12_000.0, 11_000.0],
        "run_clients, 1 thread [hiredis]": [9_000.0, 9_500.0, 9_900.0],
        "run_clients, 8 threads [Python parser]": [9_800.0],
        "run_processes, 8 processes [hiredis]": [30_000.0],
        "redis-benchmark -P 1 -c 1": [18_000.0, 19_000.0, 20_000.0],
        "redis-benchmark -P 1 -c 8": [80_000.0],
    }
    clients = {name: 8 if "8" in name else 1 for name in samples}
    rows = {
        line.split("  ")[0]: line.split()
        for line in harness_overhead.report(samples, clients).splitlines()
    }
    assert rows["run_clients, 1 thread [hiredis]"][-3:] == ["9,500", "9,000-9,900", "0.50x"]
    assert rows["run_processes, 8 processes [hiredis]"][-1] == "0.38x"
    assert rows["run_clients, 8 threads [Python parser]"][-1] == "0.12x"
    assert rows["redis-benchmark -P 1 -c 8"][-1] == "1.00x"


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
    modes = len(harness_overhead.MODES)
    assert lab.client().get(key) == str(modes * 3 * 5)  # every mode sent its INCRs, gated too


def test_run_clients_runs_the_benchmark_strategy(lab) -> None:
    key = lab.key("counter")
    result = run_clients(lab, partial(harness_overhead.incr_once, key=key), clients=2, iterations=5)
    assert sorted(v for _, _, v in result.outcomes) == list(range(1, 11))
    assert result.round_trips == 10
