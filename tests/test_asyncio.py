"""asyncio actors: an ``async def`` actor of a ``redis.asyncio`` client is explored, stepped and
loaded as its synchronous twin is, on the embedded backend and on a real server.

Each story is written twice, once with ``redis`` and once with ``redis.asyncio``, line for line;
the two must give the same schedules, the same broken ones and the same trace. A client the
"library" builds from a URL points at a port where nothing listens, so a round trip that escaped
the race would fail instead of passing unseen.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

import pytest
import redis
import redis.asyncio

from helpers import Lab, Stepper, explore, lease_expires, run_clients, run_schedule
from helpers.instruments import actors as actor_side
from helpers.instruments.adopt import SPUN, ActorRefused, Refusal
from helpers.instruments.load import run_processes
from helpers.instruments.logical_time import MONOTONIC_START_NS
from helpers.instruments.schedule import ScheduleError

NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def verdicts(found: Any) -> tuple[int, list[str]]:
    """Return (schedules, the broken ones) of an exploration."""
    return found.total, sorted(found.bad)


# --- read-modify-write: the lost update -------------------------------------------------------


def rmw(client, key: str) -> int:
    value = int(client.get(key) or 0)
    client.set(key, value + 1)
    return value + 1


async def async_rmw(client, key: str) -> int:
    value = int(await client.get(key) or 0)
    await client.set(key, value + 1)
    return value + 1


async def async_rmw_own_client(client, key: str) -> int:
    """The same, on a client the 'library' builds from a URL, as a README shows."""
    own = redis.asyncio.Redis.from_url(NOWHERE, decode_responses=True)
    try:
        value = int(await own.get(key) or 0)
        await own.set(key, value + 1)
        return value + 1
    finally:
        await own.aclose()


def test_an_async_read_modify_write_explores_to_the_counts_of_its_sync_twin(lab: Lab) -> None:
    key = lab.key("n")
    both = lambda c, r: int(c.get(key)) == 2  # noqa: E731
    sync = explore(lab, {"A": partial(rmw, key=key), "B": partial(rmw, key=key)}, both, watch=[key])
    for actor in (async_rmw, async_rmw_own_client):
        found = explore(
            lab, {"A": partial(actor, key=key), "B": partial(actor, key=key)}, both, watch=[key]
        )
        assert verdicts(found) == verdicts(sync) == (6, ["ABAB", "ABBA", "BAAB", "BABA"])
        assert {o.results["A"] for o in found.outcomes} == {1, 2}  # what each actor returned
    mixed = explore(
        lab, {"A": partial(async_rmw, key=key), "B": partial(rmw, key=key)}, both, watch=[key]
    )
    assert verdicts(mixed) == verdicts(sync)


@pytest.mark.parametrize("options", [{"reduce": False}, {"crashes": 1}], ids=["plain", "crash"])
def test_an_async_actor_meets_the_sync_twin_s_schedules_and_faults(lab: Lab, options: Any) -> None:
    key = lab.key("n")
    at_most_two = lambda c, r: int(c.get(key) or 0) == 2  # noqa: E731
    found = {}
    for actor in (rmw, async_rmw):
        actors = {"A": partial(actor, key=key), "B": partial(actor, key=key)}
        found[actor] = explore(lab, actors, at_most_two, watch=[key], **options)
    sync, async_ = found[rmw], found[async_rmw]
    assert verdicts(async_) == verdicts(sync)
    assert [(o.schedule, o.results) for o in async_.outcomes] == [
        (o.schedule, o.results) for o in sync.outcomes
    ]
    if "crashes" in options:  # "A!": A's client is killed between two round trips
        assert any("A!" in o.schedule and "A" not in o.results for o in async_.outcomes)
        assert (async_.total, len(async_.bad)) == (24, 22)


def test_an_async_actor_s_forced_schedule_has_the_sync_trace(lab: Lab) -> None:
    key = lab.key("n")
    actors = {"A": partial(async_rmw, key=key), "B": partial(async_rmw_own_client, key=key)}
    trace = run_schedule(lab, actors, "ABAB", watch=[key])
    sync = run_schedule(lab, {"A": partial(rmw, key=key), "B": partial(rmw, key=key)}, "ABAB",
                        watch=[key])  # fmt: skip
    assert [r.command for r in trace.rows] == [r.command for r in sync.rows]
    assert [r.command for r in trace.rows] == ["GET n", "GET n", "SET n 1", "SET n 1"]
    assert trace.results == sync.results == {"A": 1, "B": 1}


def test_an_async_actor_explores_on_a_cluster_as_its_sync_twin(cluster_lab: Lab) -> None:
    one, other = cluster_lab.key("one"), cluster_lab.key("other")  # keys on different nodes

    def move(client) -> int:  # a plain command each, routed by key
        value = int(client.get(one) or 0)
        client.set(other, value + 1)
        return value

    async def async_move(client) -> int:
        value = int(await client.get(one) or 0)
        await client.set(other, value + 1)
        return value

    def incr_both(client) -> list[Any]:
        return [client.incr(one), client.incr(other)]

    async def async_incr_both(client) -> list[Any]:
        return [await client.incr(one), await client.incr(other)]

    found = []
    for a, b in ((move, incr_both), (async_move, async_incr_both)):
        found.append(
            explore(cluster_lab, {"A": a, "B": b}, lambda c, r: r["A"] == 0, watch=[one, other])
        )
    assert [(o.schedule, o.results) for o in found[1].outcomes] == [
        (o.schedule, o.results) for o in found[0].outcomes
    ]
    assert found[1].bad != []


# --- a lock: SET NX PX, then release by compare-and-delete ---------------------------------------

RELEASE = """
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
end
return 0
"""


def take_and_release(client, key: str, me: str) -> int:
    """Return how many holders were inside with it (1: alone), or 0 if the lock was taken."""
    if not client.set(key, me, nx=True, px=30_000):
        return 0
    inside = int(client.incr(key + ":inside"))
    client.decr(key + ":inside")
    client.register_script(RELEASE)(keys=[key], args=[me])
    return inside


async def async_take_and_release(client, key: str, me: str) -> int:
    if not await client.set(key, me, nx=True, px=30_000):
        return 0
    inside = int(await client.incr(key + ":inside"))
    await client.decr(key + ":inside")
    await client.register_script(RELEASE)(keys=[key], args=[me])
    return inside


def lock_race(lab: Lab, actor: Any, expiry: bool) -> Any:
    """Explore two takers; with expiry, a clock step may end the holder's lease at any point."""
    key = lab.key("lock")
    actors: dict[str, Any] = {
        "A": partial(actor, key=key, me="a"),
        "B": partial(actor, key=key, me="b"),
    }
    if expiry:
        actors["T"] = lease_expires(key)
    alone = lambda c, results: results["A"] in (0, 1) and results["B"] in (0, 1)  # noqa: E731
    return explore(lab, actors, alone, watch=[key], reset=[key, key + ":inside"])


