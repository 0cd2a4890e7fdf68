"""Explorer speed: schedules/s and seconds for a few actors × round trips, exhaustive and reduced.

Every cell explores actors that alternate ``GET key`` and ``SET key value+1`` (a read-modify-write
counter, so reads commute and writes conflict), on one key for all actors or on a key of its own
for each (actors that never conflict). A cell is run three ways where the code has them:

* ``exhaustive``: every interleaving (``explore(..., reduce=False)``; a "before" tree that has no
  reduction runs its default);
* ``reduce``: one schedule per class of equivalent schedules (``explore(..., reduce=True)``, the
  default), which answers for every schedule;
* ``exhaustive, live`` and ``reduce, live``: the same with every replay run live
  (``share_prefixes=False``), against the default, which answers the steps a replay shares
  with the one before from that replay's record (``helpers.instruments.sharing``); the row's
  ``shared`` column is the share of steps so answered;
* ``preemptions=2``: every schedule with at most 2 preemptions (``explore(..., preemptions=2)``);
* ``exhaustive, N workers`` and ``reduce, N workers`` (``--workers N``, default the core count;
  none at 1): the search split across N processes (``explore(..., workers=N)``), same answer;
* ``floor`` (``--floor``): no explorer at all: the round trips an exhaustive search sends (one
  DEL per replay, then every actor's GETs and SETs), sent one after another on one plain
  client. It is what redis-py and the backend cost for those commands, which no replay scheme
  that runs the actors' real client code can go below.

Each cell runs in a subprocess of its own, on the embedded backend and on a throwaway real
redis-server. ``--before TREE`` (repeatable) runs the same cells, exhaustive only, on another
checkout of the suite (e.g. ``git worktree add --detach /tmp/before <commit>``) in the same run,
each cell on every tree one after another, so the "before" and "after" columns come from the
same machine at the same time. Every figure has its CPU time beside its wall time (the
subprocess's own and its children's: workers are processes), and the load average (1 minute)
when it started and ended: on a shared machine, compare CPU seconds, and wall seconds only at
like loads. ``count_cpu_seconds`` is the CPU time of ``found.total`` after the search: a reduced
search counts the schedules its classes stand for on first use, as a learner's summary does.
The provenance names redis-py's, fakeredis's and the real server's versions. A cell is skipped,
with the reason in the table, when it has more schedules than the benchmark's limit or runs
longer than ``--timeout`` seconds. The limit is 20,000 (the explorer's own for a search that runs
live, so that every tree meets the same one) or ``--max-schedules`` (50,000 is the explorer's
default where prefixes are shared). ``--before-way`` (repeatable) runs other ways than
``exhaustive`` on the "before" trees (``reduce``, say). Writes
``benchmarks/results/explorer.json`` with provenance.
Usage: ``python -m benchmarks explorer [--before TREE]... [--only CELL] [--backends embedded,real]
[--workers N]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TREE = HERE.parent.parent
RESULTS = HERE.parent / "results" / "explorer.json"
# name: (actors, round trips per actor, keys: "one" or "own")
CELLS: dict[str, tuple[int, int, str]] = {
    "2x4 one key": (2, 4, "one"),
    "2x6 one key": (2, 6, "one"),
    "2x8 one key": (2, 8, "one"),
    "2x8 own keys": (2, 8, "own"),
    "3x3 one key": (3, 3, "one"),
    "3x4 one key": (3, 4, "one"),
    "2x10 one key": (2, 10, "one"),
}
WAYS: dict[str, dict[str, Any]] = {
    "exhaustive": {"reduce": False},
    "exhaustive, live": {"reduce": False, "share_prefixes": False},
    "reduce": {"reduce": True},
    "reduce, live": {"reduce": True, "share_prefixes": False},
    "preemptions=2": {"preemptions": 2},
}
MAX_SCHEDULES = 20_000
WORKERS_WAYS = ("exhaustive, {n} workers", "reduce, {n} workers")


def count_interleavings(*steps: int) -> int:
    """Return the number of interleavings of actors with these step counts (multinomial)."""
    from math import factorial

    total = factorial(sum(steps))
    for s in steps:
        total //= factorial(s)
    return total


def read_modify_write(client: Any, key: str, steps: int) -> str:
    """Alternate GET key and SET key value+1 for steps round trips; return 'done'."""
    value = 0
    for i in range(steps):
        if i % 2 == 0:
            value = int(client.get(key) or 0)
        else:
            client.set(key, value + 1)
    return "done"


def cpu_seconds() -> float:
    """Return the CPU time of this process and of its children that have ended (user + system)."""
    mine, theirs = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime


def _way_options(way: str) -> dict[str, Any]:
    """Return explore()'s options for a way ("reduce, 2 workers": reduce, workers=2)."""
    if way in WAYS:
        return WAYS[way]
    base, workers = way.split(", ")
    return {**WAYS[base], "workers": int(workers.split()[0])}


