"""Rate limiter cost: each fix's throughput against the naive GET-then-INCR limiter, and the naive overshoot.

Throughput: every limiter of ``races.ratelimit`` in ``STRATEGIES`` (the same function objects
notebook 01 runs) is called through ``run_clients`` in straight mode (no think time), with a limit
so high that every request is admitted, so each run measures the admit path: naive GET + INCR,
the Lua script, WATCH/MULTI/EXEC (+ retries), INCR first, INCR + EXPIRE NX in MULTI, and Redis
8.4 ``SET ... IFEQ`` compare-and-set (+ retries) where the server has it. Reported per client
count: median requests/s (p5-p95 over repetitions, after a warm-up round; strategies take turns
run by run), the cost ratio naive / fix (above 1: the fix is slower than the race it removes),
and the round trips and retries per request that the clients' connections counted.

Overshoot: the naive limiter, 8 clients x 100 requests against a limit of 100, repeated; reported as
requests admitted over the limit per run. Threads run in lockstep rounds (every client's k-th round
trip in one round, see helpers.backend.modes), so every run overshoots; on a real server the
benchmark also runs 8 *processes* in straight mode, which shows the race needs no help when
clients truly run in parallel.

Backends: a throwaway real redis-server and/or the embedded backend, where every number is Python's.
Usage: ``python -m benchmarks ratelimit_cost [--backend real|embedded|both] [--clients 1,8]
[--requests N] [--repeats R] [--runs R]``. Figures are noisy on a shared machine: read them as ratios.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from helpers.backend.lab import Lab, connect
from helpers.instruments.load import repeat_runs, run_processes
from helpers.instruments.measure import Stats, compare_strategies, summarize
from races import ratelimit as rl

STRATEGIES: dict[str, Callable[..., bool]] = {
    "naive": rl.naive_allow,
    "lua": rl.lua_allow,
    "watch": rl.watch_allow,
    "incr-first": rl.incr_first_allow,
    "multi": rl.multi_allow,
    "ifeq": rl.ifeq_allow,
}
WINDOW = 60
OVERSHOOT_LIMIT, OVERSHOOT_CLIENTS, OVERSHOOT_REQUESTS = 100, 8, 100


@dataclass(frozen=True)
class Point:
    """One strategy at one client count: requests/s over the timed runs, round trips and retries per request."""

    throughput: Stats
    round_trips: float
    retries: float


Table = Mapping[str, Mapping[int, Point]]


def strategies_for(lab: Lab) -> dict[str, Callable[..., bool]]:
    """Return the STRATEGIES the lab's server supports (ifeq needs SET ... IFEQ)."""
    return {n: fn for n, fn in STRATEGIES.items() if n != "ifeq" or lab.caps.set_ifeq}


def measure_throughput(
    lab: Lab,
    strategies: Mapping[str, Callable[..., bool]],
    clients: Sequence[int],
    requests: int,
    repeats: int,
) -> dict[str, dict[int, Point]]:
    """Return {strategy: {clients: Point}} over repeats runs of `requests` each, after a warm-up round."""
    key = lab.key("bench:throughput")
    limiters = {n: partial(fn, key=key, limit=10**9, window=WINDOW) for n, fn in strategies.items()}
    runs = compare_strategies(
        lab, limiters, clients, requests, repeats, reset=lambda c: c.delete(key)
    )
    return {
        name: {
            n: Point(
                summarize(r.throughput for r in rs),
                statistics.median(r.round_trips / r.calls for r in rs),
                statistics.median(r.retries / r.calls for r in rs),
            )
            for n, rs in per.items()
        }
        for name, per in runs.items()
    }


