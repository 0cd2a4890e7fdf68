"""benchmarks/explorer_work.py: bytecodes per step, the same on every run, split by part."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks import explorer_work


def test_the_count_is_the_same_on_every_run_and_its_parts_add_up(tmp_path: Path) -> None:
    out = tmp_path / "work.json"
    argv = ["--cell", "2x4 one key", "--before", str(explorer_work.TREE), "--out", str(out)]
    assert explorer_work.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2  # this tree, then the same tree as a "before", each in a process
    first, second = rows
    assert first["runs"] == 70 and first["steps"] == 70 * 8  # every schedule of 2x4, all steps
    assert first["bytecodes"] == second["bytecodes"] > 0  # deterministic: one count per tree
    parts = first["per_step_by_part"]
    assert set(parts) == set(explorer_work.PARTS)
    assert abs(sum(parts.values()) - first["per_step"]) < 1  # (each part rounded to 0.1)
    assert parts["explorer"] > 0 and parts["redis-py"] > 0 and parts["fakeredis"] > 0
    functions = first["explorer_functions_per_step"]
    assert functions and all(re.fullmatch(r"\S+\.py:\d+ \S+", f) for f in functions)


def test_code_is_told_apart_by_where_it_lives() -> None:
    helpers = "/tree/helpers/"
    site = "/venv/lib/python3.11/site-packages"
    assert explorer_work.part_of("/tree/helpers/instruments/actors.py", helpers) == "explorer"
    assert explorer_work.part_of(f"{site}/redis/client.py", helpers) == "redis-py"
    assert explorer_work.part_of(f"{site}/fakeredis/_server.py", helpers) == "fakeredis"
    assert explorer_work.part_of(f"{site}/greenlet/__init__.py", helpers) == "other"
    assert explorer_work.part_of("<frozen importlib._bootstrap>", helpers) == "stdlib"
    assert explorer_work.part_of("/tree/benchmarks/explorer.py", helpers) == "other"
