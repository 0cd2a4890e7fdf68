"""CI's two legs run once what they would run identically (tests/run_once.py).

Each test runs pytest on a small generated test file, in a child process, as .ci/run's legs do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CONFTEST = """
from run_once import add_options, configure

def pytest_addoption(parser):
    add_options(parser)

def pytest_configure(config):
    configure(config)
"""

TESTS = """
import multiprocessing, os, subprocess, sys
from pathlib import Path
import pytest
from helpers.backend.server import ServerNotFound, find_binary

def test_plain():
    assert 1 + 1 == 2

@pytest.mark.parametrize("n", [2], ids=["an id with spaces"])
def test_named(n):
    assert n == 2

def look():
    try:
        find_binary()
    except ServerNotFound:
        pass

def test_looks_for_a_binary():
    look()

def test_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def run(method, target):
    child = multiprocessing.get_context(method).Process(target=target)
    child.start()
    child.join()
    assert child.exitcode == 0

def test_forks_a_child_that_looks_for_nothing():
    run("fork", int)

def test_forks_a_child_that_looks_for_a_binary():
    run("fork", look)

def test_forks_a_child_that_starts_a_process():
    run("fork", test_starts_a_process)

def test_spawns_a_child():
    run("spawn", int)

def test_runs_a_shell_command():
    assert os.system("true") == 0

def test_runs_a_foreign_program():
    subprocess.run([str(Path(__file__).parent / "pdfinfo")], check=True)

def test_fails():
    assert False

def test_skips():
    pytest.skip("not here")
"""

# the generated tests that run the same in both legs: their children look for nothing
CLEAN = [
    "test_generated.py::test_forks_a_child_that_looks_for_nothing",
    "test_generated.py::test_named[an id with spaces]",
    "test_generated.py::test_plain",
    "test_generated.py::test_runs_a_foreign_program",
]


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run pytest on folder's tests with args; return the finished process."""
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:nbval", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )


def make_tests(tmp_path: Path) -> Path:
    """Write the generated conftest and test files; return their folder."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_generated.py").write_text(TESTS)
    foreign = tmp_path / "pdfinfo"  # named as a program that runs none of the project's code
    foreign.write_text("#!/bin/sh\nexit 0\n")
    foreign.chmod(0o755)
    # A file that names a difference between the legs: its passes are run again, always.
    (tmp_path / "test_legs.py").write_text(
        'LOOKS = "RACELAB_REDIS_SERVER"\n\ndef test_a():\n    pass\n'
    )
    return tmp_path


def test_the_first_leg_records_clean_passes_and_the_second_runs_everything_else(
    tmp_path: Path,
) -> None:
    folder = make_tests(tmp_path)
    record = tmp_path / "passed.txt"
    first = pytest_in(folder, "--record-passed", str(record))
    assert first.returncode == 1, first.stdout  # test_fails
    assert record.read_text().splitlines() == CLEAN
    assert "run once: 4 passes recorded" in first.stdout
    second = pytest_in(folder, "--skip-passed", str(record), "-rA")
    assert "4 deselected" in second.stdout
    summary = second.stdout.split("short test summary")[1]
    for again in ("looks_for_a_binary", "starts_a_process", "spawns_a_child", "runs_a_shell"):
        assert f"PASSED test_generated.py::test_{again}" in summary
    for child in ("looks_for_a_binary", "starts_a_process"):  # what a forked child did counts
        assert f"PASSED test_generated.py::test_forks_a_child_that_{child}" in summary
    assert "PASSED test_legs.py::test_a" in summary
    assert not any(nodeid in summary for nodeid in CLEAN)


def test_under_xdist_the_workers_lists_are_merged_into_one_record_and_one_count(
    tmp_path: Path,
) -> None:
    folder = make_tests(tmp_path)
    # More clean passes, in a second file, so that two workers each record some (loadfile).
    (folder / "test_more.py").write_text("def test_b():\n    pass\n\ndef test_c():\n    pass\n")
    record = tmp_path / "passed.txt"
    xdist = ("-n", "2", "--dist", "loadfile")
    first = pytest_in(folder, *xdist, "--record-passed", str(record))
    assert first.returncode == 1, first.stdout  # test_fails
    assert record.read_text().splitlines() == [
        *CLEAN,
        "test_more.py::test_b",
        "test_more.py::test_c",
    ]
    assert "run once: 6 passes recorded" in first.stdout
    second = pytest_in(folder, *xdist, "--skip-passed", str(record), "-rA")
    assert "run once: 6 tests not run again" in second.stdout, second.stdout
    summary = second.stdout.split("short test summary")[1]
    assert "PASSED test_legs.py::test_a" in summary
    assert "test_more.py::test_b" not in summary and "test_plain" not in summary


def test_a_missing_record_is_a_usage_error_not_a_full_run(tmp_path: Path) -> None:
    folder = make_tests(tmp_path)
    done = pytest_in(folder, "--skip-passed", str(tmp_path / "missing.txt"))
    assert done.returncode == 4 and "no such file (record it first)" in done.stderr
