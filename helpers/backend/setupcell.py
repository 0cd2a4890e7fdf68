"""A notebook whose setup cell failed says so once, not as a cascade of NameErrors for ``lab``.

The setup cell is the first ``connect()`` of a kernel. When it raises inside IPython,
``setup_failed(error)`` puts one input transformer in place: every later cell that does not call
``connect(`` itself is replaced, before it runs, by one line that raises ``SetupFailed``, which
IPython shows as one sentence (``_render_traceback_``), not a traceback. The cell counts as failed,
so Run All stops there too. Running the setup cell again is let through; once a ``connect()``
succeeds, ``setup_done()`` takes the transformer away. Outside IPython nothing changes.
"""

from __future__ import annotations

import sys
from typing import Any

from helpers.errors import RaceLabError

# What a stopped cell runs instead of its own code: it names nothing in the learner's namespace.
STOPPED_CELL = "raise __import__('helpers.backend.setupcell', fromlist=['_']).stopped()\n"


class SetupFailed(RaceLabError, RuntimeError):
    """A cell did not run because the notebook's setup cell (its connect()) failed."""

    def _render_traceback_(self) -> list[str]:
        """Return the one line IPython shows instead of a traceback."""
        return [f"{type(self).__name__}: {self}"]


class _State:
    connected = False  # a connect() succeeded in this process: a later failure is no setup's
    failure = ""  # the setup cell's error class, while it stands


STATE = _State()


def _shell() -> Any:
    """Return the running IPython shell, or None (plain Python, pytest)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def stop_later_cells(lines: list[str]) -> list[str]:
    """Return a cell's lines, or the one line that stops it while the setup failure stands."""
    if not STATE.failure or "connect(" in "".join(lines):
        return lines
    return [STOPPED_CELL]


def stopped() -> SetupFailed:
    """Return the one-sentence error a stopped cell raises."""
    return SetupFailed(
        f"not run: this notebook's setup cell failed ({STATE.failure}, shown there), so `lab` "
        "and the other setup names do not exist; fix that, run the setup cell again, then this one"
    )


def setup_failed(error: BaseException) -> None:
    """Stop every later cell with one sentence if error ended a kernel's first connect() in IPython."""
    shell = _shell()
    if shell is None or STATE.connected:
        return
    STATE.failure = type(error).__name__
    if stop_later_cells not in shell.input_transformers_post:
        shell.input_transformers_post.append(stop_later_cells)


def setup_done() -> None:
    """Note a connect() that succeeded, and let every later cell run again."""
    STATE.connected, STATE.failure = True, ""
    shell = _shell()
    if shell is not None and stop_later_cells in shell.input_transformers_post:
        shell.input_transformers_post.remove(stop_later_cells)
