"""helpers.instruments.explore: every interleaving is run once, and the known answers come out."""

from __future__ import annotations

import itertools
import threading
import time
from functools import partial
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from programs import incr_first_limiter, lock_holder, naive_limiter

from helpers import Lab, lua
from helpers.instruments import actors as actor_side
from helpers.instruments import explore as explore_module
from helpers.instruments.explore import (
    Exploration,
    TooManySchedules,
    all_hold,
    count_interleavings,
    counter_at_most,
    counter_equals,
    explore,
    results_at_most,
)
from helpers.instruments.schedule import ScheduleError, lease_expires, run_schedule

LIMIT = 5


def lua_file_limiter(client, key: str, limit: int = LIMIT) -> str:
    """The suite's Lua limiter (lua/rate_limit_fixed_window.lua): one EVALSHA."""
    status, _count = lua("rate_limit_fixed_window")(keys=[key], args=[limit, 60], client=client)
    return "allowed" if status == 1 else "rejected"


def one_slot_left(key: str):
    return lambda c: c.set(key, LIMIT - 1, ex=60)


def admitted_at_most_limit(key: str):
    return lambda client, results: (
        list(results.values()).count("allowed") <= 1 and int(client.get(key)) <= LIMIT
    )


def read_then_write(client, key: str, rounds: int) -> str:
    for _ in range(rounds):
        value = int(client.get(key) or 0)
        client.set(key, value + 1)
    return "done"


def two(fn, **kwargs):
    actor = partial(fn, **kwargs)
    return {"A": actor, "B": actor}


def test_naive_limiter_one_slot_left_overshoots_in_4_of_6_schedules(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        two(naive_limiter, key=key),
        admitted_at_most_limit(key),
        setup=one_slot_left(key),
        watch=[key],
    )
    assert found.total == 6 and found.bad_count == 4
    assert found.bad == ["ABAB", "ABBA", "BAAB", "BABA"]
    assert found.good == ["AAB", "BBA"]  # the second GET sees the limit and stops: 3 steps
    assert found.first_bad().results == {"A": "allowed", "B": "allowed"}


def test_naive_limiter_picture_is_stable_text(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        two(naive_limiter, key=key),
        admitted_at_most_limit(key),
        setup=one_slot_left(key),
        watch=[key],
    )
    assert found.picture() == (
        " AAB  [ABAB] [ABBA] [BAAB] [BABA]  BBA\n"
        "[...] = invariant broken; 4 of 6 schedules break the invariant, in 2 of 4 classes\n"
        "returned: A: 'allowed' in 5, 'rejected' in 1; B: 'allowed' in 5, 'rejected' in 1"
    )
    assert str(found) == found.picture()
    assert found.table().splitlines()[2] == "ABAB      BROKEN     A='allowed'  B='allowed'"


def test_lua_limiter_is_one_round_trip_so_no_schedule_overshoots(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        two(lua_file_limiter, key=key),
        admitted_at_most_limit(key),
        setup=one_slot_left(key),
        watch=[key],
    )
    assert (found.total, found.bad_count) == (2, 0)
    assert sorted(o.results["A"] for o in found.outcomes) == ["allowed", "rejected"]


def test_incr_first_limiter_has_no_bad_schedule(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        {**two(incr_first_limiter, key=key), "C": partial(incr_first_limiter, key=key)},
        lambda client, results: list(results.values()).count("allowed") == 1,
        setup=one_slot_left(key),
        watch=[key],
    )
    assert (found.total, found.bad_count) == (6, 0)


def test_two_clients_of_four_steps_have_70_schedules_and_lost_updates(lab: Lab) -> None:
    key = lab.key("n")
    found = explore(
        lab,
        two(read_then_write, key=key, rounds=2),
        lambda client, results: int(client.get(key)) == 4,
        watch=[key],
    )
    assert found.total == 70 == count_interleavings(4, 4)
    assert len(set(o.schedule for o in found.schedules)) == 70 and found.runs == 34
    expected_good = {"AAAABBBB", "BBBBAAAA", "AABBBBAA", "BBAAAABB", "AABBAABB", "BBAABBAA"}
    assert set(found.good) == expected_good and found.bad_count == 64


