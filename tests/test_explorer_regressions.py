"""Every disagreement between the reduced and the exhaustive search found so far, as a named race.

Each was found by the explorer fuzzer (tests/test_fuzz_explorer.py, ``make fuzz-explorer``) or
by a notebook, then cut down by hand to the smallest race that still disagrees. Each test asserts
that ``race.explore()`` (one schedule per class, counted back) gives exactly what
``race.explore(reduce=False)`` gives: the totals, the breaking schedules, and every schedule's
verdict and result text (``tests/fuzz_explorer.py``: ``disagreements``).
"""

from __future__ import annotations

from typing import Any

from fuzz_explorer import disagreements

from cases import lock_race
from helpers import Invariant, Lab, Race


def _agree(race: Race, **options: Any) -> None:
    found = disagreements(race, options)
    assert found == [], "reduced and exhaustive searches disagree:\n" + "\n".join(found)


def _reply_of(actor: str, step: int, value: Any) -> Invariant:
    return Invariant(
        f"{actor} saw {value!r}",
        f"{actor}'s round trip {step + 1} answered {value!r}",
        lambda client, results: results.get(actor, (None,) * (step + 1))[step] == value,
    )


def test_notebook_08_redis_py_lock_lease_story(lab: Lab) -> None:
    # Exhaustively 48 of 146 schedules break "one inside"; the reduced search said 30 of 128:
    # the 18 schedules in which B takes the lock and goes in, its lease runs out (T), then A
    # takes it (BBTAAAABB, BTABAAABB, ...) were in no class it ran.
    race = lock_race(lab, "redis-py Lock", "lease")
    every = race.explore(reduce=False)
    assert (every.bad_count, every.total) == (48, 146)
    assert "BBTAAAABB" in every.bad
    _agree(race)


def test_a_read_before_and_after_one_write_with_a_write_write_race(lab: Lab) -> None:
    # No branch, no clock, no fault: 30 schedules in 8 classes; the reduced search ran 7 and
    # missed BCAAB (B reads x before C writes it, A after, and A's EXPIRE y precedes B's RPUSH y).
    x, y = lab.key("x"), lab.key("y")

    def a(client: Any) -> tuple[Any, ...]:
        return client.get(x), client.expire(y, 100)

    def b(client: Any) -> tuple[Any, ...]:
        return client.get(x), client.rpush(y, "1")

    def c(client: Any) -> tuple[Any, ...]:
        return (client.set(x, "1"),)

    race = Race(lab, {"A": a, "B": b, "C": c}, watch=[x, y], invariant=_reply_of("A", 0, None))
    assert race.explore(reduce=False).total == 30
    _agree(race)


def test_the_same_shape_with_a_clock_as_the_writer(lab: Lab) -> None:
    # As above with lease_expires(x) in C's place (it writes x, though x does not exist):
    # 30 schedules exhaustively, 29 reduced; BTAAB was missed. Found by the fuzzer first.
    x, y = lab.key("x"), lab.key("y")

    def a(client: Any) -> tuple[Any, ...]:
        return client.get(x), client.get(y)

    def b(client: Any) -> tuple[Any, ...]:
        return client.get(x), client.set(y, "1")

    actors = {"A": a, "B": b, "T": Race.lease_expires(x)}
    race = Race(lab, actors, watch=[x, y], invariant=_reply_of("A", 1, None))
    assert race.explore(reduce=False).total == 30
    _agree(race)


def test_three_readers_and_a_crash_fault(lab: Lab) -> None:
    # Two readers are fine; with three, the reduced search raised KeyError: 'A!' (a crash step
    # kept asleep after the one fault allowed had happened elsewhere, so it was no option).
    x = lab.key("x")

    def reader(client: Any) -> tuple[Any, ...]:
        return (client.get(x),)

    actors = {"A": reader, "B": reader, "C": reader}
    race = Race(lab, actors, watch=[x], invariant=_reply_of("A", 0, None))
    assert race.explore(reduce=False, faults=("crash",)).total == 24
    _agree(race, faults=("crash",))


def test_a_blpop_that_times_out_runs_only_when_nothing_else_can(lab: Lab) -> None:
    # B waits on an empty list, so its timeout is a step only once A has finished: 1 schedule
    # (AB). The reduced search counted 2, standing for BA too, which cannot happen.
    x, y = lab.key("x"), lab.key("y")

    def a(client: Any) -> tuple[Any, ...]:
        return (client.get(y),)

    def b(client: Any) -> tuple[Any, ...]:
        return (client.blpop([x], timeout=1),)

    race = Race(lab, {"A": a, "B": b}, watch=[x, y], invariant=_reply_of("B", 0, None))
    assert race.explore(reduce=False).good == ["AB"]
    _agree(race)


def test_a_pause_whose_leases_depend_on_who_wrote_last(lab: Lab) -> None:
    # A's pause (A~) expires the keys A wrote last that have a TTL. In A A C A~ A, C's SET NX
    # (refused, but a write by its footprint) is the last write of x, so A~ expires only y and
    # commutes with C; the reduced search let that run stand for A A A~ C A too, where A~ runs
    # first, expires x as well, and C's SET NX succeeds: verdict and results differ there.
    x, y = lab.key("x"), lab.key("y")

    def a(client: Any) -> tuple[Any, ...]:
        return client.set(x, "a", px=100_000), client.set(y, "a", px=100_000), client.get(x)

    def c(client: Any) -> tuple[Any, ...]:
        return (client.set(x, "c", nx=True),)

    race = Race(lab, {"A": a, "C": c}, watch=[x, y], invariant=_reply_of("C", 0, None))
    every = race.explore(reduce=False, faults=("pause",))
    assert next(o for o in every.outcomes if o.schedule == "A A A~ C A").result_text.endswith(
        "C=(True)"
    )
    _agree(race, faults=("pause",))


def test_a_write_that_takes_a_pausing_actor_s_lease_away(lab: Lab) -> None:
    # make fuzz-explorer, seed 20261206, race 849: C's SET k1 PX is a lease, and A's SET k1
    # takes it away, so A's write *disables* C~. Runs that put A first never offered C~, so
    # the search never saw A race with it and missed B C C C~ A C and its class (50 of 62).
    k0, k1 = lab.key("k0"), lab.key("k1")

    def a(client: Any) -> tuple[Any, ...]:
        return (client.set(k1, "1"),)

    def b(client: Any) -> tuple[Any, ...]:
        return (client.get(k0),)

    def c(client: Any) -> tuple[Any, ...]:
        return client.set(k1, "1", px=100_000), client.get(k0), client.get(k0)

    expired = Invariant(
        "k1 kept", "k1 is set at the end", lambda client, results: bool(client.exists(k1))
    )
    race = Race(lab, {"A": a, "B": b, "C": c}, watch=[k0, k1], invariant=expired)
    assert race.explore(reduce=False, faults=("pause",)).total == 62
    _agree(race, faults=("pause",))


def test_two_waiting_actors_and_a_crash(lab: Lab) -> None:
    # make fuzz-explorer, seed 20261206, race 850: both BLPOP an empty list, so each step is a
    # timeout, which conflicts with everything; the footprint the search saw before the step was
    # the list's, so after A! it put B's timeout to sleep and lost A! B and B! A (4 of 6).
    k0 = lab.key("k0")

    def waiter(client: Any) -> tuple[Any, ...]:
        return (client.blpop([k0], timeout=1),)

    race = Race(lab, {"A": waiter, "B": waiter}, watch=[k0], invariant=_reply_of("A", 0, None))
    assert race.explore(reduce=False, faults=("crash",)).total == 6
    _agree(race, faults=("crash",))
