"""Lock release cost: round trips and time per release, one worker taking turns at a lock of its own.

Every release of races.locks (the same function objects notebook 02 interleaves, explores and
runs under threads) runs inside races.locks.lock_turn: SET NX PX, no work, then the release.
One client in straight mode (no think time), no contention, so each turn's round trips are
exactly 1 (the SET) plus the release's, and its time is the cost of one uncontended acquire and
release. Scripts are loaded into the server's cache before anything is timed. Releases take
turns run by run, so load from other processes spreads over all of them.

Reported per release: round trips per release (exact), median microseconds per turn (p5-p95 of
the per-run medians) and the ratio to the blind DEL's turn.

Backends: a throwaway real redis-server and/or the embedded backend, where every number is
Python's (fakeredis and its Lua interpreter run in this process).
Usage: ``python -m benchmarks lock_release_cost [--backend real|embedded|both] [--turns N]
[--repeats R]``. Figures are noisy on a shared machine: read them as ratios.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from statistics import median
from typing import cast

import redis

from helpers.backend.lab import Lab, connect
from helpers.instruments.load import RunResult, run_clients
from helpers.instruments.measure import Stats, summarize
from races import locks

RELEASES: dict[str, locks.Release] = {
    "DEL (blind)": locks.release_blind,
    "GET + DEL": locks.release_check_then_del,
    "Lua": locks.release_lua,
    "Lua, checked": locks.release_lua_checked,
    "WATCH": locks.release_watch,
    "DELEX IFEQ": locks.release_delex,
    "DELEX IFDEQ": locks.release_digest,
}
NEEDS_DELEX = {"DELEX IFEQ", "DELEX IFDEQ"}
LEASE_MS = 60_000


@dataclass
class Cost:
    """One release's measurements: round trips per release and per-run median turn times (µs)."""

    round_trips: float
    runs: list[RunResult] = field(default_factory=list)

    @property
    def micros(self) -> Stats:
        """Return the Stats of the per-run median turn times, in microseconds."""
        return summarize(median(run.latencies_ns) / 1000 for run in self.runs)


def releases_for(lab: Lab) -> dict[str, locks.Release]:
    """Return the releases the lab's server supports (the DELEX ones need Redis >= 8.4)."""
    return {n: r for n, r in RELEASES.items() if n not in NEEDS_DELEX or lab.caps.delex}


def turn_of(release: locks.Release, key: str) -> partial:
    """Return the client function timed for a release: one uncontended lock_turn with no work."""
    return partial(
        locks.lock_turn, release=release, key=key, ttl_ms=LEASE_MS, work=itertools.repeat(0)
    )


def measure(
    lab: Lab, releases: Mapping[str, locks.Release], turns: int = 200, repeats: int = 3
) -> dict[str, Cost]:
    """Return {release name: Cost} from repeats runs of `turns` turns each, releases interleaved."""
    key = lab.key("bench:lock")
    admin = lab.client()
    try:
        for release in releases.values():
            release(
                cast(redis.Redis, admin), key, "warm-up"
            )  # loads a script (NOSCRIPT, SCRIPT LOAD) before timing
    finally:
        lab.release(admin)
    costs: dict[str, Cost] = {}
    for _ in range(repeats):
        for name, release in releases.items():
            run = run_clients(lab, turn_of(release, key), clients=1, iterations=turns)
            trips = run.round_trips / run.calls - 1
            cost = costs.setdefault(name, Cost(trips))
            if trips != cost.round_trips:
                raise RuntimeError(
                    f"{name}: {trips:g} round trips per release in one run, "
                    f"{cost.round_trips:g} in another"
                )
            cost.runs.append(run)
    return costs


def report(backend: str, version: str, costs: Mapping[str, Cost]) -> str:
    """Return the table for one backend: round trips and median µs per turn, ratio to DEL."""
    base = costs["DEL (blind)"].micros.median if "DEL (blind)" in costs else None
    lines = [
        f"{backend} (Redis {version}): one uncontended turn = SET NX PX + the release",
        f"{'release':<14}{'round trips':>12}{'µs per turn, median (p5-p95)':>32}{'x DEL':>8}",
    ]
    for name, cost in costs.items():
        s = cost.micros
        ratio = f"{s.median / base:7.2f}x" if base else ""
        lines.append(
            f"{name:<14}{cost.round_trips:>12g}"
            f"{f'{s.median:,.1f} ({s.p5:,.1f}-{s.p95:,.1f})':>32}{ratio:>8}"
        )
    return "\n".join(lines)


def run_backend(backend: str, turns: int, repeats: int) -> str:
    """Measure on a fresh lab of the given backend and return its report."""
    with connect("bench_lock_release", backend=backend) as lab:
        return report(lab.kind, lab.version, measure(lab, releases_for(lab), turns, repeats))


def main(argv: Sequence[str]) -> int:
    """Measure and print one table per backend; return 0."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks lock_release_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=("real", "embedded", "both"), default="both")
    parser.add_argument("--turns", type=int, default=300, help="turns per run (default 300)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per release (default 5)")
    args = parser.parse_args(list(argv))
    if args.turns < 1 or args.repeats < 1:
        parser.error("--turns and --repeats must be positive")
    backends = ("embedded", "real") if args.backend == "both" else (args.backend,)
    print("figures are noisy on a shared machine: read them as ratios")
    for backend in backends:
        print(run_backend(backend, args.turns, args.repeats))
        print()
    return 0
