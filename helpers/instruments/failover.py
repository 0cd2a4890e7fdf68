"""A primary and its replica on loopback, and a failover that loses the writes the replica missed.

``replica_pair()`` starts two throwaway servers (``helpers.backend.server.RedisServer``: loopback,
temporary directories, stopped on exit), the second a replica of the first, and waits until the
replica is in sync. ``stall_replication(replica)`` makes the replica stop applying its primary's
stream, as a slow or cut-off replica would: ``CLIENT PAUSE WRITE`` on a replica also pauses the
replication stream, so the link stays up but what the primary sends waits, unapplied, in the
replica's input buffer. ``fail_over(replica)`` promotes it, as Sentinel or an operator would once
the primary is gone: ``REPLICAOF NO ONE``, then ``CLIENT UNPAUSE``. The promoted replica keeps
what it had applied; what it had not is dropped with the old link.

This is certain by construction, not by timing: a write the primary acknowledges after the stall
never reaches the data of the replica that is promoted. ``fence_after_failover`` is notebook 07's
demo: a fencing token made with ``INCR`` in the same Redis is handed out twice. The notebook
passes it the subject, ``races.locks.acquire_fenced``: instruments never import ``races``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from helpers.backend.server import RedisServer

SYNC_TIMEOUT_S = 20.0
# (client, lock, fence key, token, lease ms) -> the fencing token, or None: somebody holds it
AcquireFenced = Callable[[redis.Redis, str, str, str, int], int | None]


@contextmanager
def replica_pair(*args: str) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    """Yield (primary, replica) clients of two throwaway servers, the replica in sync; stop both on exit."""
    primary = RedisServer(extra_args=["--repl-diskless-sync-delay", "0", *args])
    replica = RedisServer(extra_args=list(args))
    try:
        primary.start()
        replica.start()
        with primary.client(decode_responses=True) as p, replica.client(decode_responses=True) as r:
            r.replicaof("127.0.0.1", primary.port)
            deadline = time.monotonic() + SYNC_TIMEOUT_S
            while r.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the replica did not sync in {SYNC_TIMEOUT_S:g} s:\n{replica.log_tail()}"
                    )
                time.sleep(0.01)
            yield p, r
    finally:
        replica.stop()
        primary.stop()


def stall_replication(replica: redis.Redis) -> object:
    """Return CLIENT PAUSE WRITE's reply: from now on the replica applies nothing its primary sends."""
    return replica.execute_command("CLIENT", "PAUSE", 600_000, "WRITE")


def fail_over(replica: redis.Redis) -> object:
    """Return UNPAUSE's reply after REPLICAOF NO ONE: the replica is a primary with what it had applied."""
    replica.replicaof("NO", "ONE")
    return replica.execute_command("CLIENT", "UNPAUSE")


def fence_after_failover(
    acquire_fenced: AcquireFenced, lock: str = "lock", fence: str = "fence", lease_ms: int = 60_000
) -> dict[str, Any]:
    """Grant a fenced lock before and after a failover that lost one grant; return the replies."""
    with replica_pair("--appendonly", "yes", "--appendfsync", "always") as (primary, replica):
        steps: list[tuple[str, str, object]] = [  # (where, what, reply)
            ("primary", "X takes the lock", acquire_fenced(primary, lock, fence, "tok-X", lease_ms))
        ]
        primary.delete(lock)  # X is done: it lets go
        steps.append(("primary", "WAIT 1 5000 (replicas that have it)", primary.wait(1, 5000)))
        steps.append(("replica", "stall: CLIENT PAUSE WRITE", stall_replication(replica)))
        steps.append(
            ("primary", "A takes the lock", acquire_fenced(primary, lock, fence, "tok-A", lease_ms))
        )
        steps.append(("primary", "WAIT 1 100 (replicas that have it)", primary.wait(1, 100)))
        steps.append(
            (
                "primary",
                "WAITAOF 1 1 100 (fsynced: here, replicas)",
                primary.execute_command("WAITAOF", 1, 1, 100),
            )
        )
        steps.append(("replica", "failover: REPLICAOF NO ONE, UNPAUSE", fail_over(replica)))
        steps.append(("new primary", "GET lock", replica.get(lock)))
        steps.append(
            (
                "new primary",
                "B takes the lock",
                acquire_fenced(replica, lock, fence, "tok-B", lease_ms),
            )
        )
        steps.append(("old primary", "GET lock (if it were still up)", primary.get(lock)))
    width = max(len(what) for _, what, _ in steps)
    for where, what, reply in steps:
        print(f"{where:11}  {what:{width}}  -> {reply!r}")
    return {
        "replies": [reply for _, _, reply in steps],
        "fences": {"X": steps[0][2], "A": steps[3][2], "B": steps[8][2]},
    }