@pytest.mark.parametrize("expiry", [False, True], ids=["lease-kept", "lease-runs-out"])
def test_an_async_lock_gives_its_sync_twin_s_verdicts_through_every_schedule(
    lab: Lab, expiry: bool
) -> None:
    sync = lock_race(lab, take_and_release, expiry)
    found = lock_race(lab, async_take_and_release, expiry)
    assert verdicts(found) == verdicts(sync)
    assert [o.results for o in found.outcomes] == [o.results for o in sync.outcomes]
    # two inside only when a lease runs out mid-section
    assert (found.total, len(found.bad)) == ((146, 48) if expiry else (8, 0))


def library_lock(client, key: str) -> str:
    """redis-py's own Lock, as its docs show: acquire, work, release (which may find it lost)."""
    lock = client.lock(key, timeout=30, blocking=False)
    if not lock.acquire():
        return "busy"
    inside = client.incr(key + ":inside")
    client.decr(key + ":inside")
    try:
        lock.release()
    except redis.exceptions.LockNotOwnedError:
        return f"{inside}, lost"
    return str(inside)


async def async_library_lock(client, key: str) -> str:
    """redis.asyncio's Lock: the same algorithm, awaited."""
    lock = client.lock(key, timeout=30, blocking=False)
    if not await lock.acquire():
        return "busy"
    inside = await client.incr(key + ":inside")
    await client.decr(key + ":inside")
    try:
        await lock.release()
    except redis.exceptions.LockNotOwnedError:
        return f"{inside}, lost"
    return str(inside)


