"""Harness overhead: plain INCR ops/s through run_clients/run_processes versus redis-benchmark.

On a throwaway redis-server (helpers.backend.server), each round measures side by side:

* redis-py alone, one thread, a bare loop (the Python floor, no harness);
* ``run_clients`` with 1 and 8 threads (GIL-bound: 8 threads are not faster than 1);
* ``run_processes`` with 8 processes (true parallelism);
* ``redis-benchmark -t incr -P 1 -c N`` with N = 1 and 8 (the server's own client, in C).

Every configuration runs once per round, in the same order, after a warm-up round; the table
shows the median over rounds with min-max, and the ratios harness / redis-benchmark at the same
client count. Rounds are short and many, so that load from other processes on a shared machine
falls on every configuration alike instead of on whichever ran during a busy minute. Usage: ``python -m benchmarks harness_overhead [--ops N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from helpers.backend.lab import connect
from helpers.instruments.race import run_clients, run_processes
from helpers.backend.server import find_binary


def incr(key: str) -> Callable[[Any], Any]:
    """Return a client function that INCRs key once."""
    def fn(ctx: Any) -> Any:
        return ctx.client.incr(key)
    return fn


def bare_loop(lab: Any, key: str, ops: int) -> float:
    """Return INCR/s of one redis-py client in a plain loop (no harness)."""
    client = lab.client()
    try:
        client.ping()
        started = time.perf_counter()
        for _ in range(ops):
            client.incr(key)
        return ops / (time.perf_counter() - started)
    finally:
        lab.release(client)


def harness_ns_per_call(lab: Any, calls: int = 100_000, rounds: int = 5) -> tuple[float, float]:
    """Return (ns per call through run_clients, ns per bare call) of a no-op client_fn, medians over rounds."""
    def noop(ctx: Any) -> None:
        return None
    harness, bare = [], []
    for _ in range(rounds):
        harness.append(1e9 / run_clients(lab, noop, clients=1, iterations=calls).throughput)
        started = time.perf_counter_ns()
        for _ in range(calls):
            noop(None)
        bare.append((time.perf_counter_ns() - started) / calls)
    return statistics.median(harness), statistics.median(bare)


def redis_benchmark(port: int, clients: int, ops: int) -> float:
    """Return the INCR/s that redis-benchmark reports for -c clients, -P 1, -n ops."""
    binary = find_binary("redis-benchmark")
    out = subprocess.run([str(binary), "-h", "127.0.0.1", "-p", str(port), "-t", "incr", "-P", "1",
                          "-c", str(clients), "-n", str(ops), "--csv"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0] == "INCR":
            return float(cells[1])
    raise RuntimeError(f"no INCR line in redis-benchmark output:\n{out}")


def configurations(lab: Any, port: int, key: str, ops: int) -> dict[str, Callable[[], float]]:
    """Return name -> a function measuring that configuration's INCR/s with about ops operations."""
    return {
        "redis-py bare loop, 1 thread": lambda: bare_loop(lab, key, ops),
        "run_clients, 1 thread": lambda: run_clients(lab, incr(key), clients=1, iterations=ops).throughput,
        "run_clients, 8 threads": lambda: run_clients(lab, incr(key), clients=8, iterations=ops // 8).throughput,
        "run_processes, 8 processes": lambda: run_processes(lab, incr(key), clients=8,
                                                            iterations=ops // 8).throughput,
        "redis-benchmark -c 1": lambda: redis_benchmark(port, 1, ops),
        "redis-benchmark -c 8": lambda: redis_benchmark(port, 8, ops * 4),
    }


RATIOS = [("run_clients, 1 thread", "redis-benchmark -c 1"),
          ("run_clients, 8 threads", "redis-benchmark -c 8"),
          ("run_processes, 8 processes", "redis-benchmark -c 8"),
          ("run_clients, 1 thread", "redis-py bare loop, 1 thread")]


def measure_all(ops: int, rounds: int) -> dict[str, list[float]]:
    """Return name -> INCR/s of each round (after one warm-up round), on a fresh throwaway server."""
    with connect("bench_harness", backend="real") as lab:
        port = int(lab.url.rsplit(":", 1)[1].split("/")[0])
        key = lab.key("counter")
        configs = configurations(lab, port, key, ops)
        for measure in configs.values():  # warm-up: connections, imports, server allocations
            measure()
        samples: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(rounds):
            for name, measure in configs.items():
                samples[name].append(measure())
        return samples


def report(samples: dict[str, list[float]]) -> str:
    """Return the table of medians (min-max) and the ratio lines."""
    width = max(len(n) for n in samples)
    lines = [f"{'configuration':<{width}}  {'INCR/s (median)':>15}  {'min-max over rounds':>21}"]
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        spread = f"{min(values):,.0f}-{max(values):,.0f}"
        lines.append(f"{name:<{width}}  {medians[name]:>15,.0f}  {spread:>21}")
    lines.append("")
    for num, den in RATIOS:
        lines.append(f"ratio {num} / {den}: {medians[num] / medians[den]:.2f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Measure and print the table; return 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks harness_overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=5_000, help="INCRs per configuration and round")
    parser.add_argument("--rounds", type=int, default=9, help="measured rounds (after one warm-up round)")
    args = parser.parse_args(argv)
    if args.ops < 8 or args.rounds < 1:
        parser.error("need --ops >= 8 and --rounds >= 1")
    samples = measure_all(args.ops, args.rounds)
    print(f"{args.ops} INCRs per configuration (redis-benchmark -c 8: {args.ops * 4}), "
          f"{args.rounds} rounds after a warm-up round, one throwaway redis-server on loopback")
    print(report(samples))
    with connect("bench_harness", backend="embedded") as lab:
        harness, bare = harness_ns_per_call(lab)
    round_trip_ns = 1e9 / statistics.median(samples["redis-py bare loop, 1 thread"])
    print(f"harness cost per call (no-op client_fn): {harness - bare:,.0f} ns over a bare call "
          f"({harness:,.0f} vs {bare:,.0f} ns), {100 * (harness - bare) / round_trip_ns:.1f}% of one "
          f"redis-py INCR round trip ({round_trip_ns / 1000:,.0f} µs)")
    return 0
