"""helpers.backend.modes: every Lab client counts its round trips; think mode delays each one."""

from __future__ import annotations

import time

import pytest

from helpers import Lab, client_stats
from helpers.backend.modes import (
    ClientStats,
    Lockstep,
    Rendezvous,
    Think,
    is_failed_conditional_write,
    mode_of,
    rtt_of,
)
from helpers.instruments.schedule import Gate


def test_a_single_command_is_one_round_trip_and_connecting_is_none(lab: Lab) -> None:
    client = lab.client()
    client.get(lab.key("k"))  # the first command also connects (HELLO, CLIENT SETINFO): not counted
    assert client_stats(client) == ClientStats(round_trips=1, commands=1, retries=0)


def test_a_pipeline_is_one_round_trip_and_a_multi_block_counts_multi_and_exec(lab: Lab) -> None:
    client, key = lab.client(), lab.key("k")
    plain = client.pipeline(transaction=False)
    plain.get(key)
    plain.exists(key)
    plain.execute()
    assert client_stats(client) == ClientStats(1, 2, 0)
    tx = client.pipeline(transaction=True)
    tx.incr(key)
    tx.expire(key, 60)
    tx.execute()
    assert client_stats(client) == ClientStats(2, 6, 0)  # MULTI, INCRBY, EXPIRE, EXEC


def test_watch_and_each_immediate_command_are_round_trips(lab: Lab) -> None:
    client, key = lab.client(), lab.key("k")
    with client.pipeline(transaction=True) as pipe:
        pipe.watch(key)
        pipe.get(key)
        pipe.multi()
        pipe.set(key, 1)
        pipe.execute()
    assert client_stats(client) == ClientStats(3, 5, 0)


@pytest.mark.parametrize("option", ["NX", "XX", "IFEQ"])
def test_a_conditional_set_that_does_not_apply_is_a_retry(lab: Lab, option: str) -> None:
    client, key = lab.client(), lab.key("k")
    if option == "NX":
        client.set(key, "taken")
    args = ["SET", key, "v", option] + (["other"] if option == "IFEQ" else [])
    if option == "IFEQ" and not lab.caps.set_ifeq:
        pytest.skip("no SET IFEQ on this server")
    before = client_stats(client)
    assert client.execute_command(*args) is None
    assert (client_stats(client) - before).retries == 1


def test_a_set_that_applies_or_a_nil_get_is_no_retry() -> None:
    assert not is_failed_conditional_write(("SET", "k", "v", "NX"), "OK")
    assert not is_failed_conditional_write(("GET", "k"), None)
    assert not is_failed_conditional_write(("SET", "NX", "v"), None)  # a key named NX, no option
    assert is_failed_conditional_write(("EXEC",), None)
    assert is_failed_conditional_write((b"set", b"k", b"v", b"ifeq", b"x"), None)


def test_think_mode_waits_before_every_round_trip(lab: Lab) -> None:
    client = lab.client(mode="think", think_s=0.02)
    client.ping()  # connect
    start = time.monotonic()
    for _ in range(3):
        client.ping()
    assert time.monotonic() - start >= 0.06
    assert isinstance(mode_of(client), Think) and client_stats(client).round_trips == 4


def test_clients_of_one_lab_count_separately(lab: Lab) -> None:
    a, b = lab.client(), lab.client()
    a.ping()
    a.ping()
    b.ping()
    assert client_stats(a).round_trips == 2 and client_stats(b).round_trips == 1


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf")])
def test_a_bad_think_time_is_refused(seconds: float) -> None:
    with pytest.raises(ValueError, match="think time"):
        Think(seconds)


def test_an_unknown_mode_is_refused(lab: Lab) -> None:
    with pytest.raises(ValueError, match="unknown client mode"):
        lab.client(mode="fast")


def test_a_cluster_client_counts_across_its_nodes(cluster_lab: Lab) -> None:
    client = cluster_lab.client()
    for i in range(20):
        client.set(cluster_lab.key(f"k{i}"), i)  # keys spread over the three nodes
    assert client_stats(client).round_trips >= 20 and client_stats(client).commands >= 20


def test_a_connection_opened_again_after_it_broke_is_a_reconnect(lab: Lab) -> None:
    client = lab.client()
    client.ping()
    client.connection_pool.disconnect()  # as a dropped socket or a server restart would
    client.ping()  # redis-py opens the same connection again, silently
    assert client_stats(client).reconnects == 1


# --- the network delay (rtt_ms) ------------------------------------------------------------


def _record_delays(client: object) -> list[float]:
    """Replace the client's Mode.delay with a recorder; return the list it appends seconds to."""
    waits: list[float] = []
    mode = mode_of(client)
    mode.delay = waits.append  # type: ignore[method-assign]
    return waits


def _modes() -> dict[str, object]:
    return {
        "straight": "straight",
        "think": Think(0.0),
        "lockstep": Lockstep(Rendezvous(1)),
        "gated": Gate("A"),  # not in a run: its round trips pass, as while connecting
    }


@pytest.mark.parametrize("mode", ["straight", "think", "lockstep", "gated"])
def test_rtt_delays_each_round_trip_once_in_every_mode(lab: Lab, mode: str) -> None:
    client, key = lab.client(mode=_modes()[mode], rtt_ms=1.5), lab.key("k")
    client.ping()  # connect: the handshake is not delayed
    waits = _record_delays(client)
    client.set(key, 1)
    client.get(key)
    pipe = client.pipeline(transaction=True)  # MULTI, INCR, EXPIRE, EXEC: one round trip
    pipe.incr(key)
    pipe.expire(key, 60)
    pipe.execute()
    with client.pipeline(transaction=True) as watched:  # WATCH, GET, MULTI..EXEC: three
        watched.watch(key)
        watched.get(key)
        watched.multi()
        watched.set(key, 2)
        watched.execute()
    assert waits == [0.0015] * 6
    assert client_stats(client).round_trips == 1 + 6


def test_rtt_is_really_waited_and_measured(lab: Lab) -> None:
    client = lab.client(rtt_ms=20)
    client.ping()
    before = mode_of(client).delayed_ns
    start = time.perf_counter_ns()
    for _ in range(3):
        client.ping()
    assert time.perf_counter_ns() - start >= 60e6  # time.sleep never returns early
    assert mode_of(client).delayed_ns - before >= 60e6
    assert rtt_of(client) == 20


def test_no_rtt_means_no_wait(lab: Lab) -> None:
    client = lab.client()
    client.ping()
    waits = _record_delays(client)
    client.ping()
    assert waits == [] and rtt_of(client) == 0 and mode_of(client).delayed_ns == 0


def test_rtt_on_a_cluster_client_delays_each_round_trip(cluster_lab: Lab) -> None:
    client = cluster_lab.client(rtt_ms=1.0)
    keys = [cluster_lab.key(f"k{i}") for i in range(6)]  # spread over the three nodes
    client.set(keys[0], 0)
    waits = _record_delays(client)
    before = client_stats(client).round_trips
    for key in keys:
        client.set(key, 1)
    assert waits == [0.001] * (client_stats(client).round_trips - before) and len(waits) == 6
    assert rtt_of(client) == 1.0


@pytest.mark.parametrize("rtt_ms", [-0.5, float("nan"), float("inf"), "1", None, True])
def test_a_bad_rtt_is_refused(lab: Lab, rtt_ms: float) -> None:
    with pytest.raises(ValueError, match="rtt_ms"):
        lab.client(rtt_ms=rtt_ms)
