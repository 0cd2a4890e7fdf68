"""helpers.instruments.history: overlapping lock holds are found exactly, and the history plot renders."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from helpers.instruments.history import (
    EXPIRY_SLACK_NS,
    Op,
    Span,
    hold_spans,
    lease_span,
    overlaps,
    spans_of,
)
from helpers.instruments.plots import plot_timeline

MS = 1_000_000


def test_spans_of_different_clients_that_intersect_overlap() -> None:
    a, b = Span(0, 0, 10), Span(1, 5, 20)
    found = overlaps([b, a])
    assert len(found) == 1
    assert (found[0].first, found[0].second, found[0].start_ns, found[0].end_ns) == (a, b, 5, 10)
    assert found[0].duration_ns == 5


def test_touching_spans_and_spans_of_one_client_do_not_overlap() -> None:
    assert overlaps([Span(0, 0, 10), Span(1, 10, 20)]) == []
    assert overlaps([Span(0, 0, 10), Span(0, 5, 20)]) == []
    assert overlaps([]) == []


def test_a_long_span_overlaps_every_later_holder() -> None:
    long, *short = [Span("A", 0, 100), Span("B", 10, 20), Span("C", 30, 40), Span("B", 50, 60)]
    found = overlaps([long, *short])
    assert [(o.second.client, o.start_ns, o.end_ns) for o in found] == [
        ("B", 10, 20),
        ("C", 30, 40),
        ("B", 50, 60),
    ]


def test_three_holders_at_once_give_three_pairs() -> None:
    assert len(overlaps([Span(0, 0, 10), Span(1, 1, 10), Span(2, 2, 10)])) == 3


def test_a_span_that_ends_before_it_starts_is_an_error() -> None:
    with pytest.raises(ValueError, match="ends before it starts"):
        overlaps([Span(0, 10, 5)])


def test_spans_of_takes_ops_with_one_label() -> None:
    history = [Op(0, "hold", 1, 5), Op(0, "acquire", 0, 1), Op(1, "hold", 3, 9)]
    assert spans_of(history, "hold") == [Span(0, 1, 5, "hold"), Span(1, 3, 9, "hold")]


def test_hold_spans_run_from_acquire_end_to_release_start() -> None:
    history = [
        Op(0, "acquire", 0, 2, True),
        Op(0, "work", 2, 8),
        Op(0, "release", 9, 11, 1),
        Op(1, "acquire", 1, 3, False),
        Op(1, "acquire", 4, 6, True),
        Op(1, "release", 12, 13, 0),
        Op(2, "acquire", 5, 7, True),
    ]
    spans = hold_spans(
        history,
        acquired=lambda op: op.label == "acquire" and op.result is True,
        released=lambda op: op.label == "release",
    )
    assert spans == [Span(0, 2, 9), Span(1, 6, 12), Span(2, 7, 7, "holds lock (never released)")]
    assert [(o.first.client, o.second.client) for o in overlaps(spans)] == [(0, 1)]


def test_lease_span_ends_at_letting_go_or_at_the_surest_end_of_the_lease() -> None:
    assert lease_span("A", 0, 1 * MS, 5 * MS, 10 * MS) == Span("A", 1 * MS, 5 * MS, "valid lease")
    assert lease_span("A", 0, 1 * MS, 50 * MS, 10 * MS) == Span(
        "A", 1 * MS, 10 * MS - EXPIRY_SLACK_NS, "valid lease"
    )


def test_lease_span_is_none_when_the_grant_came_back_after_the_lease_surely_ended() -> None:
    assert lease_span("A", 0, 20 * MS, 30 * MS, 10 * MS) is None


def test_lease_spans_overlap_only_when_two_valid_leases_meet() -> None:
    stalled = lease_span("A", 0, 1 * MS, 60 * MS, 10 * MS)  # let go long after its lease ended
    after = lease_span(
        "B", 9 * MS, 10 * MS, 15 * MS, 10 * MS
    )  # took the lock once A's lease ran out
    assert overlaps([stalled, after]) == []
    inside = lease_span("C", 12 * MS, 13 * MS, 20 * MS, 10 * MS)  # got in while B's lease was valid
    assert [(o.first.client, o.second.client) for o in overlaps([stalled, after, inside])] == [
        ("B", "C")
    ]


def test_timeline_renders_lanes_ops_and_overlaps_to_png(tmp_path: Path) -> None:
    history = [
        Op(0, "acquire", 0, 1_000_000, True),
        Op(0, "release", 8_000_000, 9_000_000),
        Op(1, "acquire", 4_000_000, 5_000_000, True),
        Op(1, "release", 12_000_000, 13_000_000),
    ]
    spans = hold_spans(history, lambda op: op.label == "acquire", lambda op: op.label == "release")
    fig = plot_timeline(history, spans, title="Two holders", note="toy history")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["client 0", "client 1"]
    assert ax.get_xlabel() == "time since first operation (ms)" and "Two holders" in ax.get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "overlap: mutual exclusion violated (1)" in legend
    assert {t.get_text() for t in ax.texts} == {"acquire", "release"}
    fig.savefig(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 1000


def test_timeline_of_logical_steps_and_narrow_ops_without_labels() -> None:
    steps = [Op("A", "GET c", 0, 1), Op("B", "GET c", 1, 2), Op("A", "INCR c", 2, 3)]
    ax = plot_timeline(steps, unit="step").axes[0]
    assert ax.get_xlabel() == "logical time (steps)" and len(ax.texts) == 3
    narrow = [Op(0, "a long label", 0, 1), Op(0, "x", 1_000_000, 2_000_000_000)]
    assert [t.get_text() for t in plot_timeline(narrow).axes[0].texts] == ["x"]


def test_timeline_rejects_an_empty_history_and_unknown_units() -> None:
    with pytest.raises(ValueError, match="empty"):
        plot_timeline([])
    with pytest.raises(ValueError, match="unit"):
        plot_timeline([Op(0, "x", 0, 1)], unit="hours")