@pytest.mark.parametrize("reduce", [False, True])
def test_schedules_are_enumerated_in_lexicographic_order(lab: Lab, reduce: bool) -> None:
    key = lab.key("n")
    found = explore(
        lab,
        {
            **two(read_then_write, key=key, rounds=1),
            "C": partial(read_then_write, key=key, rounds=1),
        },
        lambda client, results: True,
        watch=[key],
        reduce=reduce,
    )
    every = sorted({"".join(p) for p in itertools.permutations("AABBCC")})
    assert [o.schedule for o in found.schedules] == every and found.total == 90
    assert found.runs == (90 if not reduce else found.classes) < 91


def test_clock_actor_is_explored_like_a_client(lab: Lab) -> None:
    lock = lab.key("lock")

    found = explore(
        lab,
        {"A": partial(lock_holder, key=lock, token="a"), "T": lease_expires(lock)},
        lambda client, results: client.exists(lock) == 0,
        watch=[lock],
    )
    assert [o.schedule for o in found.outcomes] == ["AAT", "ATA", "TAA"] and found.bad_count == 0


def test_non_deterministic_actors_are_detected(lab: Lab) -> None:
    key = lab.key("n")
    runs = itertools.count()

    def flaky(client):
        client.incr(key)
        if next(runs) % 2 == 0:
            client.incr(key)
        return "done"

    with pytest.raises(RuntimeError, match="not deterministic"):
        explore(
            lab,
            {"A": flaky, "B": partial(read_then_write, key=key, rounds=1)},
            lambda c, r: True,
            watch=[key],
        )


def test_too_many_schedules_raise(lab: Lab) -> None:
    key = lab.key("n")
    with pytest.raises(TooManySchedules):
        explore(
            lab,
            two(read_then_write, key=key, rounds=2),
            lambda c, r: True,
            watch=[key],
            max_schedules=10,
        )


def test_invariant_must_return_a_bool(lab: Lab) -> None:
    key = lab.key("n")
    with pytest.raises(TypeError, match="must return a bool"):
        explore(
            lab, {"A": partial(read_then_write, key=key, rounds=1)}, lambda c, r: "yes", watch=[key]
        )


def test_plot_renders_every_schedule_to_png(lab: Lab, tmp_path: Path) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        two(naive_limiter, key=key),
        admitted_at_most_limit(key),
        setup=one_slot_left(key),
        watch=[key],
    )
    fig = found.plot(title="GET then INCR")
    assert isinstance(fig, Figure)
    assert "4 of 6 schedules break the invariant" in fig.axes[0].get_title()
    fig.savefig(tmp_path / "grid.png")
    assert (tmp_path / "grid.png").stat().st_size > 1000


def test_count_interleavings_is_the_multinomial() -> None:
    assert count_interleavings(2, 2) == 6 and count_interleavings(4, 4) == 70
    assert count_interleavings(3, 3, 3) == 1680 and count_interleavings() == 1
    with pytest.raises(ValueError):
        count_interleavings(-1)


def test_exploration_without_traces_still_counts() -> None:
    assert Exploration([]).total == 0 and Exploration([]).first_bad() is None


def test_invariant_helpers_pin_overshoot_and_lost_updates(lab: Lab) -> None:
    key = lab.key("counter")
    client = lab.client()
    assert counter_at_most(key, 0)(client, {}) and counter_equals(key, 0)(client, {})  # missing = 0
    client.set(key, 6)
    assert not counter_at_most(key, 5)(client, {}) and counter_at_most(key, 6)(client, {})
    assert counter_equals(key, 6)(client, {}) and not counter_equals(key, 5)(client, {})
    assert results_at_most("allowed", 1)(client, {"A": "allowed", "B": "rejected"})
    assert not results_at_most("allowed", 1)(client, {"A": "allowed", "B": "allowed"})
    assert all_hold(counter_equals(key, 6), results_at_most("x", 0))(client, {"A": "y"})
    assert not all_hold(counter_equals(key, 6), results_at_most("y", 0))(client, {"A": "y"})