@pytest.mark.parametrize("how", ["clock step", "crash or pause"])
def test_redis_asyncio_s_lock_gives_the_verdicts_of_redis_py_s_lock(lab: Lab, how: str) -> None:
    key = lab.key("lock")
    options: dict[str, Any] = {"faults": ("crash", "pause")} if how == "crash or pause" else {}
    found = {}
    for actor in (library_lock, async_library_lock):
        actors: dict[str, Any] = {"A": partial(actor, key=key), "B": partial(actor, key=key)}
        if how == "clock step":
            actors["T"] = lease_expires(key)
        alone = lambda c, r: all(not str(r.get(n, "")).startswith("2") for n in "AB")  # noqa: E731
        found[actor] = explore(
            lab, actors, alone, watch=[key], reset=[key, key + ":inside"], **options
        )
    sync, async_ = found[library_lock], found[async_library_lock]
    assert verdicts(async_) == verdicts(sync)
    assert [(o.schedule, o.results) for o in async_.outcomes] == [
        (o.schedule, o.results) for o in sync.outcomes
    ]
    assert async_.bad != []  # a lease that runs out mid-section lets a second holder in
    assert any(str(r).endswith("lost") for o in async_.outcomes for r in o.results.values())
    if how == "crash or pause":
        assert any("A~" in s for s in async_.bad) and any(
            "!" in o.schedule for o in async_.outcomes
        )


# --- a limiter: at most LIMIT admitted per window ------------------------------------------------

LIMIT = 2


def admit(client, key: str) -> bool:
    used = int(client.get(key) or 0)  # check, then count: two callers may both see room
    if used >= LIMIT:
        return False
    pipe = client.pipeline(transaction=True)
    pipe.incr(key).expire(key, 60)
    pipe.execute()
    return True


async def async_admit(client, key: str) -> bool:
    used = int(await client.get(key) or 0)
    if used >= LIMIT:
        return False
    pipe = client.pipeline(transaction=True)
    pipe.incr(key).expire(key, 60)
    await pipe.execute()
    return True


def admit_watched(client, key: str) -> bool:
    def attempt(pipe) -> bool:
        used = int(pipe.get(key) or 0)
        pipe.multi()
        if used < LIMIT:
            pipe.incr(key).expire(key, 60)
        return used < LIMIT

    return client.transaction(attempt, key, value_from_callable=True)


async def async_admit_watched(client, key: str) -> bool:
    async def attempt(pipe) -> bool:
        used = int(await pipe.get(key) or 0)
        pipe.multi()
        if used < LIMIT:
            pipe.incr(key).expire(key, 60)
        return used < LIMIT

    return await client.transaction(attempt, key, value_from_callable=True)


def limiter_race(lab: Lab, actor: Any) -> Any:
    key = lab.key("window")
    actors = {n: partial(actor, key=key) for n in "ABC"}

    def within(c, results) -> bool:
        return sum(results.values()) <= LIMIT and int(c.get(key) or 0) <= LIMIT

    setup = lambda c: c.set(key, LIMIT - 1)  # noqa: E731 - one place left in the window
    return explore(lab, actors, within, setup=setup, watch=[key])


@pytest.mark.parametrize(
    ("sync", "async_"), [(admit, async_admit), (admit_watched, async_admit_watched)],
    ids=["check-then-incr", "watch-multi"],
)  # fmt: skip
def test_an_async_limiter_gives_its_sync_twin_s_verdicts(lab: Lab, sync: Any, async_: Any) -> None:
    expected = limiter_race(lab, sync)
    found = limiter_race(lab, async_)
    assert verdicts(found) == verdicts(expected)
    assert [o.results for o in found.outcomes] == [o.results for o in expected.outcomes]
    assert (found.bad != []) is (sync is admit)  # the WATCH/MULTI one holds


