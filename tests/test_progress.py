"""Progress on long runs: a bar only while it runs in a kernel, the same empty output however long
it ran, a one-line summary in plain Python, and silence when nested or off the main thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from helpers.backend.lab import Lab
from helpers.instruments import progress as progress_module
from helpers.instruments.load import run_clients
from helpers.instruments.progress import CSS_CLASS, progress, tick

ROOT = Path(__file__).resolve().parents[1]


class FakeHandle:
    """Records what a kernel display shows, in order."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def update(self, obj: Any, raw: bool = False) -> None:
        self.log.append(obj)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Pretend to run in a kernel: return the list of what the display shows."""
    import IPython.display

    log: list[Any] = []

    def display(obj: Any, raw: bool = False, display_id: bool = False) -> FakeHandle:
        log.append(obj)
        return FakeHandle(log)

    monkeypatch.setattr(progress_module, "_kernel", lambda: True)
    monkeypatch.setattr(IPython.display, "display", display)
    return log


def test_a_slow_run_shows_a_bar_then_ends_empty(
    kernel: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(progress_module, "REFRESH_S", 0.0)
    with progress("threaded load", total=4, unit="calls") as bar:
        bar.update(3)
        box = kernel[-1]
        assert CSS_CLASS in box._dom_classes
        progress_bar, text = box.children
        assert (progress_bar.value, progress_bar.max) == (3, 4)
        assert text.value.startswith("threaded load: 3/4 calls in ")
    assert kernel[0] == {} and kernel[-1] == {}  # a placeholder, the bar, then empty again
    assert box.comm is None  # the widgets are closed: no view is left to store


def test_a_fast_run_leaves_the_same_empty_output(kernel: list[Any]) -> None:
    with progress("threaded load", total=4) as bar:
        bar.update(4)
    assert kernel == [{}, {}]  # never drawn, and the stored output is the same as a slow run's


def test_the_output_is_emptied_when_the_run_raises(
    kernel: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "SHOW_AFTER_S", 0.0)
    with pytest.raises(KeyboardInterrupt), progress("exploring schedules") as bar:
        bar.update(2)
        raise KeyboardInterrupt
    assert kernel[-1] == {}


def test_nested_and_other_threads_runs_are_silent(kernel: list[Any]) -> None:
    with progress("relative cost", total=2):
        with progress("threaded load", total=8):
            tick(3)
    assert kernel == [{}, {}]  # only the outer run's placeholder
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(_silent_run()))
    thread.start()
    thread.join()
    assert seen == [2] and kernel == [{}, {}]


def _silent_run() -> int:
    with progress("off the main thread", total=2) as bar:
        bar.advance(2)
    return bar.done


def test_plain_python_prints_one_summary_line_for_a_long_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with progress("short", total=1) as bar:
        bar.advance()
    assert capsys.readouterr().err == ""  # under SUMMARY_AFTER_S: nothing
    monkeypatch.setattr(progress_module, "SUMMARY_AFTER_S", 0.0)
    with progress("RTT sweep", total=6, unit="calls") as bar:
        bar.advance(6)
    err = capsys.readouterr().err
    assert err.startswith("RTT sweep: 6/6 calls in ") and err.count("\n") == 1


def test_join_follows_the_threads_and_stops_at_the_deadline() -> None:
    done = threading.Event()
    fast = threading.Thread(target=lambda: None)
    slow = threading.Thread(target=lambda: done.wait(5))
    fast.start()
    slow.start()
    with progress("threads", total=2) as bar:
        alive = bar.join([fast, slow], time.monotonic() + 0.3, lambda: 1)
    assert alive == [slow] and bar.done == 1
    done.set()
    slow.join()


def test_a_threaded_load_counts_its_calls(
    lab: Lab, kernel: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(progress_module, "REFRESH_S", 0.0)
    key = lab.key("progress")
    result = run_clients(lab, lambda c: c.incr(key), clients=2, iterations=50)
    assert result.calls == 100
    bars = [o for o in kernel if o != {}]
    assert bars, "the load never drew its bar"
    assert bars[-1].children[1].value.startswith("threaded load, 2 clients: 100/100 calls in ")
    assert kernel[-1] == {}


def test_a_real_kernel_stores_one_empty_output_fast_or_slow() -> None:
    """nbclient applies the display updates: what is stored has no data, so nbval compares nothing."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import time\nfrom helpers.instruments.progress import progress"),
        nbformat.v4.new_code_cell(
            'with progress("slow", total=5) as bar:\n'
            "    for i in range(5):\n"
            "        time.sleep(0.25)\n"
            "        bar.update(i + 1)\n"
            'print("done")'
        ),
        nbformat.v4.new_code_cell('with progress("fast", total=1) as bar:\n    bar.update(1)'),
    ]
    NotebookClient(nb, timeout=60, resources={"metadata": {"path": str(ROOT)}}).execute()
    empty = {"output_type": "display_data", "data": {}, "metadata": {}}
    assert nb.cells[1].outputs[0] == empty
    assert nb.cells[1].outputs[1]["text"] == "done\n"
    assert nb.cells[2].outputs == [empty]