def test_invariant_helpers_give_the_known_answer(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        two(naive_limiter, key=key),
        all_hold(counter_at_most(key, LIMIT), results_at_most("allowed", 1)),
        setup=one_slot_left(key),
        watch=[key],
    )
    assert (found.total, found.bad_count) == (6, 4)


def watch_limiter(client, key: str, limit: int = 1) -> str:
    """Raw WATCH ... EXEC on one connection; a rejection leaves the WATCH open, as careless code does."""
    with client.pipeline(
        transaction=False
    ) as _:  # only to hold one connection for the raw commands
        conn = client.connection_pool.get_connection()
        try:

            def send(*args):
                conn.send_command(*args)
                return conn.read_response()

            send("WATCH", key)
            count = int(send("GET", key) or 0)
            if count >= limit:
                return "rejected"
            send("MULTI")
            send("INCRBY", key, 1)
            return "allowed" if send("EXEC") is not None else "aborted"
        finally:
            client.connection_pool.release(conn)


def test_connection_state_does_not_leak_between_replays(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(
        lab,
        two(watch_limiter, key=key),
        all_hold(counter_at_most(key, 1), results_at_most("allowed", 1)),
        setup=lambda c: c.set(key, 0),
        watch=[key],
    )
    # A replay right after one where A was rejected (its WATCH left open) must not abort A's EXEC.
    uninterrupted = ("AAAAABB", "BAAAAAB", "BBBBBAA", "ABBBBBA")
    by_schedule = {o.schedule: o.results for o in found.schedules if o.schedule in uninterrupted}
    assert by_schedule == {
        "AAAAABB": {"A": "allowed", "B": "rejected"},
        "BAAAAAB": {"A": "allowed", "B": "rejected"},
        "BBBBBAA": {"A": "rejected", "B": "allowed"},
        "ABBBBBA": {"A": "rejected", "B": "allowed"},
    }
    assert found.bad_count == 0 and all("allowed" in o.results.values() for o in found.outcomes)


def test_trace_of_an_explored_schedule_matches_run_schedule(lab: Lab) -> None:
    key = lab.key("counter")
    programs = two(naive_limiter, key=key)
    found = explore(
        lab, programs, admitted_at_most_limit(key), setup=one_slot_left(key), watch=[key]
    )
    direct = run_schedule(lab, programs, "ABBA", setup=one_slot_left(key), watch=[key])
    assert str(found.trace("ABBA")) == str(direct) and found.trace("ABBA") is found.trace("ABBA")
    assert str(found.first_bad()) == str(
        run_schedule(lab, programs, "ABAB", setup=one_slot_left(key), watch=[key])
    )
    with pytest.raises(KeyError, match="not one of the explored"):
        found.trace("AAAA")
    quiet = explore(
        lab,
        programs,
        admitted_at_most_limit(key),
        setup=one_slot_left(key),
        watch=[key],
        keep_traces=False,
    )
    with pytest.raises(KeyError, match="keep_traces=False"):
        quiet.trace("ABAB")


def test_explore_releases_its_connections(lab: Lab) -> None:
    key = lab.key("n")
    before = len(lab._clients)
    explore(lab, two(read_then_write, key=key, rounds=1), lambda c, r: True, watch=[key])
    with pytest.raises(TypeError):
        explore(
            lab, {"A": partial(read_then_write, key=key, rounds=1)}, lambda c, r: None, watch=[key]
        )
    assert len(lab._clients) == before


def test_explorer_runs_on_a_cluster(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("limiter", "counter")
    found = explore(
        cluster_lab,
        two(naive_limiter, key=key),
        admitted_at_most_limit(key),
        setup=one_slot_left(key),
        watch=[key],
    )
    assert (found.total, found.bad_count) == (6, 4)


def test_an_actor_that_never_finishes_is_stopped_after_max_steps(lab: Lab) -> None:
    # Regression: an actor that kept sending round trips made explore loop (and grow) forever.
    def forever(client):
        for _ in itertools.count():
            client.ping()

    with pytest.raises(TooManySchedules, match="more than 50 steps"):
        explore(lab, {"A": forever, "B": forever}, lambda c, r: True, max_steps=50)
    assert lab.ns.keys(lab.client()) == []


def test_an_actor_repeating_one_round_trip_is_stopped_by_name_long_before_max_steps(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An actor that polls GET without end took 234 s to reach max_steps (10,000) on one replay.
    monkeypatch.setattr(explore_module, "REPEAT_LIMIT", 5)
    key = lab.key("flag")

    def poll(client):
        while client.get(key) is None:
            pass

    def polls_four_times(client):  # the same round trip 4 times, then done: under the limit
        for _ in range(4):
            client.get(key)

    with pytest.raises(TooManySchedules, match=r"actor A makes no progress: it sent GET flag"):
        explore(lab, {"A": poll, "B": lambda c: c.set(key, 1)}, lambda c, r: True)
    found = explore(lab, {"A": polls_four_times, "B": lambda c: c.set(key, 1)}, lambda c, r: True)
    assert found.total == 5 and found.bad_count == 0


def test_the_exploration_keeps_the_very_function_objects_it_ran(lab: Lab) -> None:
    key = lab.key("counter")
    actors = two(naive_limiter, key=key)
    found = explore(lab, actors, admitted_at_most_limit(key), setup=one_slot_left(key), watch=[key])
    assert found.actors["A"] is actors["A"] and found.actors["B"].func is naive_limiter


def test_a_search_over_the_limit_is_refused_after_its_first_replay(lab: Lab) -> None:
    # 4 actors of 4 steps: 63,063,000 schedules. Without the estimate the explorer would replay
    # max_schedules of them (at a few hundred a second) before giving up.
    key = lab.key("n")
    actors = {name: partial(read_then_write, key=key, rounds=2) for name in "ABCD"}
    start = time.monotonic()
    with pytest.raises(TooManySchedules, match=r"about 63,063,000 schedules \(A 4, B 4, C 4, D 4"):
        explore(lab, actors, lambda c, r: True, watch=[key], max_schedules=20_000, reduce=False)
    assert time.monotonic() - start < 30  # one replay, not 20,000 (generous: a loaded machine)


def test_a_search_the_estimate_allows_still_runs_to_its_end(lab: Lab) -> None:
    key = lab.key("n")
    result = explore(
        lab,
        two(read_then_write, key=key, rounds=2),
        lambda c, r: True,
        watch=[key],
        max_schedules=70,
    )
    assert result.total == 70


def test_an_actor_that_waits_for_something_other_than_redis_is_stopped_with_its_name(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Replays run actors as greenlets on this thread: without the watchdog this would hang.
    monkeypatch.setattr(actor_side, "STEP_TIMEOUT_S", 0.5)
    key, never = lab.key("n"), threading.Event()

    def waits(client: object) -> str:
        client.get(key)  # type: ignore[attr-defined]
        never.wait(60)  # nobody sets it (the bound only keeps a broken watchdog from hanging)
        return "done"

    start = time.monotonic()
    with pytest.raises(ScheduleError, match="actor B did not reach its next round trip"):
        explore(
            lab,
            {"A": partial(read_then_write, key=key, rounds=1), "B": waits},
            lambda c, r: True,
            watch=[key],
        )
    assert time.monotonic() - start < 10
