"""Dictionary latency: one registration by HGETALL + HSETNX versus the Lua get-or-put, against dictionary size.

For each size (one dictionary grows through the sizes, helpers.dictionary.prefill), registers fresh
strings (the miss path: the full cost) with lua/dict_get_or_put.lua and with HGETALL + HSETNX, then
removes them again (helpers.dictionary.truncate), so both always see exactly `size` strings. Reports
the client-side median seconds per registration (p5-p95 over repetitions, after warm-up) and the
ratio HGETALL / Lua. On a real server it also reads ``INFO commandstats`` before and after, so the
server's own microseconds per HGETALL and per EVALSHA are shown apart from the client's parsing.

Backends: a throwaway real redis-server (helpers.backend.server) and/or the embedded fakeredis backend,
where every number is Python's. Usage:
``python -m benchmarks dictionary_latency [--backend real|embedded|both] [--sizes 100,1000,...] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from helpers.backend.lab import connect
from helpers.dictionary import DictKeys, dict_keys, dict_script, prefill, register_hgetall_hsetnx, register_lua, truncate
from helpers.instruments.measure import Stats, measure, server_usec_per_call
from helpers.backend.server import ServerNotFound

DEFAULT_SIZES = {"real": (100, 1_000, 10_000, 100_000), "embedded": (100, 1_000, 10_000, 30_000)}


@dataclass(frozen=True)
class SizeRow:
    """The measurements at one dictionary size."""

    size: int
    scan: Stats
    lua: Stats
    server_scan_us: float | None = None
    server_lua_us: float | None = None

    @property
    def ratio(self) -> float:
        """Return the client-side median of HGETALL + HSETNX divided by the Lua script's."""
        return self.scan.median / self.lua.median

    @property
    def server_ratio(self) -> float | None:
        """Return the server-side HGETALL microseconds divided by the script's, if measured."""
        if self.server_scan_us is None or not self.server_lua_us:
            return None
        return self.server_scan_us / self.server_lua_us


def _timed(client: Any, command: str, server: bool, run: Any) -> tuple[Stats, float | None]:
    """Return run()'s Stats and, if server, the server microseconds per call of command during it."""
    return server_usec_per_call(client, command, run) if server else (run(), None)


def measure_sizes(client: Any, keys: DictKeys, sizes: Sequence[int], repeats: int, server: bool) -> list[SizeRow]:
    """Return one SizeRow per size (ascending), growing one dictionary through the sizes."""
    script = dict_script()
    fresh = itertools.count()
    rows, filled = [], 0
    for size in sorted(sizes):
        prefill(client, keys, size, start=filled + 1)
        filled = size
        lua, lua_us = _timed(client, "evalsha", server, lambda: measure(
            lambda: register_lua(client, keys, f"~new{next(fresh)}", script), warmup=3, repeats=repeats, number=20))
        truncate(client, keys, size)
        scan, scan_us = _timed(client, "hgetall", server, lambda: measure(
            lambda: register_hgetall_hsetnx(client, keys, f"~new{next(fresh)}"), warmup=1, repeats=repeats))
        truncate(client, keys, size)
        rows.append(SizeRow(size, scan, lua, scan_us, lua_us))
    return rows


def report(backend: str, version: str, rows: Sequence[SizeRow]) -> str:
    """Return the table for one backend: medians, spreads, ratios (and server-side figures if any)."""
    lines = [f"{backend} (Redis {version}): seconds per registration of a new string, median (p5-p95)",
             f"{'size':>8}  {'HGETALL + HSETNX':>32}  {'Lua script':>26}  {'ratio':>8}"
             + (f"  {'server µs HGETALL':>17}  {'server µs script':>16}  {'server ratio':>12}"
                if any(r.server_scan_us is not None for r in rows) else "")]
    for r in rows:
        scan = f"{r.scan.median * 1e3:.3f} ms ({r.scan.p5 * 1e3:.3f}-{r.scan.p95 * 1e3:.3f})"
        lua = f"{r.lua.median * 1e3:.3f} ms ({r.lua.p5 * 1e3:.3f}-{r.lua.p95 * 1e3:.3f})"
        line = f"{r.size:>8,}  {scan:>32}  {lua:>26}  {r.ratio:>7.1f}x"
        if r.server_scan_us is not None:
            server_ratio = r.server_ratio
            shown = "n/a" if server_ratio is None else f"{server_ratio:.{1 if server_ratio < 10 else 0}f}x"
            line += f"  {r.server_scan_us:>17,.1f}  {r.server_lua_us or 0:>16,.1f}  {shown:>12}"
        lines.append(line)
    largest = max(rows, key=lambda r: r.size)
    lines.append(f"speed-up of the Lua script at {largest.size:,} strings: {largest.ratio:.0f}x (client side)")
    return "\n".join(lines)


def run_backend(backend: str, sizes: Sequence[int], repeats: int) -> str:
    """Measure on a fresh lab of the given backend and return its report."""
    with connect("bench_dictionary", backend=backend) as lab:
        client = lab.client()
        rows = measure_sizes(client, dict_keys(lab.ns, "bench"), sizes, repeats, server=lab.kind == "real")
        return report(lab.kind, lab.version, rows)


def main(argv: list[str]) -> int:
    """Measure and print one table per backend; return 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks dictionary_latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("real", "embedded", "both"), default="both")
    parser.add_argument("--sizes", help="comma-separated dictionary sizes (default per backend: "
                        + "; ".join(f"{b} {','.join(map(str, s))}" for b, s in DEFAULT_SIZES.items()) + ")")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per point (after warm-up)")
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
