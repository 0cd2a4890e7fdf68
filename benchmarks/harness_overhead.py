"""Harness overhead: what run_clients, run_processes and each client mode add to a plain INCR.

On a throwaway redis-server (helpers.backend.server), each round measures side by side:

* redis-py alone, one thread, a bare loop (the Python floor, no harness);
* ``run_clients`` with 1 and 8 threads (GIL-bound: 8 threads are not faster than 1);
* ``run_processes`` with 8 processes (true parallelism);
* ``redis-benchmark -t incr -P 1 -c N`` with N = 1 and 8 (the server's own client, in C);

each of ours with redis-py's hiredis parser (when installed) and with its Python parser, and the
ratio of each to ``redis-benchmark -P 1`` with as many clients;

and the cost of each client mode (``helpers.backend.modes``), one INCR per call in a bare loop:

* redis-py alone: a client with no mode, the baseline (one loopback round trip per call);
* redis-py alone with its Python parser: what hiredis saves (or not) per call;
* straight: the mode's connection counts round trips, commands and retries;
* straight with ``rtt_ms=0``: the network-delay knob turned off costs nothing more;
* think with 0 s: straight plus ``time.sleep(0)`` before each round trip;
* gated: each INCR is one step granted by ``ScheduleRun.step`` (two thread hand-offs and a trace
  row per round trip).

The modes take turns in blocks of 100 INCRs; a mode's overhead is the median over paired blocks of
its ns per call minus the baseline's, also given as a fraction of one loopback round trip (the
baseline's median). Every configuration runs once per round, in the same order,
after a warm-up round; tables show the median over rounds with min-max. Rounds are short and
many, so that load from other processes on a shared machine falls on every configuration alike
instead of on whichever ran during a busy minute. Usage:
``python -m benchmarks harness_overhead [--ops N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import redis

from helpers.backend import embedded
from helpers.backend.lab import PYTHON_PARSER, Client, Lab, connect, hiredis_version
from helpers.backend.server import find_binary
from helpers.instruments.load import run_clients, run_processes
from helpers.instruments.schedule import ScheduleRun
from helpers.instruments.spec import RaceSpec

BASELINE = "redis-py alone (no mode)"
PYTHON_ALONE = "redis-py alone, Python parser"
GATED = "gated (ScheduleRun.step)"
MODES = (BASELINE, PYTHON_ALONE, "straight", "straight, rtt_ms=0", "think, 0 s", GATED)


def incr_once(client: redis.Redis, key: str) -> int:
    """INCR key once; return the new value (the strategy every configuration runs)."""
    return client.incr(key)


def noop(client: redis.Redis) -> None:
    """Do nothing with the client (measures the harness alone)."""
    return None


def bare_loop(client: Client, key: str, ops: int) -> float:
    """Return ns per INCR of client in a plain loop (no harness), after one PING to connect."""
    client.ping()
    started = time.perf_counter_ns()
    for _ in range(ops):
        client.incr(key)
    return (time.perf_counter_ns() - started) / ops


def plain_client(lab: Lab, parser_class: type | None = None) -> redis.Redis:
    """Return a redis-py client of lab's server (not a cluster), no client mode, default parser."""
    if lab.kind == "embedded":
        return embedded.plain_client(lab.fake_server, decode_responses=True)
    if lab.url is None:
        raise ValueError(f"a {lab.kind} lab without a URL has no server to connect to")
    extra = {} if parser_class is None else {"parser_class": parser_class}
    return redis.Redis.from_url(lab.url, decode_responses=True, **extra)


def parsers() -> dict[str, type | None]:
    """Return {label: parser class for Lab.parser_class}: hiredis (if installed) and Python."""
    found: dict[str, type | None] = {"hiredis": None} if hiredis_version() else {}
    return {**found, "Python parser": PYTHON_PARSER}


