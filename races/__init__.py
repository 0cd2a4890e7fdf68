"""The subject of the lessons: each race strategy as an application writes it.

One module per race (``ratelimit``, ``locks``, ``dictionary``). Each strategy is an ordinary
function of a redis-py client, with nothing in its body that serves the lab: the notebooks show
these functions in full, forced schedules interleave them, the explorer enumerates their
schedules, threads hammer them and the benchmarks time them, always the same function object.
Timing (think time, network delay, gated steps) belongs to the client a strategy is given.

``races`` depends only on redis and the Lua loader: it never imports ``helpers``.
"""

from __future__ import annotations

from typing import Protocol

from racelab_errors import RaceLabError


class GaveUp(RaceLabError, RuntimeError):
    """An optimistic strategy gave up after its maximum number of attempts (the key kept changing)."""

    def __init__(self, attempts: int, what: str = "the key kept changing under us") -> None:
        super().__init__(f"gave up after {attempts} attempts: {what}")
        self.attempts = attempts


class Namespace(Protocol):
    """The key names of one run (a lab's ``lab.ns``): what races/ needs to name its keys."""

    def key(self, name: str) -> str:
        """Return the full key for a short name."""
        ...

    def tagged(self, tag: str, name: str) -> str:
        """Return the full key for a short name, in the cluster slot of hash tag {tag}."""
        ...
