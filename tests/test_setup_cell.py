"""A notebook whose setup cell fails says so once, not as a cascade of NameErrors (issue 37 item 4).

An IPython shell in this process plays the kernel: its first cell connects to a dead URL, and every
later cell stops with one sentence until the setup cell runs again and succeeds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from helpers.backend import setupcell
from helpers.backend.lab import ServerUnavailable
from helpers.backend.server import free_port
from helpers.backend.setupcell import SetupFailed


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """Yield a fresh IPython shell in which no connect() has succeeded yet."""
    monkeypatch.setattr(setupcell.STATE, "connected", False)
    monkeypatch.setattr(setupcell.STATE, "failure", "")
    the_shell = InteractiveShell.instance()
    try:
        yield the_shell
    finally:
        if setupcell.stop_later_cells in the_shell.input_transformers_post:
            the_shell.input_transformers_post.remove(setupcell.stop_later_cells)
        InteractiveShell.clear_instance()


def run(
    shell: InteractiveShell, code: str, capsys: pytest.CaptureFixture[str]
) -> tuple[object, str]:
    """Run one cell; return the exception it ended with (None) and what it printed."""
    result = shell.run_cell(code)
    return result.error_in_exec, capsys.readouterr().out.strip()


def test_a_failed_setup_cell_stops_each_later_cell_with_one_sentence(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    setup = f'from helpers import connect\nlab = connect("setup_cell", url="{dead}")\nx = 1'
    error, printed = run(shell, setup, capsys)
    assert isinstance(error, ServerUnavailable)
    assert printed.splitlines() == [f"ServerUnavailable: {error}"]  # one line, no traceback
    for later in ('print(lab.key("n"))', "y = x + 1", "check(lab, '00.aabb', 12)"):
        error, printed = run(shell, later, capsys)
        assert isinstance(error, SetupFailed), later
        assert printed == (
            "SetupFailed: not run: this notebook's setup cell failed (ServerUnavailable, shown "
            "there), so `lab` and the other setup names do not exist; fix that, run the setup "
            "cell again, then this one"
        )
    assert "y" not in shell.user_ns and "SetupFailed" not in shell.user_ns


def test_running_the_setup_cell_again_lets_every_cell_run(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    run(shell, f'from helpers import connect\nlab = connect("setup_cell", url="{dead}")', capsys)
    again = 'lab = connect("setup_cell", backend="embedded")'
    assert run(shell, again, capsys) == (None, "")
    assert run(shell, "print(lab.ns.notebook); lab.close()", capsys) == (None, "setup_cell")
    assert setupcell.stop_later_cells not in shell.input_transformers_post


def test_a_failure_after_a_successful_connect_stops_nothing(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(
        shell,
        'from helpers import connect\nlab = connect("setup_cell", backend="embedded")',
        capsys,
    )
    dead = f"redis://127.0.0.1:{free_port()}/0"
    error, _ = run(shell, f'other = connect("setup_cell", url="{dead}")', capsys)
    assert isinstance(error, ServerUnavailable)  # a demo's own server, not the setup cell's
    assert run(shell, "print(lab.ns.notebook); lab.close()", capsys) == (None, "setup_cell")


def test_outside_ipython_nothing_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(setupcell.STATE, "connected", False)
    monkeypatch.setattr(setupcell.STATE, "failure", "")
    InteractiveShell.clear_instance()
    setupcell.setup_failed(ServerUnavailable("x"))
    assert setupcell.STATE.failure == ""