def _timed_block(send: Callable[[], Any], block: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(block):
        send()
    return (time.perf_counter_ns() - started) / block


def mode_ns_per_call(lab: Lab, key: str, blocks: int, block: int = 100) -> dict[str, list[float]]:
    """Return {mode: ns per INCR of each block} for redis-py alone and each client mode.

    The modes take turns block by block (block INCRs each), so that a burst of load on the
    machine falls on neighbouring blocks of every mode alike; the i-th blocks form a pair.
    """

    def actor(client: redis.Redis) -> None:  # the gated client's INCRs, granted step by step
        for _ in range(blocks * block):
            client.incr(key)

    clients = {
        BASELINE: plain_client(lab),
        PYTHON_ALONE: plain_client(lab, PYTHON_PARSER),
        "straight": lab.client(mode="straight"),
        "straight, rtt_ms=0": lab.client(mode="straight", rtt_ms=0),
        "think, 0 s": lab.client(mode="think", think_s=0.0),
    }
    result: dict[str, list[float]] = {name: [] for name in MODES}
    try:
        for client in clients.values():
            client.ping()  # connect before timing
        with ScheduleRun(RaceSpec(lab, {"A": actor})) as run:
            for _ in range(blocks):
                for name, client in clients.items():
                    result[name].append(_timed_block(partial(client.incr, key), block))
                result[GATED].append(_timed_block(partial(run.step, "A"), block))
    finally:
        clients.pop(BASELINE).close()
        clients.pop(PYTHON_ALONE).close()
        for client in clients.values():
            lab.release(client)
    return result


def harness_ns_per_call(lab: Lab, calls: int = 100_000, rounds: int = 5) -> tuple[float, float]:
    """Return (ns per call through run_clients, ns per bare call) of a no-op strategy, medians over rounds."""
    harness, bare = [], []
    for _ in range(rounds):
        harness.append(1e9 / run_clients(lab, noop, clients=1, iterations=calls).throughput)
        started = time.perf_counter_ns()
        for _ in range(calls):
            noop(None)  # type: ignore[arg-type]
        bare.append((time.perf_counter_ns() - started) / calls)
    return statistics.median(harness), statistics.median(bare)


def redis_benchmark(port: int, clients: int, ops: int) -> float:
    """Return the INCR/s that redis-benchmark reports for -c clients, -P 1, -n ops."""
    binary = find_binary("redis-benchmark")
    out = subprocess.run(
        [
            str(binary),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-t",
            "incr",
            "-P",
            "1",
            "-c",
            str(clients),
            "-n",
            str(ops),
            "--csv",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0] == "INCR":
            return float(cells[1])
    raise RuntimeError(f"no INCR line in redis-benchmark output:\n{out}")


def _with_parser(lab: Lab, parser_class: type | None, measure: Callable[[], float]) -> float:
    lab.parser_class = parser_class
    try:
        return measure()
    finally:
        lab.parser_class = None


def configurations(
    lab: Lab, port: int, key: str, ops: int
) -> dict[str, tuple[int, Callable[[], float]]]:
    """Return name -> (clients, a function measuring that configuration's INCR/s over ~ops INCRs)."""
    fn = partial(incr_once, key=key)

    def bare() -> float:
        client = lab.client()
        try:
            return 1e9 / bare_loop(client, key, ops)
        finally:
            lab.release(client)

    configs: dict[str, tuple[int, Callable[[], float]]] = {}
    for label, parser_class in parsers().items():
        ours = {
            f"redis-py bare loop, 1 thread [{label}]": (1, bare),
            f"run_clients, 1 thread [{label}]": (
                1,
                lambda: run_clients(lab, fn, clients=1, iterations=ops).throughput,
            ),
            f"run_clients, 8 threads [{label}]": (
                8,
                lambda: run_clients(lab, fn, clients=8, iterations=ops // 8).throughput,
            ),
            f"run_processes, 8 processes [{label}]": (
                8,
                lambda: run_processes(lab, fn, clients=8, iterations=ops // 8).throughput,
            ),
        }
        for name, (n, measure) in ours.items():
            configs[name] = (n, partial(_with_parser, lab, parser_class, measure))
    configs["redis-benchmark -P 1 -c 1"] = (1, lambda: redis_benchmark(port, 1, ops))
    configs["redis-benchmark -P 1 -c 8"] = (8, lambda: redis_benchmark(port, 8, ops * 4))
    return configs


def measure_all(
    ops: int, rounds: int
) -> tuple[dict[str, list[float]], dict[str, int], dict[str, list[float]]]:
    """Return (name -> INCR/s per round, name -> clients, mode -> ns per INCR per block)."""
    blocks = max(1, ops // 100)
    with connect("bench_harness", backend="real") as lab:
        assert lab.url is not None, "a real lab has a URL"
        port = int(lab.url.rsplit(":", 1)[1].split("/")[0])
        key = lab.key("counter")
        configs = configurations(lab, port, key, ops)
        for _, measure in configs.values():  # warm-up: connections, imports, server allocations
            measure()
        mode_ns_per_call(lab, key, blocks)
        samples: dict[str, list[float]] = {name: [] for name in configs}
        clients = {name: n for name, (n, _) in configs.items()}
        modes: dict[str, list[float]] = {name: [] for name in MODES}
        for _ in range(rounds):
            for name, (_, measure) in configs.items():
                samples[name].append(measure())
            for name, values in mode_ns_per_call(lab, key, blocks).items():
                modes[name].extend(values)
        return samples, clients, modes


def report(samples: dict[str, list[float]], clients: dict[str, int]) -> str:
    """Return the table: INCR/s median (min-max) and the ratio to redis-benchmark -P 1, same clients."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    width = max(len(n) for n in samples)
    lines = [
        f"{'configuration':<{width}}  {'INCR/s (median)':>15}  {'min-max over rounds':>21}  "
        f"{'/ redis-benchmark':>17}"
    ]
    for name, values in samples.items():
        bench = medians[f"redis-benchmark -P 1 -c {clients[name]}"]
        spread = f"{min(values):,.0f}-{max(values):,.0f}"
        lines.append(
            f"{name:<{width}}  {medians[name]:>15,.0f}  {spread:>21}  {medians[name] / bench:>16.2f}x"
        )
    lines.append("(/ redis-benchmark: INCR/s divided by redis-benchmark -P 1's, as many clients)")
    return "\n".join(lines)


def mode_report(modes: dict[str, list[float]]) -> str:
    """Return the table of ns per INCR of each client mode, and its overhead in ns and per round trip.

    A mode's overhead is the median over paired blocks of (its block - the baseline's block),
    which cancels most of the load that a shared machine puts on both.
    """
    base = modes[BASELINE]
    round_trip = statistics.median(base)
    width = max(len(n) for n in modes)
    lines = [
        f"{'client mode':<{width}}  {'ns per INCR (median)':>20}  {'p5-p95 of blocks':>19}  "
        f"{'overhead ns':>11}  {'of one round trip':>17}"
    ]
    for name, values in modes.items():
        low, *_, high = (
            statistics.quantiles(values, n=20) if len(values) > 1 else (values[0], values[0])
        )
        spread = f"{low:,.0f}-{high:,.0f}"
        if name == BASELINE:
            overhead, share = "-", "-"
        else:
            extra = statistics.median(v - b for v, b in zip(values, base))
            overhead, share = f"{extra:,.0f}", f"{extra / round_trip:.1%}"
        lines.append(
            f"{name:<{width}}  {statistics.median(values):>20,.0f}  {spread:>19}  "
            f"{overhead:>11}  {share:>17}"
        )
    lines.append(
        f"(one loopback round trip: the {BASELINE} median, {round_trip / 1000:,.1f} µs; "
        f"{len(base)} blocks per mode)"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Measure and print the tables; return 0."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks harness_overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ops", type=int, default=5_000, help="INCRs per configuration and round")
    parser.add_argument(
        "--rounds", type=int, default=9, help="measured rounds (after one warm-up round)"
    )
    args = parser.parse_args(argv)
    if args.ops < 8 or args.rounds < 1:
        parser.error("need --ops >= 8 and --rounds >= 1")
    samples, clients, modes = measure_all(args.ops, args.rounds)
    print(
        f"{args.ops} INCRs per configuration (redis-benchmark -c 8: {args.ops * 4}), "
        f"{args.rounds} rounds after a warm-up round, one throwaway redis-server on loopback; "
        f"redis-py {redis.__version__}, hiredis {hiredis_version() or 'not installed'}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    print(report(samples, clients))
    print()
    print(
        f"per-call cost of each client mode: INCRs in blocks of 100, the modes taking turns, "
        f"{max(1, args.ops // 100)} blocks per mode and round, same server:"
    )
    print(mode_report(modes))
    with connect("bench_harness", backend="embedded") as lab:
        harness, bare = harness_ns_per_call(lab)
    round_trip_ns = statistics.median(modes[BASELINE])
    print(
        f"\nrun_clients cost per call (no-op strategy): {harness - bare:,.0f} ns over a bare call "
        f"({harness:,.0f} vs {bare:,.0f} ns), {(harness - bare) / round_trip_ns:.1%} of one "
        f"loopback INCR round trip ({round_trip_ns / 1000:,.1f} µs)"
    )
    return 0
