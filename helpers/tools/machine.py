"""The doctor's report and the checks that need only Python's standard library.

``helpers.tools.doctor`` builds on this module. ``make doctor`` also runs it on its own, as a file
(``python3 helpers/tools/machine.py``), before ``make lab`` has made ``.venv``: then redis-py and
the suite cannot be imported yet, but the Python version, chromium and JupyterLab's port can
already be checked, so a learner sees everything that is wrong at once and not only "no .venv".
It must therefore import nothing outside the standard library, and run on an old Python too
(it is the one that says the Python is too old).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

MIN_PYTHON = (3, 11)
LAB_PORT = 8888  # JupyterLab's default port
SETUP_PAGE = "docs/setup.md"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
TITLE = "racelab doctor: can this machine run the workshop?"


class Status(Enum):
    """How one check came out, as printed at the start of its line."""

    OK = "✓"
    WARN = "⚠"
    FAIL = "✗"


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it came out, and the fix when it failed."""

    what: str
    status: Status
    detail: str
    fix: str = ""
    blocking: bool = True  # a FAIL here stops the core session

    def lines(self) -> list[str]:
        """Return the printed lines: the mark and the finding, then the fix (if any) indented."""
        optional = " (optional)" if not self.blocking and self.status is Status.FAIL else ""
        out = [f"{self.status.value} {self.what}{optional}: {self.detail}"]
        if self.fix and self.status is not Status.OK:
            out.append(f"    fix: {self.fix}")
        return out


def check_python() -> Check:
    """Return whether this Python is recent enough."""
    found = ".".join(map(str, sys.version_info[:3]))
    wanted = ".".join(map(str, MIN_PYTHON))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("Python", Status.OK, f"{found} (needs >= {wanted})")
    return Check(
        "Python",
        Status.FAIL,
        f"{found} is too old (needs >= {wanted})",
        f"install Python {wanted} or newer ({SETUP_PAGE} says how on each system), "
        f"then `make lab PYTHON=python{wanted}`",
    )


def check_chromium() -> Check:
    """Return whether a chromium for the PDF handouts is there ($RACELAB_CHROMIUM, then PATH)."""
    named = os.environ.get("RACELAB_CHROMIUM")  # as scripts/handouts.py and tests/browser look
    found = named or shutil.which("chromium") or shutil.which("chromium-browser")
    if found and Path(found).exists():
        return Check("chromium", Status.OK, f"{found} (PDF handouts, make test-browser)")
    return Check(
        "chromium",
        Status.FAIL,
        f"{'RACELAB_CHROMIUM=' + named + ' does not exist' if named else 'not on PATH'}: "
        "`make handouts` cannot print the PDFs (`scripts/handouts.py --html-only` skips them), "
        "and the browser test skips",
        f"`apt-get install chromium`, or set RACELAB_CHROMIUM to a chromium binary (other systems: "
        f"{SETUP_PAGE}); not needed for the notebooks",
        blocking=False,
    )


def lab_port_is_free(port: int = LAB_PORT) -> bool:
    """Return True if nothing holds the loopback TCP port (JupyterLab's, by default)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_lab_port(port: int = LAB_PORT) -> Check:
    """Return whether JupyterLab's port is free (a warning when not: it takes the next one)."""
    if lab_port_is_free(port):
        return Check("ports", Status.OK, f"{port} (JupyterLab) is free")
    return Check(
        "ports",
        Status.WARN,
        f"{port} (JupyterLab) is in use, maybe by another JupyterLab: "
        "it will take the next free port and print it",
        f'`make lab LAB_ARGS="--port {port + 11}"` picks one yourself',
        blocking=False,
    )


def check_no_venv(venv: Path = PROJECT_ROOT / ".venv") -> Check:
    """Return the ✗ of a machine on which `make lab` has not made .venv yet."""
    return Check(
        "venv",
        Status.FAIL,
        f"no {venv.name} yet, so the packages, the Jupyter kernel, the embedded backend, a "
        "redis-server and REDIS_URL cannot be checked",
        "`make lab` creates it with the pinned packages; then run `make doctor` again",
    )


def blocked(checks: list[Check]) -> list[Check]:
    """Return the failed checks that block the core session."""
    return [c for c in checks if c.status is Status.FAIL and c.blocking]


def report(checks: list[Check]) -> str:
    """Return the printed report: every check's lines, then the verdict."""
    lines = [line for check in checks for line in check.lines()]
    stops = blocked(checks)
    others = [c for c in checks if c.status is not Status.OK and c not in stops]
    if stops:
        verdict = f"NOT READY: {len(stops)} problem(s) above block the workshop; fix each ✗"
    else:
        verdict = "ready for the core session (00-03)"
    if others:
        verdict += f"; {len(others)} note(s) for the optional parts"
    return "\n".join([TITLE, *lines, verdict])


def before_venv() -> list[Check]:
    """Return what can be checked before .venv exists: Python, the venv's ✗, chromium, the port."""
    return [check_python(), check_no_venv(), check_chromium(), check_lab_port()]


def main() -> int:
    """Print the report of a machine without .venv; return 1 (the missing .venv blocks)."""
    checks = before_venv()
    print(report(checks))
    return 1 if blocked(checks) else 0


if __name__ == "__main__":
    sys.exit(main())
