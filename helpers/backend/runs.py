"""Run records on a shared server: a heartbeat per run, so an abandoned run's keys can be swept.

A learner's run (``racelab:@<learner>:``), or any run on a server the suite does not own when
``RACELAB_LEASE_S`` is set, writes two small keys beside (not under) its prefix:

* ``<owner>#run:<notebook>:<run-id>``, no TTL: the run's prefix, so a sweep knows what to remove;
* ``<owner>#alive:<notebook>:<run-id>``, with a TTL of the lease (``RACELAB_LEASE_S``, 600 s by
  default), set again by a daemon thread every third of the lease while the run's Lab is open.

``Lab.close()`` (and the interpreter's exit) stops the thread and deletes both. A killed kernel
stops the heartbeat, so its alive key expires on the server's own clock one lease later, and
``python -m helpers sweep`` (any user that may SCAN: the administrator, or the self-study user)
then UNLINKs every key that run owns (``Namespace.cleanup``: under its prefix, or a library's head
and then the prefix, such as ``lock:<prefix>job``) and the record. A run whose heartbeat lives is never
touched; a key under ``racelab:`` that no record names (somebody's look-alike) neither.

**The instructor owns the lease.** ``python -m helpers acl --load`` (and ``room``) writes the
longest lease a run may have into ``racelab:#lease`` (seconds; learners may only read it). A run
beats with the shorter of its own ``RACELAB_LEASE_S`` and that bound, and a sweep (bound:
``--max-lease``, else that key) first cuts every alive key's TTL down to the bound
(``PEXPIRE ... LT``), so a lease set longer, by the suite or by hand, ends at the bound anyway.
``<owner>`` is ``racelab:`` or a learner's ``racelab:@<learner>:``, inside the learner's key
pattern; ``#`` cannot occur in a notebook name, so a record never lies under a run's prefix.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from typing import Any

import redis

from helpers.backend.namespace import SUITE_PREFIX, Namespace, escape_glob

LEASE_VARIABLE = "RACELAB_LEASE_S"
DEFAULT_LEASE_S = 600.0
LONGEST_LEASE_S = 86_400.0
LEASE_KEY = f"{SUITE_PREFIX}:#lease"  # the instructor's bound, in seconds (acl --load writes it)
_RECORD = re.compile(
    rf"^{SUITE_PREFIX}:(?:@(?P<learner>[A-Za-z0-9_-]{{1,32}}):)?#run:"
    r"(?P<notebook>[A-Za-z0-9_.-]{1,64}):(?P<run>[A-Za-z0-9_.-]{1,64})$"
)


def checked_lease(raw: str, what: str = LEASE_VARIABLE) -> float:
    """Return raw as a lease in seconds; ValueError unless it is 0.5 to 86,400."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.5 <= value <= LONGEST_LEASE_S:
        raise ValueError(f"{what} must be 0.5 to 86400 seconds, got {raw!r}")
    return value


def lease_s(bound: float | None = None) -> float:
    """Return the heartbeat lease in seconds: RACELAB_LEASE_S (600 by default), at most bound."""
    raw = os.environ.get(LEASE_VARIABLE, "")
    own = checked_lease(raw) if raw else DEFAULT_LEASE_S
    return own if bound is None else min(own, bound)


def instructor_lease(client: Any) -> float | None:
    """Return the instructor's bound on a lease (LEASE_KEY), None if none is set or readable."""
    try:
        raw = client.get(LEASE_KEY)
        return checked_lease(_text(raw), LEASE_KEY) if raw is not None else None
    except (redis.ResponseError, ValueError):
        return None  # a user the ACL keeps from it, or a value nobody should trust


def set_instructor_lease(client: Any, seconds: float) -> None:
    """Write the longest lease a run may have (the instructor's; ValueError outside 0.5-86,400 s)."""
    client.set(LEASE_KEY, f"{checked_lease(str(seconds), 'the longest lease'):g}")


def record_key(ns: Namespace) -> str:
    """Return the key naming ns's prefix (no TTL), which a sweep looks for."""
    return f"{ns.owner}#run:{ns.notebook}:{ns.run_id}"


def alive_key(ns: Namespace) -> str:
    """Return the key whose TTL the heartbeat renews while ns's run is alive."""
    return f"{ns.owner}#alive:{ns.notebook}:{ns.run_id}"


class Heartbeat:
    """Keeps one run's alive key from expiring while the run lives; stop() removes the record."""

    def __init__(self, client: Any, ns: Namespace, lease: float | None = None) -> None:
        self.ns = ns
        self.lease = lease if lease is not None else lease_s(instructor_lease(client))
        self._client = client  # its own connections: never counted as a run's round trips
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"racelab-heartbeat-{ns.run_id}")
        self._thread.daemon = True

    def start(self) -> Heartbeat | None:
        """Write the record and the alive key, start renewing it; return self.

        None if the server refuses the two writes (out of memory, say): the run goes on, and
        nothing of it can be swept, since the server took none of its writes either.
        """
        try:
            self._client.set(record_key(self.ns), self.ns.prefix)
            self._renew()
        except (
            redis.ResponseError
        ):  # out of memory, a read-only replica: the run writes nothing either
            try:
                self._client.delete(record_key(self.ns))  # a DEL passes where a SET cannot
            except redis.ResponseError:
                pass
            self._client.close()
            return None
        self._thread.start()
        atexit.register(self.stop)
        return self

    def _renew(self) -> None:
        self._client.set(alive_key(self.ns), "1", px=max(1, int(self.lease * 1000)))

    def _beat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self._renew()
            except redis.RedisError:
                continue  # a busy or restarting server: the next beat tries again

    def stop(self) -> None:
        """Stop renewing and delete the record and the alive key. Safe to call twice."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        atexit.unregister(self.stop)
        try:
            self._client.delete(alive_key(self.ns))
            self._client.delete(record_key(self.ns))
        except redis.RedisError:
            pass  # the server is gone: a later sweep removes the record
        finally:
            self._client.close()


def _text(key: Any) -> str:
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else key


def sweep(client: Any, max_lease: float | None = None) -> list[str]:
    """UNLINK every key each run whose heartbeat has expired owns, and its record; return their prefixes.

    Every alive key's TTL is first cut down to max_lease (default: the instructor's LEASE_KEY;
    neither: no bound). client must be allowed to SCAN (the administrator): a learner user is not.
    """
    bound = max_lease if max_lease is not None else instructor_lease(client)
    swept = []
    pattern = escape_glob(f"{SUITE_PREFIX}:") + "*#run:*"
    for key in sorted(client.scan_iter(match=pattern, count=1000)):
        found = _RECORD.match(_text(key))
        if not found:
            continue  # not a record of the suite's (a look-alike)
        ns = Namespace(found["notebook"], found["run"], learner=found["learner"] or "")
        if _text(client.get(key) or b"") != ns.prefix:
            continue  # not ours
        if bound is not None:  # LT: a longer TTL is cut to the bound, a shorter one kept
            client.pexpire(alive_key(ns), max(1, int(bound * 1000)), lt=True)
        if client.exists(alive_key(ns)):
            continue  # its owner still beats
        ns.cleanup(client)  # its prefix's keys, and a library's lock:<prefix>... (Namespace.owns)
        client.unlink(key)
        swept.append(ns.prefix)
    return swept
