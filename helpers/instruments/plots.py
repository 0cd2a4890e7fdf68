"""Timing plots in one style: titles, axis units, legends, one colour and marker per series.

Every function returns a ``LabFigure`` (a ``matplotlib.figure.Figure`` made without pyplot), so
nothing is drawn twice and no figure leaks into a later cell: show it by making it the cell's last
expression (or ``display(fig)``); it displays as a PNG with or without ``%matplotlib inline``, and
in an HTML export. Save it with ``fig.savefig(...)``. Inputs are the tidy rows of
``helpers.measure.sweep`` (``{x: value, "median": ..., "p5": ..., "p95": ..., ...}``) keyed by
strategy name, or raw latency samples in ns.

On the embedded backend every "server" call runs in this Python process: absolute numbers are
Python's, not Redis's. Pass ``note=`` to say so on the figure.

The style (``STYLE``): Okabe-Ito colours with a distinct marker per series, a transparent figure
around a white plotting area, and text with a white halo, so a figure reads in a light and in a
dark theme alike; long titles wrap to their axes. Every figure carries **alt text**
(``alt_text(fig)``): a sentence saying what it shows and its key number, computed from the
data. It is displayed as the image's alt: the output holds the PNG (its alt in the output's
metadata, which MyST-NB reads), an ``<img alt=...>`` twin (which JupyterLab and nbconvert draw)
and the sentence as its plain text. ``subplots()`` makes a figure of several axes that displays
the same way; ``draw_relative_costs`` and ``draw_rtt_sweep`` draw the reference bar chart and
the network-delay chart on a given axes.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from cycler import cycler
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from helpers.instruments.history import Op, Span, overlaps

TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "step": 1.0}

# Okabe-Ito: distinguishable with the common colour-vision deficiencies and in greyscale print.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
BAD_COLOR = "#D55E00"
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
UNIT_LABEL = {"ns": "ns", "us": "µs", "ms": "ms", "s": "s"}
Rows = Sequence[Mapping[str, Any]]
TITLE_SIZE = 11
HALO: list[patheffects.AbstractPathEffect] = [
    patheffects.withStroke(linewidth=2.5, foreground="white")
]
# Keys are rcParams names; typed loosely since matplotlib types rc_context with a Literal of them.
STYLE: dict[Any, Any] = {
    "axes.prop_cycle": cycler(color=PALETTE) + cycler(marker=MARKERS),
    "figure.facecolor": "none",  # transparent around the axes: no white box in a dark theme
    "savefig.facecolor": "none",
    "axes.facecolor": "white",
    "axes.titlesize": TITLE_SIZE,
    "legend.framealpha": 1.0,
    "legend.facecolor": "white",
    "font.size": 10,
}
_ALT: weakref.WeakKeyDictionary[Axes, str] = weakref.WeakKeyDictionary()


def plural(count: float, word: str, many: str | None = None) -> str:
    """Return '1 client', '2 clients', '1.5 round trips' (many: the plural when not word + 's')."""
    return f"{count:g} {word if count == 1 else many or word + 's'}"


def contrast(foreground: str, background: str) -> float:
    """Return the WCAG contrast ratio of two colours (1 to 21; AA text needs 4.5)."""

    def luminance(color: str) -> float:
        rgb = np.array(matplotlib.colors.to_rgb(color))
        linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        return float(linear @ [0.2126, 0.7152, 0.0722])

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def text_color_on(background: str) -> str:
    """Return black or white, whichever reads better on background."""
    return "black" if contrast("black", background) >= contrast("white", background) else "white"


def set_alt(ax: Axes, sentence: str) -> None:
    """Record the alt text of what ax shows (a figure's alt joins its axes' sentences)."""
    _ALT[ax] = sentence


def alt_text(fig: Figure) -> str:
    """Return the figure's alt text: its own, or its axes' sentences, or '' if it has none."""
    own = getattr(fig, "alt", "")
    return own or " ".join(_ALT[ax] for ax in fig.axes if ax in _ALT)


def _finish(fig: Figure) -> None:
    """Give every text without an effect of its own a white halo (readable on dark and light)."""
    for text in fig.findobj(Text):
        if not text.get_path_effects() and text.get_text():
            text.set_path_effects(HALO)


class LabFigure(Figure):
    """A Figure that displays as a PNG with alt text, with or without ``%matplotlib inline``."""

    alt: str = ""

    def png(self) -> bytes:
        """Return the figure rendered as PNG bytes: transparent around the axes, halos on text."""
        _finish(self)
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        return buffer.getvalue()

    def _repr_png_(self) -> bytes:
        """Return the PNG bytes (IPython's PNG display)."""
        return self.png()

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """Return the PNG, an <img> with the alt text and the alt text itself, for Jupyter."""
        alt = alt_text(self) or "A figure without a description."
        data = base64.b64encode(self.png()).decode("ascii")
        img = f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'
        bundle = {"image/png": data, "text/html": img, "text/plain": alt}
        return bundle, {"image/png": {"alt": alt}}


def subplots(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[LabFigure, Any]:
    """Return (LabFigure, axes) like ``plt.subplots``, without pyplot; alt text per axes."""
    with matplotlib.rc_context(STYLE):
        fig = LabFigure(
            layout="constrained", **{k: kwargs.pop(k) for k in ("figsize",) if k in kwargs}
        )
        axes = fig.subplots(nrows, ncols, **kwargs)
    return fig, axes


def color_of(index: int) -> str:
    """Return the palette colour for the index-th strategy or client."""
    return PALETTE[index % len(PALETTE)]


def marker_of(index: int) -> str:
    """Return the marker for the index-th series: shifted by one each round of the palette."""
    return MARKERS[(index + index // len(PALETTE)) % len(MARKERS)]


def fit_title(
    ax: Axes, text: str, fontsize: float = TITLE_SIZE, width_in: float | None = None
) -> str:
    """Return text wrapped to fit the width of ax, or width_in inches (0.58 em per character)."""
    figure = ax.get_figure(root=True)
    if width_in is None and figure is not None:
        width_in = figure.get_figwidth() * ax.get_position().width
    if width_in is None:
        raise ValueError("fit_title needs axes that belong to a figure, or width_in")
    chars = max(20, int(width_in * 72 / (fontsize * 0.58)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def new_figure(
    title: str,
    xlabel: str,
    ylabel: str,
    note: str | None = None,
    size: tuple[float, float] = (7.0, 4.2),
) -> tuple[Figure, Any]:
    """Return (figure, axes) with the suite's title, labels, grid and optional note."""
    with matplotlib.rc_context(STYLE):
        fig = LabFigure(figsize=size, layout="constrained")
        ax = fig.add_subplot()
    ax.set_title(fit_title(ax, title + (f"\n{note}" if note else "")), fontsize=TITLE_SIZE)
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
            marker=marker_of(i),
            capsize=3,
            linewidth=1.6,
            markersize=5,
        )


def _at_largest(series: Mapping[str, Rows], x: str, y: str, scale: float = 1.0) -> tuple[Any, str]:
    """Return (largest x, 'name value, name value') of each series' point at its largest x."""
    top = max(r[x] for rows in series.values() for r in rows)
    parts = []
    for name, rows in series.items():
        last = max(rows, key=lambda r: r[x])
        parts.append(f"{name} {plain_number(last[y] * scale)}")
    return top, ", ".join(parts)


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
    medians: list[str] = []
    for i, (name, samples) in enumerate(latencies_ns.items()):
        xs = np.sort(np.asarray(samples, dtype=float)) / scale
        ys = np.arange(1, len(xs) + 1) / len(xs)
        p50, p99 = np.percentile(xs, [50, 99])
        medians.append(f"{name} {plain_number(p50)}")
        ax.step(
            xs,
            ys,
            where="post",
            color=color_of(i),
            marker=marker_of(i),
            markevery=max(1, len(xs) // 6),
            markersize=5,
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
    set_alt(
        ax,
        f"{title}: the share of operations at or below each latency, for "
        f"{plural(len(latencies_ns), 'strategy', 'strategies')}; median latency in "
        f"{UNIT_LABEL[unit]}: {', '.join(medians)}.",
    )
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
    top, values = _at_largest(series, x, y)
    set_alt(
        ax,
        f"{title}: median operations per second against concurrent clients; at "
        f"{plural(top, 'client')}: {values}.",
    )
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
    top, values = _at_largest(series, x, y)
    set_alt(
        ax,
        f"{title}: median retries per successful operation against {xlabel}; at {x} "
        f"{plain_number(top)}: {values}.",
    )
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
    top, values = _at_largest(series, x, y, 1e9 / UNITS[unit])
    set_alt(
        ax,
        f"{title}: median time per call in {UNIT_LABEL[unit]} against {xlabel}, both on log "
        f"scales; at {plain_number(top)}: {values} {UNIT_LABEL[unit]}.",
    )
    return fig


OK_COLOR = "#BBBBBB"


def schedule_grid(exploration: Any, title: str = "Every interleaving", ax: Any = None) -> Figure:
    """Return a Figure: one column per schedule, one coloured cell per step, a verdict cell on top.

    The top row is red where the invariant broke and grey where it held; with few schedules the
    broken columns are also outlined and marked with a cross.
    """
    outcomes = exploration.schedules  # every schedule (each class run stands for its orders)
    if not outcomes:
        raise ValueError("the exploration ran no schedule")
    steps = [exploration.names_of(o.schedule) for o in outcomes]
    clients = list(exploration.clients) or sorted({c for names in steps for c in names})
    longest = max(len(names) for names in steps)
    width = min(14.0, max(7.5, 0.22 * len(outcomes) + 3.0))  # grid, and the legend on its right
    if ax is None:
        with matplotlib.rc_context(STYLE):
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
    verdict = (
        f"{exploration.bad_count} of {plural(exploration.total, 'schedule')} break the invariant"
    )
    room = fig.get_figwidth() - 2.2  # the legend stands to the right of the grid
    ax.set_title(fit_title(ax, f"{title}: {verdict}", width_in=room), fontsize=TITLE_SIZE)
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
    set_alt(
        ax,
        f"{title}: a grid of {plural(len(outcomes), 'schedule')} of clients "
        f"{', '.join(map(str, clients))}, one column each, one coloured cell per step; "
        f"{verdict}.",
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
    with matplotlib.rc_context(STYLE):
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
                        color=text_color_on(color_of(y)),
                        clip_on=True,
                        path_effects=[patheffects.Normal()],  # no halo: the bar is its ground
                    )
    ax.set_yticks(range(len(lanes)), [f"client {c}" for c in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    if unit == "step":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(
        "logical time (steps)" if unit == "step" else f"time since first operation ({unit})"
    )
    ax.set_title(fit_title(ax, title + (f"\n{note}" if note else "")), fontsize=TITLE_SIZE)
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
    length = "steps" if unit == "step" else unit
    failed = sum(isinstance(op.result, BaseException) for op in history)
    sentence = (
        f"{title}: a timeline of {plural(len(history), 'operation')} by "
        f"{plural(len(lanes), 'client')} ({', '.join(map(str, lanes))}) over "
        f"{plain_number(x_range)} {length}, one lane per client"
    )
    if spans:
        sentence += f"; {plural(len(found), 'overlap')} where mutual exclusion is violated"
    if failed:
        sentence += f"; {plural(failed, 'operation')} failed"
    set_alt(ax, sentence + ".")
    return fig


def draw_relative_costs(ax: Axes, costs: Any) -> Axes:
    """Draw grouped bars of each strategy's cost relative to the baseline per client count.

    costs is a ``helpers.instruments.reference.CostFigures`` (ratios, names, baseline, title,
    source, provenance); bars are hatched as well as coloured, one pattern per client count.
    """
    counts, names = list(costs.ratios), costs.names
    width = 0.8 / len(counts)
    hatches = ["", "//", "..", "xx", "\\\\", "oo"]
    for i, c in enumerate(counts):
        xs = [j + (i - (len(counts) - 1) / 2) * width for j in range(len(names))]
        ax.bar(
            xs,
            [costs.ratio(n, int(c)) for n in names],
            width,
            label=plural(int(c), "client"),
            color=color_of(i),
            hatch=hatches[i % len(hatches)],
            edgecolor="black",
            linewidth=0.5,
        )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel(f"time per request / {costs.baseline}'s (x)")
    ax.set_xlabel("strategy")
    heading = f"{costs.title}: cost relative to {costs.baseline} ({costs.source})"
    ax.set_title(fit_title(ax, f"{heading}\n{costs.provenance}", 10), fontsize=10)
    ax.legend(title="clients (threads)", fontsize=9)
    top = counts[-1]
    ranked = sorted(names, key=lambda n: costs.ratio(n, int(top)))
    cheap, dear = ranked[0], ranked[-1]
    set_alt(
        ax,
        f"{heading}: bars of time per request relative to {costs.baseline} at "
        f"{', '.join(plural(int(c), 'client') for c in counts)}; at {plural(int(top), 'client')} "
        f"the cheapest is {cheap} at {costs.ratio(cheap, int(top)):.2f}x and the dearest "
        f"{dear} at {costs.ratio(dear, int(top)):.2f}x.",
    )
    return ax


def draw_rtt_sweep(ax: Axes, sweep: Any, title: str | None = None) -> Axes:
    """Draw time per operation against the added round-trip time, one line per strategy.

    sweep is a ``helpers.instruments.rtt.RttSweep`` (rtts_ms, names, round_trips, cost_ms,
    backend).
    """
    for i, name in enumerate(sweep.names):
        costs = [sweep.cost_ms(name, r) for r in sweep.rtts_ms]
        label = f"{name} ({plural(sweep.round_trips[name], 'round trip')})"
        ax.plot(sweep.rtts_ms, costs, marker=marker_of(i), color=color_of(i), label=label)
    ax.set_xlabel("network round-trip time added per round trip (ms)")
    ax.set_ylabel("time per operation (ms, median)")
    ax.set_ylim(bottom=0)
    heading = title or f"Cost per operation as the network slows ({sweep.backend} backend)"
    ax.set_title(fit_title(ax, heading), fontsize=TITLE_SIZE)
    ax.set_xticks(list(sweep.rtts_ms))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    top = max(sweep.rtts_ms)
    values = ", ".join(
        f"{n} ({plural(sweep.round_trips[n], 'round trip')}) {sweep.cost_ms(n, top):.2f} ms"
        for n in sweep.names
    )
    set_alt(
        ax,
        f"{heading}: median time per operation against the added round-trip time, "
        f"{plain_number(min(sweep.rtts_ms))} to {plain_number(top)} ms; at {plain_number(top)} ms: "
        f"{values}.",
    )
    return ax
