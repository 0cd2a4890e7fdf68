"""benchmarks/explorer.py: each cell runs in its own interpreter and the file says where it ran."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from benchmarks import explorer
from helpers.tools.room import process_start


def test_one_cell_on_embedded_gives_every_way_and_its_provenance(tmp_path: Path) -> None:
    out = tmp_path / "explorer.json"
    assert (
        explorer.main(
            ["--only", "2x4 one key", "--backends", "embedded", "--out", str(out), "--floor"]
            + ["--workers", "2"]
        )
        == 0
    )
    data = json.loads(out.read_text())
    rows = {row["way"]: row for row in data["rows"]}
    assert rows["exhaustive"]["schedules"] == 70 == rows["exhaustive"]["interleavings"]
    assert rows["reduce"]["runs"] == rows["reduce"]["classes"] == 34
    assert rows["reduce"]["schedules"] == 70  # the classes answer for every schedule
    assert rows["preemptions=2"]["schedules"] == 26 and rows["preemptions=2"]["complete"] is False
    # Sharing prefixes answers some steps from a record; the live ways run every step live.
    assert rows["exhaustive"]["shared_steps"] > 0 and rows["reduce"]["shared_steps"] > 0
    for way in ("exhaustive", "reduce"):
        live = rows[f"{way}, live"]
        assert live["shared_steps"] == 0 and live["schedules"] == rows[way]["schedules"]
        assert live["live_steps"] == 0  # counted only where prefixes were shared
    assert {"date", "commit", "load_average", "cpu_count"} <= set(data["provenance"])
    assert {"redis_py", "fakeredis", "server"} <= set(data["provenance"])
    # Two processes run the same schedules; their CPU time counts (the workers' too).
    split = rows["exhaustive, 2 workers"]
    assert split["schedules"] == split["runs"] == 70 and split["cpu_seconds"] > 0
    split = rows["reduce, 2 workers"]
    assert split["schedules"] == 70 and split["runs"] == split["classes"] == 34
    for row in rows.values():  # each figure has its CPU time and the load around it
        assert row["cpu_seconds"] > 0 and len(row["load"]) == 2
    assert rows["reduce"]["count_cpu_seconds"] >= 0  # the count of the schedules, timed apart
    # The floor: the same 70 x 9 round trips on a plain client, no explorer.
    assert rows["floor"]["runs"] == 70 and rows["floor"]["us_per_round_trip"] > 0
    # --append keeps the other rows and replaces a row measured again.
    argv = ["--only", "2x4 one key", "--backends", "embedded", "--out", str(out), "--append"]
    argv += ["--workers", "2"]
    assert explorer.main(argv) == 0
    again = json.loads(out.read_text())
    assert len(again["runs"]) == 2 and {r["way"] for r in again["rows"]} == set(rows)
    assert len(again["rows"]) == len(data["rows"])


def test_a_cell_over_the_limit_is_skipped_with_its_reason(tmp_path: Path) -> None:
    out = tmp_path / "explorer.json"
    argv = ["--only", "3x4 one key", "--backends", "embedded", "--out", str(out), "--timeout", "1"]
    assert explorer.main(argv) == 0
    rows = {row["way"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["exhaustive"]["skipped"] == "34,650 schedules, over the 20,000 limit"
    assert rows["reduce"]["skipped"] == "over the 1 s cap"


def test_the_limit_and_the_before_ways_are_options(tmp_path: Path) -> None:
    """--max-schedules reaches explore() (and the skip), --before-way the "before" trees."""
    out = tmp_path / "explorer.json"
    argv = ["--only", "2x4 one key", "--backends", "embedded", "--out", str(out)]
    argv += ["--max-schedules", "40", "--before", str(explorer.TREE), "--workers", "1"]
    argv += ["--before-way", "reduce", "--before-way", "reduce, live"]
    assert explorer.main(argv) == 0
    data = json.loads(out.read_text())
    rows = {(row["code"], row["way"]): row for row in data["rows"]}
    assert data["max_schedules"] == 40
    assert rows[("after", "exhaustive")]["skipped"] == "70 schedules, over the 40 limit"
    assert rows[("after", "reduce")]["max_schedules"] == 40  # (34 classes fit)
    assert {way for code, way in rows if code == "before"} == {"reduce", "reduce, live"}
    assert (
        rows[("before", "reduce")]["walked"] > 0 and rows[("before", "reduce, live")]["walked"] == 0
    )


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_command_over_its_cap_leaves_no_process_behind(tmp_path: Path) -> None:
    """The cap kills the command's children too (a cell's pool workers), not only the command."""
    ready = tmp_path / "ready"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(ready)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    done = explorer.run_capped([sys.executable, "-c", script], dict(os.environ), tmp_path, 5)
    assert done is None  # over the cap (5 s: time for two interpreters to start on a busy machine)
    child = int(ready.read_text())  # the command had started its child before the cap
    try:
        assert _gone(child), f"the command's child {child} outlived the cap"
    finally:
        if not _gone(child, 0):
            os.kill(child, signal.SIGKILL)  # this test's own orphan, by its pid


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    """Whether pid ends within wait_s (a zombie counts as ended: SIGKILL is delivered apart)."""
    deadline = time.monotonic() + wait_s
    while process_start(pid) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
