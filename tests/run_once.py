"""Run once what CI's two legs would run identically (`.ci/run`: the newcomer's leg, then make test).

CI first runs every test on a machine with no Redis binary (``RACELAB_REDIS_SERVER=none``), then
builds Redis and runs ``make test``. A test that passed in the first leg without consulting what
differs between the legs would run the same code again in the second. So the first leg, given
``--record-passed FILE``, writes the ids of the tests that passed and, from setup to teardown:

* never looked for a Redis binary (``helpers.backend.server.find_binary``, wherever imported),
  nor did any process it forked (a forked child runs this interpreter, with the same witnesses:
  it leaves a mark in a folder the recorder reads after each test);
* started no other process (``subprocess``, ``os.exec*``, ``os.posix_spawn``, ``os.system``,
  ``multiprocessing`` by spawn or forkserver): a new interpreter or program may look for one, or
  read the legs' other differences from its environment. The exceptions are ``FOREIGN``
  programs, which run none of this project's code (chromium printing a handout, pdfinfo);
* and live in a file that names no ``.redis`` path or CI variable (read without a lookup).

The second leg, given ``--skip-passed FILE`` (``RACELAB_SKIP_PASSED`` in scripts/run-tests.sh),
deselects exactly those and says how many. Without either option nothing changes.

Under pytest-xdist (``-n``) each worker records or deselects its own tests and hands its list or
count to the controller (``workeroutput``), which writes the one file or says the one count.
"""

from __future__ import annotations

import multiprocessing.process
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import cache, wraps
from pathlib import Path
from typing import Any

import pytest

from helpers.backend import server

# A test file whose text names one of these reads a difference between the legs directly.
LEG_WORDS = re.compile(
    r"\.redis\b|LOCAL_BIN|RACELAB_MATRIX|RACELAB_REQUIRE_REAL|RACELAB_REDIS_SERVER"
)


# Programs that run none of this project's code, so cannot look for a binary (by file name).
FOREIGN = frozenset({"chromium", "chromium-browser", "pdfinfo"})


@cache
def names_a_leg_difference(path: str) -> bool:
    """Return whether the test file at path names a difference between the legs (read once)."""
    return bool(LEG_WORDS.search(Path(path).read_text(encoding="utf-8")))


def add_options(parser: pytest.Parser) -> None:
    """Add --record-passed and --skip-passed."""
    group = parser.getgroup("run once", "CI's two legs (tests/run_once.py)")
    group.addoption("--record-passed", metavar="FILE", help="write the leg-independent passes")
    group.addoption("--skip-passed", metavar="FILE", help="deselect the tests FILE lists")


def is_worker(config: pytest.Config) -> bool:
    """Return whether this process is a pytest-xdist worker (its controller reports)."""
    return hasattr(config, "workerinput")


