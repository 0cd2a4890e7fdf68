"""Dictionary latency: one registration of a new string by each strategy of races.dictionary, against size.

The strategies timed are the very functions notebook 03 shows, interleaves and runs in threads
(``STRATEGIES``). For each size (one dictionary grows through the sizes, ``prefill``), each
strategy registers fresh strings (the miss path: the full cost of a registration), and
``truncate`` removes them again, so every strategy always sees exactly `size` strings. Reports
the client-side median seconds per registration (p5-p95 over repetitions, after warm-up) and the
ratio HGETALL + HSETNX / Lua script. On a real server it also reads ``INFO commandstats`` before
and after, so the server's own microseconds per HGETALL and per EVALSHA show apart from the
client's parsing.

Backends: a throwaway real redis-server (helpers.backend.server) and/or the embedded fakeredis
backend, where every number is Python's. Usage:
``python -m benchmarks dictionary_latency [--backend real|embedded|both] [--sizes 100,1000,...] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from helpers.backend.lab import connect
from helpers.backend.server import ServerNotFound
from helpers.instruments.measure import Stats, measure, server_usec_per_call
from races.dictionary import (
    DictKeys,
    batch_get_or_put,
    dict_keys,
    function_get_or_put,
    hgetall_hsetnx_get_or_put,
    hincrby_hsetnx_get_or_put,
    lua_get_or_put,
    naive_get_or_put,
    watch_get_or_put,
)

DEFAULT_SIZES = {"real": (100, 1_000, 10_000, 100_000), "embedded": (100, 1_000, 10_000, 30_000)}
Strategy = Callable[..., Any]
STRATEGIES: dict[str, Strategy] = {
    "HGETALL + HSETNX": hgetall_hsetnx_get_or_put,
    "naive counter": naive_get_or_put,
    "Lua script": lua_get_or_put,
    "Function": function_get_or_put,
    "Lua batch of 1": batch_get_or_put,
    "WATCH/MULTI": watch_get_or_put,
    "HINCRBY + HSETNX": hincrby_hsetnx_get_or_put,
}
SCAN, SCRIPT = hgetall_hsetnx_get_or_put, lua_get_or_put  # compared in the ratio columns
SERVER_COMMAND = {SCAN: "hgetall", SCRIPT: "evalsha"}  # INFO commandstats, on a real server


@dataclass(frozen=True)
class SizeRow:
    """The measurements at one dictionary size, by strategy function."""

    size: int
    stats: dict[Strategy, Stats]  # seconds per registration of a new string
    server_us: dict[
        Strategy, float | None
    ]  # server µs per call of SERVER_COMMAND (real server only)

    @property
    def ratio(self) -> float:
        """Return the client-side median of HGETALL + HSETNX divided by the Lua script's."""
        return self.stats[SCAN].median / self.stats[SCRIPT].median

    @property
    def server_ratio(self) -> float | None:
        """Return the server-side HGETALL microseconds divided by the script's, if measured."""
        scan, script = self.server_us.get(SCAN), self.server_us.get(SCRIPT)
        return None if scan is None or not script else scan / script


def prefill(client: Any, keys: DictKeys, count: int, start: int = 1, chunk: int = 2000) -> None:
    """Register strings field<n> under ids start..count (ids, index and counter), in chunks."""
    for first in range(start, count + 1, chunk):
        numbers = range(first, min(first + chunk, count + 1))
        with client.pipeline(transaction=False) as pipe:
            pipe.hset(keys.ids, mapping={n: f"field{n}" for n in numbers})
            pipe.hset(keys.index, mapping={f"field{n}": n for n in numbers})
            pipe.execute()
    if count >= start:
        client.hset(keys.meta, "last_id", count)


def truncate(client: Any, keys: DictKeys, size: int) -> int:
    """Remove every id above size (and its index entry), set the counter to size; return how many went."""
    extra = list(range(size + 1, int(client.hlen(keys.ids)) + 1))
    if extra:
        texts = [t for t in client.hmget(keys.ids, extra) if t is not None]
        client.hdel(keys.ids, *extra)
        if texts:
            client.hdel(keys.index, *texts)
    client.hset(keys.meta, "last_id", size)
    return len(extra)


def register_new(fn: Strategy, client: Any, keys: DictKeys, text: str) -> Any:
    """Register one new string with strategy fn (the batch strategy gets a batch of one)."""
    return fn(client, [text], keys) if fn is batch_get_or_put else fn(client, text, keys)


