"""Timing plots in one style: titles, axis units, legends, one colour per strategy.

Every function returns a ``LabFigure`` (a ``matplotlib.figure.Figure`` made without pyplot), so
nothing is drawn twice and no figure leaks into a later cell: show it by making it the cell's last
expression (or ``display(fig)``); it displays as a PNG with or without ``%matplotlib inline``, and
in an HTML export. Save it with ``fig.savefig(...)``. Inputs are the tidy rows of
``helpers.measure.sweep`` (``{x: value, "median": ..., "p5": ..., "p95": ..., ...}``) keyed by
strategy name, or raw latency samples in ns.

On the embedded backend every "server" call runs in this Python process: absolute numbers are
Python's, not Redis's. Pass ``note=`` to say so on the figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from helpers.instruments.history import Op, Span, overlaps

TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "step": 1.0}

# Okabe-Ito: distinguishable with the common colour-vision deficiencies and in greyscale print.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
BAD_COLOR = "#D55E00"
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
UNIT_LABEL = {"ns": "ns", "us": "µs", "ms": "ms", "s": "s"}
Rows = Sequence[Mapping[str, Any]]


class LabFigure(Figure):
    """A Figure that Jupyter shows as a PNG even without ``%matplotlib inline`` (no pyplot needed)."""

    def _repr_png_(self) -> bytes:
        """Return the figure rendered as PNG bytes (IPython calls this to display it)."""
        import io

        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        return buffer.getvalue()


def color_of(index: int) -> str:
    """Return the palette colour for the index-th strategy or client."""
    return PALETTE[index % len(PALETTE)]


def new_figure(
    title: str,
    xlabel: str,
    ylabel: str,
    note: str | None = None,
    size: tuple[float, float] = (7.0, 4.2),
) -> tuple[Figure, Any]:
    """Return (figure, axes) with the suite's title, labels, grid and optional note."""
    fig = LabFigure(figsize=size, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title + (f"\n{note}" if note else ""), fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def _check_series(series: Mapping[str, Rows], x: str, y: str) -> None:
    if not series:
        raise ValueError("nothing to plot: series is empty")
    for name, rows in series.items():
        for row in rows:
            if x not in row or y not in row:
                raise KeyError(
                    f"series {name!r}: every row needs {x!r} and {y!r}, got {sorted(row)}"
                )


def _line_with_spread(
    ax: Any, series: Mapping[str, Rows], x: str, y: str, spread: tuple[str, str], scale: float
) -> None:
    """Draw one line per series with an error bar from spread[0] to spread[1]."""
    for i, (name, rows) in enumerate(series.items()):
        rows = sorted(rows, key=lambda r: r[x])
        xs = np.array([r[x] for r in rows], dtype=float)
        ys = np.array([r[y] for r in rows], dtype=float) * scale
        if all(k in r for r in rows for k in spread):
            lo = ys - np.array([r[spread[0]] for r in rows], dtype=float) * scale
            hi = np.array([r[spread[1]] for r in rows], dtype=float) * scale - ys
            yerr = np.vstack([np.clip(lo, 0, None), np.clip(hi, 0, None)])
        else:
            yerr = None
        ax.errorbar(
            xs,
            ys,
            yerr=yerr,
            label=name,
            color=color_of(i),
            marker=MARKERS[i % len(MARKERS)],
            capsize=3,
            linewidth=1.6,
            markersize=5,
        )


def _spread_note(spread: tuple[str, str]) -> str:
    return f"line: median; bars: {spread[0]}–{spread[1]} over repetitions"


def plain_number(value: float) -> str:
    """Return value as short plain text: 2960 -> '2,960', 12.345 -> '12.3', 0.01234 -> '0.0123'."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def plain_log_ticks(axis: Any) -> None:
    """Label a log-scale axis with plain numbers (100, 2000) instead of powers like 2×10³."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain_number(v)))
    axis.set_minor_formatter(NullFormatter())


def latency_cdf(
    latencies_ns: Mapping[str, Sequence[float]],
    title: str = "Latency per operation",
    unit: str = "us",
    note: str | None = None,
    log_x: bool = True,
) -> Figure:
    """Return a Figure with the empirical CDF of each strategy's latencies (given in ns)."""
    if not latencies_ns or not all(len(v) for v in latencies_ns.values()):
        raise ValueError("latency_cdf needs at least one sample per strategy")
    scale = UNITS[unit]
    fig, ax = new_figure(
        title,
        f"latency ({UNIT_LABEL[unit]}, {'log scale' if log_x else 'linear'})",
        "fraction of operations at or below",
        note,
    )
    for i, (name, samples) in enumerate(latencies_ns.items()):
        xs = np.sort(np.asarray(samples, dtype=float)) / scale
        ys = np.arange(1, len(xs) + 1) / len(xs)
        p50, p99 = np.percentile(xs, [50, 99])
        ax.step(
            xs,
            ys,
            where="post",
            color=color_of(i),
            linewidth=1.6,
            label=f"{name}: p50 {plain_number(p50)}, p99 {plain_number(p99)} {UNIT_LABEL[unit]}",
        )
    if log_x:
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
    ax.set_ylim(0, 1.02)
    for q in (0.5, 0.99):
        ax.axhline(q, color="grey", linewidth=0.8, linestyle=":")
    ax.legend(loc="lower right", fontsize=9)
    return fig


def throughput_vs_clients(
    series: Mapping[str, Rows],
    x: str = "clients",
    y: str = "median",
    spread: tuple[str, str] = ("p5", "p95"),
    title: str = "Throughput against clients",
    note: str | None = None,
) -> Figure:
    """Return a Figure of operations per second (median, spread bars) against client count."""
    _check_series(series, x, y)
    fig, ax = new_figure(title, "concurrent clients", "throughput (operations/s)", note)
    _line_with_spread(ax, series, x, y, spread, 1.0)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9, title=_spread_note(spread), title_fontsize=8)
    return fig