def run_cell(
    cell: str, way: str, backend: str, max_schedules: int = MAX_SCHEDULES
) -> dict[str, Any]:
    """Explore one cell one way on one backend (in this process); return its figures."""
    import inspect
    from functools import partial

    from helpers import connect
    from helpers.instruments.explore import explore

    actors, steps, keys = CELLS[cell]
    with connect("bench_explorer", backend=backend) as lab:
        names = "ABCDEFGH"[:actors]
        key_of = {n: lab.key("n" if keys == "one" else f"n-{n}") for n in names}
        programs = {n: partial(read_modify_write, key=key_of[n], steps=steps) for n in names}
        options = _way_options(way)
        parameters = inspect.signature(explore).parameters
        if "reduce" not in parameters and "options" not in parameters:
            options = {}  # a tree from before reduction: its explore() is exhaustive
        started, cpu = time.perf_counter(), cpu_seconds()
        found = explore(
            lab,
            programs,
            lambda client, results: True,
            watch=sorted(set(key_of.values())),
            max_schedules=max_schedules,
            keep_traces=False,
            **options,
        )
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        counting = cpu_seconds()
        total = found.total  # counted from the classes on first use, as a summary does
        counting = cpu_seconds() - counting
        runs = getattr(found, "runs", total)  # one per class when reduced
        return {
            "schedules": total,  # the schedules the result answers for
            "runs": runs,
            "classes": getattr(found, "classes", None),
            "complete": getattr(found, "complete", True),
            "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu, 3),
            "count_cpu_seconds": round(counting, 3),  # found.total, after the search
            "runs_per_s": round(runs / seconds, 1),
            "shared_steps": getattr(found, "shared_steps", None),
            "live_steps": getattr(found, "live_steps", None),
            "walked": getattr(found, "walked", None),
            "max_schedules": max_schedules,
        }


def run_floor(cell: str, backend: str) -> dict[str, Any]:
    """Send the round trips an exhaustive search of the cell sends, with no explorer; time them."""
    from helpers import connect

    actors, steps, keys = CELLS[cell]
    replays = count_interleavings(*[steps] * actors)
    with connect("bench_explorer_floor", backend=backend) as lab:
        names = "ABCDEFGH"[:actors]
        key_of = {n: lab.key("n" if keys == "one" else f"n-{n}") for n in names}
        client = lab.client()
        started, cpu = time.perf_counter(), cpu_seconds()
        for _ in range(replays):
            client.delete(*set(key_of.values()))
            for name in names:
                read_modify_write(client, key_of[name], steps)
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        round_trips = replays * (1 + actors * steps)
        return {
            "schedules": replays,
            "runs": replays,
            "classes": None,
            "complete": True,
            "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu, 3),
            "runs_per_s": round(replays / seconds, 1),
            "us_per_round_trip": round(seconds / round_trips * 1e6, 1),
        }


