"""Run the suite's benchmarks: `python -m benchmarks [--list] [NAME [ARGS...]]` (`make bench`).

Without a name, every module of the package runs in name order, each with no arguments; one
failing does not stop the others, and the exit status says whether all passed. With a name, that
module runs with the remaining arguments (e.g. `python -m benchmarks harness_overhead --rounds 5`).
A benchmark is any module here whose name does not start with "_" and that defines
``main(argv: list[str]) -> int``. Figures are noisy on a shared machine: read them as ratios.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path


def benchmark_names() -> list[str]:
    """Return the names of the benchmark modules in this package, sorted."""
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))


def run_one(name: str, argv: list[str]) -> int:
    """Import benchmarks.<name> and return the exit status of its main(argv)."""
    module = importlib.import_module(f"benchmarks.{name}")
    print(
        f"== benchmarks.{name}: {(module.__doc__ or '').strip().splitlines()[0] if module.__doc__ else ''}",
        flush=True,
    )
    started = time.perf_counter()
    status = module.main(argv)
    print(
        f"== benchmarks.{name}: {'ok' if status == 0 else f'exit {status}'} "
        f"({time.perf_counter() - started:.1f} s)\n",
        flush=True,
    )
    return status


def main(argv: list[str]) -> int:
    """Run the named benchmark (or all of them); return 0 if every one succeeded."""
    names = benchmark_names()
    if argv[:1] == ["--list"]:
        print("\n".join(names))
        return 0
    if argv:
        if argv[0] not in names:
            print(f"unknown benchmark {argv[0]!r}; available: {', '.join(names)}", file=sys.stderr)
            return 2
        return run_one(argv[0], argv[1:])
    failed = []
    for name in names:
        try:
            status = run_one(name, [])
        except Exception:  # noqa: BLE001 - report it and run the other benchmarks
            traceback.print_exc()
            status = 1
        if status != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
