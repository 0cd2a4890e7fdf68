"""helpers/locks.py: acquire, broken and safe releases, extend, fencing, and the violation counter."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from helpers import Lab
from helpers import locks
from helpers.instruments.race import Op

MINE = "a" * 40
THEIRS = "b" * 40

SAFE_RELEASES = {
    "lua": locks.release_lua,
    "watch": locks.release_watch,
    "delex": locks.release_delex,
    "digest": locks.release_digest,
    "lua_checked": lambda c, k, t: locks.release_lua_checked(c, k, t) == locks.RELEASED,
}


# ------------------------------------------------------------------ tokens and digests

def test_new_token_is_20_random_bytes_as_hex() -> None:
    tokens = {locks.new_token() for _ in range(50)}
    assert len(tokens) == 50
    assert all(len(t) == 40 and int(t, 16) >= 0 for t in tokens)


def test_new_token_refuses_guessable_sizes() -> None:
    with pytest.raises(ValueError):
        locks.new_token(8)


@pytest.mark.parametrize("value", ["tok", "91", "", "é" * 3, b"\x00\xff" * 100, "x" * 10_000])
def test_token_digest_matches_server_digest(lab: Lab, value: Any) -> None:
    c, key = lab.client(decode_responses=False), lab.key("lock")
    c.set(key, value)
    assert locks.server_digest(c, key) == locks.token_digest(value)


def test_token_digest_keeps_leading_zeros() -> None:
    assert locks.token_digest("91") == "004901d6d0084f13"


def test_server_digest_of_missing_key_is_none(lab: Lab) -> None:
    assert locks.server_digest(lab.client(), lab.key("nothing")) is None


# ------------------------------------------------------------------ acquire

def test_acquire_takes_a_free_lock_with_the_given_lease(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    assert locks.acquire(c, key, MINE, 30_000) is True
    assert c.get(key) == MINE
    assert 0 < c.pttl(key) <= 30_000


def test_acquire_of_a_held_lock_fails_and_leaves_it(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    locks.acquire(c, key, THEIRS, 30_000)
    assert locks.acquire(c, key, MINE, 30_000) is False
    assert c.get(key) == THEIRS


@pytest.mark.parametrize("token, ttl", [("", 1000), (MINE, 0), (MINE, -1), (MINE, 1.5), (MINE, True)])
def test_acquire_rejects_bad_arguments_before_writing(lab: Lab, token: str, ttl: Any) -> None:
    c, key = lab.client(), lab.key("lock")
    with pytest.raises(ValueError):
        locks.acquire(c, key, token, ttl)
    assert c.exists(key) == 0


def test_acquire_fenced_hands_out_increasing_fences_and_none_when_held(lab: Lab) -> None:
    c = lab.client()
    key, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    first = locks.acquire_fenced(c, key, fence, MINE, 30_000)
    assert locks.acquire_fenced(c, key, fence, THEIRS, 30_000) is None
    c.delete(key)
    second = locks.acquire_fenced(c, key, fence, THEIRS, 30_000)
    assert first is not None and second is not None and second > first
    assert c.get(key) == THEIRS


@pytest.mark.parametrize("corrupt", ["abc", "1.5", "9" * 25, "hash"])
def test_acquire_fenced_with_a_corrupt_fence_raises_and_leaves_the_lock_free(lab: Lab, corrupt: str) -> None:
    # Regression: SET NX ran in the MULTI before the failing INCR, so the caller got an error
    # while holding the lock for the whole ttl (everyone else blocked, nobody to release it).
    c = lab.client()
    key, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    if corrupt == "hash":
        c.hset(fence, "n", "1")
    else:
        c.set(fence, corrupt)
    with pytest.raises(redis.ResponseError):
        locks.acquire_fenced(c, key, fence, MINE, 30_000)
    assert c.exists(key) == 0


def test_acquire_fenced_with_a_corrupt_fence_leaves_another_holders_lock_alone(lab: Lab) -> None:
    c = lab.client()
    key, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    c.set(key, THEIRS, px=30_000)
    c.set(fence, "abc")
    with pytest.raises(redis.ResponseError):
        locks.acquire_fenced(c, key, fence, MINE, 30_000)
    assert c.get(key) == THEIRS


def test_lock_is_never_held_by_two_of_64_clients(lab: Lab) -> None:
    from helpers.instruments.race import run_clients

    key, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    inside = lab.ns.tagged("job", "inside")

    def cycle(ctx) -> int:
        token = locks.new_token()
        for _ in range(100_000):
            taken = locks.acquire_fenced(ctx.client, key, fence, token, 60_000)
            if taken is not None:
                break
            ctx.think()
        else:
            raise AssertionError("never got the lock")
        holders = ctx.client.incr(inside)  # how many clients are in the critical section now
        ctx.think()
        ctx.client.decr(inside)
        assert locks.release_lua(ctx.client, key, token) is True
        return holders

    result = run_clients(lab, cycle, clients=64, iterations=2)
    assert result.counts() == {1: 128}
    assert lab.client().exists(key) == 0


# ------------------------------------------------------------------ broken releases (pinned bugs)

def test_release_blind_deletes_another_clients_lock(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    locks.acquire(c, key, THEIRS, 30_000)
    assert locks.release_blind(c, key, MINE) is True
    assert c.exists(key) == 0


class _StealAfterGet:
    """A client whose GET is followed, before anything else, by expiry and a theft of the lock."""

    def __init__(self, client: Any, thief: Any) -> None:
        self._client, self._thief = client, thief

    def get(self, key: str) -> Any:
        value = self._client.get(key)
        self._thief.delete(key)  # the lease runs out...
        self._thief.set(key, THEIRS, nx=True, px=30_000)  # ...and another client takes the lock
        return value

    def delete(self, key: str) -> int:
        return self._client.delete(key)


def test_release_check_then_del_deletes_a_lock_taken_between_get_and_del(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    locks.acquire(c, key, MINE, 30_000)
    assert locks.release_check_then_del(_StealAfterGet(c, lab.client()), key, MINE) is True
    assert c.exists(key) == 0  # the thief's lock is gone


def test_release_check_then_del_leaves_a_foreign_lock_when_nothing_interleaves(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    locks.acquire(c, key, THEIRS, 30_000)
    assert locks.release_check_then_del(c, key, MINE) is False
    assert c.get(key) == THEIRS


# ------------------------------------------------------------------ safe releases

def _needs(lab: Lab, name: str) -> None:
    if name in ("delex", "digest") and not lab.caps.delex:
        pytest.skip(f"{lab.kind} backend has no DELEX")


@pytest.mark.parametrize("name", sorted(SAFE_RELEASES))
def test_safe_release_deletes_own_lock(lab: Lab, name: str) -> None:
    _needs(lab, name)
    c, key = lab.client(), lab.key("lock")
    locks.acquire(c, key, MINE, 30_000)
    assert SAFE_RELEASES[name](c, key, MINE) is True
    assert c.exists(key) == 0


@pytest.mark.parametrize("name", sorted(SAFE_RELEASES))
def test_safe_release_leaves_a_foreign_lock_and_its_ttl(lab: Lab, name: str) -> None:
    _needs(lab, name)
    c, key = lab.client(), lab.key("lock")
    locks.acquire(c, key, THEIRS, 30_000)
    assert SAFE_RELEASES[name](c, key, MINE) is False
    assert c.get(key) == THEIRS
    assert 0 < c.pttl(key) <= 30_000


@pytest.mark.parametrize("name", sorted(SAFE_RELEASES))
def test_safe_release_of_a_missing_lock_is_false_and_creates_nothing(lab: Lab, name: str) -> None:
    _needs(lab, name)
    c, key = lab.client(), lab.key("lock")
    assert SAFE_RELEASES[name](c, key, MINE) is False
    assert c.exists(key) == 0


@pytest.mark.parametrize("name", sorted(SAFE_RELEASES))
def test_safe_release_compares_binary_tokens_byte_for_byte(lab: Lab, name: str) -> None:
    _needs(lab, name)
    c, key = lab.client(decode_responses=False), lab.key("lock")
    token = b"\x00\xff" + bytes(range(40))
    locks.acquire(c, key, token, 30_000)
    assert SAFE_RELEASES[name](c, key, token[:-1] + b"\x00") is False
    assert SAFE_RELEASES[name](c, key, token) is True


@pytest.mark.parametrize("name", sorted(SAFE_RELEASES))
def test_safe_release_of_a_wrong_type_key_raises_and_keeps_it(lab: Lab, name: str) -> None:
    _needs(lab, name)
    c, key = lab.client(), lab.key("lock")
    c.rpush(key, MINE)
    with pytest.raises(redis.ResponseError):
        SAFE_RELEASES[name](c, key, MINE)
    assert c.lrange(key, 0, -1) == [MINE]


def test_release_lua_checked_tells_expired_from_stolen(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    assert locks.release_lua_checked(c, key, MINE) == locks.EXPIRED
    locks.acquire(c, key, THEIRS, 30_000)
    assert locks.release_lua_checked(c, key, MINE) == locks.STOLEN


def test_release_lua_uses_a_given_script(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    script = lab.script("lock_release", c)
    locks.acquire(c, key, MINE, 30_000)
    assert locks.release_lua(lab.client(), key, MINE, script=script) is True


def test_release_watch_retries_when_the_lock_is_stolen_before_exec(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    c, thief, key = lab.client(), lab.client(), lab.key("lock")
    locks.acquire(c, key, MINE, 30_000)
    real_same_token = locks.same_token
    calls: list[int] = []

    def stolen_after_check(stored: Any, token: Any) -> bool:
        calls.append(1)
        if len(calls) == 1:  # the GET matched; now the lease runs out and a thief takes the lock
            thief.delete(key)
            thief.set(key, THEIRS, px=30_000)
            return True
        return real_same_token(stored, token)

    monkeypatch.setattr(locks, "same_token", stolen_after_check)
    assert locks.release_watch(c, key, MINE) is False
    assert len(calls) == 2
    assert c.get(key) == THEIRS


def test_release_watch_gives_up_with_lock_contention(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    c, other, key = lab.client(), lab.client(), lab.key("lock")
    locks.acquire(c, key, MINE, 30_000)

    def always_changed(stored: Any, token: Any) -> bool:
        other.set(key, MINE, px=30_000)  # same value, but a write: WATCH aborts EXEC
        return True

    monkeypatch.setattr(locks, "same_token", always_changed)
    with pytest.raises(locks.LockContention):
        locks.release_watch(c, key, MINE, max_attempts=3)
    assert c.get(key) == MINE


@pytest.mark.parametrize("fn", [locks.release_check_then_del, locks.release_lua, locks.release_watch])
def test_releases_refuse_an_empty_token(lab: Lab, fn: Any) -> None:
    c, key = lab.client(), lab.key("lock")
    c.set(key, "")
    with pytest.raises(ValueError):
        fn(c, key, "")
    assert c.exists(key) == 1


# ------------------------------------------------------------------ extend

def _extenders(lab: Lab) -> list[Any]:
    found = [locks.extend_lua]
    if lab.caps.set_ifeq:
        found.append(locks.extend_ifeq)
    return found


def test_extend_resets_the_owners_lease(lab: Lab) -> None:
    c, key = lab.client(), lab.key("lock")
    for extend in _extenders(lab):
        c.set(key, MINE, px=1_000)
        assert extend(c, key, MINE, 120_000) is True
        assert c.get(key) == MINE
        assert 60_000 < c.pttl(key) <= 120_000


def test_extend_of_a_foreign_or_missing_lock_is_false_and_changes_nothing(lab: Lab) -> None:
    c, key, gone = lab.client(), lab.key("lock"), lab.key("gone")
    c.set(key, THEIRS, px=30_000)
    for extend in _extenders(lab):
        assert extend(c, key, MINE, 600_000) is False
        assert extend(c, gone, MINE, 600_000) is False
    assert c.get(key) == THEIRS and 0 < c.pttl(key) <= 30_000
    assert c.exists(gone) == 0


def test_extend_ifeq_matches_extend_lua_on_a_real_84_server(lab: Lab) -> None:
    if not lab.caps.set_ifeq:
        pytest.skip(f"{lab.kind} backend has no SET IFEQ")
    c, key = lab.client(), lab.key("lock")
    c.set(key, MINE, px=1_000)
    assert locks.extend_ifeq(c, key, MINE, 50_000) == locks.extend_lua(c, key, MINE, 50_000) is True


# ------------------------------------------------------------------ fenced resource

def test_write_fenced_refuses_a_stale_fence_and_unfenced_write_does_not(lab: Lab) -> None:
    c = lab.client()
    resource, seen = lab.ns.tagged("job", "resource"), lab.ns.tagged("job", "resource:fence")
    assert locks.write_fenced(c, resource, seen, 34, "new holder") is True
    assert locks.write_fenced(c, resource, seen, 33, "late zombie") is False
    assert c.get(resource) == "new holder"
    assert locks.write_unfenced(c, resource, "late zombie") is True
    assert c.get(resource) == "late zombie"


@pytest.mark.parametrize("fence", [0, -1, True, "3"])
def test_write_fenced_rejects_non_positive_int_fences(lab: Lab, fence: Any) -> None:
    c = lab.client()
    resource, seen = lab.ns.tagged("job", "resource"), lab.ns.tagged("job", "resource:fence")
    with pytest.raises(ValueError):
        locks.write_fenced(c, resource, seen, fence, "v")
    assert c.exists(resource, seen) == 0


# ------------------------------------------------------------------ histories and violations

MS = 1_000_000


def test_lease_span_ends_at_release_or_expiry_whichever_first() -> None:
    assert locks.lease_span("A", 0, 1 * MS, 5 * MS, ttl_ms=10) == locks.LeaseSpan("A", 1 * MS, 5 * MS)
    end = 10 * MS - locks.EXPIRY_SLACK_NS
    assert locks.lease_span("A", 0, 1 * MS, 50 * MS, ttl_ms=10) == locks.LeaseSpan("A", 1 * MS, end)


def test_lease_span_is_none_when_the_acquire_outlasted_the_lease() -> None:
    assert locks.lease_span("A", 0, 20 * MS, 30 * MS, ttl_ms=10) is None


def test_violations_are_overlaps_between_different_clients_only() -> None:
    a = locks.LeaseSpan("A", 0, 10)
    b = locks.LeaseSpan("B", 5, 15)
    a2 = locks.LeaseSpan("A", 12, 14)
    c = locks.LeaseSpan("C", 15, 20)  # touches B's end: not an overlap
    assert locks.violations([c, a2, b, a]) == [(a, b), (b, a2)]


def test_lease_spans_pair_acquires_with_the_next_release_per_client() -> None:
    history = [
        Op(0, "acquire", 0, 1 * MS, True),
        Op(1, "acquire", 0, 1 * MS, False),  # failed attempt: holds nothing
        Op(1, "acquire", 2 * MS, 3 * MS, True),
        Op(0, "release", 4 * MS, 5 * MS, True),
        Op(1, "release", 30 * MS, 31 * MS, True),  # overran: lease ended first
    ]
    spans = locks.lease_spans(history, ttl_ms=10)
    assert sorted(spans, key=lambda s: s.client) == [
        locks.LeaseSpan(0, 1 * MS, 4 * MS),
        locks.LeaseSpan(1, 3 * MS, 12 * MS - locks.EXPIRY_SLACK_NS),
    ]
    assert len(locks.violations(spans)) == 1


def test_lease_spans_count_an_unreleased_holder_until_its_lease_ends() -> None:
    spans = locks.lease_spans([Op(0, "acquire", 0, MS, True)], ttl_ms=10)
    assert spans == [locks.LeaseSpan(0, MS, 10 * MS - locks.EXPIRY_SLACK_NS)]


def test_lease_spans_follow_successful_extends_only() -> None:
    history = [
        Op(0, "acquire", 0, 1 * MS, True),
        Op(0, "extend", 8 * MS, 9 * MS, True),  # lease now lasts until 8 + 10 ms
        Op(0, "extend", 30 * MS, 31 * MS, False),  # too late: changes nothing
        Op(0, "release", 40 * MS, 41 * MS, False),
    ]
    assert locks.lease_spans(history, ttl_ms=10) == [locks.LeaseSpan(0, 1 * MS, 18 * MS - locks.EXPIRY_SLACK_NS)]


def test_release_check_then_del_runs_between_in_the_window(lab: Lab) -> None:
    c, thief, key = lab.client(), lab.client(), lab.key("lock")
    locks.acquire(c, key, MINE, 30_000)

    def lease_lost_and_lock_taken() -> None:
        thief.delete(key)
        thief.set(key, THEIRS, px=30_000)

    assert locks.release_check_then_del(c, key, MINE, between=lease_lost_and_lock_taken) is True
    assert c.exists(key) == 0


# ------------------------------------------------------------------ threaded load

def test_lock_load_pauses_every_nth_cycle_staggered_by_client() -> None:
    load = locks.LockLoad(key="k", pause_every=4)
    assert [i for i in range(8) if load.pauses(1, i)] == [3, 7]
    assert [i for i in range(8) if load.pauses(0, i)] == [0, 4]
    assert not any(locks.LockLoad(key="k", pause_every=0).pauses(0, i) for i in range(8))


@pytest.mark.parametrize("bad", [{"pause_where": "elsewhere"}, {"ttl_ms": 0}, {"pause_s": -1.0},
                                 {"pause_every": -1}, {"retry_s": -0.1},
                                 # NaN and infinity used to pass and fail later inside the client threads
                                 {"wait_limit_s": float("nan")}, {"wait_limit_s": float("inf")},
                                 {"work_s": float("nan")}, {"pause_s": float("inf")}])
def test_lock_load_rejects_bad_settings(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        locks.LockLoad(key="k", **bad)


def test_blind_release_under_overrunning_load_violates_mutual_exclusion(lab: Lab) -> None:
    from helpers.instruments.race import run_clients

    load = locks.LockLoad(key=lab.key("lock"), ttl_ms=5, pause_s=0.012, pause_every=4)
    result = run_clients(lab, locks.lock_cycle(load, locks.release_blind), clients=3, iterations=24)
    assert result.calls == 72
    assert locks.violations(locks.lease_spans(result.history, load.ttl_ms))


@pytest.mark.parametrize("name", ["lua", "watch", "delex"])
def test_safe_release_under_overrunning_load_keeps_mutual_exclusion(lab: Lab, name: str) -> None:
    from helpers.instruments.race import run_clients

    load = locks.LockLoad(key=lab.key("lock"), ttl_ms=5, pause_s=0.012, pause_every=4)
    result = run_clients(lab, locks.lock_cycle(load, SAFE_RELEASES[name]), clients=3, iterations=24)
    overran = [op for op in result.history if op.label == "work" and op.result == "overran"]
    assert len(overran) == 18
    assert result.count(False) >= 1  # some overrunning holder found its lock gone and deleted nothing
    assert locks.violations(locks.lease_spans(result.history, load.ttl_ms)) == []


# ------------------------------------------------------------------ forced schedules

def _programs(lab: Lab, method: str) -> dict[str, Any]:
    key = lab.key("lock")
    return {"A": locks.holder_program(key, "tok-A", 10_000, method), "T": locks.lease_runs_out(key, "tok-A"),
            "B": locks.take_program(key, "tok-B", 10_000)}


def _b_keeps_its_lock(lab: Lab) -> Any:
    return lambda client, results: results["B"] != "holding" or client.get(lab.key("lock")) == "tok-B"


@pytest.mark.parametrize("method, bad", [("blind", ["ATBA"]), ("check_then_del", ["AATBA"])])
def test_explorer_finds_exactly_the_schedule_that_breaks_a_naive_release(lab: Lab, method: str, bad: list[str]) -> None:
    from helpers.instruments.explore import explore

    found = explore(lab, _programs(lab, method), _b_keeps_its_lock(lab), watch=[lab.key("lock")])
    assert found.bad == bad


@pytest.mark.parametrize("method", ["lua", "lua_checked", "watch", "delex", "digest"])
def test_explorer_finds_no_bad_schedule_for_a_safe_release(lab: Lab, method: str) -> None:
    from helpers.instruments.explore import explore

    found = explore(lab, _programs(lab, method), _b_keeps_its_lock(lab), watch=[lab.key("lock")])
    assert found.total >= 11 and found.bad == []


def test_lease_runs_out_only_for_the_named_token(lab: Lab) -> None:
    from helpers.instruments.schedule import run_schedule

    key = lab.key("lock")
    programs = {"B": locks.take_program(key, "tok-B", 10_000), "T": locks.lease_runs_out(key, "tok-A")}
    trace = run_schedule(lab, programs, "BT", watch=[key])
    assert trace.results == {"B": "holding", "T": "lease not held: nothing expires"}
    assert lab.client().get(key) == "tok-B"


def test_holder_program_rejects_an_unknown_method(lab: Lab) -> None:
    with pytest.raises(ValueError):
        locks.holder_program(lab.key("lock"), "tok", 1000, "hope")


@pytest.mark.parametrize("fenced, a_result, resource", [
    (False, "wrote, not released", "A's report"),
    (True, "write refused, not released", "B's report"),
])
def test_fencing_refuses_the_paused_holders_late_write(lab: Lab, fenced: bool, a_result: str, resource: str) -> None:
    from helpers.instruments.schedule import run_schedule

    lock, fence = lab.ns.tagged("job", "lock"), lab.ns.tagged("job", "fence")
    res, seen = lab.ns.tagged("job", "resource"), lab.ns.tagged("job", "resource:fence")
    programs = {name: locks.fenced_holder_program(lock, fence, res, seen, f"tok-{name}", 10_000,
                                                  f"{name}'s report", fenced) for name in "AB"}
    programs["T"] = locks.lease_runs_out(lock, "tok-A")
    trace = run_schedule(lab, programs, "ATBBAAB", watch=[lock, res])
    assert trace.results["A"] == a_result
    assert trace.results["B"] == "wrote, released"
    assert lab.client().get(res) == resource


def test_overrun_releases_picks_the_release_of_each_overrunning_cycle() -> None:
    history = [
        Op(0, "acquire", 0, 1, True), Op(0, "work", 1, 2, "ok"), Op(0, "release", 2, 3, True),
        Op(0, "acquire", 4, 5, True), Op(0, "work", 5, 50, "overran"), Op(0, "release", 50, 51, False),
        Op(1, "acquire", 60, 61, True), Op(1, "work", 61, 62, "ok"), Op(1, "release", 62, 90, True),
        Op(1, "pause", 63, 89, "overran"),  # a pause inside the release (between GET and DEL)
    ]
    assert sorted(locks.overrun_releases(history)) == [False, True]


def test_check_then_del_paused_in_its_window_records_the_pause_and_violates(lab: Lab) -> None:
    from helpers.instruments.race import run_clients

    # A violation needs three things in order: the paused holder's DEL lands while another client
    # holds the lock, then a third client takes the freed lock before that holder finishes. With a
    # 1 ms hold the second window was often missed (a CI run on the embedded backend once found no
    # violation in 5 runs); a 12 ms hold against a 0.5 ms retry makes it wide, and these figures
    # gave 11-20 violations in every one of 40 measured runs, on both backends, also with the CPU
    # saturated. The loop of up to 5 runs stays as a margin, each run checked.
    load = locks.LockLoad(key=lab.key("lock"), ttl_ms=20, work_s=0.012, pause_s=0.040, pause_every=2,
                          pause_where="release", retry_s=0.0005)
    found = []
    for _ in range(5):
        result = run_clients(lab, locks.lock_cycle(load, locks.release_check_then_del), clients=3, iterations=30)
        pauses = [op for op in result.history if op.label == "pause"]
        assert 0 < len(pauses) <= 45  # a holder whose GET already missed its token never pauses there
        assert len(locks.overrun_releases(result.history)) == len(pauses)
        found = locks.violations(locks.lease_spans(result.history, load.ttl_ms))
        if found:
            break
    assert found


def test_extend_stress_check_passes_the_lua_extend(lab: Lab) -> None:
    assert locks.extend_stress_check(lab, locks.extend_lua, locks.release_lua, clients=3, cycles=20) == []


def test_extend_stress_check_passes_native_set_ifeq(lab: Lab) -> None:
    if not lab.caps.set_ifeq:
        pytest.skip(f"{lab.kind} backend has no SET IFEQ")
    assert locks.extend_stress_check(lab, locks.extend_ifeq, locks.release_delex, clients=3, cycles=20) == []


@pytest.mark.parametrize("bad_extend, problem", [
    (lambda c, k, t, ttl: bool(c.pexpire(k, ttl)), "another client's lock"),
    (lambda c, k, t, ttl: bool(c.set(k, t, px=ttl)), "another client's lock"),
    (lambda c, k, t, ttl: False, "could not extend"),
], ids=["blind-pexpire", "set-px", "never"])
def test_extend_stress_check_names_what_a_broken_extend_does(lab: Lab, bad_extend: Any, problem: str) -> None:
    problems = locks.extend_stress_check(lab, bad_extend, locks.release_lua, clients=3, cycles=20)
    assert any(problem in p for p in problems)


def test_lock_cycle_gives_up_on_a_lock_that_never_expires(lab: Lab) -> None:
    from helpers.instruments.race import run_clients

    key = lab.key("lock")
    lab.client().set(key, "stuck forever")  # no TTL: nobody can ever take this lock
    load = locks.LockLoad(key=key, wait_limit_s=0.05, retry_s=0.005)
    with pytest.raises(locks.LockWaitTimeout):
        run_clients(lab, locks.lock_cycle(load, locks.release_lua), clients=2, iterations=1)
    assert lab.client().get(key) == "stuck forever"


def test_lock_helpers_work_on_a_cluster(cluster_lab: Lab) -> None:
    c = cluster_lab.client()
    key, fence = cluster_lab.ns.tagged("job", "lock"), cluster_lab.ns.tagged("job", "fence")
    assert locks.acquire_fenced(c, key, fence, MINE, 30_000) == 1
    assert locks.release_lua(c, key, THEIRS) is False
    assert locks.extend_lua(c, key, MINE, 60_000) is True
    assert locks.release_lua_checked(c, key, MINE) == locks.RELEASED
    assert locks.acquire(c, key, MINE, 30_000) and locks.release_delex(c, key, MINE)
    assert locks.acquire(c, key, MINE, 30_000) and locks.release_watch(c, key, MINE)


def test_no_unbounded_while_true_loop_in_locks() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(locks))
    unbounded = [node.lineno for node in ast.walk(tree)
                 if isinstance(node, ast.While) and isinstance(node.test, ast.Constant) and node.test.value is True]
    assert unbounded == []
