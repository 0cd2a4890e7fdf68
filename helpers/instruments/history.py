"""Jepsen-style histories: operations, the intervals in which a client holds a lock, and their overlaps.

An operation is an ``Op``: who ran it, what (a label), when it was invoked and when it
completed, what it returned, and its status, as in Jepsen/Knossos histories: ``"ok"`` (it
completed), ``"fail"`` (it certainly did not take effect: Redis answered with an error) or
``"info"`` (the outcome is unknown: the connection broke or timed out after the command may have
reached the server). A bar from invocation to completion is all a client can know: the command
took effect at some instant inside it. A *span* is an interval during which a client believes it
holds a lock (from the end of its successful acquire to the start of its release); two spans of
different clients that overlap are a mutual-exclusion violation, drawn in red.

Histories from ``run_clients`` are in monotonic nanoseconds; histories from a forced schedule
(``Trace.history()``) are in logical steps. This module records and checks; drawing is
``helpers.instruments.plots.plot_timeline``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(frozen=True)
class Op:
    """One recorded operation: who, what, when (invocation to completion, ns or steps), result, status."""

    client_id: int | str
    label: str
    start_ns: int
    end_ns: int
    result: Any = None
    status: str = OK

    @property
    def duration_ns(self) -> int:
        """Return end_ns - start_ns."""
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Span:
    """An interval in which one client holds something (a lock), from start to end."""

    client: int | str
    start_ns: int
    end_ns: int
    label: str = "holds lock"


@dataclass(frozen=True)
class Overlap:
    """Two spans of different clients that intersect, and the shared interval."""

    first: Span
    second: Span
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        """Return the length of the shared interval."""
        return self.end_ns - self.start_ns


def overlaps(spans: Iterable[Span]) -> list[Overlap]:
    """Return every pair of spans of different clients that share a positive-length interval."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    for s in ordered:
        if s.end_ns < s.start_ns:
            raise ValueError(f"span ends before it starts: {s}")
    found: list[Overlap] = []
    active: list[Span] = []
    for span in ordered:
        active = [a for a in active if a.end_ns > span.start_ns]
        for other in active:
            if other.client != span.client:
                start, end = span.start_ns, min(other.end_ns, span.end_ns)
                if end > start:
                    found.append(Overlap(other, span, start, end))
        active.append(span)
    return found


def spans_of(history: Iterable[Op], label: str) -> list[Span]:
    """Return one Span per op with this label (e.g. ops recorded with ctx.op("critical section"))."""
    return [
        Span(op.client_id, op.start_ns, op.end_ns, label) for op in history if op.label == label
    ]


def hold_spans(
    history: Iterable[Op],
    acquired: Callable[[Op], bool],
    released: Callable[[Op], bool],
    label: str = "holds lock",
) -> list[Span]:
    """Return spans from the end of each op where acquired(op) to the start of the next released(op)."""
    by_client: dict[Any, list[Op]] = {}
    for op in sorted(history, key=lambda o: o.start_ns):
        by_client.setdefault(op.client_id, []).append(op)
    spans: list[Span] = []
    for client, ops in by_client.items():
        since: int | None = None
        for op in ops:
            if since is None and acquired(op):
                since = op.end_ns
            elif since is not None and released(op):
                spans.append(Span(client, since, op.start_ns, label))
                since = None
        if since is not None:  # never released: held until its last op completed
            spans.append(
                Span(client, since, max(since, ops[-1].end_ns), label + " (never released)")
            )
    return spans


# Redis (and fakeredis) keep expiry times in whole milliseconds, so a lease can end up to 1 ms
# "early" measured on the client's nanosecond clock; lease_span ends a lease this much earlier.
EXPIRY_SLACK_NS = 2_000_000


def lease_span(
    client: int | str,
    asked_ns: int,
    got_ns: int,
    letting_go_ns: int,
    lease_ns: int,
    slack_ns: int = EXPIRY_SLACK_NS,
    label: str = "valid lease",
) -> Span | None:
    """Return the span in which client certainly held a lease (None: maybe it never held it).

    The lease was requested at asked_ns (the request that took it was sent no earlier) and granted
    by got_ns (its reply came back); it lasts lease_ns on the server, and the holder let go at
    letting_go_ns. The span runs from got_ns to the earlier of letting_go_ns and asked_ns +
    lease_ns - slack_ns (the lease surely ran no shorter). With a correct release, two such spans
    of one lock never overlap; an overlap means two clients held a valid lease at once.
    """
    end = min(letting_go_ns, asked_ns + lease_ns - slack_ns)
    return Span(client, got_ns, end, label) if end > got_ns else None
