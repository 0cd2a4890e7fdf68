"""helpers.backend.modes: every Lab client counts its round trips; think mode delays each one."""

from __future__ import annotations

import time

import pytest

from helpers import Lab, client_stats
from helpers.backend.modes import ClientStats, Think, is_failed_conditional_write, mode_of


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
