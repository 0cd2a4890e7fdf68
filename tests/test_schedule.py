"""helpers.instruments.schedule: forced interleavings print the same trace on every run and every backend."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab
from helpers.instruments.schedule import (ScheduleError, ScheduleRun, Trace, call, clock_expires, cmd, format_value,
                              parse_schedule, run_schedule, schedule_text)

from programs import naive_limiter

NAIVE_ABAB = """\
step  client  command       reply  state after
----------------------------------------------
              (setup)              counter=4
   1  A       GET counter   '4'    counter=4
   2  B       GET counter   '4'    counter=4
   3  A       INCR counter  5      counter=5
   4  B       INCR counter  6      counter=6
results: A -> 'allowed'  B -> 'allowed'"""


def lock_holder(key: str, token: str):
    def program():
        if not (yield cmd("SET", key, token, "NX", "PX", 30000)):
            return "busy"
        yield cmd("DEL", key)  # blind DEL: whoever holds it now loses it
        return "released"
    return program


def test_naive_limiter_schedule_prints_the_known_trace(lab: Lab) -> None:
    key = lab.key("counter")
    trace = run_schedule(lab, {"A": naive_limiter(key, 5), "B": naive_limiter(key, 5)}, "ABAB",
                         setup=lambda c: c.set(key, 4), watch=[key])
    assert str(trace) == NAIVE_ABAB
    assert trace.results == {"A": "allowed", "B": "allowed"}
    assert trace.schedule == "ABAB" and trace.final_state == "counter=6"


def test_the_same_schedule_prints_the_same_text_every_run(lab: Lab) -> None:
    key = lab.key("counter")
    programs = {"A": naive_limiter(key, 5), "B": naive_limiter(key, 5)}
    texts = {str(run_schedule(lab, programs, "AAB", setup=lambda c: c.set(key, 4), watch=[key]))
             for _ in range(3)}
    assert len(texts) == 1
    assert "B       GET counter   '5'" in texts.pop()


def test_each_run_resets_the_keys_before_setup(lab: Lab) -> None:
    key, other = lab.key("counter"), lab.key("scratch")
    programs = {"A": naive_limiter(key, 5)}
    lab.client().set(other, "left over")
    first = run_schedule(lab, programs, "AA", watch=[key], reset=[key, other])
    second = run_schedule(lab, programs, "AA", watch=[key], reset=[key, other])
    assert str(first) == str(second) and first.final_state == "counter=1"
    assert lab.client().exists(other) == 0


def test_keys_print_without_the_run_prefix(lab: Lab) -> None:
    key = lab.key("counter")
    text = str(run_schedule(lab, {"A": naive_limiter(key, 5)}, "AA", watch=[key]))
    assert lab.ns.prefix not in text and "GET counter" in text


def test_schedule_naming_an_unknown_client_is_an_error(lab: Lab) -> None:
    key = lab.key("counter")
    with pytest.raises(ScheduleError, match="'C', which is not a client"):
        run_schedule(lab, {"A": naive_limiter(key, 5)}, "AC", watch=[key])


def test_schedule_asking_a_finished_client_for_a_step_is_an_error(lab: Lab) -> None:
    key = lab.key("counter")
    with pytest.raises(ScheduleError, match="already finished"):
        run_schedule(lab, {"A": naive_limiter(key, 5)}, "AAA", watch=[key])


def test_schedule_leaving_clients_unfinished_is_an_error_unless_finish(lab: Lab) -> None:
    key = lab.key("counter")
    programs = {"A": naive_limiter(key, 5), "B": naive_limiter(key, 5)}
    with pytest.raises(ScheduleError, match="unfinished clients: A, B"):
        run_schedule(lab, programs, "AB", watch=[key])
    trace = run_schedule(lab, programs, "AB", watch=[key], finish=True)
    assert trace.schedule == "ABAB" and trace.results == {"A": "allowed", "B": "allowed"}


def test_a_redis_error_is_thrown_into_the_program_at_its_yield(lab: Lab) -> None:
    key = lab.key("h")

    def careful():
        try:
            yield cmd("INCR", key)
        except redis.ResponseError as exc:
            return f"caught {str(exc).split()[0]}"
        return "no error"

    def careless():
        yield cmd("INCR", key)
        return "unreachable"
    trace = run_schedule(lab, {"A": careful, "B": careless}, "AB", setup=lambda c: c.hset(key, "f", "v"),
                         watch=[key])
    assert trace.results["A"] == "caught WRONGTYPE"
    assert isinstance(trace.results["B"], redis.ResponseError)
    assert trace.rows[0].reply.startswith("ResponseError: WRONGTYPE")


def test_a_call_step_runs_a_whole_transaction_as_one_step(lab: Lab) -> None:
    key = lab.key("counter")

    def incr_and_expire(client):
        pipe = client.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, 60)
        return pipe.execute()[0]

    def program():
        count = yield call("MULTI INCR counter EXPIRE counter 60 EXEC", incr_and_expire)
        return "allowed" if count <= 1 else "rejected"
    trace = run_schedule(lab, {"A": program, "B": program}, "AB", watch=[key])
    assert [r.command for r in trace.rows] == ["MULTI INCR counter EXPIRE counter 60 EXEC"] * 2
    assert trace.results == {"A": "allowed", "B": "rejected"}
    assert trace.final_state == "counter=2 (ttl)"


def test_watch_state_is_per_client_so_exec_aborts_after_a_concurrent_write(lab: Lab) -> None:
    key = lab.key("counter")

    def optimistic():
        yield cmd("WATCH", key)
        value = int((yield cmd("GET", key)) or 0)
        yield cmd("MULTI")
        yield cmd("SET", key, value + 1)
        return (yield cmd("EXEC"))

    def writer():
        yield cmd("SET", key, 100)
        return "wrote"
    aborted = run_schedule(lab, {"A": optimistic, "B": writer}, "AABAAA", watch=[key])
    assert aborted.results["A"] is None and aborted.final_state == "counter=100"
    committed = run_schedule(lab, {"A": optimistic, "B": writer}, "BAAAAA", watch=[key])
    assert committed.results["A"] == ["OK"] and committed.final_state == "counter=101"


def test_clock_step_expires_a_lease_only_if_it_has_a_ttl(lab: Lab) -> None:
    lock, plain = lab.key("lock"), lab.key("plain")
    trace = run_schedule(lab, {"A": lock_holder(lock, "tok-A"), "T": clock_expires(lock),
                               "U": clock_expires(plain), "B": lock_holder(lock, "tok-B")},
                         "ATBAUB", setup=lambda c: c.set(plain, "kept"), watch=[lock, plain], reset=[lock, plain])
    states = [r.state for r in trace.rows]
    assert states[0] == "lock=tok-A (ttl), plain=kept"
    assert states[1] == "lock=nil, plain=kept"          # the lease ran out
    assert states[3] == "lock=nil, plain=kept"          # A's blind DEL removed B's lock
    assert states[4] == "lock=nil, plain=kept"          # no TTL: time changes nothing
    assert trace.results["T"] == "TTL ran out: key expired"
    assert trace.results["U"] == "no TTL: nothing expires"
    assert trace.rows[1].command == "(clock) TTL of lock runs out"


def test_clock_step_on_a_missing_key_changes_nothing(lab: Lab) -> None:
    trace = run_schedule(lab, {"T": clock_expires(lab.key("gone"), label="time passes")}, "T",
                         watch=[lab.key("gone")])
    assert trace.results["T"] == "key missing: nothing expires" and trace.rows[0].command == "time passes"


def test_state_shows_every_key_type_sorted(lab: Lab) -> None:
    h, s, lst, z = (lab.key(n) for n in ("h", "s", "l", "z"))

    def setup(c) -> None:
        c.hset(h, mapping={"b": "2", "a": "1"})
        c.sadd(s, "y", "x")
        c.rpush(lst, "first", "second")
        c.zadd(z, {"m": 2, "n": 1.5})
    trace = run_schedule(lab, {"A": lambda: (yield cmd("PING"))}, "A", setup=setup, watch=[h, s, lst, z])
    assert trace.initial_state == "h={a: 1, b: 2}, s={x, y}, l=[first, second], z=[n:1.5, m:2]"


def test_a_program_that_yields_something_else_is_a_type_error(lab: Lab) -> None:
    def wrong():
        yield "GET x"
    with pytest.raises(TypeError, match="yield cmd"):
        run_schedule(lab, {"A": wrong}, "A")


def test_connections_are_released_after_every_run(lab: Lab) -> None:
    key = lab.key("counter")
    before = len(lab._clients)
    run_schedule(lab, {"A": naive_limiter(key, 5), "B": naive_limiter(key, 5)}, "ABAB", watch=[key])
    with pytest.raises(ScheduleError):
        run_schedule(lab, {"A": naive_limiter(key, 5)}, "B", watch=[key])
    assert len(lab._clients) == before


def test_schedule_run_lets_the_caller_pick_steps_one_at_a_time(lab: Lab) -> None:
    key = lab.key("counter")
    with ScheduleRun(lab, {"A": naive_limiter(key, 1), "B": naive_limiter(key, 1)}, watch=[key]) as run:
        assert run.unfinished == ["A", "B"]
        run.step("A")
        run.step("A")
        assert run.unfinished == ["B"]
        run.step("B")
        trace = run.trace()
    assert isinstance(trace, Trace) and trace.results == {"A": "allowed", "B": "rejected"}
    assert [(op.client_id, op.start_ns, op.end_ns) for op in trace.history()] == [("A", 0, 1), ("A", 1, 2),
                                                                                 ("B", 2, 3)]


def test_parse_and_format_helpers() -> None:
    assert parse_schedule("AB BA") == ["A", "B", "B", "A"] and parse_schedule(["A", "clock"]) == ["A", "clock"]
    assert schedule_text(["A", "B"]) == "AB" and schedule_text(["A", "clock"]) == "A clock"
    def short(x):
        return (x.decode() if isinstance(x, bytes) else x).removeprefix("racelab:t:0:")
    assert format_value({"racelab:t:0:k": [1, None, b"x"]}, short) == "{'k': [1, None, b'x']}"
    assert format_value(ValueError("bad"), str) == "ValueError: bad"


def test_schedules_and_watch_run_on_a_cluster_with_tagged_keys(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("limiter", "counter")
    trace = run_schedule(cluster_lab, {"A": naive_limiter(key, 5), "B": naive_limiter(key, 5)}, "ABAB",
                         setup=lambda c: c.set(key, 4), watch=[key])
    assert [(r.client, r.command, r.reply, r.state) for r in trace.rows] == [
        ("A", "GET {limiter}:counter", "'4'", "{limiter}:counter=4"),
        ("B", "GET {limiter}:counter", "'4'", "{limiter}:counter=4"),
        ("A", "INCR {limiter}:counter", "5", "{limiter}:counter=5"),
        ("B", "INCR {limiter}:counter", "6", "{limiter}:counter=6")]
    assert trace.results == {"A": "allowed", "B": "allowed"}


def test_hostile_keys_and_values_keep_one_line_per_step(lab: Lab) -> None:
    spaced, binary = lab.key("a key\nwith newline"), lab.key("bin").encode() + b"\xff"

    def program():
        yield cmd("SET", spaced, "two\nlines")
        yield cmd("SET", binary, b"\x00\xfe")
        yield cmd("GET", spaced)
        return "done"
    try:
        trace = run_schedule(lab, {"A": program}, "AAA", watch=[spaced])
    finally:
        lab.client(decode_responses=False).delete(binary)  # binary key names: delete them ourselves
    lines = str(trace).splitlines()
    assert len(lines) == 2 + 1 + 3 + 1  # header, rule, setup, three steps, results
    assert trace.rows[0].command == "SET 'a key\\nwith newline' 'two\\nlines'"
    assert run_schedule(lab, {"A": lambda: (yield cmd("ECHO", "a b", ""))}, "A").rows[0].command == "ECHO a b ''"
    assert trace.rows[1].command == "SET b'bin\\xff' b'\\x00\\xfe'"
    assert trace.rows[2].reply == "'two\\nlines'"
    assert trace.rows[2].state == "a key\\nwith newline=two\\nlines"


def test_raw_watch_multi_exec_and_unwatch_run_on_a_cluster_with_tagged_keys(cluster_lab: Lab) -> None:
    key, other = cluster_lab.ns.tagged("tx", "counter"), cluster_lab.ns.tagged("tx", "other")

    def optimistic():
        yield cmd("WATCH", key)
        value = int((yield cmd("GET", key)) or 0)
        if value >= 100:
            yield cmd("UNWATCH")
            return "gave up"
        yield cmd("MULTI")
        yield cmd("SET", key, value + 1)
        yield cmd("INCR", other)
        return (yield cmd("EXEC"))

    def writer():
        yield cmd("SET", key, 100)
        return "wrote"
    aborted = run_schedule(cluster_lab, {"A": optimistic, "B": writer}, "AABAAAA", watch=[key, other])
    assert aborted.results["A"] is None and aborted.final_state == "{tx}:counter=100, {tx}:other=nil"
    committed = run_schedule(cluster_lab, {"A": optimistic, "B": writer}, "AAAAAAB", watch=[key, other])
    assert committed.results["A"] == ["OK", 1]
    assert committed.final_state == "{tx}:counter=100, {tx}:other=1"
    gave_up = run_schedule(cluster_lab, {"A": optimistic, "B": writer}, "BAAA", watch=[key, other])
    assert gave_up.results["A"] == "gave up" and [r.reply for r in gave_up.rows][-1] == "True"


def test_explore_runs_watch_programs_on_a_cluster(cluster_lab: Lab) -> None:
    from helpers.instruments.explore import explore

    key = cluster_lab.ns.tagged("tx", "counter")

    def increment():
        for _ in range(3):
            yield cmd("WATCH", key)
            value = int((yield cmd("GET", key)) or 0)
            yield cmd("MULTI")
            yield cmd("SET", key, value + 1)
            if (yield cmd("EXEC")) is not None:
                return "done"
        return "gave up"
    found = explore(cluster_lab, {"A": increment, "B": increment},
                    lambda c, results: results != {"A": "done", "B": "done"} or c.get(key) == "2", watch=[key])
    assert found.total > 1 and found.bad_count == 0


def test_schedules_on_keys_of_several_cluster_nodes_still_run_plain_commands(cluster_lab: Lab) -> None:
    from redis.crc import key_slot

    keys = [cluster_lab.ns.tagged(f"n{i}", "k") for i in range(40)]
    router = cluster_lab.client()
    spread = [k for k in keys if router.get_node_from_key(k).port != router.get_node_from_key(keys[0]).port]
    assert spread and key_slot(spread[0].encode()) != key_slot(keys[0].encode())
    a, b = keys[0], spread[0]

    def writer():
        yield cmd("SET", a, "1")
        yield cmd("SET", b, "2")
        return "wrote"
    trace = run_schedule(cluster_lab, {"A": writer}, "AA", watch=[a, b])
    assert trace.results == {"A": "wrote"} and router.get(a) == "1" and router.get(b) == "2"


def test_a_schedule_refuses_to_reset_a_key_outside_the_run_prefix(lab: Lab) -> None:
    other, theirs = lab.client(), f"not-racelab:{lab.ns.run_id}:config"  # somebody else's key
    other.set(theirs, "theirs")
    try:
        for kwargs in ({"watch": [theirs]}, {"watch": [lab.key("k")], "reset": [lab.key("k"), theirs.encode()]}):
            with pytest.raises(ValueError, match="must lie under this run's prefix"):
                run_schedule(lab, {"A": naive_limiter(lab.key("k"), 5)}, "AA", **kwargs)
        assert other.get(theirs) == "theirs"
        # watching a foreign key without resetting it is allowed: only deletion is refused
        trace = run_schedule(lab, {"A": naive_limiter(lab.key("k"), 5)}, "AA", watch=[theirs], reset=[])
        assert trace.results == {"A": "allowed"} and other.get(theirs) == "theirs"
    finally:
        other.delete(theirs)
