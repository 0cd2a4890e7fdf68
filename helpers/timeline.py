"""Jepsen-style histories: one lane per client, one bar per operation, lock holds and their overlaps.

An operation is an ``Op`` (``helpers.race``): who ran it, a label, and when it was invoked and
when it completed. A bar from invocation to completion is all a client can know: the command
took effect at some instant inside it. A *span* is an interval during which a client believes it
holds a lock (from the end of its successful acquire to the start of its release); two spans of
different clients that overlap are a mutual-exclusion violation, drawn in red.

Histories from ``run_clients`` are in monotonic nanoseconds (plotted in ms from the first op);
histories from a forced schedule (``Trace.history()``) are in logical steps (``unit="step"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from helpers.plots import BAD_COLOR, LabFigure, color_of
from helpers.race import Op

TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "step": 1.0}
_MAX_LABELLED_OPS = 80


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
    return [Span(op.client_id, op.start_ns, op.end_ns, label) for op in history if op.label == label]


def hold_spans(history: Iterable[Op], acquired: Callable[[Op], bool], released: Callable[[Op], bool],
               label: str = "holds lock") -> list[Span]:
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
            spans.append(Span(client, since, max(since, ops[-1].end_ns), label + " (never released)"))
    return spans


def _lanes(history: Sequence[Op], spans: Sequence[Span], clients: Sequence[Any] | None) -> list[Any]:
    if clients is not None:
        return list(clients)
    seen: dict[Any, None] = {}
    for c in [op.client_id for op in history] + [s.client for s in spans]:
        seen.setdefault(c, None)
    try:
        return sorted(seen)
    except TypeError:
        return list(seen)


def _fits(width: float, text: str, x_range: float) -> bool:
    """Return True if a label of text fits inside a bar of width (about 120 characters span the axes)."""
    return width >= x_range * (len(text) + 1) / 120


def plot_timeline(history: Sequence[Op], spans: Sequence[Span] = (), title: str = "History",
                  unit: str = "ms", clients: Sequence[Any] | None = None, label_ops: bool | None = None,
                  note: str | None = None) -> Figure:
    """Return a Figure: a lane per client, a bar per op, spans shaded, overlaps highlighted in red.

    Op labels are written inside bars wide enough to hold them (label_ops=False: never). Each
    overlap is drawn in red on the lanes of both clients involved.
    """
    if unit not in TIME_UNITS:
        raise ValueError(f"unit must be one of {', '.join(TIME_UNITS)}")
    if not history and not spans:
        raise ValueError("nothing to plot: the history is empty")
    lanes = _lanes(history, spans, clients)
    row = {c: i for i, c in enumerate(lanes)}
    t0 = 0 if unit == "step" else min([op.start_ns for op in history] + [s.start_ns for s in spans])
    scale = TIME_UNITS[unit]
    t_end = max([op.end_ns for op in history] + [s.end_ns for s in spans])
    x_range = max((t_end - t0) / scale, 1e-9)
    fig = LabFigure(figsize=(9.0, 1.6 + 0.6 * len(lanes)), layout="constrained")
    ax = fig.add_subplot()
    for span in spans:
        y = row[span.client]
        ax.broken_barh([((span.start_ns - t0) / scale, (span.end_ns - span.start_ns) / scale)], (y - 0.42, 0.84),
                       facecolor=color_of(y), alpha=0.18, edgecolor=color_of(y), linestyle="--")
    found = overlaps(spans)
    for ov in found:
        for client in (ov.first.client, ov.second.client):
            ax.broken_barh([((ov.start_ns - t0) / scale, ov.duration_ns / scale)], (row[client] - 0.42, 0.84),
                           facecolor=BAD_COLOR, alpha=0.45, edgecolor=BAD_COLOR, hatch="//", linewidth=0)
    for client in lanes:
        y = row[client]
        ops = [op for op in history if op.client_id == client]
        bars = [((op.start_ns - t0) / scale, max((op.end_ns - op.start_ns) / scale, 1e-9)) for op in ops]
        edges = [BAD_COLOR if isinstance(op.result, BaseException) else "black" for op in ops]
        ax.broken_barh(bars, (y - 0.25, 0.5), facecolor=color_of(y), edgecolor=edges, linewidth=0.6)
        if label_ops is not False:
            for op, (left, width) in zip(ops, bars):
                if label_ops or _fits(width, op.label, x_range):
                    ax.text(left + width / 2, y, op.label, ha="center", va="center", fontsize=8,
                            color="white", clip_on=True)
    ax.set_yticks(range(len(lanes)), [f"client {c}" for c in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    if unit == "step":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("logical time (steps)" if unit == "step" else f"time since first operation ({unit})")
    ax.set_title(title + (f"\n{note}" if note else ""), fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(facecolor="grey", edgecolor="black", label="operation (invoke → complete)")]
    if spans:
        handles.append(Patch(facecolor="grey", alpha=0.2, edgecolor="grey", linestyle="--", label=spans[0].label))
        handles.append(Patch(facecolor=BAD_COLOR, alpha=0.45, hatch="//",
                             label=f"overlap: mutual exclusion violated ({len(found)})"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    return fig
