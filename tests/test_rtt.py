"""helpers.instruments.rtt: cost per operation as the RTT grows, and the ordering round trips predict."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import matplotlib
import pytest

from helpers import Lab
from helpers.instruments.rtt import rtt_sweep
from races import locks
from races import ratelimit as rl

matplotlib.use("Agg")


def limiters(lab: Lab) -> dict[str, Callable[[Any], Any]]:
    """The notebook 01 comparison: every request admitted, each limiter on its own counter."""
    fns = {
        "naive": rl.naive_allow,
        "Lua": rl.lua_allow,
        "MULTI": rl.multi_allow,
        "WATCH": rl.watch_allow,
    }
    return {n: partial(f, key=lab.key(f"rl:{n}"), limit=10**9, window=60) for n, f in fns.items()}


def lock_turns(lab: Lab) -> dict[str, Callable[[Any], Any]]:
    """The notebook 02 comparison: acquire, then release, uncontended."""
    releases = {
        "GET + DEL": locks.release_check_then_del,
        "Lua": locks.release_lua,
        "DELEX": locks.release_delex,
        "WATCH": locks.release_watch,
    }

    def turn(release: locks.Release, key: str, client: Any) -> Any:
        token = locks.new_token()
        locks.acquire(client, key, token, 60_000)
        return release(client, key, token)

    return {n: partial(turn, r, lab.key(f"lock:{n}")) for n, r in releases.items()}


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Keep both cores busy (two spinning processes) while the test runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_round_trips_per_operation_and_the_table(lab: Lab) -> None:
    sweep = rtt_sweep(lab, limiters(lab), rtts_ms=(0, 1.0), ops=5)
    assert sweep.round_trips == {"naive": 2, "Lua": 1, "MULTI": 1, "WATCH": 3}
    lines = sweep.table().splitlines()
    assert lines[0].split() == ["strategy", "round", "trips", "0", "ms", "RTT", "1", "ms", "RTT"]
    assert [line.split()[0] for line in lines[1:5]] == ["naive", "Lua", "MULTI", "WATCH"]


def test_each_round_trip_is_charged_its_rtt_and_the_wait_is_real(lab: Lab) -> None:
    sweep = rtt_sweep(lab, limiters(lab), rtts_ms=(0, 1.0), ops=5)
    for name, trips in sweep.round_trips.items():
        assert sweep.injected_ms(name, 1.0) >= trips * 1.0  # time.sleep never returns early
        assert sweep.injected_ms(name, 0) == 0
        assert sweep.cost_ms(name, 1.0) >= trips * 1.0


@pytest.mark.parametrize("strategies", [limiters, lock_turns])
def test_fewer_round_trips_cost_less_at_1_ms_with_both_cores_busy(
    lab: Lab, busy_cores: None, strategies: Callable[[Lab], dict[str, Any]]
) -> None:
    sweep = rtt_sweep(lab, strategies(lab), ops=40)
    assert sweep.order_violations(1.0) == []
    assert sweep.dearest(1.0) == "WATCH"


def test_the_plot_has_a_title_axis_labels_and_a_legend(lab: Lab) -> None:
    (ax,) = rtt_sweep(lab, limiters(lab), rtts_ms=(0, 0.1), ops=2).plot().axes
    assert ax.get_title() and "(ms)" in ax.get_xlabel() and "ms" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()][0] == "naive (2 round trips)"


def test_a_sweep_on_a_cluster(cluster_lab: Lab) -> None:
    sweep = rtt_sweep(cluster_lab, limiters(cluster_lab), rtts_ms=(0, 1.0), ops=3)
    assert sweep.round_trips == {"naive": 2, "Lua": 1, "MULTI": 1, "WATCH": 3}


def test_nothing_to_sweep_is_refused(lab: Lab) -> None:
    with pytest.raises(ValueError, match="ops"):
        rtt_sweep(lab, {}, ops=3)