class Recorder:
    """Notes, per test, whether it looked for a binary or started a process; keeps clean passes."""

    def __init__(self, path: Path, config: pytest.Config) -> None:
        self.path = path
        self.config = config
        self.touched = self.call_passed = self.phase_failed = False
        self.passed: list[str] = []
        self.pid = os.getpid()
        self.marks = Path(tempfile.mkdtemp(prefix="run-once-"))  # forked children write here
        self._wrap_everywhere()

    def touch(self) -> None:
        """Note that the running test did what may differ between the legs."""
        if os.getpid() == self.pid:
            self.touched = True
        else:  # a forked child: tell the recorder, in the parent, through the folder
            (self.marks / str(os.getpid())).touch()

    def _witness(
        self, function: Callable[..., Any], when: Callable[..., bool] = lambda *a, **k: True
    ) -> Callable[..., Any]:
        @wraps(function)
        def witnessed(*args: Any, **kwargs: Any) -> Any:
            if when(*args, **kwargs):
                self.touch()
            return function(*args, **kwargs)

        return witnessed

    def _wrap_everywhere(self) -> None:
        """Wrap find_binary in every module holding it, and every way to start a process."""
        original = server.find_binary
        wrapped = self._witness(original)
        for module in list(sys.modules.values()):
            if getattr(module, "find_binary", None) is original:
                module.find_binary = wrapped  # type: ignore[attr-defined]
        subprocess.Popen._execute_child = self._witness(  # type: ignore[attr-defined]
            subprocess.Popen._execute_child,  # type: ignore[attr-defined]
            lambda popen, args, executable, *rest, **kw: not _foreign(args, executable),
        )
        for name in ("execv", "execve", "posix_spawn", "posix_spawnp", "system"):
            setattr(os, name, self._witness(getattr(os, name)))
        start = multiprocessing.process.BaseProcess.start
        multiprocessing.process.BaseProcess.start = self._witness(  # type: ignore[method-assign]
            start, lambda process: _start_method(process) != "fork"
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.touched = self.call_passed = self.phase_failed = False
        yield
        for mark in list(self.marks.iterdir()):  # a forked child looked, or started a process
            self.touched = True
            mark.unlink(missing_ok=True)
        clean = self.call_passed and not self.phase_failed and not self.touched
        if clean and not names_a_leg_difference(str(item.fspath)):
            self.passed.append(item.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.call_passed = report.passed
        elif not report.passed:
            self.phase_failed = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Controller: take a finished worker's passes (pytest-xdist)."""
        self.passed.extend(getattr(node, "workeroutput", {}).get("run_once_passed", []))

    def pytest_sessionfinish(self) -> None:
        shutil.rmtree(self.marks, ignore_errors=True)
        if is_worker(self.config):
            self.config.workeroutput["run_once_passed"] = self.passed  # type: ignore[attr-defined]
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = sorted(set(self.passed))
        self.path.write_text("".join(f"{nodeid}\n" for nodeid in lines), encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(
            f"run once: {len(self.passed)} passes recorded in {self.path} "
            "(no binary looked for, no process started): make test with "
            f"RACELAB_SKIP_PASSED={self.path} does not run them again"
        )


def _foreign(args: Any, executable: Any) -> bool:
    """Return whether Popen(args, executable=...) starts a FOREIGN program (a string of args may
    be a shell's command line: never foreign)."""
    if executable is None:
        if not isinstance(args, (list, tuple)) or not args:
            return False
        executable = args[0]
    return os.path.basename(os.fsdecode(executable)) in FOREIGN


def _start_method(process: multiprocessing.process.BaseProcess) -> str:
    """Return how process will start: fork, spawn or forkserver (the default is listed first)."""
    method: str | None = getattr(process, "_start_method", None)
    return (
        method
        or multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_all_start_methods()[0]
    )


class Skipper:
    """Deselects the tests a recorded file lists."""

    def __init__(self, path: Path, config: pytest.Config) -> None:
        self.path = path
        self.config = config
        self.ids = set(path.read_text(encoding="utf-8").splitlines())  # (ids may hold spaces)
        self.count = 0

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep = [item for item in items if item.nodeid not in self.ids]
        gone = [item for item in items if item.nodeid in self.ids]
        self.count = len(gone)
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = keep

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Controller: every worker collects and deselects the same tests; take one's count."""
        self.count = max(self.count, getattr(node, "workeroutput", {}).get("run_once_gone", 0))

    def pytest_sessionfinish(self) -> None:
        if is_worker(self.config):
            self.config.workeroutput["run_once_gone"] = self.count  # type: ignore[attr-defined]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(
            f"run once: {self.count} tests not run again: they passed in the leg without a Redis "
            f"binary without looking for one or starting a process ({self.path})"
        )


def configure(config: pytest.Config) -> None:
    """Register the recorder or the skipper when their option is given."""
    record, skip = config.getoption("--record-passed"), config.getoption("--skip-passed")
    if record and skip:
        raise pytest.UsageError("--record-passed and --skip-passed are two legs: give one")
    if record:
        config.pluginmanager.register(Recorder(Path(record), config), "run-once-recorder")
    elif skip:
        if not Path(skip).is_file():
            raise pytest.UsageError(f"--skip-passed {skip}: no such file (record it first)")
        config.pluginmanager.register(Skipper(Path(skip), config), "run-once-skipper")