def measure_overshoot(lab: Lab, runs: int, processes: bool = False) -> list[int]:
    """Return, per run, how many requests the naive limiter admitted over the limit (8 x 100, limit 100)."""
    key = lab.key("bench:overshoot")
    naive = partial(STRATEGIES["naive"], key=key, limit=OVERSHOOT_LIMIT, window=WINDOW)
    kwargs: dict[str, Any] = {"clients": OVERSHOOT_CLIENTS, "iterations": OVERSHOOT_REQUESTS}
    if processes:
        kwargs["runner"] = run_processes
    else:
        kwargs["mode"] = "lockstep"
    admitted = repeat_runs(
        lab,
        naive,
        runs=runs,
        reset=lambda c: c.delete(key),
        metric=lambda result, _c: result.count(True),
        **kwargs,
    )
    return [n - OVERSHOOT_LIMIT for n in admitted]


def _overshoot_line(label: str, overs: Sequence[int]) -> str:
    hit = sum(o > 0 for o in overs)
    return (
        f"naive overshoot, {label}: {hit}/{len(overs)} runs over the limit; "
        f"+{min(overs)}..+{max(overs)} requests (median {summarize(overs).median / OVERSHOOT_LIMIT:.0%} "
        f"of the limit of {OVERSHOOT_LIMIT})"
    )


def report(backend: str, version: str, table: Table, overshoot: Mapping[str, Sequence[int]]) -> str:
    """Return the table for one backend: requests/s, cost naive / fix, round trips and retries per request."""
    clients = sorted({n for per in table.values() for n in per})
    lines = [
        f"{backend} (Redis {version}): admitted requests/s, median (p5-p95); cost = naive / fix; "
        f"round trips and retries per request"
    ]
    lines.append(
        f"{'strategy':<11}"
        + "".join(f"{f'{n} client(s)':>24}{'cost':>7}{'rt':>6}{'retry':>7}" for n in clients)
    )
    for name, per in table.items():
        cells = ""
        for n in clients:
            s = per[n].throughput
            cost = table["naive"][n].throughput.median / s.median if s.median > 0 else float("inf")
            cells += (
                f"{f'{s.median:,.0f} ({s.p5:,.0f}-{s.p95:,.0f})':>24}{cost:>6.2f}x"
                f"{per[n].round_trips:>6.2f}{per[n].retries:>7.2f}"
            )
        lines.append(f"{name:<11}{cells}")
    lines += [_overshoot_line(label, overs) for label, overs in overshoot.items()]
    return "\n".join(lines)


def run_backend(
    backend: str, clients: Sequence[int], requests: int, repeats: int, runs: int
) -> str:
    """Measure on a fresh lab of the given backend and return its report."""
    with connect("bench_ratelimit", backend=backend) as lab:
        table = measure_throughput(lab, strategies_for(lab), clients, requests, repeats)
        overshoot = {"8 threads, lockstep rounds": measure_overshoot(lab, runs)}
        if lab.kind != "embedded":
            overshoot["8 processes, straight"] = measure_overshoot(lab, runs, processes=True)
        return report(lab.kind, lab.version, table, overshoot)


def main(argv: list[str]) -> int:
    """Measure and print one table per backend; return 0."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks ratelimit_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=("real", "embedded", "both"), default="both")
    parser.add_argument(
        "--clients", default="1,8", help="comma-separated client counts (default 1,8)"
    )
    parser.add_argument(
        "--requests", type=int, default=800, help="requests per run, split over the clients"
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed runs per point (after one warm-up run)"
    )
    parser.add_argument("--runs", type=int, default=10, help="runs of the overshoot experiment")
    args = parser.parse_args(argv)
    try:
        clients = [int(c) for c in args.clients.split(",")]
    except ValueError:
        parser.error(f"--clients must be comma-separated integers, got {args.clients!r}")
    if not clients or min(clients) < 1 or args.requests < 1 or args.repeats < 1 or args.runs < 1:
        parser.error("--clients, --requests, --repeats and --runs must be positive")
    backends = ("embedded", "real") if args.backend == "both" else (args.backend,)
    print("figures are noisy on a shared machine: read them as ratios")
    for backend in backends:
        print(run_backend(backend, clients, args.requests, args.repeats, args.runs))
        print()
    return 0
