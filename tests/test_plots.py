"""helpers.instruments.plots: every timing plot has a title, axis units, a legend, and renders to PNG."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from helpers.instruments.plots import (
    LabFigure,
    color_of,
    cost_vs_size,
    latency_cdf,
    plain_number,
    retries_vs_contention,
    throughput_vs_clients,
)

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
