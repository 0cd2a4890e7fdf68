"""Worker processes for a search split into subtrees: the standard library's process pool, forked.

``explore(..., workers=N)`` (``helpers.instruments.explore``) splits its search at its first
branch points into prefixes, one subtree each, and ``map_in_workers`` runs them in N processes;
the explorer merges their outcomes in prefix order.

Why fork: a race's actors, setup and invariant are ordinary functions, often closures or
functions defined in a notebook cell, which cannot be pickled, so a freshly started process
(spawn) could not rebuild them. A forked process inherits them, with the search's open clients
and the embedded server they talk to: each worker replays on its own copy of that server, and
the processes share nothing. Only the prefixes go to the workers, and only the outcomes (the
actors' results and what each step touched) come back, pickled. So ``workers > 1`` needs the
``fork`` start method (not on Windows) and the embedded backend: on a real server the workers
would replay on one keyspace at once, each resetting the keys under the others. Both are refused
with ``WorkersUnavailable`` rather than run some other way.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from helpers.errors import RaceLabError
from helpers.instruments.actors import WATCHDOG
from helpers.instruments.progress import forget

Task = TypeVar("Task")
Result = TypeVar("Result")

_WORK: Callable[[Any], Any] | None = None  # the job, set just before the workers are forked


class WorkersUnavailable(RaceLabError, ValueError):
    """workers=N cannot run here: no fork start method, or not the embedded backend."""


def refuse_unless_possible(lab: Any, workers: int) -> None:
    """Raise WorkersUnavailable unless workers processes can each replay on their own server."""
    if workers == 1:
        return
    if "fork" not in multiprocessing.get_all_start_methods():
        raise WorkersUnavailable(
            f"workers={workers} forks the search's process, and this system cannot fork: "
            "use workers=1"
        )
    if getattr(lab, "kind", None) != "embedded":
        raise WorkersUnavailable(
            f"workers={workers} needs the embedded backend, where each forked worker replays on "
            f"its own copy of the server; on this {getattr(lab, 'kind', '?')} server the workers "
            "would reset and write the same keys at once: use workers=1"
        )


def _fresh() -> None:
    """Set up a forked worker: its parent alone draws progress; its own watchdog thread."""
    forget()
    WATCHDOG.forked()


def _run(task: Any) -> Any:
    assert _WORK is not None  # set by map_in_workers before the fork
    return _WORK(task)


def map_in_workers(
    work: Callable[[Task], Result],
    tasks: Sequence[Task],
    workers: int,
    each: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Return [work(task) for task in tasks], computed in up to workers forked processes.

    each, if given, is called here with each result in task order as it is ready (progress).
    The first error a task raises is raised here, once every running task has stopped; tasks
    not yet started are cancelled.
    """
    global _WORK
    _WORK = work
    pool = ProcessPoolExecutor(
        max_workers=max(1, min(workers, len(tasks))),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_fresh,
    )
    try:
        futures: list[Future[Result]] = [pool.submit(_run, task) for task in tasks]
        results = []
        for future in futures:
            results.append(future.result())
            if each is not None:
                each(results[-1])
        return results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORK = None