def _timed(
    client: Any, fn: Strategy, server: bool, run: Callable[[], Stats]
) -> tuple[Stats, float | None]:
    """Return run()'s Stats and, on a real server, the server µs per call of fn's SERVER_COMMAND."""
    if server and fn in SERVER_COMMAND:
        return server_usec_per_call(client, SERVER_COMMAND[fn], run)
    return run(), None


def measure_sizes(
    client: Any,
    keys: DictKeys,
    sizes: Sequence[int],
    repeats: int,
    server: bool,
    strategies: Sequence[Strategy] = tuple(STRATEGIES.values()),
) -> list[SizeRow]:
    """Return one SizeRow per size (ascending), growing one dictionary through the sizes."""
    fresh = itertools.count()
    rows, filled = [], 0
    for size in sorted(sizes):
        prefill(client, keys, size, start=filled + 1)
        filled = size
        stats, server_us = {}, {}
        for fn in strategies:
            slow = fn is SCAN  # O(N): one call per repetition is plenty
            stats[fn], server_us[fn] = _timed(
                client,
                fn,
                server,
                lambda: measure(
                    lambda: register_new(fn, client, keys, f"~new{next(fresh)}"),
                    warmup=1 if slow else 3,
                    repeats=repeats,
                    number=1 if slow else 20,
                ),
            )
            truncate(client, keys, size)
        rows.append(SizeRow(size, stats, server_us))
    return rows


def report(backend: str, version: str, rows: Sequence[SizeRow]) -> str:
    """Return the table for one backend: medians, the HGETALL/Lua ratio (and server figures if any)."""
    names = {fn: label for label, fn in STRATEGIES.items()}
    timed = list(rows[0].stats)
    with_server = any(r.server_us.get(SCAN) is not None for r in rows)
    lines = [
        f"{backend} (Redis {version}): milliseconds per registration of a new string, median",
        f"{'size':>8}"
        + "".join(f"  {names.get(fn, fn.__name__):>16}" for fn in timed)
        + f"  {'HGETALL/Lua':>11}"
        + (
            f"  {'server µs HGETALL':>17}  {'server µs script':>16}  {'server ratio':>12}"
            if with_server
            else ""
        ),
    ]
    for r in rows:
        line = f"{r.size:>8,}" + "".join(f"  {r.stats[fn].median * 1e3:>16.3f}" for fn in timed)
        line += f"  {r.ratio:>10.1f}x"
        if with_server:
            ratio = r.server_ratio
            shown = "n/a" if ratio is None else f"{ratio:.{1 if ratio < 10 else 0}f}x"
            line += f"  {r.server_us[SCAN]:>17,.1f}  {r.server_us.get(SCRIPT) or 0:>16,.1f}  {shown:>12}"
        lines.append(line)
    largest = max(rows, key=lambda r: r.size)
    lines.append(
        f"speed-up of the Lua script at {largest.size:,} strings: {largest.ratio:.0f}x (client side)"
    )
    return "\n".join(lines)


def run_backend(backend: str, sizes: Sequence[int], repeats: int) -> str:
    """Measure on a fresh lab of the given backend and return its report."""
    with connect("bench_dictionary", backend=backend) as lab:
        client = lab.client()
        rows = measure_sizes(
            client, dict_keys(lab.ns, "bench"), sizes, repeats, server=lab.kind == "real"
        )
        return report(lab.kind, lab.version, rows)


def main(argv: list[str]) -> int:
    """Measure and print one table per backend; return 0."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks dictionary_latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=("real", "embedded", "both"), default="both")
    parser.add_argument(
        "--sizes",
        help="comma-separated dictionary sizes (default per backend: "
        + "; ".join(f"{b} {','.join(map(str, s))}" for b, s in DEFAULT_SIZES.items())
        + ")",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed repetitions per point (after warm-up)"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("need --repeats >= 1")
    try:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if sizes is not None and (not sizes or min(sizes) < 1):
        parser.error("--sizes must be positive")
    backends = ("embedded", "real") if args.backend == "both" else (args.backend,)
    print("figures are noisy on a shared machine: read them as ratios")
    for backend in backends:
        try:
            print(run_backend(backend, sizes or DEFAULT_SIZES[backend], args.repeats))
        except ServerNotFound as exc:
            if args.backend != "both":
                print(f"cannot run on a real server: {exc}")
                return 1
            print(f"real server skipped: {exc}")
        print()
    return 0
