"""Foreign prefixes: the keys a library derives from a run's names belong to the run.

python-redis-lock given ``lab.key("job")`` writes ``lock:<prefix>job`` and ``lock-signal:<prefix>job``,
pottery ``redlock:<prefix>...``, python-redis-rate-limit ``rate_limit:<prefix>...``, limits
``LIMITS:LIMITER/<prefix>.../1/1/minute`` and ``LIMITS:{LIMITER/<prefix>...}/-1``. Such keys are
watched, reset and cleaned up like the run's own; a key of anybody else (another run, another
application, a look-alike) never is.
"""

from __future__ import annotations

import pytest
import redis

from helpers import connect
from helpers.backend.namespace import LIBRARY_HEAD_MAX, Namespace, library_head
from helpers.backend.runs import record_key, sweep
from helpers.instruments.schedule import run_schedule
from helpers.tools import foreign

RUN = Namespace("08_cases", "abcd1234")
P = RUN.prefix  # racelab:08_cases:abcd1234:
LEARNER_RUN = Namespace("08_cases", "abcd1234", learner="ann")
LP = LEARNER_RUN.prefix  # racelab:@ann:08_cases:abcd1234:

# What the libraries of issue 27 write when handed a name under the run's prefix.
LIBRARY_KEYS = [
    f"lock:{P}job",  # python-redis-lock
    f"lock-signal:{P}job",
    f"redlock:{P}job",  # pottery
    f"rate_limit:{P}api_client1",  # python-redis-rate-limit
    f"rate_limit:api_{P}client1",  # ... its client part given the name
    f"LIMITS:LIMITER/{P}user/10/1/minute",  # limits: fixed and moving window
    f"LIMITS:{{LIMITER/{P}user/10/1/minute}}",  # limits: sliding window
    f"LIMITS:{{LIMITER/{P}user/10/1/minute}}/-1",
    f"LIMITS:{P}user/10/1/minute",  # limits, the name as its namespace
    f"{'x' * (LIBRARY_HEAD_MAX - 1)}:{P}job",  # the longest head (32 characters)
    f"{P}job",  # redis-py's Lock: the name itself
]

# Keys that nearly look like one of RUN's, but are somebody else's.
NEAR_MISSES = [
    "lock:something",
    "lock:racelab-other:08_cases:abcd1234:job",
    "lock:racelab:08_cases:abcd12345:job",  # another run id that starts the same
    "lock:racelab:08_cases:0badc0de:job",  # another run
    "lock:racelab:@ann:08_cases:abcd1234:job",  # a learner's run of the same id
    f"lock{P}job",  # no separator: 'lock' + the prefix is not a library's head
    f"racelab:@bob:lock:{P}job",  # another learner's key that names this run
    f"racelab:other:0badc0de:lock:{P}job",  # another run's key that names this run
    f"racelab:{P}job",  # the suite's own prefix twice: another run's (notebook 'racelab')
    f"RACELAB-x:{P}job",  # 'racelab' in the head, in any case
    f"my app:{P}job",  # a space: no library's head
    f"lock:*:{P}job",  # a glob character in the head
    f"{'x' * LIBRARY_HEAD_MAX}:{P}job",  # a head of 33 characters: over the bound
    f"lock@x:{P}job",  # an '@' in the head (a learner's ACL patterns rely on there being none)
    P.rstrip(":"),  # the prefix without its colon
    f" {P}job",
]


@pytest.mark.parametrize("key", LIBRARY_KEYS)
def test_a_library_key_of_the_runs_name_is_the_runs(key):
    assert RUN.owns(key) and RUN.owns(key.encode())
    learner_key = key.replace(P, LP)
    assert LEARNER_RUN.owns(learner_key) and not RUN.owns(learner_key)


@pytest.mark.parametrize("key", NEAR_MISSES)
def test_a_near_miss_is_not_the_runs(key):
    assert not RUN.owns(key) and not RUN.owns(key.encode())
    assert RUN.short(key) == key  # shown whole, as somebody else's


