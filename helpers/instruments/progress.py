"""Live progress for long instrument runs: a bar in JupyterLab, a one-line summary in plain Python.

``with progress("threaded load", total=800, unit="calls") as bar:`` wraps a run that can take
seconds (threaded loads, explorations, RTT sweeps, relative-cost runs, server starts); the run
calls ``bar.update(done)`` (or ``bar.advance()``, or the module's ``tick()`` from code that has
no handle) from the thread that opened it.

In an IPython kernel the context first displays an empty placeholder output, turns it into an
ipywidgets bar (CSS class ``racelab-progress``) once the run has lasted ``SHOW_AFTER_S``, and
empties it again when the run ends, however it ends. So the stored output is the same empty
display on every run, fast or slow, which nbval does not compare (it has no data), and no widget
view is left behind. In plain Python (scripts, benchmarks, tests), a run that lasted at least
``SUMMARY_AFTER_S`` prints one line to stderr: what ran, how much of it, and how long it took.
A progress opened inside another one, or off the main thread, is silent: only the outermost
run of the main thread is shown.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# a run shorter than this never shows a bar (RACELAB_PROGRESS_AFTER_S: tests/browser sets 0)
SHOW_AFTER_S = float(os.environ.get("RACELAB_PROGRESS_AFTER_S", "0.5"))
REFRESH_S = 0.2  # the bar is redrawn at most this often
SUMMARY_AFTER_S = 2.0  # plain Python: runs at least this long print their summary line
CSS_CLASS = "racelab-progress"

_active = threading.local()


def _kernel() -> bool:
    """Return True inside an IPython kernel (JupyterLab, nbclient, nbval), not a terminal."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "ZMQ" in type(shell).__name__


class Progress:
    """One run's progress: how much of ``total`` (None: unknown) is done, and its display."""

    def __init__(self, label: str, total: int | None, unit: str, outermost: bool) -> None:
        self.label, self.total, self.unit, self.outermost = label, total, unit, outermost
        self.done = 0
        self.started = time.monotonic()
        self._drawn = 0.0
        self._handle: Any = None  # the kernel display (placeholder, then bar), if any
        self._bar: Any = None
        self._text: Any = None
        self._widgets: tuple[Any, ...] = ()
        if outermost and _kernel():
            from IPython.display import display

            self._handle = display({}, raw=True, display_id=True)

    def summary(self) -> str:
        """Return the one-line summary: label, how much was done, and how long it took."""
        of = f"/{self.total}" if self.total is not None else ""
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.label}: {self.done}{of}{unit} in {time.monotonic() - self.started:.1f} s"

    def update(self, done: int | None = None) -> None:
        """Record done (None: unchanged) and redraw the bar if it is time to."""
        if done is not None:
            self.done = done
        now = time.monotonic()
        if (
            self._handle is None
            or now - self.started < SHOW_AFTER_S
            or now - self._drawn < REFRESH_S
        ):
            return
        self._drawn = now
        if self._bar is None:
            self._show()
        if self.total:
            self._bar.max = self.total
            self._bar.value = min(self.done, self.total)
        self._text.value = self.summary()

    def advance(self, n: int = 1) -> None:
        """Count n more units done."""
        self.update(self.done + n)

    def join(
        self, threads: list[threading.Thread], deadline: float, done: Callable[[], int]
    ) -> list[threading.Thread]:
        """Join threads until deadline, updating with done() meanwhile; return those still alive."""
        self.update(done())
        for t in threads:
            while t.is_alive() and (remaining := deadline - time.monotonic()) > 0:
                t.join(min(REFRESH_S, remaining))
                self.update(done())
        self.update(done())
        return [t for t in threads if t.is_alive()]

    def _show(self) -> None:
        import ipywidgets as w  # type: ignore[import-untyped]

        self._bar = w.IntProgress(
            value=0,
            min=0,
            max=self.total or 1,
            bar_style="" if self.total else "info",
            layout=w.Layout(width="16em"),
        )
        self._text = w.Label(value=self.summary())
        box = w.HBox([self._bar, self._text], _dom_classes=(CSS_CLASS,))  # in the first state
        self._handle.update(box)
        self._widgets = (box, self._bar, self._text)

    def close(self) -> None:
        """End the display: the placeholder is emptied (and any bar closed); plain Python prints."""
        if self._handle is not None:
            self._handle.update({}, raw=True)
            for widget in self._widgets:
                widget.close()
        elif (
            self.outermost and not _kernel() and time.monotonic() - self.started >= SUMMARY_AFTER_S
        ):
            print(self.summary(), file=sys.stderr)


@contextmanager
def progress(label: str, total: int | None = None, unit: str = "") -> Iterator[Progress]:
    """Yield a Progress for a run that can take seconds (see the module docstring)."""
    stack: list[Progress] = _active.__dict__.setdefault("stack", [])
    outermost = not stack and threading.current_thread() is threading.main_thread()
    bar = Progress(label, total, unit, outermost)
    stack.append(bar)
    try:
        yield bar
    finally:
        stack.pop()
        bar.close()


def tick(done: int | None = None, total: int | None = None) -> None:
    """Update the innermost progress of this thread, and its total if given (nothing if none)."""
    stack: list[Progress] = _active.__dict__.get("stack", [])
    if stack:
        if total is not None:
            stack[-1].total = total
        stack[-1].update(done)


def forget() -> None:
    """Drop this thread's bars: a forked worker's are its parent's, which alone draws them."""
    _active.__dict__.pop("stack", None)
