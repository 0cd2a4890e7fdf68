"""helpers.instruments.plots: every plot has a title, axis units, a legend, alt text and one style.

Every plot function is rendered on sample data (long names and notes included) and checked: alt
text with a number in it, displayed as the image's alt; no two series with the same colour and
marker; no text outside the figure and no title wider than its axes (matplotlib's tight bounding
box); a transparent figure around a white plotting area; bar labels at WCAG AA contrast.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from helpers.instruments.history import Op, Span
from helpers.instruments.plots import (
    PALETTE,
    LabFigure,
    alt_text,
    color_of,
    contrast,
    cost_vs_size,
    draw_relative_costs,
    draw_rtt_sweep,
    latency_cdf,
    plain_number,
    plot_timeline,
    plural,
    retries_vs_contention,
    schedule_grid,
    subplots,
    text_color_on,
    throughput_vs_clients,
)
from helpers.instruments.reference import reference

ROWS = {
    "naive": [
        {"clients": 1, "median": 900.0, "p5": 800.0, "p95": 1000.0},
        {"clients": 8, "median": 1200.0, "p5": 1100.0, "p95": 1500.0},
    ],
    "lua": [
        {"clients": 8, "median": 1000.0, "p5": 900.0, "p95": 1100.0},
        {"clients": 1, "median": 700.0, "p5": 600.0, "p95": 800.0},
    ],
}


def _check(fig: Figure, tmp_path: Path, name: str) -> None:
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_legend() is not None
    fig.savefig(tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_latency_cdf_has_one_curve_per_strategy_with_percentiles(tmp_path: Path) -> None:
    fig = latency_cdf(
        {"naive": [1000, 2000, 3000], "lua": [1500] * 10}, note="embedded: Python's numbers"
    )
    _check(fig, tmp_path, "cdf")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["naive: p50 2, p99 2.98 µs", "lua: p50 1.5, p99 1.5 µs"]
    assert "µs" in fig.axes[0].get_xlabel() and "Python's numbers" in fig.axes[0].get_title()
    with pytest.raises(ValueError):
        latency_cdf({"empty": []})


def test_throughput_vs_clients_sorts_points_and_starts_at_zero(tmp_path: Path) -> None:
    fig = throughput_vs_clients(ROWS)
    _check(fig, tmp_path, "throughput")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "throughput (operations/s)" and ax.get_ylim()[0] == 0
    lua_line = ax.containers[1].lines[0]  # errorbar container: (data line, caps, bars)
    assert list(lua_line.get_xdata()) == [1, 8] and list(lua_line.get_ydata()) == [700, 1000]
    assert ax.get_legend().get_title().get_text() == "line: median; bars: p5–p95 over repetitions"


def test_retries_vs_contention_labels_its_axes(tmp_path: Path) -> None:
    rows = {"WATCH": [{"clients": 2, "median": 0.5}, {"clients": 16, "median": 3.0}]}
    fig = retries_vs_contention(rows)
    _check(fig, tmp_path, "retries")
    assert fig.axes[0].get_ylabel() == "retries per successful operation"


def test_cost_vs_size_is_log_log_in_the_chosen_unit(tmp_path: Path) -> None:
    rows = {"HGETALL": [{"size": 100, "median": 2e-5}, {"size": 100_000, "median": 2e-2}]}
    fig = cost_vs_size(rows, unit="ms")
    _check(fig, tmp_path, "cost")
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert list(ax.containers[0].lines[0].get_ydata()) == pytest.approx([0.02, 20.0])


def test_series_rows_must_carry_x_and_y() -> None:
    with pytest.raises(KeyError, match="needs 'clients' and 'median'"):
        throughput_vs_clients({"bad": [{"clients": 1}]})
    with pytest.raises(ValueError):
        throughput_vs_clients({})


def test_palette_and_numbers_are_stable() -> None:
    assert color_of(0) == color_of(8) != color_of(1)
    assert [plain_number(v) for v in (2960.4, 12.345, 0.01234)] == ["2,960", "12.3", "0.0123"]


def test_figures_display_as_png_without_pyplot() -> None:
    fig = throughput_vs_clients(ROWS)
    assert isinstance(fig, LabFigure) and fig._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")


# --- one style for every plot: alt text, distinct series, text that fits ----------------------


def _exploration() -> Any:
    from helpers.instruments.explore import Exploration, Outcome

    orders = ["AABB", "ABAB", "ABBA", "BAAB", "BABA", "BBAA"]
    outcomes = [Outcome(s, s in ("AABB", "BBAA"), {}, "") for s in orders]
    return Exploration(outcomes=outcomes, clients=["A", "B"])


def _sweep() -> Any:
    from helpers.instruments.rtt import RttSweep

    rtts = (0.0, 0.1, 1.0)
    sweep = RttSweep(rtts_ms=rtts, backend="embedded")
    for name, trips in (("naive GET then INCR", 2), ("Lua script", 1)):
        sweep.wall_ns[name] = {r: [50_000] * 3 for r in rtts}
        sweep.cpu_ns[name] = {r: [40_000] * 3 for r in rtts}
        sweep.waited_ns[name] = {r: [int(r * 1e6) * trips] * 3 for r in rtts}
        sweep.trips[name] = {r: [trips] * 3 for r in rtts}
    return sweep


def _timeline() -> Figure:
    history = [
        Op("A", "SET lock NX PX", 0, 2 * MS, True),
        Op("B", "SET lock NX PX", 1 * MS, 3 * MS, False),
        Op("B", "SET lock NX PX", 6 * MS, 7 * MS, True),
        Op("A", "DEL lock", 8 * MS, 9 * MS, 1),
    ]
    spans = [Span("A", 2 * MS, 8 * MS), Span("B", 7 * MS, 12 * MS)]
    return plot_timeline(history, spans, title="Two holders of one lock", note="toy history")


def _costs_figure() -> Figure:
    fig, (left, right) = subplots(2, 1, figsize=(8, 9))
    draw_relative_costs(left, reference("ratelimit_cost"))
    draw_rtt_sweep(right, _sweep())
    return fig


MS = 1_000_000
LONG_NOTE = (
    "embedded backend: every command runs in this Python process, so these are Python's numbers"
)
SAMPLES = {
    "latency_cdf": lambda: latency_cdf(
        {name: [1000 * (i + 1) * k for k in range(1, 200)] for i, name in enumerate("abcdefgh")},
        note=LONG_NOTE,
    ),
    "throughput_vs_clients": lambda: throughput_vs_clients(
        {f"strategy {i}": ROWS["naive"] for i in range(9)}, note=LONG_NOTE
    ),
    "retries_vs_contention": lambda: retries_vs_contention(
        {"WATCH": [{"clients": 2, "median": 0.5}, {"clients": 16, "median": 3.0}]}
    ),
    "cost_vs_size": lambda: cost_vs_size(
        {
            "HGETALL then HSETNX": [{"size": 100, "median": 2e-5}, {"size": 1e5, "median": 2e-2}],
            "Lua get-or-put": [{"size": 100, "median": 1e-5}, {"size": 1e5, "median": 1e-5}],
        },
        title="Registering one string against the dictionary's size, with a long title",
        note=LONG_NOTE,
    ),
    "schedule_grid": lambda: schedule_grid(_exploration()),
    "plot_timeline": _timeline,
    "relative costs and RTT sweep": _costs_figure,
}


def _series_keys(ax: Any) -> list[tuple[Any, ...]]:
    """Return (colour, marker or hatch) of each labelled series drawn on ax."""
    keys = []
    for line in ax.get_lines():
        if not line.get_label().startswith("_"):
            keys.append((to_hex(line.get_color()), line.get_marker()))
    for container in ax.containers:
        if isinstance(container, BarContainer) and not container.get_label().startswith("_"):
            bar = container.patches[0]
            keys.append((to_hex(bar.get_facecolor()), bar.get_hatch()))
        elif hasattr(container, "lines") and not container.get_label().startswith("_"):
            data = container.lines[0]
            keys.append((to_hex(data.get_color()), data.get_marker()))
    return keys


@pytest.mark.parametrize("name", SAMPLES)
def test_every_plot_has_alt_text_with_its_key_number(name: str) -> None:
    fig = SAMPLES[name]()
    alt = alt_text(fig)
    assert alt.endswith(".") and len(alt.split()) >= 10, alt
    assert any(ch.isdigit() for ch in alt), f"no number in the alt text: {alt}"
    bundle, metadata = fig._repr_mimebundle_()
    assert metadata == {"image/png": {"alt": alt}} and bundle["text/plain"] == alt
    assert bundle["text/html"].startswith(f'<img alt="{html.escape(alt)}" src="data:image/png')
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert "(s)" not in alt and "1 round trips" not in alt and "1 clients" not in alt


@pytest.mark.parametrize("name", SAMPLES)
def test_no_two_series_share_colour_and_marker(name: str) -> None:
    fig = SAMPLES[name]()
    for ax in fig.axes:
        keys = _series_keys(ax)
        assert len(keys) == len(set(keys)), f"{name}: series share colour and marker: {keys}"


@pytest.mark.parametrize("name", SAMPLES)
def test_no_text_overflows_its_figure_or_its_axes(name: str) -> None:
    fig = SAMPLES[name]()
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    tight = fig.get_tightbbox(renderer)  # inches
    width, height = fig.get_size_inches()
    assert tight.x0 >= -0.05 and tight.y0 >= -0.05, f"{name}: text outside the figure: {tight}"
    assert tight.x1 <= width + 0.05 and tight.y1 <= height + 0.05, f"{name}: {tight} > figure"
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        title = ax.title.get_window_extent(renderer)
        assert title.width <= box.width + 2, (
            f"{name}: title wider than its axes: {ax.get_title()!r}"
        )


@pytest.mark.parametrize("name", SAMPLES)
def test_figures_are_transparent_around_a_white_plot_area(name: str) -> None:
    fig = SAMPLES[name]()
    png = matplotlib.image.imread(io.BytesIO(fig.png()))
    assert png.shape[2] == 4 and png[0, 0, 3] == 0, "the corner should be transparent"
    assert all(to_hex(ax.get_facecolor()) == "#ffffff" for ax in fig.axes)


def test_labels_on_bars_meet_wcag_aa_contrast() -> None:
    for color in PALETTE:
        assert contrast(text_color_on(color), color) >= 4.5, color
    ax = _timeline().axes[0]
    assert ax.texts and all(t.get_color() in ("black", "white") for t in ax.texts)
    assert contrast("white", "#E69F00") < 4.5 < contrast("black", "#E69F00")  # labels on orange


def test_plurals() -> None:
    assert [plural(1, "client"), plural(2, "client"), plural(1, "round trip")] == [
        "1 client",
        "2 clients",
        "1 round trip",
    ]
    assert (
        plural(3, "strategy", "strategies") == "3 strategies" and plural(1.5, "trip") == "1.5 trips"
    )
