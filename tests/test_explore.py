"""helpers.instruments.explore: every interleaving is run once, and the known answers come out."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from helpers import Lab
from helpers.instruments.explore import (Exploration, TooManySchedules, all_hold, count_interleavings, counter_at_most,
                             counter_equals, explore, results_at_most)
from helpers.instruments.schedule import call, clock_expires, cmd, run_schedule

from programs import naive_limiter

LIMIT = 5


def lua_limiter(lab: Lab, key: str, limit: int = LIMIT):
    script = lab.script("rate_limit_fixed_window", lab.client())

    def program():
        status, _count = yield call("EVALSHA rate_limit_fixed_window counter",
                                    lambda c: script(keys=[key], args=[limit, 60], client=c))
        return "allowed" if status == 1 else "rejected"
    return program


def incr_first_limiter(key: str, limit: int = LIMIT):
    def program():
        count = yield cmd("INCR", key)
        return "allowed" if count <= limit else "rejected"
    return program


def one_slot_left(key: str):
    return lambda c: c.set(key, LIMIT - 1, ex=60)


def admitted_at_most_limit(key: str):
    return lambda client, results: list(results.values()).count("allowed") <= 1 and int(client.get(key)) <= LIMIT


def read_then_write(key: str, rounds: int):
    def program():
        for _ in range(rounds):
            value = int((yield cmd("GET", key)) or 0)
            yield cmd("SET", key, value + 1)
        return "done"
    return program


def test_naive_limiter_one_slot_left_overshoots_in_4_of_6_schedules(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(lab, {"A": naive_limiter(key), "B": naive_limiter(key)}, admitted_at_most_limit(key),
                    setup=one_slot_left(key), watch=[key])
    assert found.total == 6 and found.bad_count == 4
    assert found.bad == ["ABAB", "ABBA", "BAAB", "BABA"]
    assert found.good == ["AAB", "BBA"]  # the second GET sees the limit and stops: 3 steps
    assert found.first_bad().results == {"A": "allowed", "B": "allowed"}


def test_naive_limiter_picture_is_stable_text(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(lab, {"A": naive_limiter(key), "B": naive_limiter(key)}, admitted_at_most_limit(key),
                    setup=one_slot_left(key), watch=[key])
    assert found.picture() == (" AAB  [ABAB] [ABBA] [BAAB] [BABA]  BBA\n"
                               "[...] = invariant broken; 4 of 6 schedules break the invariant")
    assert str(found) == found.picture()
    assert found.table().splitlines()[2] == "ABAB      BROKEN     A='allowed'  B='allowed'"


def test_lua_limiter_is_one_step_so_no_schedule_overshoots(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(lab, {"A": lua_limiter(lab, key), "B": lua_limiter(lab, key)},
                    admitted_at_most_limit(key), setup=one_slot_left(key), watch=[key])
    assert (found.total, found.bad_count) == (2, 0)
    assert sorted(o.results["A"] for o in found.outcomes) == ["allowed", "rejected"]


def test_incr_first_limiter_has_no_bad_schedule(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(lab, {"A": incr_first_limiter(key), "B": incr_first_limiter(key), "C": incr_first_limiter(key)},
                    lambda client, results: list(results.values()).count("allowed") == 1,
                    setup=one_slot_left(key), watch=[key])
    assert (found.total, found.bad_count) == (6, 0)


def test_two_clients_of_four_steps_have_70_schedules_and_lost_updates(lab: Lab) -> None:
    key = lab.key("n")
    found = explore(lab, {"A": read_then_write(key, 2), "B": read_then_write(key, 2)},
                    lambda client, results: int(client.get(key)) == 4, watch=[key])
    assert found.total == 70 == count_interleavings(4, 4)
    assert len(set(o.schedule for o in found.outcomes)) == 70
    expected_good = {"AAAABBBB", "BBBBAAAA", "AABBBBAA", "BBAAAABB", "AABBAABB", "BBAABBAA"}
    assert set(found.good) == expected_good and found.bad_count == 64


def test_schedules_are_enumerated_in_lexicographic_order(lab: Lab) -> None:
    key = lab.key("n")
    found = explore(lab, {"A": read_then_write(key, 1), "B": read_then_write(key, 1), "C": read_then_write(key, 1)},
                    lambda client, results: True, watch=[key])
    every = sorted({"".join(p) for p in itertools.permutations("AABBCC")})
    assert [o.schedule for o in found.outcomes] == every and found.total == 90


def test_clock_actor_is_explored_like_a_client(lab: Lab) -> None:
    lock = lab.key("lock")

    def holder(token: str):
        def program():
            if not (yield cmd("SET", lock, token, "NX", "PX", 30000)):
                return "busy"
            yield cmd("DEL", lock)
            return "released"
        return program
    found = explore(lab, {"A": holder("a"), "T": clock_expires(lock)},
                    lambda client, results: client.exists(lock) == 0, watch=[lock])
    assert [o.schedule for o in found.outcomes] == ["AAT", "ATA", "TAA"] and found.bad_count == 0


def test_non_deterministic_programs_are_detected(lab: Lab) -> None:
    key = lab.key("n")
    runs = itertools.count()

    def flaky():
        yield cmd("INCR", key)
        if next(runs) % 2 == 0:
            yield cmd("INCR", key)
        return "done"
    with pytest.raises(RuntimeError, match="not deterministic"):
        explore(lab, {"A": flaky, "B": read_then_write(key, 1)}, lambda c, r: True, watch=[key])


def test_too_many_schedules_raise(lab: Lab) -> None:
    key = lab.key("n")
    with pytest.raises(TooManySchedules):
        explore(lab, {"A": read_then_write(key, 2), "B": read_then_write(key, 2)}, lambda c, r: True,
                watch=[key], max_schedules=10)


def test_invariant_must_return_a_bool(lab: Lab) -> None:
    key = lab.key("n")
    with pytest.raises(TypeError, match="must return a bool"):
        explore(lab, {"A": read_then_write(key, 1)}, lambda c, r: "yes", watch=[key])


def test_plot_renders_every_schedule_to_png(lab: Lab, tmp_path: Path) -> None:
    key = lab.key("counter")
    found = explore(lab, {"A": naive_limiter(key), "B": naive_limiter(key)}, admitted_at_most_limit(key),
                    setup=one_slot_left(key), watch=[key])
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
    found = explore(lab, {"A": naive_limiter(key), "B": naive_limiter(key)},
                    all_hold(counter_at_most(key, LIMIT), results_at_most("allowed", 1)),
                    setup=one_slot_left(key), watch=[key])
    assert (found.total, found.bad_count) == (6, 4)


def watch_limiter(key: str, limit: int = 1):
    def program():
        yield cmd("WATCH", key)
        count = int((yield cmd("GET", key)) or 0)
        if count >= limit:
            return "rejected"  # leaves the WATCH open, as careless code does
        yield cmd("MULTI")
        yield cmd("INCR", key)
        return "allowed" if (yield cmd("EXEC")) is not None else "aborted"
    return program


def test_connection_state_does_not_leak_between_replays(lab: Lab) -> None:
    key = lab.key("counter")
    found = explore(lab, {"A": watch_limiter(key), "B": watch_limiter(key)},
                    all_hold(counter_at_most(key, 1), results_at_most("allowed", 1)),
                    setup=lambda c: c.set(key, 0), watch=[key])
    # A replay right after one where A was rejected (its WATCH left open) must not abort A's EXEC.
    uninterrupted = ("AAAAABB", "BAAAAAB", "BBBBBAA", "ABBBBBA")
    by_schedule = {o.schedule: o.results for o in found.outcomes if o.schedule in uninterrupted}
    assert by_schedule == {"AAAAABB": {"A": "allowed", "B": "rejected"}, "BAAAAAB": {"A": "allowed", "B": "rejected"},
                           "BBBBBAA": {"A": "rejected", "B": "allowed"}, "ABBBBBA": {"A": "rejected", "B": "allowed"}}
    assert found.bad_count == 0 and all("allowed" in o.results.values() for o in found.outcomes)


def test_trace_of_an_explored_schedule_matches_run_schedule(lab: Lab) -> None:
    key = lab.key("counter")
    programs = {"A": naive_limiter(key), "B": naive_limiter(key)}
    found = explore(lab, programs, admitted_at_most_limit(key), setup=one_slot_left(key), watch=[key])
    direct = run_schedule(lab, programs, "ABBA", setup=one_slot_left(key), watch=[key])
    assert str(found.trace("ABBA")) == str(direct) and found.trace("ABBA") is found.trace("ABBA")
    assert str(found.first_bad()) == str(run_schedule(lab, programs, "ABAB", setup=one_slot_left(key), watch=[key]))
    with pytest.raises(KeyError, match="not one of the explored"):
        found.trace("AAAA")
    quiet = explore(lab, programs, admitted_at_most_limit(key), setup=one_slot_left(key), watch=[key],
                    keep_traces=False)
    with pytest.raises(KeyError, match="keep_traces=False"):
        quiet.trace("ABAB")


def test_explore_releases_its_connections(lab: Lab) -> None:
    key = lab.key("n")
    before = len(lab._clients)
    explore(lab, {"A": read_then_write(key, 1), "B": read_then_write(key, 1)}, lambda c, r: True, watch=[key])
    with pytest.raises(TypeError):
        explore(lab, {"A": read_then_write(key, 1)}, lambda c, r: None, watch=[key])
    assert len(lab._clients) == before


def test_explorer_runs_on_a_cluster(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("limiter", "counter")
    found = explore(cluster_lab, {"A": naive_limiter(key), "B": naive_limiter(key)}, admitted_at_most_limit(key),
                    setup=one_slot_left(key), watch=[key])
    assert (found.total, found.bad_count) == (6, 4)


def test_a_program_that_never_finishes_is_stopped_after_max_steps(lab: Lab) -> None:
    # Regression: a program that kept yielding steps made explore loop (and grow) forever.
    def forever():
        for _ in itertools.count():
            yield cmd("PING")

    with pytest.raises(TooManySchedules, match="more than 50 steps"):
        explore(lab, {"A": forever, "B": forever}, lambda c, r: True, max_steps=50)
    assert lab.ns.keys(lab.client()) == []