# --- time: asyncio.sleep and timeouts are the race's ---------------------------------------------


def test_asyncio_sleep_moves_the_logical_clock_not_the_wall_clock(lab: Lab) -> None:
    key = lab.key("n")
    seen: list[tuple[float, float, float]] = []

    async def sleeper(client) -> int:
        loop = asyncio.get_running_loop()
        before = (loop.time(), time.monotonic())
        await client.incr(key)
        await asyncio.sleep(3_600)  # an hour, logical
        async with asyncio.timeout(10):  # a timeout on the same clock: 5 s of it are used
            await asyncio.sleep(5)
        try:
            await asyncio.wait_for(asyncio.sleep(60), timeout=1)
        except TimeoutError:
            pass
        seen.append((before[0], loop.time() - before[0], time.monotonic() - before[1]))
        return await client.incr(key)

    start = time.monotonic()
    trace = run_schedule(lab, {"A": sleeper}, "AA", watch=[key])
    assert time.monotonic() - start < 5
    assert trace.results == {"A": 2}
    (t0, loop_moved, monotonic_moved) = seen[0]
    assert t0 == MONOTONIC_START_NS / 1e9  # the run's clock, as time.monotonic() reads it
    assert loop_moved == pytest.approx(3_606) and monotonic_moved == pytest.approx(3_606)


def test_an_async_retry_loop_is_cut_by_the_spin_bound(lab: Lab) -> None:
    key = lab.key("lock")

    async def holder(client) -> bool:
        return bool(await client.set(key, "a", nx=True, px=60_000))

    async def waiter(client) -> bool:  # redis.asyncio's blocking acquire: SET NX, sleep, again
        return await client.lock(key, timeout=60, sleep=0.5).acquire(blocking=True)

    start = time.monotonic()
    found = explore(lab, {"A": holder, "B": waiter}, lambda c, r: True, reset=[key])
    assert time.monotonic() - start < 20
    assert found.spin_cut >= 1
    assert any(o.results["B"] is SPUN for o in found.outcomes)
    assert all(o.results["B"] in (True, SPUN) for o in found.outcomes)


def test_tasks_of_an_async_actor_stopped_by_a_crash_end_quietly(lab: Lab, capfd) -> None:
    a, b = lab.key("a"), lab.key("b")

    async def both(client) -> tuple[int, int]:  # two tasks, each sleeping, then a round trip
        async def bump(key: str) -> int:
            await asyncio.sleep(0.1)
            return int(await client.incr(key))

        first, second = await asyncio.gather(bump(a), bump(b))
        return first, second

    def one_after_the_other(client) -> tuple[int, int]:
        return int(client.incr(a)), int(client.incr(b))

    found = [
        explore(lab, {"A": fn, "B": fn}, lambda c, r: True, watch=[a, b], crashes=1)
        for fn in (one_after_the_other, both)
    ]
    # every schedule gives the same results (their classes differ: the sleeps move the clock)
    assert [(o.schedule, o.results) for o in found[1].schedules] == [
        (o.schedule, o.results) for o in found[0].schedules
    ]
    assert found[1].total == 24
    err = capfd.readouterr().err
    assert "Task" not in err and "Traceback" not in err and "never retrieved" not in err


# --- the stepper and threaded load ---------------------------------------------------------------


def test_the_stepper_steps_an_async_actor(lab: Lab) -> None:
    key = lab.key("n")
    actors = {"A": partial(async_rmw, key=key), "B": partial(rmw, key=key)}
    stepper = Stepper(lab, actors, watch=[key], invariant=lambda c, r: int(c.get(key) or 0) == 2)
    try:
        rows = [stepper.step(n) for n in "AB"]
        assert [r.command for r in rows] == ["GET n", "GET n"]
        ahead = stepper.explore_from_here()  # both read 0: every ending loses an update
        assert (ahead.total, len(ahead.bad)) == (2, 2)
        rows = [stepper.step(n) for n in "AB"]
        assert [r.command for r in rows] == ["SET n 1", "SET n 1"]
        assert stepper.finished and stepper.results == {"A": 1, "B": 1}
    finally:
        stepper.close()


