"""Library code inside an actor: its own clients are the actor's, its sleeps are logical, and what
a schedule cannot control is refused. On the embedded backend and on a real server.

The "library" here is what the READMEs of limits, redlock-py and python-redis-rate-limit do:
build a client from a URL or host and port the caller gives. Its URL points at a port where no
server listens, so a command that escaped the race would fail instead of passing unseen.
"""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest
import redis

from helpers import Lab, Race, explore, run_schedule
from helpers.instruments import actors as actor_side
from helpers.instruments.adopt import SPUN, ActorRefused
from helpers.instruments.schedule import TIMED_OUT, ScheduleError
from helpers.instruments.spec import RaceSpec

NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def counter_from_url(client, key: str, url: str = NOWHERE) -> int:
    """Read, then write one more, on a client the 'library' builds itself from a URL."""
    own = redis.Redis.from_url(url, decode_responses=True)
    value = int(own.get(key) or 0)
    own.set(key, value + 1)
    return value + 1


def test_a_client_the_actor_builds_from_a_url_is_gated_on_the_labs_server(lab: Lab) -> None:
    key = lab.key("n")
    actor = partial(counter_from_url, key=key)
    found = explore(lab, {"A": actor, "B": actor}, lambda c, r: int(c.get(key)) == 2, watch=[key])
    assert found.total == 6  # two steps each: every interleaving of the library's own commands
    assert found.bad == [
        "ABAB",
        "ABBA",
        "BAAB",
        "BABA",
    ]  # the lost update, as with the lab's client
    trace = run_schedule(lab, {"A": actor, "B": actor}, "ABAB", watch=[key])
    assert [row.command for row in trace.rows] == ["GET n", "GET n", "SET n 1", "SET n 1"]


def test_a_pipeline_and_a_script_of_a_foreign_client_are_steps_too(lab: Lab) -> None:
    key = lab.key("n")

    def library(client):
        own = redis.Redis(host="127.0.0.1", port=1)
        bump = own.register_script("return redis.call('INCR', KEYS[1])")
        with own.pipeline(transaction=True) as pipe:
            pipe.incr(key).incr(key)
            pipe.execute()
        return bump(keys=[key])

    trace = run_schedule(lab, {"A": library}, "AA", watch=[key])
    assert trace.results["A"] == 3
    assert (
        len(trace.rows) == 2
    )  # the MULTI block, then the script (NOSCRIPT, load, retry: one step)


def test_an_actor_without_a_single_round_trip_is_refused(lab: Lab) -> None:
    with pytest.raises(ActorRefused, match="actor A finished without a single round trip"):
        explore(lab, {"A": lambda client: 42}, lambda c, r: True)


def test_a_sleep_and_spin_acquire_ends_within_its_bound_and_no_wall_time_passes(lab: Lab) -> None:
    name = lab.key("lock")

    def holder(client):  # takes the lock and never gives it back (a crashed holder)
        return client.lock(name, timeout=30).acquire(blocking=False)

    def waiter(client):  # redis-py's blocking acquire: SET NX, sleep 0.5 s, again, ...
        return client.lock(name, timeout=30, sleep=0.5).acquire(blocking=True)

    start = time.monotonic()
    found = explore(lab, {"A": holder, "B": waiter}, lambda c, r: True, reset=[name])
    assert time.monotonic() - start < 20  # 20 sleeps of 0.5 s per schedule would be 10 s each
    assert found.spin_cut >= 1 and "cut by its spin bound" in found.summary()
    assert all(o.results["B"] in (True, SPUN) for o in found.outcomes)
    assert any(o.results["B"] is SPUN for o in found.outcomes)  # held: B gave up, never hung


def test_subscribing_inside_an_actor_is_refused_with_the_reason(lab: Lab) -> None:
    def listener(client):
        client.get(lab.key("x"))
        own = redis.Redis(host="127.0.0.1", port=1)
        own.pubsub().subscribe("news")

    with pytest.raises(ActorRefused, match="subscribes .pubsub.: messages arrive on another"):
        run_schedule(lab, {"A": listener}, "AA")


def test_outside_an_actor_redis_and_sleep_are_untouched() -> None:
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(NOWHERE, socket_connect_timeout=1).ping()
    start = time.monotonic()
    time.sleep(0.05)
    assert time.monotonic() - start >= 0.05


def test_a_schedule_error_still_names_an_actor_that_blocks_on_something_else(
    lab: Lab, monkeypatch
) -> None:
    import threading

    monkeypatch.setattr(actor_side, "STEP_TIMEOUT_S", 0.3)
    gate = threading.Event()
    with pytest.raises(ScheduleError, match="did not reach its next round trip"):
        run_schedule(lab, {"A": lambda client: gate.wait(5)}, "A")
    gate.set()


def test_a_cold_script_cache_explores_deterministically_with_the_warm_count(lab: Lab) -> None:
    key = lab.key("n")
    # a script no server has seen: the first replay meets NOSCRIPT, loads it, and retries
    source = f"return redis.call('INCRBY', KEYS[1], 1) -- {lab.ns.prefix} {time.time_ns()}"

    def library(client):
        own = redis.Redis.from_url(NOWHERE)
        own.get(key)
        return own.register_script(source)(keys=[key])

    found = explore(lab, {"A": library, "B": library}, lambda c, r: True, watch=[key])
    assert found.total == 6  # 2 steps each (GET, the script), as with a warm cache
    trace = run_schedule(lab, {"A": library, "B": library}, "AABB", watch=[key])
    assert trace.results == {"A": 1, "B": 2}


# --- background threads: a thread the actor started is its sub-actor (A1) ------------------------


