"""Reference figures: each fix's cost relative to the naive version on a real Redis, written to results/.

For every workload of ``WORKLOADS`` (rate limiter, lock release, dictionary get-or-put: the
``REFERENCE`` each module of ``races/`` declares beside the functions the notebooks run), measures requests/s
at 1 and 8 client threads in straight mode, strategies taking turns run by run, with redis-py's
hiredis parser and with its Python parser (hiredis turned off per connection), and writes
``benchmarks/results/<workload>.json``: the cost ratios to the naive version, requests/s, round
trips and retries per request, and the provenance (server and client versions, CPUs, machine,
date, command line, load average before and after). Notebooks plot these figures on the
embedded backend, where every timing is Python's.

The server is REDIS_URL when set (only this run's keys are touched), else a throwaway
redis-server >= 8.4 from .redis/bin. Figures from a busy machine are not trustworthy: the load
average is in the file; refresh at a quiet moment with ``make bench-reference``.
Usage: ``python -m benchmarks reference [--requests N] [--repeats R] [--only NAME] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import redis

from helpers.backend.lab import PYTHON_PARSER, Lab, connect, hiredis_version
from helpers.instruments.reference import (
    CLIENTS,
    RESULTS_DIR,
    CostFigures,
    Workload,
    measure_costs,
    runnable,
)
from races import dictionary, locks, ratelimit

WORKLOADS: dict[str, Workload] = {
    w.name: w for w in (ratelimit.REFERENCE, locks.REFERENCE, dictionary.REFERENCE)
}


def module_of(workload: Workload) -> str:
    """Return the module that defines the workload's strategies, e.g. "races.ratelimit"."""
    (module,) = {fn.__module__ for fn in workload.strategies.values()}
    return module


def provenance(lab: Lab, argv: list[str], load_before: tuple[float, ...]) -> dict[str, Any]:
    """Return where and when the figures were measured (PROVENANCE_FIELDS and a bit more)."""
    return {
        "server": lab.server.label(),
        "server_version": lab.version,
        "redis_py": redis.__version__,
        "hiredis": hiredis_version() or "not installed",
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m benchmarks reference", *argv]),
        "load_average": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def run_workload(
    lab: Lab, workload: Workload, argv: list[str], requests: int, repeats: int
) -> dict[str, Any]:
    """Measure one workload with each parser available; return the reference file's content."""
    load_before = os.getloadavg()
    parsers: dict[str, Any] = {}
    choices = (
        {"hiredis": None, "python": PYTHON_PARSER}
        if hiredis_version()
        else {"python": PYTHON_PARSER}
    )
    for parser, parser_class in choices.items():
        lab.parser_class = parser_class
        parsers[parser] = measure_costs(lab, workload, CLIENTS, requests, repeats)
    lab.parser_class = None
    functions = runnable(workload, lab)
    return {
        "name": workload.name,
        "title": workload.title,
        "what": workload.what,
        "module": module_of(workload),
        "baseline": workload.baseline,
        "strategies": {label: fn.__name__ for label, fn in functions.items()},
        "clients": list(CLIENTS),
        "unit": "time per request / the baseline's (best requests/s of the repeats, threads)",
        "requests_per_run": requests,
        "repeats": repeats,
        "provenance": provenance(lab, argv, load_before),
        "parsers": parsers,
    }


def main(argv: list[str]) -> int:
    """Measure every workload (or --only one), write results/<name>.json, print the tables."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks reference",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=800, help="requests per run (default 800)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point (default 5)")
    parser.add_argument("--only", choices=sorted(WORKLOADS), help="one workload only")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory of the files")
    args = parser.parse_args(argv)
    if args.requests < 8 or args.repeats < 1:
        parser.error("need --requests >= 8 and --repeats >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    names = [args.only] if args.only else list(WORKLOADS)
    with connect("bench_reference", backend=None if os.environ.get("REDIS_URL") else "real") as lab:
        if lab.kind == "embedded" or not lab.caps.delex:
            print(f"needs a real Redis >= 8.4, got {lab.server.label()}", file=sys.stderr)
            return 1
        for name in names:
            data = run_workload(lab, WORKLOADS[name], argv, args.requests, args.repeats)
            path = args.out / f"{name}.json"
            path.write_text(json.dumps(data, indent=1) + "\n")
            for parser_name, figures in data["parsers"].items():
                print(
                    CostFigures(
                        name,
                        data["title"],
                        data["baseline"],
                        figures["ratios"],
                        "reference",
                        f"{lab.server.label()}, {parser_name} parser, "
                        f"load {data['provenance']['load_average'][0]}",
                    ).table()
                )
            print(f"wrote {path}\n", flush=True)
    return 0