def test_a_binary_head_is_not_a_library_head():
    assert not RUN.owns(b"\xff\xfe:" + P.encode() + b"job")
    assert RUN.owns(P.encode() + b"\xff\xfe")  # a binary name under the prefix stays the run's


def test_library_head_names_the_part_before_the_prefix():
    assert library_head(f"lock-signal:{P}job", P) == "lock-signal:"
    assert library_head(f"LIMITS:{{LIMITER/{P}u/1/1/minute}}/-1", P) == "LIMITS:{LIMITER/"
    assert library_head(f"{P}job", P) == ""
    assert library_head("lock:something", P) is None


def test_another_runs_key_is_never_this_runs():
    # A run of notebook 'racelab' with run id '08_cases' writes racelab:racelab:08_cases:...:
    # that has RUN's prefix after 'racelab:', which is the suite's prefix, not a library's.
    other = Namespace("racelab", "08_cases")
    theirs = other.key("abcd1234:job")
    assert theirs == f"racelab:{P}job" and other.owns(theirs) and not RUN.owns(theirs)
    # and its library keys neither
    assert not RUN.owns(f"lock:{theirs}")


def test_short_keeps_the_library_head_and_drops_the_run_prefix():
    assert RUN.short(f"lock:{P}job") == "lock:job"
    assert (
        RUN.short(f"LIMITS:{{LIMITER/{P}user/10/1/minute}}/-1")
        == "LIMITS:{LIMITER/user/10/1/minute}/-1"
    )
    assert RUN.short(f"{P}job") == "job"


def test_record_keeps_the_runs_names_among_a_commands_arguments():
    ns = Namespace("08_cases", "abcd1234")
    ns.record(("SET", f"lock:{P}job", "token-1", "NX", "PX", 1000))
    ns.record((b"EVALSHA", b"0" * 40, 2, f"lock:{P}job".encode(), f"lock-signal:{P}job".encode()))
    ns.record(("GET", "lock:something", f"racelab:@bob:lock:{P}job", P.encode() + b"\xff"))
    assert ns.written == {f"lock:{P}job", f"lock-signal:{P}job", P + "\udcff"}


def test_planted_foreign_keys_are_no_runs():
    """The shared server's foreign data (helpers.tools.foreign) holds no key of a new run, and its
    library look-alikes are no key even of the runs they imitate."""
    fresh = Namespace("test_namespace_foreign", learner="someone")
    for key in foreign.LOOKALIKE_KEYS + foreign.BINARY_KEYS + foreign.LIBRARY_LOOKALIKE_KEYS:
        assert not fresh.owns(key) and not Namespace("test").owns(key), key
    imitated = [Namespace("someone", "deadbeef"), Namespace("nb", "deadbeef", learner="someone")]
    for key in foreign.LIBRARY_LOOKALIKE_KEYS:
        assert not any(ns.owns(key) for ns in imitated), key


# --- on a server: cleanup, reset ----------------------------------------------------------------


def _library_keys(lab):
    """Return the library-derived keys of lab's run, as in LIBRARY_KEYS."""
    return [k.replace(P, lab.ns.prefix) for k in LIBRARY_KEYS if k != f"{P}job"]


def _near_misses(lab):
    """Return the near misses of lab's run, as in NEAR_MISSES, each a key no other test writes
    (lock:something is planted as the shared server's own)."""
    unique = f"something-{lab.ns.run_id}"
    return [k.replace(P, lab.ns.prefix).replace("something", unique) for k in NEAR_MISSES]


def test_cleanup_deletes_library_keys_and_no_near_miss(lab):
    c = lab.client()
    mine, theirs = _library_keys(lab), _near_misses(lab)
    for key in mine + theirs:
        c.set(key, "x")
    try:
        assert sorted(lab.ns.keys(c)) == sorted(mine)
        assert lab.cleanup() == len(mine)
        assert c.exists(*mine) == 0 and c.exists(*theirs) == len(theirs)
    finally:
        c.delete(*theirs)