def test_threaded_load_runs_an_async_actor(lab: Lab) -> None:
    key = lab.key("n")
    observer = lab.client()
    try:

        async def incr(client) -> int:
            return int(await client.incr(key))

        observer.delete(key)
        done = run_clients(lab, incr, clients=3, iterations=20)
        assert sorted(value for _, _, value in done.outcomes) == list(range(1, 61))
        assert done.round_trips == 60  # one per call: the async view adds none
        finals = []
        for actor in (rmw, async_rmw):  # lockstep: each round's two reads come before its writes
            observer.delete(key)
            run_clients(lab, partial(actor, key=key), clients=2, iterations=10, mode="lockstep")
            finals.append(int(observer.get(key)))
        assert finals == [10, 10]  # every other update lost, as its sync twin loses them
    finally:
        lab.release(observer)


def test_processes_run_an_async_actor(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("processes need a real server")
    key = lab.key("n")

    async def incr(client) -> int:
        return int(await client.incr(key))

    done = run_processes(lab, incr, clients=2, iterations=10)
    assert sorted(value for _, _, value in done.outcomes) == list(range(1, 21))


# --- what an async actor may and may not do ------------------------------------------------------


def test_a_sync_library_that_calls_asyncio_run_inside_an_actor_is_stepped(lab: Lab) -> None:
    key = lab.key("n")

    def facade(client) -> int:  # a sync API over an asyncio library (asyncio.run per call)
        return asyncio.run(async_rmw_own_client(None, key))

    found = explore(lab, {"A": facade, "B": facade}, lambda c, r: int(c.get(key)) == 2,
                    watch=[key])  # fmt: skip
    assert verdicts(found) == (6, ["ABAB", "ABBA", "BAAB", "BABA"])


def test_async_actors_explore_from_inside_a_running_event_loop(lab: Lab) -> None:
    """As in a notebook, whose kernel runs an event loop while a cell runs."""
    key = lab.key("n")
    actors = {"A": partial(async_rmw, key=key), "B": partial(async_rmw, key=key)}

    async def cell() -> Any:
        return explore(lab, actors, lambda c, r: int(c.get(key)) == 2, watch=[key])

    assert verdicts(asyncio.run(cell())) == (6, ["ABAB", "ABBA", "BAAB", "BABA"])


@pytest.mark.parametrize("runner", ["explore", "run_schedule"])
def test_an_async_actor_that_awaits_something_else_is_named_not_hung(
    lab: Lab, monkeypatch, runner: str
) -> None:
    monkeypatch.setattr(actor_side, "STEP_TIMEOUT_S", 0.5)
    key = lab.key("n")

    async def stuck(client) -> None:
        await client.incr(key)
        await asyncio.Event().wait()  # nothing will ever set it

    start = time.monotonic()
    with pytest.raises(ScheduleError, match="did not reach its next round trip"):
        if runner == "explore":
            explore(lab, {"A": stuck}, lambda c, r: True, watch=[key])
        else:
            run_schedule(lab, {"A": stuck}, "AA", watch=[key])
    assert time.monotonic() - start < 10


def test_async_pubsub_is_refused_saying_asyncio(lab: Lab) -> None:
    async def listener(client) -> None:
        await client.get(lab.key("x"))
        own = redis.asyncio.Redis.from_url(NOWHERE)
        await own.pubsub().subscribe("news")

    with pytest.raises(ActorRefused, match="pubsub of an asyncio client") as refused:
        run_schedule(lab, {"A": listener}, "AA")
    assert refused.value.reason is Refusal.PUBSUB


def test_a_lambda_that_returns_a_coroutine_is_told_to_be_async_def(lab: Lab) -> None:
    key = lab.key("n")
    with pytest.raises(TypeError, match="returned a coroutine: define the actor itself"):
        run_schedule(lab, {"A": lambda client: async_rmw(client, key)}, "A")