def retries_vs_contention(
    series: Mapping[str, Rows],
    x: str = "clients",
    y: str = "median",
    spread: tuple[str, str] = ("p5", "p95"),
    xlabel: str = "concurrent clients on one key",
    title: str = "Retries against contention",
    note: str | None = None,
) -> Figure:
    """Return a Figure of retries per successful operation against contention (e.g. clients)."""
    _check_series(series, x, y)
    fig, ax = new_figure(title, xlabel, "retries per successful operation", note)
    _line_with_spread(ax, series, x, y, spread, 1.0)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9, title=_spread_note(spread), title_fontsize=8)
    return fig


def cost_vs_size(
    series: Mapping[str, Rows],
    x: str = "size",
    y: str = "median",
    spread: tuple[str, str] = ("p5", "p95"),
    unit: str = "us",
    xlabel: str = "data size (items)",
    title: str = "Cost against data size",
    note: str | None = None,
) -> Figure:
    """Return a log-log Figure of time per call (rows in seconds, shown in unit) against size."""
    _check_series(series, x, y)
    fig, ax = new_figure(
        title, f"{xlabel}, log scale", f"time per call ({UNIT_LABEL[unit]}, log scale)", note
    )
    _line_with_spread(ax, series, x, y, spread, 1e9 / UNITS[unit])
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax.xaxis)
    plain_log_ticks(ax.yaxis)
    ax.grid(True, which="minor", alpha=0.1)
    ax.legend(fontsize=9, title=_spread_note(spread), title_fontsize=8)
    return fig


OK_COLOR = "#BBBBBB"