def _renewing(key: str, seen: list, via_url: bool = False):
    """Return an actor that takes a lease, then renews it from a thread of its own (as
    python-redis-lock's auto-renewal does), on its own client or one it built from a URL."""

    def actor(client):
        own = redis.Redis.from_url(NOWHERE) if via_url else client
        own.set(key, "me", px=10_000)

        def renew():
            try:
                own.pexpire(key, 20_000)
            except ActorRefused as exc:  # what the renewal thread itself is told
                seen.append(exc)

        thread = threading.Thread(target=renew, name="lease-renewer")
        thread.start()
        thread.join(5)
        seen.append(thread.is_alive())  # False: refused at once, never parked under A's letter
        return own.get(key)

    return actor


REFUSED = r"thread 'lease-renewer', which actor A started, sent (PEXPIRE lease 20000|PEXPIRE) "


@pytest.mark.parametrize("via_url", [False, True], ids=["its own client", "a client from a URL"])
def test_a_thread_the_actor_starts_is_its_sub_actor_in_the_stepper(lab: Lab, via_url: bool) -> None:
    """The stepper runs a forced schedule's greenlets: the renewer is A1, a step of its own."""
    key, seen = lab.key("lease"), []
    with Race(lab, {"A": _renewing(key, seen, via_url)}, watch=[key]).stepper() as stepper:
        stepper.step("A")
        assert stepper.waiting == {"A": "(waits, with a timeout)", "A1": "PEXPIRE lease 20000"}
        assert 0 < lab.client().pttl(key) <= 10_000  # not renewed yet: A1 has not been named
        stepper.play("A A1 A")
        assert [r.client for r in stepper.trace.rows] == ["A", "A1", "A"]
        assert stepper.results == {"A": b"me" if via_url else "me"} and stepper.finished
        stepper.play("AAA")  # A's letter stands for A1 while A waits for it
        assert [r.client for r in stepper.trace.rows] == ["A", "A1", "A"]
    assert set(seen) == {False}  # never refused; joined, it is no longer alive
    assert 10_000 < lab.client().pttl(key) <= 20_000  # A1's renewal reached the server


@pytest.mark.parametrize("via_url", [False, True], ids=["its own client", "a client from a URL"])
def test_a_thread_the_actor_starts_is_its_sub_actor_under_explore(lab: Lab, via_url: bool) -> None:
    """The explorer steps it as A1: its PEXPIRE is a step of its own, B can come before it."""
    key, seen = lab.key("lease"), []
    actors = {"A": _renewing(key, seen, via_url), "B": lambda client: client.pttl(key) > 10_000}
    found = explore(lab, actors, lambda c, r: True, watch=[key], reduce=False)
    schedules = sorted(o.schedule for o in found.outcomes)
    assert schedules == ["A A1 A B", "A A1 B A", "A B A1 A", "B A A1 A"]
    assert {o.schedule: o.results["B"] for o in found.outcomes if o.schedule != "B A A1 A"} == {
        "A A1 A B": True,
        "A A1 B A": True,
        "A B A1 A": False,  # B read the lease before the renewal, A1's step
    }
    assert set(seen) == {False}  # never refused; joined, it is no longer alive
    trace = run_schedule(lab, actors, "A B A1 A", watch=[key])  # a schedule that names A1
    assert [r.client for r in trace.rows] == ["A", "B", "A1", "A"]
    assert trace.results == {"A": b"me" if via_url else "me", "B": False}


def test_a_gated_client_used_from_the_callers_thread_mid_run_is_refused(lab: Lab) -> None:
    """Not only threads an actor started: any thread but the actor's own (here the test's)."""
    from helpers.instruments.schedule import ScheduleRun

    key, clients = lab.key("n"), []

    def actor(client):
        clients.append(client)
        client.incr(key)
        return client.incr(key)

    with ScheduleRun(RaceSpec(lab, {"A": actor}, watch=[key])) as run:
        run.step("A")
        with pytest.raises(ActorRefused, match=r"thread 'MainThread' sent GET n through actor A's"):
            clients[0].get(key)
        with pytest.raises(ActorRefused, match="MainThread"):
            run.step("A")  # the race says so too, at its next step


def test_a_thread_that_sends_nothing_is_no_problem_and_threads_outside_actors_are_free(
    lab: Lab,
) -> None:
    key = lab.key("n")

    def actor(client):
        found = []
        thread = threading.Thread(target=lambda: found.append(sum(range(10))))
        thread.start()
        thread.join()
        return client.incr(key, found[0])

    assert run_schedule(lab, {"A": actor}, "A", watch=[key]).results == {"A": 45}
    free = []
    thread = threading.Thread(target=lambda: free.append(lab.client().incr(key)))
    thread.start()
    thread.join()
    assert free == [46]  # a thread no actor started: untouched, after a race has run


def test_python_redis_lock_s_auto_renewal_thread_renews_when_its_wait_times_out(lab: Lab) -> None:
    redis_lock = pytest.importorskip("redis_lock")  # not pinned in the lock: only if installed
    name = lab.key("job")

    def holder(client):
        lock = redis_lock.Lock(client, name, expire=1, auto_renewal=True)
        assert lock.acquire(blocking=False)
        threading.Event().wait(1.5)  # logical: times out when nothing else can run
        lock.release()
        return True

    trace = run_schedule(lab, {"A": holder}, "A A A1 A1 A", finish=True)  # GET, SET NX EX
    assert [r.client for r in trace.rows][:5] == ["A", "A", "A1", "A1", "A"]
    assert trace.rows[2].reply == TIMED_OUT  # after 2/3 of expire (its interval) it extends:
    assert trace.rows[3].command.startswith("EVALSHA")  # its extend script, as A1's own step
    assert trace.rows[4].reply == TIMED_OUT and trace.results == {"A": True}
