"""The real-browser tests run only when asked for by path (`make test-browser`, scripts/run-tests.sh).

`pytest tests` collects them but skips them with a reason: they start JupyterLab and run every
notebook through the UI, minutes of work that `pytest tests -x` should not start by surprise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _asked_for(config: pytest.Config) -> bool:
    """Return True when a command-line argument names this folder or a file in it."""
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this folder's tests unless the run names it (pytest tests/browser)."""
    if _asked_for(config):
        return
    skip = pytest.mark.skip(
        reason="real-browser tests: run `make test-browser` (pytest tests/browser)"
    )
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(skip)