def schedule_grid(exploration: Any, title: str = "Every interleaving", ax: Any = None) -> Figure:
    """Return a Figure: one column per schedule, one coloured cell per step, a verdict cell on top.

    The top row is red where the invariant broke and grey where it held; with few schedules the
    broken columns are also outlined and marked with a cross.
    """
    outcomes = exploration.outcomes
    if not outcomes:
        raise ValueError("the exploration ran no schedule")
    steps = [o.schedule.split() if " " in o.schedule else list(o.schedule) for o in outcomes]
    clients = list(exploration.clients) or sorted({c for names in steps for c in names})
    longest = max(len(names) for names in steps)
    width = min(14.0, max(5.0, 0.22 * len(outcomes) + 1.5))
    if ax is None:
        fig = LabFigure(figsize=(width, 1.6 + 0.35 * longest), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    outline = len(outcomes) <= 24
    for col, (outcome, names) in enumerate(zip(outcomes, steps)):
        ax.add_patch(Rectangle((col, -1.3), 0.9, 0.9, color=OK_COLOR if outcome.ok else BAD_COLOR))
        for row, name in enumerate(names):
            ax.add_patch(
                Rectangle(
                    (col, row),
                    0.9,
                    0.9,
                    color=color_of(clients.index(name)) if name in clients else "grey",
                )
            )
        if not outcome.ok and outline:
            ax.add_patch(
                Rectangle(
                    (col - 0.05, -1.35),
                    1.0,
                    len(names) + 1.4,
                    fill=False,
                    edgecolor=BAD_COLOR,
                    linewidth=2,
                )
            )
            ax.text(col + 0.45, -1.85, "✗", ha="center", va="center", color=BAD_COLOR, fontsize=10)
    ax.set_xlim(-0.3, len(outcomes) + 0.2)
    ax.set_ylim(longest + 0.2, -2.3 if outline else -1.5)
    ax.set_xlabel(f"schedule (1 to {len(outcomes)}, in exploration order)")
    ax.set_ylabel("step (first at top)")
    ax.set_xticks([])
    ax.set_yticks(
        [-0.85] + [i + 0.45 for i in range(longest)],
        ["invariant"] + [str(i + 1) for i in range(longest)],
    )
    ax.set_title(
        f"{title}: {exploration.bad_count} of {exploration.total} schedules break the invariant",
        fontsize=11,
    )
    handles = [Rectangle((0, 0), 1, 1, color=color_of(i)) for i in range(len(clients))]
    handles += [Rectangle((0, 0), 1, 1, color=BAD_COLOR), Rectangle((0, 0), 1, 1, color=OK_COLOR)]
    ax.legend(
        handles,
        [f"client {c}" for c in clients] + ["invariant broken", "invariant holds"],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=9,
        frameon=False,
    )
    return fig


def _lanes(
    history: Sequence[Op], spans: Sequence[Span], clients: Sequence[Any] | None
) -> list[Any]:
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


def plot_timeline(
    history: Sequence[Op],
    spans: Sequence[Span] = (),
    title: str = "History",
    unit: str = "ms",
    clients: Sequence[Any] | None = None,
    label_ops: bool | None = None,
    note: str | None = None,
) -> Figure:
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
        ax.broken_barh(
            [((span.start_ns - t0) / scale, (span.end_ns - span.start_ns) / scale)],
            (y - 0.42, 0.84),
            facecolor=color_of(y),
            alpha=0.18,
            edgecolor=color_of(y),
            linestyle="--",
        )
    found = overlaps(spans)
    for ov in found:
        for client in (ov.first.client, ov.second.client):
            ax.broken_barh(
                [((ov.start_ns - t0) / scale, ov.duration_ns / scale)],
                (row[client] - 0.42, 0.84),
                facecolor=BAD_COLOR,
                alpha=0.45,
                edgecolor=BAD_COLOR,
                hatch="//",
                linewidth=0,
            )
    for client in lanes:
        y = row[client]
        ops = [op for op in history if op.client_id == client]
        bars = [
            ((op.start_ns - t0) / scale, max((op.end_ns - op.start_ns) / scale, 1e-9)) for op in ops
        ]
        edges = [BAD_COLOR if isinstance(op.result, BaseException) else "black" for op in ops]
        ax.broken_barh(bars, (y - 0.25, 0.5), facecolor=color_of(y), edgecolor=edges, linewidth=0.6)
        if label_ops is not False:
            for op, (left, width) in zip(ops, bars):
                if label_ops or _fits(width, op.label, x_range):
                    ax.text(
                        left + width / 2,
                        y,
                        op.label,
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white",
                        clip_on=True,
                    )
    ax.set_yticks(range(len(lanes)), [f"client {c}" for c in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    if unit == "step":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(
        "logical time (steps)" if unit == "step" else f"time since first operation ({unit})"
    )
    ax.set_title(title + (f"\n{note}" if note else ""), fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(facecolor="grey", edgecolor="black", label="operation (invoke → complete)")]
    if spans:
        handles.append(
            Patch(
                facecolor="grey", alpha=0.2, edgecolor="grey", linestyle="--", label=spans[0].label
            )
        )
        handles.append(
            Patch(
                facecolor=BAD_COLOR,
                alpha=0.45,
                hatch="//",
                label=f"overlap: mutual exclusion violated ({len(found)})",
            )
        )
    fig.legend(
        handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False
    )
    return fig
