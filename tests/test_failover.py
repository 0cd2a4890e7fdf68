"""Notebook 07's failover demo on a throwaway primary + replica: an INCRed fencing token repeats.

A fencing token INCRed in the same Redis as the lock goes back after a failover to a replica that
missed the last grant (issue 14, item 10). These run on loopback servers the test starts itself,
and are skipped, with the reason, where no redis-server >= 8.4 is available.
"""

from __future__ import annotations

import pytest

from helpers.backend.server import ServerNotFound, find_binary
from helpers.instruments.failover import (
    fail_over,
    fence_after_failover,
    replica_pair,
    stall_replication,
)
from races.locks import acquire_fenced


def _missing_server() -> str:
    try:
        find_binary()
    except ServerNotFound as exc:
        return str(exc)
    return ""


pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(bool(_missing_server()), reason=_missing_server() or "-"),
]


def test_the_fence_repeats_after_a_failover_that_lost_a_grant(capsys) -> None:
    data = fence_after_failover(acquire_fenced)
    assert data["fences"] == {"X": 1, "A": 2, "B": 2}
    # WAIT: the replica had X's grant, not A's; WAITAOF: A's grant is on the primary's disk only.
    # The promoted replica has no lock, so B gets it, with A's fence; the old primary says A's.
    assert data["replies"] == [1, 1, "OK", 2, 0, [1, 0], "OK", None, 2, "tok-A"]
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 10 and printed[-2].endswith("-> 2")


def test_without_the_stall_the_promoted_replica_goes_on_counting() -> None:
    with replica_pair() as (primary, replica):
        assert acquire_fenced(primary, "lock", "fence", "tok-A", 60_000) == 1
        assert primary.wait(1, 5000) == 1  # the replica has A's grant
        fail_over(replica)
        assert replica.get("lock") == "tok-A"  # so B finds the lock taken...
        primary.delete("lock")
        replica.delete("lock")  # ...until A lets go; then B's fence is larger
        assert acquire_fenced(replica, "lock", "fence", "tok-B", 60_000) == 2


def test_a_stalled_replica_applies_nothing_until_it_is_promoted() -> None:
    with replica_pair() as (primary, replica):
        primary.set("before", 1)
        assert primary.wait(1, 5000) == 1
        stall_replication(replica)
        primary.set("after", 1)
        assert primary.wait(1, 200) == 0
        assert replica.exists("before", "after") == 1
        fail_over(replica)
        assert replica.exists("after") == 0 and replica.info("replication")["role"] == "master"
