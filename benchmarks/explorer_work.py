"""Explorer work per step, counted in Python bytecodes: the same count on every run, idle or busy.

CPU seconds of an explorer search vary by 10-15% from run to run on a shared two-core machine, so
a change that saves 5% cannot be seen in them. This counts instead the bytecode instructions the
Python interpreter runs during one search of a cell of ``benchmarks.explorer`` (default: 2×6
on one key, exhaustive, on the embedded backend), through ``sys.settrace`` opcode events (on
the searching thread and any thread started meanwhile), and divides them by the steps of the
schedules the search ran (walked through known states or run live: the same for every tree).
Two runs of one tree give the same count (the search is deterministic, and its actors are
greenlets of the searching thread), so trees compare by it exactly: ``--before TREE``
(repeatable) counts another checkout of the suite the same way, as ``benchmarks.explorer`` does.
A tree from before the greenlet runner (c19c80b) runs its actors on threads, whose waits make its
count vary a little (0.02% here).

The count is split by where the code lives: the explorer (the tree's ``helpers/``), redis-py,
fakeredis, the standard library, the rest (the actors' own code, generated ``__init__``
methods). It weighs every instruction alike: time spent inside C or the kernel (a fakeredis
lock, a greenlet switch, a thread handing over the GIL, hiredis's packer) does not show. So
c19c80b's threads run fewer bytecodes a step than today's greenlets, yet take twice the CPU
time: read the count beside the CPU seconds of ``benchmarks.explorer``, never instead of them.
Tracing makes a search about 30× slower (about 40 s for the default cell). Writes
``benchmarks/results/explorer_work.json``.
Usage: ``python -m benchmarks explorer_work [--cell CELL] [--way WAY] [--before TREE]... [--top N]``.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

HERE = Path(__file__).resolve()
TREE = HERE.parent.parent
RESULTS = HERE.parent / "results" / "explorer_work.json"
PARTS = ("explorer", "redis-py", "fakeredis", "stdlib", "other")


def _explorer_module() -> Any:
    """Return this tree's ``benchmarks/explorer.py``, whatever tree ``helpers`` comes from."""
    spec = importlib.util.spec_from_file_location(
        "_racelab_bench_explorer", HERE.parent / "explorer.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_of(filename: str, helpers: str) -> str:
    """Return which part of PARTS the code of filename belongs to."""
    if filename.startswith(helpers):
        return "explorer"
    if "site-packages" in filename:
        package = filename.split("site-packages/", 1)[1].split("/", 1)[0]
        return {"redis": "redis-py", "fakeredis": "fakeredis"}.get(package, "other")
    if filename.startswith(sysconfig.get_paths()["stdlib"]) or filename.startswith("<frozen"):
        return "stdlib"
    return "other"


def count(cell: str, way: str, backend: str = "embedded") -> dict[str, Any]:
    """Search one cell once (in this process), counting bytecodes; return the figures."""
    bench = _explorer_module()
    bench.run_cell(cell, way, backend)  # once untraced: imports and first connections apart
    try:  # a search that lasts 2 s prints a summary line: traced, a small one lasts about that
        from helpers.instruments import progress

        progress.SUMMARY_AFTER_S = math.inf  # (so whether it prints would vary the count)
    except ImportError:  # a tree from before the progress line
        pass
    ops: collections.Counter[CodeType] = collections.Counter()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            ops[frame.f_code] += 1
        return local

    def call(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    sys.settrace(call)
    threading.settrace(call)  # the actors' threads too, where a tree runs them on threads
    try:
        found = bench.run_cell(cell, way, backend)
    finally:
        threading.settrace(None)  # (None: threads started later are not traced)
        sys.settrace(None)
    import helpers

    where = str(Path(helpers.__file__).resolve().parent) + os.sep
    actors, round_trips, _keys = bench.CELLS[cell]
    # The steps of the schedules the search ran: every schedule of these cells has them all.
    # (Not the steps that ran through the actors: a search that walks its replays through the
    # states met before, helpers.instruments.states, runs far fewer, for the same answer.)
    steps = found["runs"] * actors * round_trips
    parts: collections.Counter[str] = collections.Counter()
    functions: collections.Counter[str] = collections.Counter()
    for code, n in ops.items():
        part = part_of(code.co_filename, where)
        parts[part] += n
        if part == "explorer":
            name = code.co_filename[len(where) :]
            functions[f"{name}:{code.co_firstlineno} {code.co_qualname}"] += n
    total = sum(parts.values())
    return {
        "cell": cell,
        "way": way,
        "backend": backend,
        "runs": found["runs"],
        "steps": steps,
        "bytecodes": total,
        "per_step": round(total / steps, 1),
        "per_step_by_part": {p: round(parts[p] / steps, 1) for p in PARTS},
        "explorer_functions_per_step": {
            f: round(n / steps, 1) for f, n in functions.most_common(40)
        },
    }


def _subprocess(tree: Path, cell: str, way: str) -> dict[str, Any]:
    """Count one cell in a fresh interpreter that imports the suite from tree."""
    env = {**os.environ, "PYTHONPATH": str(tree), "RACELAB_BACKEND": "embedded"}
    env.pop("REDIS_URL", None)
    command = [sys.executable, str(HERE), "--child", "--cell", cell, "--way", way]
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        return {"tree": str(tree), "failed": (done.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return {"tree": str(tree), **json.loads(done.stdout.splitlines()[-1])}


def _show(row: dict[str, Any], top: int) -> None:
    name = f"{row.get('commit', '?')} ({row['tree']})"
    if "failed" in row:
        print(f"{name}: failed: {row['failed']}")
        return
    by_part = "  ".join(f"{p} {v:,.0f}" for p, v in row["per_step_by_part"].items())
    print(
        f"{name}: {row['per_step']:,.0f} bytecodes a step ({row['bytecodes']:,} over "
        f"{row['steps']:,} steps, {row['runs']:,} replays)\n  {by_part}"
    )
    for function, n in list(row["explorer_functions_per_step"].items())[:top]:
        print(f"    {n:7,.1f}  {function}")


def main(argv: list[str]) -> int:
    """Count the cell on this tree (and each --before tree); print and write the figures."""
    bench = _explorer_module()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks explorer_work",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cell", default="2x6 one key", choices=list(bench.CELLS))
    parser.add_argument("--way", default="exhaustive", choices=["exhaustive", "reduce"])
    parser.add_argument(
        "--before", type=Path, action="append", default=[], help="another checkout (repeat)"
    )
    parser.add_argument("--top", type=int, default=12, help="explorer functions listed per tree")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(count(args.cell, args.way)))
        return 0
    rows = [
        {**_subprocess(tree.resolve(), args.cell, args.way), "commit": bench.commit_of(tree)}
        for tree in [TREE, *args.before]
    ]
    print(f"{args.cell}, {args.way}, embedded: Python bytecodes per step of the search")
    for row in rows:
        _show(row, args.top)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    provenance = {
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m benchmarks explorer_work", *argv]),
        "commit": bench.commit_of(TREE),
    }
    args.out.write_text(json.dumps({"provenance": provenance, "rows": rows}, indent=2) + "\n")
    return 0 if all("failed" not in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
