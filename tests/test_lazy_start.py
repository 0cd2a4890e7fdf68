"""A race with a time_passes step starts each client at its first step, not when the run opens.

So the code before a client's first round trip (a limiter reading the time, then sending) reads
the time of the step that sends it: a client that starts after a clock step reads it later. The
first step runs that code and sends the round trip; it counts as touching everything. Races
without a time_passes step start their clients when the run opens, as before. On embedded and
real.
"""

from __future__ import annotations

import concurrent.futures
import time

from helpers import Lab, explore, lease_expires, run_schedule, time_passes
from helpers.instruments.actors import CRASHED
from helpers.instruments.logical_time import EPOCH

START = EPOCH.timestamp()


def stamper(key: str):
    """Return an actor that reads the time, then writes it to key (its first round trip)."""

    def actor(client):
        at = time.time() - START
        client.rpush(key, at)
        return at

    return actor


def test_a_client_reads_the_time_of_its_first_step_in_a_race_where_time_passes(lab: Lab) -> None:
    key = lab.key("log")
    race = {"A": stamper(key), "T": time_passes(40)}
    assert run_schedule(lab, race, "TA", watch=[key]).results["A"] == 40.0
    assert run_schedule(lab, race, "AT", watch=[key]).results["A"] == 0.0
    # without a step that moves the time, the run starts its clients when it opens, as before
    eager = {"A": stamper(key), "T": lease_expires(key)}
    assert run_schedule(lab, eager, "TA", watch=[key]).results["A"] == 0.0


def test_the_first_step_of_a_lazy_client_shows_what_its_start_sent(lab: Lab) -> None:
    key = lab.key("log")
    trace = run_schedule(lab, {"A": stamper(key), "T": time_passes(40)}, "TA", watch=[key])
    assert trace.rows[1].client == "A"
    assert trace.rows[1].command.startswith("(starts) RPUSH log 40")


def test_every_order_of_lazy_starts_and_clock_steps_and_the_reduction_agrees(lab: Lab) -> None:
    key = lab.key("log")
    race = {"A": stamper(key), "B": stamper(key), "T": time_passes(40)}

    def in_order(client, results) -> bool:
        """A does not stamp a later time than B."""
        return results["A"] <= results["B"]

    every = explore(lab, race, in_order, watch=[key], reduce=False)
    fewer = explore(lab, race, in_order, watch=[key])
    assert every.total == 6 and every.returned() == fewer.returned()
    assert every.returned()["A"] == {"0.0": 3, "40.0": 3}  # T before A's step, or after it
    assert every.bad == ["BTA"] == fewer.bad  # B at 0, A at 40: the only order A stamps later


def test_a_client_that_crashes_before_it_starts_never_runs(lab: Lab) -> None:
    key = lab.key("log")
    race = {"A": stamper(key), "B": stamper(key), "T": time_passes(40)}
    trace = run_schedule(lab, race, "A! B T", watch=[key])
    assert trace.results == {"A": CRASHED, "B": 0.0, "T": "40 s passed"}
    found = explore(lab, race, lambda c, r: True, watch=[key], crashes=1)
    every = explore(lab, race, lambda c, r: True, watch=[key], crashes=1, reduce=False)
    assert found.returned() == every.returned()


def test_a_lazy_client_whose_first_call_blocks_starts_and_then_waits(lab: Lab) -> None:
    key = lab.key("jobs")

    def consumer(client):
        return client.blpop([key], timeout=5)

    def producer(client):
        return client.rpush(key, "job")

    race = {"A": consumer, "B": producer, "T": time_passes(1)}
    trace = run_schedule(lab, race, "A B A T", watch=[key])
    assert trace.rows[0].command == "(starts)"  # parked at its BLPOP, which nothing answers yet
    assert trace.rows[1].command.startswith("(starts) RPUSH jobs")
    assert trace.rows[2].command.startswith("BLPOP jobs")
    assert list(trace.results["A"])[1] in ("job", b"job")
    every = explore(lab, race, lambda c, r: True, watch=[key], reduce=False)
    fewer = explore(lab, race, lambda c, r: True, watch=[key])
    assert every.returned() == fewer.returned()


def test_a_clock_with_two_steps_moves_the_time_twice(lab: Lab) -> None:
    key = lab.key("log")
    race = {"A": stamper(key), "B": stamper(key), "T": time_passes(40, times=2)}
    trace = run_schedule(lab, race, "TATB", watch=[key])
    assert (trace.results["A"], trace.results["B"]) == (40.0, 80.0)
    every = explore(lab, race, lambda c, r: True, watch=[key], reduce=False)
    assert every.total == 12  # 4!/2!: T's two steps keep their order
    assert every.returned() == explore(lab, race, lambda c, r: True, watch=[key]).returned()


def test_a_lazy_client_s_threads_are_its_sub_actors_and_the_reduction_agrees(lab: Lab) -> None:
    key = lab.key("n")

    def pooled(client):
        def bump() -> int:
            return client.incr(key)

        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            return sorted(f.result() for f in [pool.submit(bump), pool.submit(bump)])

    race = {"A": pooled, "B": stamper(lab.key("log")), "T": time_passes(5)}
    trace = run_schedule(lab, race, "A A1 A2 T B", watch=[key, lab.key("log")], finish=True)
    assert trace.results["A"] == [1, 2] and trace.results["B"] == 5.0
    every = explore(lab, race, lambda c, r: True, watch=[key, lab.key("log")], reduce=False)
    fewer = explore(lab, race, lambda c, r: True, watch=[key, lab.key("log")])
    assert every.returned() == fewer.returned()
