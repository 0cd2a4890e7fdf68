"""helpers.instruments.measure: medians with spread over repetitions, warm-up calls, tidy sweep rows."""

from __future__ import annotations

import math

import pytest

from helpers import Lab
from helpers.instruments.measure import (
    Stats,
    format_rows,
    loglog_slope,
    measure,
    percentile,
    server_usec_per_call,
    summarize,
    sweep,
)


def test_percentile_interpolates_linearly() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (
        percentile(values, 0) == 1 and percentile(values, 100) == 5 and percentile(values, 50) == 3
    )
    assert percentile(values, 25) == 2 and percentile([0.0, 10.0], 5) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_summarize_reports_order_statistics() -> None:
    stats = summarize([5, 1, 4, 2, 3])
    assert (stats.median, stats.min, stats.max, stats.n) == (3, 1, 5, 5)
    assert (stats.q1, stats.q3, stats.iqr) == (2, 4, 2)
    assert stats.p5 == pytest.approx(1.2) and stats.p95 == pytest.approx(4.8)
    assert set(stats.row()) == {"median", "p5", "p95", "q1", "q3", "min", "max", "n"}
    assert stats.format("ms", scale=1000) == "3e+03 ms (IQR 2e+03–4e+03, n=5)"


def test_summarize_rejects_empty_and_nan_samples() -> None:
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError, match="NaN"):
        summarize([1.0, math.nan])


def test_measure_runs_warmup_then_repeats_times_number_calls() -> None:
    calls: list[int] = []
    stats = measure(lambda: calls.append(1), warmup=2, repeats=4, number=3)
    assert len(calls) == (2 + 4) * 3 and isinstance(stats, Stats) and stats.n == 4
    assert stats.min >= 0


def test_measure_rejects_bad_counts() -> None:
    for kwargs in ({"warmup": -1}, {"repeats": 0}, {"number": 0}):
        with pytest.raises(ValueError):
            measure(lambda: None, **kwargs)


def test_sweep_returns_one_tidy_row_per_value_after_warmup() -> None:
    seen: list[int] = []

    def run(clients: int) -> float:
        seen.append(clients)
        return clients * 10.0 + len(seen) % 2

    rows = sweep([1, 4], run, warmup=1, repeats=3)
    assert seen == [1] * 4 + [4] * 4
    assert [r["clients"] for r in rows] == [1, 4] and all(r["n"] == 3 for r in rows)
    assert 10 <= rows[0]["median"] <= 11 and 40 <= rows[1]["median"] <= 41
    assert sweep([2], lambda v: 1.0, name="size", warmup=0, repeats=1)[0]["size"] == 2


def test_format_rows_prints_a_right_aligned_table() -> None:
    rows = [
        {"clients": 1, "median": 1234.5678, "p5": 1.0, "p95": 2.0, "n": 5},
        {"clients": 16, "median": 2.0, "p5": 1.5, "p95": 3.25, "n": 5},
    ]
    assert format_rows(rows).splitlines() == [
        "clients    median   p5   p95  n",
        "      1  1.23e+03    1     2  5",
        "     16         2  1.5  3.25  5",
    ]
    assert format_rows([]) == "(no rows)"


@pytest.mark.parametrize("exponent", [0.0, 0.5, 1.0, 2.0])
def test_loglog_slope_recovers_the_exponent_of_a_power_law(exponent: float) -> None:
    sizes = [100, 1_000, 10_000, 100_000]
    assert loglog_slope(sizes, [3e-6 * n**exponent for n in sizes]) == pytest.approx(exponent)


@pytest.mark.parametrize(
    "sizes, seconds",
    [
        ([10], [1.0]),
        ([10, 10], [1.0, 2.0]),
        ([10, 100], [1.0]),
        ([0, 100], [1.0, 2.0]),
        ([10, 100], [1.0, 0.0]),
    ],
)
def test_loglog_slope_refuses_what_has_no_slope(sizes: list[float], seconds: list[float]) -> None:
    with pytest.raises(ValueError):
        loglog_slope(sizes, seconds)


def test_server_usec_per_call_counts_only_the_calls_made_during_run(lab: Lab) -> None:
    if lab.kind != "real":
        pytest.skip("INFO commandstats needs one real server process")
    c, key = lab.client(), lab.key("h")
    c.hset(key, mapping={str(i): "x" for i in range(1_000)})
    c.hgetall(key)  # a call before the measurement must not count
    result, usec = server_usec_per_call(c, "hgetall", lambda: [c.hgetall(key) for _ in range(5)])
    assert len(result) == 5 and len(result[0]) == 1_000
    assert usec is not None and usec > 0
    # No call of the command during run(): None, not a division by zero.
    assert server_usec_per_call(c, "no-such-command", lambda: "no call") == ("no call", None)
