"""The race's own clock: inside an actor, time.time() and friends read the run's logical clock,
time.sleep moves it without waiting, and everything else keeps wall time (other threads, the
scheduler, the standard library, the embedded server, threaded load). On embedded and real.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import time
from functools import partial
from time import monotonic as imported_monotonic  # bound before any race: rebound when one opens
from time import perf_counter as imported_perf_counter
from time import sleep as imported_sleep
from time import time as imported_time  # the C-level patch covers this one

import pytest

from helpers import Lab, explore, lease_expires, run_clients, run_schedule, time_passes
from helpers.instruments import actors as actor_side
from helpers.instruments import logical_time
from helpers.instruments.logical_time import EPOCH, MONOTONIC_START_NS
from helpers.instruments.schedule import ScheduleError

START = EPOCH.timestamp()  # 2100-01-01 00:00:00 UTC: where every run's clock starts
MONO = MONOTONIC_START_NS / 1e9


def clocks() -> dict[str, float]:
    """Return every clock an actor might read, through names bound every way they can be."""
    return {
        "time": time.time(),
        "time_ns": time.time_ns() / 1e9,
        "imported time": imported_time(),
        "datetime.now": dt.datetime.now(dt.UTC).timestamp(),
        "utcnow": dt.datetime.utcnow().replace(tzinfo=dt.UTC).timestamp(),
        "monotonic": time.monotonic(),
        "monotonic_ns": time.monotonic_ns() / 1e9,
        "imported monotonic": imported_monotonic(),
        "perf_counter": time.perf_counter(),
        "perf_counter_ns": time.perf_counter_ns() / 1e9,
        "imported perf_counter": imported_perf_counter(),
    }


def sleeper(client, key: str) -> tuple[dict[str, float], dict[str, float]]:
    """Read every clock, sleep 30 s two ways, read them again; one round trip between."""
    before = clocks()
    time.sleep(20)
    client.incr(key)
    imported_sleep(10)
    return before, clocks()


def _expect_logical(before: dict[str, float], after: dict[str, float]) -> None:
    for name, value in before.items():
        start = MONO if "monotonic" in name or "perf" in name else START
        assert value == start, name
        assert after[name] - value == pytest.approx(30.0, abs=1e-3), name


def test_an_actor_reads_the_runs_clock_and_a_sleep_moves_it_at_once(lab: Lab) -> None:
    key = lab.key("n")
    started = time.monotonic()
    trace = run_schedule(lab, {"A": partial(sleeper, key=key)}, "A", watch=[key])
    found = explore(lab, {"A": partial(sleeper, key=key)}, lambda c, r: True, watch=[key])
    assert time.monotonic() - started < 10  # two sleeps of 30 s each, twice: none waited
    _expect_logical(*trace.results["A"])  # run_schedule: actors in threads
    assert found.total == 1
    _expect_logical(*found.outcomes[0].results["A"])  # explore: actors as greenlets


def test_every_run_starts_at_the_same_instant_and_a_sleep_shows_from_the_sleepers_next_step(
    lab: Lab,
) -> None:
    key = lab.key("n")

    def actor(client):
        client.incr(key)
        seen = time.time()
        time.sleep(1)  # the sleeper's own clock moves now; the run's at its next step
        client.incr(key)
        return seen - START

    found = explore(lab, {"A": actor, "B": actor}, lambda c, r: True, watch=[key], reduce=False)
    assert found.total == 6
    for o in found.outcomes:  # the second actor reads a second on only after both first's steps
        first, second = o.schedule[0], "B" if o.schedule[0] == "A" else "A"
        later = o.schedule.startswith(first * 2)
        assert o.results == {first: 0.0, second: 1.0 if later else 0.0}, o.schedule
    reduced = explore(lab, {"A": actor, "B": actor}, lambda c, r: True, watch=[key])
    assert reduced.returned() == found.returned()


def test_the_reduction_orders_a_sleep_against_another_actors_time_reads(lab: Lab) -> None:
    """A step that brings the run's clock up to a sleep conflicts with every step that may read
    it, though they touch no key in common: found by comparing with the exhaustive search."""
    k1, k2 = lab.key("k1"), lab.key("k2")

    def sleeper(client):
        client.set(k1, 1)
        time.sleep(5)
        client.set(k1, 2)

    def reader(client):
        client.get(k2)  # another key: no conflict but the clock's
        return time.time() - START

    race = {"A": sleeper, "B": reader}
    late = lambda c, r: r["B"] < 5  # noqa: E731 - B read before A's sleep showed
    every = explore(lab, race, late, watch=[k1, k2], reduce=False)
    reduced = explore(lab, race, late, watch=[k1, k2])
    assert (every.total, every.bad_count) == (3, 1)  # only "AAB": A's second step first
    assert every.bad == ["AAB"]
    assert (reduced.total, reduced.bad_count, reduced.bad) == (3, 1, ["AAB"])


def stamped_limiter(client, key: str, me: str, limit: int = 1, window_s: float = 1.0) -> bool:
    """A sliding-window log limiter that stamps each admitted request with time.time()."""
    now = time.time()
    client.zremrangebyscore(key, 0, now - window_s)
    if client.zcard(key) >= limit:
        return False
    client.zadd(key, {f"{me}@{now!r}": now})
    time.sleep(window_s / 2)  # then the request is served: time passes
    return True


@pytest.mark.parametrize("reduce", [True, False], ids=["reduced", "exhaustive"])
def test_an_actor_that_stamps_explores_to_the_same_answer_three_runs_in_a_row(
    lab: Lab, reduce: bool
) -> None:
    key = lab.key("window")
    actors = {n: partial(stamped_limiter, key=key, me=n) for n in "AB"}
    within = lambda client, results: client.zcard(key) <= 1  # noqa: E731
    answers = []
    for _ in range(3):
        found = explore(lab, actors, within, watch=[key], reduce=reduce)
        answers.append(
            (
                found.bad_count,
                found.total,
                [(o.schedule, o.ok, o.result_text) for o in found.schedules],
            )
        )
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][:2] == (12, 20)  # check, then add: both admitted unless one added first
    trace = run_schedule(lab, actors, found.bad[0], watch=[key])  # the stamps in the state
    assert f"A@{START!r}" in trace.final_state and f"B@{START!r}" in trace.final_state


def test_a_clock_step_ends_the_ttl_and_leaves_the_actors_clock_alone(lab: Lab) -> None:
    key = lab.key("lease")

    def holder(client):
        taken = time.time()
        client.set(key, "me", px=10_000)
        return client.get(key), time.time() - taken

    trace = run_schedule(lab, {"A": holder, "T": lease_expires(key)}, "ATA", watch=[key])
    assert trace.results["A"] == (None, 0.0)  # the lease ran out; the clock did not move


def test_time_passing_moves_the_actors_clock_and_the_ttls_it_names(lab: Lab) -> None:
    short, long, plain = lab.key("short"), lab.key("long"), lab.key("plain")

    def reader(client):
        client.set(short, 1, px=30_000)
        client.set(long, 1, px=100_000)
        client.set(plain, 1)
        before = time.time() - START
        ttl = client.pttl(long)  # the clock step comes before this round trip, so the read
        # after its reply (part of its step) is 40 s on
        return before, time.time() - START, ttl, client.exists(short, plain)

    race = {"A": reader, "T": time_passes(40, [short, long, plain])}
    trace = run_schedule(lab, race, "AAATAA", watch=[short, long, plain])
    before, after, ttl, left = trace.results["A"]
    assert (before, after) == (0.0, 40.0)
    assert 59_000 < ttl <= 60_000  # 100 s less the 40 that passed
    assert left == 1  # the 30 s TTL ran out; the key without one stays
    assert trace.results["T"] == "40 s passed, 1 TTL(s) ran out"


def test_time_passing_is_ordered_against_every_time_read_and_refuses_nonsense(lab: Lab) -> None:
    key = lab.key("k")

    def reader(client):
        client.get(key)
        return time.time() - START

    race = {"A": reader, "B": reader, "T": time_passes(5)}
    every = explore(lab, race, lambda c, r: True, watch=[key], reduce=False)
    reduced = explore(lab, race, lambda c, r: True, watch=[key])
    assert reduced.returned() == every.returned()
    assert every.returned()["A"] == {"0.0": 3, "5.0": 3}  # T before A's step or after it
    for bad in (0, -1, float("nan"), float("inf"), True, "5"):
        with pytest.raises(ValueError, match="seconds must be a number > 0"):
            time_passes(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="list of keys"):
        time_passes(1, key)
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="times must be a number >= 1"):
            time_passes(1, times=bad)  # type: ignore[arg-type]


# --- what keeps wall time ----------------------------------------------------------------------


def test_outside_the_actors_time_is_the_walls_during_a_race(lab: Lab) -> None:
    """Another thread sampling all through an exploration, the setup and the invariant (the
    scheduler's side) read wall time, while the actors read the logical clock."""
    key, seen, stop, sampling = lab.key("n"), [], threading.Event(), threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.append(clocks())
            sampling.set()
            imported_sleep(0.0005)

    def actor(client):
        for _ in range(3):
            client.incr(key)
            imported_sleep(1)
        return time.time()

    def invariant(client, results):
        seen.append(clocks())
        return True

    wall_start, mono_start = time.time(), time.monotonic()
    sampler = threading.Thread(target=sample, name="sampler")
    sampler.start()
    sampling.wait(5)
    try:
        found = explore(
            lab,
            {"A": actor, "B": actor},
            invariant,
            setup=lambda c: seen.append(clocks()),
            watch=[key],
            reduce=False,
        )
    finally:
        stop.set()
        sampler.join()
    wall_end, mono_end = time.time(), time.monotonic()
    assert found.total == 20  # each actor slept 3 s, and saw 0 to 3 s of the other's sleeps
    assert all(START + 3 <= r <= START + 6 for o in found.outcomes for r in o.results.values())
    assert len(seen) > 2 * found.total  # setup and invariant in each schedule, and the sampler
    for sample_ in seen:
        for name, value in sample_.items():
            if "perf" in name:  # perf_counter's origin is neither: it is never near 1,000 s
                assert abs(value - MONO) > 1, (name, value)
                continue
            low, high = (mono_start, mono_end) if "monotonic" in name else (wall_start, wall_end)
            assert low - 1 <= value <= high + 1, (name, value)


def test_the_standard_library_inside_an_actor_keeps_wall_time(lab: Lab) -> None:
    """A queue's timeout counts wall time: on the logical clock it would never run out."""
    key = lab.key("n")

    def actor(client):
        started = time.time()
        try:
            queue.Queue().get(timeout=0.05)
        except queue.Empty:
            pass
        client.incr(key)
        return time.time() - started

    started = time.monotonic()
    assert run_schedule(lab, {"A": actor}, "A", watch=[key]).results == {"A": 0.0}
    assert 0.05 <= time.monotonic() - started < 10


def test_the_server_keeps_wall_time_when_an_actor_reads_the_logical_clock(lab: Lab) -> None:
    """fakeredis expires keys by the wall clock, as a real server does: a key set in setup with a
    minute to live is still there in 2100, a logical sleep expires nothing, and an absolute
    expiry computed from the logical clock lies in the server's future."""
    kept, short, absolute = lab.key("kept"), lab.key("short"), lab.key("absolute")

    def actor(client):
        client.set(short, "1", px=1_000)
        time.sleep(3600)
        client.set(absolute, "1", exat=int(time.time()) + 10)
        return client.get(kept), client.get(short), client.ttl(absolute) > 10

    trace = run_schedule(
        lab,
        {"A": actor},
        "AAAAA",
        setup=lambda c: c.set(kept, "1", px=60_000),
        watch=[kept, short, absolute],
    )
    assert trace.results["A"] == ("1", "1", True)


def test_threaded_load_keeps_wall_time(lab: Lab) -> None:
    key = lab.key("n")

    def stamp(client):
        client.incr(key)
        return time.time()

    before = time.time()
    result = run_clients(lab, stamp, clients=2, iterations=3)
    after = time.time()
    assert all(before <= value <= after for _, _, value in result.outcomes)


def test_the_watchdog_still_stops_an_actor_that_waits_for_something_else(
    lab: Lab, monkeypatch
) -> None:
    """The watchdog thread reads wall time while the actor reads its logical clock."""

    monkeypatch.setattr(actor_side, "STEP_TIMEOUT_S", 0.3)
    gate, key = threading.Event(), lab.key("n")

    def actor(client):
        time.sleep(3600)  # logical: an hour on the actor's clock, none on the watchdog's
        client.incr(key)
        return gate.wait(5)

    with pytest.raises(ScheduleError, match="did not reach its next round trip"):
        explore(lab, {"A": actor}, lambda c, r: True, watch=[key])
    gate.set()


def test_no_patch_is_left_in_once_the_runs_are_closed() -> None:
    assert logical_time.current() is None
    assert abs(time.time() - dt.datetime.now(dt.UTC).timestamp()) < 1
    assert time.time() < START - 1e9  # the wall, nowhere near 2100


def test_a_time_machine_travel_under_way_keeps_its_time_outside_the_actors(lab: Lab) -> None:
    """Code that travels with time-machine itself (a test) still sees its own time outside."""
    import time_machine

    key, seen = lab.key("n"), []

    def actor(client):
        client.incr(key)
        return time.time()

    with time_machine.travel(dt.datetime(2030, 1, 1, tzinfo=dt.UTC), tick=False):
        trace = run_schedule(lab, {"A": actor}, "A", setup=lambda c: seen.append(time.time()))
        seen.append(time.time())
    assert trace.results == {"A": START}
    assert seen == [dt.datetime(2030, 1, 1, tzinfo=dt.UTC).timestamp()] * 2


def test_a_library_that_stamps_its_requests_prints_the_same_trace_every_run(lab: Lab) -> None:
    """limits' moving window sends time.time() to its script and keeps it in the list."""
    pytest.importorskip("limits")
    cases = pytest.importorskip("cases")  # notebook 08's case files (the six libraries)
    race = cases.limiter_race(lab, "limits", "ABC")
    assert race.explore().summary() == race.explore().summary()  # (its script is loaded now)
    first, again = (race.run("ABC").table() for _ in range(2))
    assert first == again
    assert f"[{int(START)}, {int(START)}]" in first  # two admitted, stamped with the run's time