@pytest.fixture
def shared_lab(request):
    """A Lab on the session's real server, which plays a shared one (the guard is on)."""
    the_lab = connect(
        "test_namespace_foreign", url=request.getfixturevalue("real_url"), owned=False
    )
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        the_lab.close()


def test_a_lab_client_records_the_library_keys_it_sends(shared_lab):
    c = shared_lab.client()
    lock, signal = f"lock:{shared_lab.key('job')}", f"lock-signal:{shared_lab.key('job')}"
    c.set(lock, "token", nx=True, px=60_000)
    pipe = c.pipeline()
    pipe.rpush(signal, 1)
    pipe.execute()
    assert {lock, signal} <= shared_lab.ns.written
    assert "lock:something" not in shared_lab.ns.written


def test_cleanup_without_scan_uses_what_the_clients_recorded(shared_lab, monkeypatch):
    """A learner's user may not SCAN: what its clients sent is all cleanup knows."""
    c = shared_lab.client()
    mine = _library_keys(shared_lab)
    for key in mine:
        c.set(key, "x")
    theirs = f"lock:something-{shared_lab.ns.run_id}"
    c.set(theirs, "theirs")

    def refused(*args, **kwargs):
        raise redis.exceptions.NoPermissionError("this user has no permissions to run 'scan'")

    monkeypatch.setattr(redis.Redis, "scan_iter", refused)
    try:
        assert shared_lab.cleanup() == len(mine)
        assert c.exists(*mine) == 0 and c.get(theirs) == "theirs"
    finally:
        monkeypatch.undo()
        c.delete(theirs)


def test_cleanup_on_cluster_reaches_library_keys_on_every_node(cluster_lab):
    c = cluster_lab.client()
    mine = [
        f"{head}{cluster_lab.key(f'job{i}')}" for head in ("lock:", "redlock:") for i in range(10)
    ]
    for key in mine:
        c.set(key, 1)
    assert len({c.keyslot(k) for k in mine}) > 3  # spread over several slots, hence nodes
    assert cluster_lab.cleanup() == len(mine)
    assert sum(c.exists(k) for k in mine) == 0


def test_a_schedule_resets_and_watches_a_library_key(lab):
    lock = f"lock:{lab.key('job')}"

    def take(client):
        return bool(client.set(lock, "me", nx=True))

    for _ in range(2):  # the second run starts from a reset key: the same trace
        trace = run_schedule(lab, {"A": take, "B": take}, "AB", watch=[lock])
        assert trace.results == {"A": True, "B": False}
    assert "lock:job" in str(trace) and lab.ns.prefix not in str(trace)
    with pytest.raises(ValueError, match="prefix"):
        run_schedule(lab, {"A": take}, "A", watch=["lock:something"])


def test_a_sweep_removes_an_expired_runs_library_keys_and_no_near_miss(lab):
    """helpers.backend.runs.sweep: a run whose heartbeat expired (a record, no alive key) loses
    every key it owns, a library's lock:<prefix>... included, and nobody else's."""
    gone = Namespace("test_namespace_foreign", learner="someone")
    c = lab.client()
    mine = [k.replace(P, gone.prefix) for k in LIBRARY_KEYS]
    theirs = [k.replace(P, gone.prefix) for k in NEAR_MISSES if P in k]
    theirs = [k.replace("something", f"something-{gone.run_id}") for k in theirs]
    try:
        for key in mine + theirs:
            c.set(key, "x")
        c.set(record_key(gone), gone.prefix)  # its alive key expired: never written here
        assert gone.prefix in sweep(c)
        assert c.exists(*mine) == 0 and c.exists(*theirs) == len(theirs)
        assert not c.exists(record_key(gone))
    finally:
        c.delete(*theirs, record_key(gone))
