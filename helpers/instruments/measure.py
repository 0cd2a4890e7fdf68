"""Measurements that report a median with its spread over repetitions, never one number from one run.

* ``measure(fn, warmup=3, repeats=15, number=1)``: times ``fn()`` (``number`` calls per repeat,
  after ``warmup`` untimed repeats) and returns ``Stats`` of seconds per call.
* ``summarize(samples)``: ``Stats`` of any list of numbers (latencies, per-run throughputs).
* ``sweep(values, run, name="clients", warmup=1, repeats=5)``: for each value, calls
  ``run(value)`` (which returns one number, e.g. a run's throughput) ``warmup`` + ``repeats``
  times and returns tidy rows ``{name: value, "median": ..., "p5": ..., "p95": ..., "q1": ...,
  "q3": ..., "min": ..., "max": ..., "n": ...}`` that ``helpers.instruments.plots`` draws.
* ``loglog_slope(sizes, seconds)``: how a cost grows with size (about 1 for O(N), about 0 for O(1)).
* ``server_usec_per_call(client, command, run)``: microseconds Redis itself spent per call of
  ``command`` while ``run()`` ran, from ``INFO commandstats`` (a real server only).
* ``compare_strategies(lab, {name: fn}, client_counts, requests, repeats)``: threaded runs of
  several strategies, taking turns run by run, so a load spike hits them all alike.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import product
from typing import Any, TypeVar

import redis

from helpers.backend.lab import Client, Lab
from helpers.instruments.load import RunResult, run_clients
from helpers.instruments.progress import progress

T = TypeVar("T")
Strategy = Callable[[Client], Any]  # one request, given a client of the lab


@dataclass(frozen=True)
class Stats:
    """Order statistics of a sample: median, 5th/95th percentiles, quartiles, extremes, size."""

    median: float
    p5: float
    p95: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @property
    def iqr(self) -> float:
        """Return the interquartile range q3 - q1."""
        return self.q3 - self.q1

    def row(self) -> dict[str, float]:
        """Return the statistics as a dict (one tidy row without the x value)."""
        return asdict(self)

    def format(self, unit: str = "s", scale: float = 1.0, digits: int = 3) -> str:
        """Return e.g. '1.23 ms (IQR 1.1-1.4, n=15)' with values multiplied by scale."""
        g = lambda v: f"{v * scale:.{digits}g}"  # noqa: E731 - tiny local formatter
        return f"{g(self.median)} {unit} (IQR {g(self.q1)}–{g(self.q3)}, n={self.n})"

    def __str__(self) -> str:
        return self.format()


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0-100) of already sorted values, linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of an empty sample")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: Iterable[float]) -> Stats:
    """Return the Stats of samples (at least one number, no NaN)."""
    values = sorted(float(v) for v in samples)
    if not values:
        raise ValueError("summarize needs at least one sample")
    if any(math.isnan(v) for v in values):
        raise ValueError("samples contain NaN")
    p = lambda q: percentile(values, q)  # noqa: E731
    return Stats(
        median=p(50),
        p5=p(5),
        p95=p(95),
        q1=p(25),
        q3=p(75),
        min=values[0],
        max=values[-1],
        n=len(values),
    )


def _check_counts(warmup: int, repeats: int) -> None:
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")


def measure(fn: Callable[[], object], warmup: int = 3, repeats: int = 15, number: int = 1) -> Stats:
    """Return Stats of seconds per fn() call: warmup untimed repeats, then repeats x number calls."""
    _check_counts(warmup, repeats)
    if number < 1:
        raise ValueError(f"number must be >= 1, got {number}")
    for _ in range(warmup):
        for _ in range(number):
            fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        times.append((time.perf_counter_ns() - start) / 1e9 / number)
    return summarize(times)


def sweep(
    values: Iterable[T],
    run: Callable[[T], float],
    name: str = "clients",
    warmup: int = 1,
    repeats: int = 5,
) -> list[dict[str, Any]]:
    """Return one tidy row per value: {name: value, **Stats of run(value) over repeats}."""
    _check_counts(warmup, repeats)
    rows = []
    for value in values:
        for _ in range(warmup):
            run(value)
        stats = summarize(run(value) for _ in range(repeats))
        rows.append({name: value, **stats.row()})
    return rows


def format_rows(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str] = ("median", "p5", "p95", "n"),
    digits: int = 3,
) -> str:
    """Return tidy rows as a fixed-width text table (first key of each row first)."""
    if not rows:
        return "(no rows)"
    first = next(iter(rows[0]))
    header = [first, *columns]
    cells = [
        [str(r[first])]
        + [f"{r[c]:.{digits}g}" if isinstance(r[c], float) else str(r[c]) for c in columns]
        for r in rows
    ]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def loglog_slope(sizes: Sequence[float], seconds: Sequence[float]) -> float:
    """Return the least-squares slope of log(seconds) against log(sizes).

    About 1 when the cost grows in proportion to the size (O(N)), about 0 when it does not (O(1)).
    """
    if len(sizes) != len(seconds) or len(set(sizes)) < 2 or min(*sizes, *seconds) <= 0:
        raise ValueError("need at least two distinct positive sizes, each with a positive time")
    xs, ys = [math.log10(x) for x in sizes], [math.log10(y) for y in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _commandstats(client: redis.Redis, command: str) -> tuple[int, int]:
    """Return (calls, usec) that INFO commandstats reports for command (lower case, e.g. "hgetall")."""
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def server_usec_per_call(
    client: redis.Redis, command: str, run: Callable[[], T]
) -> tuple[T, float | None]:
    """Return (run(), microseconds Redis spent per call of command while run() ran, or None if none ran).

    Reads INFO commandstats before and after, so it needs one real server (a cluster keeps these per
    node; the embedded backend has no server process). On a shared server other clients' calls of
    the same command are counted too.
    """
    before = _commandstats(client, command)
    result = run()
    after = _commandstats(client, command)
    calls = after[0] - before[0]
    return result, ((after[1] - before[1]) / calls if calls else None)


def compare_strategies(
    lab: Lab,
    strategies: Mapping[str, Strategy],
    client_counts: Sequence[int],
    requests: int,
    repeats: int,
    reset: Strategy | None = None,
    warmup: int = 1,
    **run_kwargs: Any,
) -> dict[str, dict[int, list[RunResult]]]:
    """Return {name: {clients: [RunResult of each timed run]}}, the strategies taking turns run by run.

    For each client count, every repetition runs every strategy once with run_clients (after
    reset(client), e.g. deleting the key they share), ``requests`` calls split over the clients;
    the first ``warmup`` repetitions are not kept. run_kwargs (e.g. mode) go to run_clients.
    """
    _check_counts(warmup, repeats)
    if requests < 1 or not client_counts or min(client_counts) < 1:
        raise ValueError(
            f"need requests >= 1 and client counts >= 1, got {requests} and {list(client_counts)}"
        )
    results: dict[str, dict[int, list[RunResult]]] = {
        name: {n: [] for n in client_counts} for name in strategies
    }
    observer = lab.client()
    runs = len(client_counts) * (warmup + repeats) * len(strategies)
    try:
        with progress("relative cost", runs, "runs") as bar:
            for clients, rep, (name, fn) in product(
                client_counts, range(warmup + repeats), strategies.items()
            ):
                if reset is not None:
                    reset(observer)
                result = run_clients(
                    lab, fn, clients=clients, iterations=max(1, requests // clients), **run_kwargs
                )
                if rep >= warmup:
                    results[name][clients].append(result)
                bar.advance()
    finally:
        lab.release(observer)
    return results