def _subprocess(
    tree: Path, cell: str, way: str, backend: str, timeout: float, max_schedules: int
) -> dict[str, Any]:
    """Run one cell in a fresh interpreter that imports the suite from tree; return its figures."""
    env = {**os.environ, "PYTHONPATH": str(tree), "RACELAB_BACKEND": backend}
    env.pop("REDIS_URL", None)
    command = [sys.executable, str(HERE), "--cell", cell, "--way", way, "--backend", backend]
    command += ["--max-schedules", str(max_schedules)]
    done = run_capped(command, env, tree, timeout)
    if done is None:
        return {"skipped": f"over the {timeout:g} s cap"}
    if done.returncode != 0:
        return {"skipped": f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:120]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_capped(
    command: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """Run command in a session of its own; past timeout, kill all of it and return None.

    ``subprocess.run(timeout=...)`` kills only the process it started: a cell's pool workers
    (``workers=N``) would live on, idle, as orphans. Here the command leads its own process
    group, and the whole group is killed.
    """
    with subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Not yet reaped, the leader's pid still names this group alone.
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _ways_for(
    cell: str,
    before: bool,
    floor: bool = False,
    workers: int = 1,
    before_ways: tuple[str, ...] = ("exhaustive",),
) -> list[str]:
    if before:
        return list(before_ways)
    ways = list(WAYS) + ([w.format(n=workers) for w in WORKERS_WAYS] if workers > 1 else [])
    return [*ways, "floor"] if floor and CELLS[cell][2] == "one" else ways


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run every requested cell on every tree, way and backend; return one row per run."""
    rows = []
    before = args.before or []
    labelled = [
        (f"before{'' if len(before) == 1 else i + 1}", tree) for i, tree in enumerate(before)
    ]
    trees = [("after", TREE), *labelled]
    for backend in args.backends:
        cells = args.only or list(CELLS)
        if backend == "real" and args.real_cells:
            cells = [c for c in cells if c in args.real_cells.split(",")]
        for cell in cells:
            actors, steps, _keys = CELLS[cell]
            every = count_interleavings(*[steps] * actors)
            for label, tree in trees:
                ways = _ways_for(
                    cell,
                    label != "after",
                    args.floor,
                    args.workers,
                    tuple(args.before_way or ["exhaustive"]),
                )
                for way in ways:
                    row: dict[str, Any] = {
                        "backend": backend,
                        "cell": cell,
                        "code": label,
                        "way": way,
                        "interleavings": every,
                    }
                    exhaustive = way == "floor" or way.startswith("exhaustive")
                    cap = args.max_schedules
                    if exhaustive and every > cap:
                        row["skipped"] = f"{every:,} schedules, over the {cap:,} limit"
                    else:
                        load = os.getloadavg()[0]
                        row.update(_subprocess(tree, cell, way, backend, args.timeout, cap))
                        row["load"] = [round(load, 2), round(os.getloadavg()[0], 2)]
                    rows.append(row)
                    print(_line(row), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    head = f"{row['backend']:<8} {row['cell']:<13} {row['code']:<7} {row['way']:<22}"
    if "skipped" in row:
        return f"{head} skipped: {row['skipped']}"
    classes = "" if row.get("classes") is None else f"{row['classes']:>7,}"
    return (
        f"{head} {row['schedules']:>7,} schedules {row['runs']:>7,} runs {classes:>7} classes "
        f"{row['seconds']:>8.2f} s {row['runs_per_s']:>9,.1f} runs/s  cpu {row['cpu_seconds']:>7.2f} s"
        f"  load {row['load'][0]:.2f}-{row['load'][1]:.2f}"
        f"{'' if row.get('complete', True) else '  (bounded)'}"
        + (f"  count {row['count_cpu_seconds']:.2f} s" if "count_cpu_seconds" in row else "")
        + (f"  {row['us_per_round_trip']} us per round trip" if "us_per_round_trip" in row else "")
        + _shared(row)
    )


def _shared(row: dict[str, Any]) -> str:
    """Return the share of steps answered from a record ('' when the tree has no sharing)."""
    shared, live = row.get("shared_steps"), row.get("live_steps")
    if shared is None or live is None or not shared + live:
        return ""
    return f"  shared {shared / (shared + live):.0%} of {shared + live:,} steps"


def provenance(argv: list[str], load_before: tuple[float, ...]) -> dict[str, Any]:
    """Return where and when the figures were measured."""
    import redis

    return {
        "redis_py": redis.__version__,
        "fakeredis": _version_of("fakeredis"),
        "server": _server(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m benchmarks explorer", *argv]),
        "commit": commit_of(TREE),
        "load_average": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def _version_of(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _server() -> str:
    """Return the redis-server the real backend starts, with its version, or why there is none."""
    from helpers.backend.server import find_binary, server_description

    try:
        return server_description(find_binary())
    except Exception as exc:  # noqa: BLE001 - provenance says why, the real rows say skipped
        return f"none: {str(exc).splitlines()[0][:120]}"


def commit_of(tree: Path) -> str:
    """Return the short commit tree's checkout is at ('unknown' outside git)."""
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str]) -> int:
    """Measure the cells (after, and before when --before is given); write results/explorer.json."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks explorer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--before",
        type=Path,
        action="append",
        help="another checkout to measure alongside (repeat)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes of the 'N workers' ways (default: the core count; 1: none)",
    )
    parser.add_argument("--only", action="append", choices=list(CELLS), help="one cell (repeat)")
    parser.add_argument("--backends", default="embedded,real", help="comma-separated backends")
    parser.add_argument("--real-cells", help="comma-separated cells to run on real (default all)")
    parser.add_argument("--timeout", type=float, default=300.0, help="cap per cell, in seconds")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--floor", action="store_true", help="also time the bare round trips")
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the results file's other rows (a row measured again is replaced)",
    )
    parser.add_argument(
        "--max-schedules",
        type=int,
        default=MAX_SCHEDULES,
        help=f"explore()'s max_schedules in every cell (default {MAX_SCHEDULES:,}, its own)",
    )
    parser.add_argument(
        "--before-way",
        action="append",
        help="a way to run on the --before trees (repeat; default: exhaustive)",
    )
    parser.add_argument("--cell", help=argparse.SUPPRESS)  # the subprocess side
    parser.add_argument("--way", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        if args.way == "floor":
            print(json.dumps(run_floor(args.cell, args.backend)))
        else:
            print(json.dumps(run_cell(args.cell, args.way, args.backend, args.max_schedules)))
        return 0
    args.backends = args.backends.split(",")
    load_before = os.getloadavg()
    rows = measure(args)
    runs = [provenance(argv, load_before)]
    if args.append and args.out.is_file():
        old = json.loads(args.out.read_text())
        fresh = {(r["backend"], r["cell"], r["code"], r["way"]) for r in rows}
        kept = [
            r for r in old["rows"] if (r["backend"], r["cell"], r["code"], r["way"]) not in fresh
        ]
        rows = kept + rows
        runs = old.get("runs", [old["provenance"]]) + runs
    data = {
        "name": "explorer",
        "what": "explore() on actors alternating GET and SET (one key shared, or a key each)",
        "unit": "seconds of one explore() call; complete schedules run (runs) per second",
        "max_schedules": args.max_schedules,  # (each row says its own, since this option)
        "before": [str(t) for t in args.before or []] or None,
        "before_commit": [commit_of(t) for t in args.before or []] or None,
        "provenance": runs[-1],
        "runs": runs,  # every invocation that wrote rows here (--append), oldest first
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
