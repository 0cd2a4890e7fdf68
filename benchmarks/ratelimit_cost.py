"""Rate limiter cost: each fix's throughput against the naive GET-then-INCR limiter, and the naive overshoot.

Throughput: every strategy of helpers.ratelimit runs flat out (no think time) with a limit so high
that every request is admitted, so each run measures the admit path: naive GET + INCR, the Lua
script, WATCH/MULTI/EXEC (+ retries), INCR first, INCR + EXPIRE NX in MULTI, and Redis 8.4
``SET ... IFEQ`` compare-and-set (+ retries) where the server has it. Reported per client count:
median requests/s (p5-p95 over repetitions, after a warm-up round; strategies interleaved) and the cost ratio naive / fix
(above 1: the fix is slower than the race it removes).

Overshoot: the naive limiter, 8 clients x 100 requests against a limit of 100, repeated; reported as
requests admitted over the limit per run. Threads yield between GET and INCR (``time.sleep(0)``,
see helpers.instruments.race); on a real server the benchmark also runs 8 *processes* with no think time at all,
which shows the race needs no help when clients truly run in parallel.

Backends: a throwaway real redis-server and/or the embedded backend, where every number is Python's.
Usage: ``python -m benchmarks ratelimit_cost [--backend real|embedded|both] [--clients 1,8]
[--requests N] [--repeats R] [--runs R]``. Figures are noisy on a shared machine: read them as ratios.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.backend.lab import Lab, connect
from helpers.instruments.measure import Stats, summarize
from helpers.instruments.race import repeat_runs, run_processes
from helpers.ratelimit import STRATEGIES, client_functions, compare_strategies

WINDOW = 60
OVERSHOOT_LIMIT, OVERSHOOT_CLIENTS, OVERSHOOT_REQUESTS = 100, 8, 100
Throughput = Mapping[str, Mapping[int, Stats]]


def strategies_for(lab: Lab) -> tuple[str, ...]:
    """Return the strategies the lab's server supports (ifeq needs SET ... IFEQ)."""
    return tuple(n for n in STRATEGIES if n != "ifeq" or lab.caps.set_ifeq)


def measure_throughput(lab: Lab, names: Sequence[str], clients: Sequence[int], requests: int,
                       repeats: int) -> dict[str, dict[int, Stats]]:
    """Return {strategy: {clients: Stats of requests/s}} over repeats runs of `requests` each, after a warm-up round.

    Strategies take turns run by run (helpers.ratelimit.compare_strategies), so load from other
    processes on the machine spreads over all of them.
    """
    key = lab.key("bench:throughput")
    fns = client_functions(key, 10**9, WINDOW, tuple(names), think=False)
    runs = compare_strategies(lab, key, fns, tuple(clients), requests, repeats)
    return {name: {n: summarize(r.throughput for r in rs) for n, rs in per.items()} for name, per in runs.items()}


def measure_overshoot(lab: Lab, runs: int, processes: bool = False) -> list[int]:
    """Return, per run, how many requests the naive limiter admitted over the limit (8 x 100, limit 100)."""
    key = lab.key("bench:overshoot")
    naive = client_functions(key, OVERSHOOT_LIMIT, WINDOW, ("naive",), think=not processes)["naive"]
    kwargs: dict[str, Any] = {"clients": OVERSHOOT_CLIENTS, "iterations": OVERSHOOT_REQUESTS}
    if processes:
        kwargs["runner"] = run_processes
    admitted = repeat_runs(lab, naive, runs=runs, reset=lambda c: c.delete(key),
                           metric=lambda result, _c: result.count(True), **kwargs)
    return [n - OVERSHOOT_LIMIT for n in admitted]


def _overshoot_line(label: str, overs: Sequence[int]) -> str:
    hit = sum(o > 0 for o in overs)
    return (f"naive overshoot, {label}: {hit}/{len(overs)} runs over the limit; "
            f"+{min(overs)}..+{max(overs)} requests (median {summarize(overs).median / OVERSHOOT_LIMIT:.0%} "
            f"of the limit of {OVERSHOOT_LIMIT})")


def report(backend: str, version: str, throughput: Throughput, overshoot: Mapping[str, Sequence[int]]) -> str:
    """Return the table for one backend: requests/s per strategy and client count, cost ratios naive / fix."""
    clients = sorted({n for per in throughput.values() for n in per})
    lines = [f"{backend} (Redis {version}): admitted requests/s, median (p5-p95); cost = naive / fix"]
    lines.append(f"{'strategy':<11}" + "".join(f"{f'{n} client(s)':>24}{'cost':>7}" for n in clients))
    for name, per in throughput.items():
        cells = ""
        for n in clients:
            s = per[n]
            cost = throughput["naive"][n].median / s.median if s.median > 0 else float("inf")
            cells += f"{f'{s.median:,.0f} ({s.p5:,.0f}-{s.p95:,.0f})':>24}{cost:>6.2f}x"
        lines.append(f"{name:<11}{cells}")
    lines += [_overshoot_line(label, overs) for label, overs in overshoot.items()]
    return "\n".join(lines)


def run_backend(backend: str, clients: Sequence[int], requests: int, repeats: int, runs: int) -> str:
    """Measure on a fresh lab of the given backend and return its report."""
    with connect("bench_ratelimit", backend=backend) as lab:
        throughput = measure_throughput(lab, strategies_for(lab), clients, requests, repeats)
        overshoot = {"8 threads, think time sleep(0)": measure_overshoot(lab, runs)}
        if lab.kind != "embedded":
            overshoot["8 processes, no think time"] = measure_overshoot(lab, runs, processes=True)
        return report(lab.kind, lab.version, throughput, overshoot)


def main(argv: list[str]) -> int:
    """Measure and print one table per backend; return 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks ratelimit_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("real", "embedded", "both"), default="both")
    parser.add_argument("--clients", default="1,8", help="comma-separated client counts (default 1,8)")
    parser.add_argument("--requests", type=int, default=800, help="requests per run, split over the clients")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point (after one warm-up run)")
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
