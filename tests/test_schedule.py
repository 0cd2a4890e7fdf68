"""helpers.instruments.schedule: forced interleavings of ordinary functions, on gated clients.

The same trace prints on every run and every backend; one step is one round trip.
"""

from __future__ import annotations

import threading
from functools import partial

import pytest
import redis
from programs import lock_holder, lua_limiter, naive_limiter, watch_increment

from helpers import Lab
from helpers.backend.modes import client_stats
from helpers.instruments import actors as actor_side
from helpers.instruments import faults
from helpers.instruments.schedule import (
    ScheduleError,
    ScheduleRun,
    Trace,
    format_value,
    lease_expires,
    parse_schedule,
    run_schedule,
    schedule_text,
)
from helpers.instruments.spec import RaceSpec

NAIVE_ABAB = """\
step  client  command           reply  state after
--------------------------------------------------
              (setup)                  counter=4
   1  A       GET counter       '4'    counter=4
   2  B       GET counter       '4'    counter=4
   3  A       INCRBY counter 1  5      counter=5
   4  B       INCRBY counter 1  6      counter=6
results: A -> 'allowed'  B -> 'allowed'"""


def pair(fn, **kwargs):
    """Return two actors A and B running the same partial of fn."""
    actor = partial(fn, **kwargs)
    return {"A": actor, "B": actor}


def test_naive_limiter_schedule_prints_the_known_trace(lab: Lab) -> None:
    key = lab.key("counter")
    trace = run_schedule(
        lab, pair(naive_limiter, key=key), "ABAB", setup=lambda c: c.set(key, 4), watch=[key]
    )
    assert str(trace) == NAIVE_ABAB
    assert trace.results == {"A": "allowed", "B": "allowed"}
    assert trace.schedule == "ABAB" and trace.final_state == "counter=6"


def test_the_trace_keeps_the_very_function_objects_it_ran(lab: Lab) -> None:
    key = lab.key("counter")
    actors = pair(naive_limiter, key=key)
    trace = run_schedule(lab, actors, "AB", finish=True, watch=[key])
    assert trace.actors["A"] is actors["A"] and trace.actors["A"].func is naive_limiter


def test_the_same_schedule_prints_the_same_text_every_run(lab: Lab) -> None:
    key = lab.key("counter")
    texts = {
        str(
            run_schedule(
                lab, pair(naive_limiter, key=key), "AAB", setup=lambda c: c.set(key, 4), watch=[key]
            )
        )
        for _ in range(3)
    }
    assert len(texts) == 1
    assert "B       GET counter       '5'" in texts.pop()


def test_each_run_resets_the_keys_before_setup(lab: Lab) -> None:
    key, other = lab.key("counter"), lab.key("scratch")
    actors = {"A": partial(naive_limiter, key=key)}
    lab.client().set(other, "left over")
    first = run_schedule(lab, actors, "AA", watch=[key], reset=[key, other])
    second = run_schedule(lab, actors, "AA", watch=[key], reset=[key, other])
    assert str(first) == str(second) and first.final_state == "counter=1"
    assert lab.client().exists(other) == 0


def test_keys_print_without_the_run_prefix(lab: Lab) -> None:
    key = lab.key("counter")
    text = str(run_schedule(lab, {"A": partial(naive_limiter, key=key)}, "AA", watch=[key]))
    assert lab.ns.prefix not in text and "GET counter" in text


def test_schedule_naming_an_unknown_client_is_an_error(lab: Lab) -> None:
    with pytest.raises(ScheduleError, match="'C', which is not a client"):
        run_schedule(
            lab, {"A": partial(naive_limiter, key=lab.key("c"))}, "AC", watch=[lab.key("c")]
        )


def test_schedule_asking_a_finished_client_for_a_step_is_an_error(lab: Lab) -> None:
    with pytest.raises(ScheduleError, match="already finished"):
        run_schedule(
            lab, {"A": partial(naive_limiter, key=lab.key("c"))}, "AAA", watch=[lab.key("c")]
        )


def test_schedule_leaving_clients_unfinished_is_an_error_unless_finish(lab: Lab) -> None:
    key = lab.key("counter")
    with pytest.raises(ScheduleError, match="unfinished clients: A, B"):
        run_schedule(lab, pair(naive_limiter, key=key), "AB", watch=[key])
    trace = run_schedule(lab, pair(naive_limiter, key=key), "AB", watch=[key], finish=True)
    assert trace.schedule == "ABAB" and trace.results == {"A": "allowed", "B": "allowed"}


def test_a_redis_error_raised_by_an_actor_is_its_result(lab: Lab) -> None:
    key = lab.key("h")

    def careful(client):
        try:
            client.incr(key)
        except redis.ResponseError as exc:
            return f"caught {str(exc).split()[0]}"
        return "no error"

    def careless(client):
        client.incr(key)
        return "unreachable"

    trace = run_schedule(
        lab, {"A": careful, "B": careless}, "AB", setup=lambda c: c.hset(key, "f", "v"), watch=[key]
    )
    assert trace.results["A"] == "caught WRONGTYPE"
    assert isinstance(trace.results["B"], redis.ResponseError)
    assert trace.rows[0].reply.startswith("ResponseError: WRONGTYPE")


def test_any_other_exception_in_an_actor_is_raised_by_the_step(lab: Lab) -> None:
    def buggy(client):
        client.ping()
        raise KeyError("a bug in the actor")

    with pytest.raises(KeyError, match="a bug"):
        run_schedule(lab, {"A": buggy}, "A")


def test_a_multi_exec_pipeline_is_one_round_trip_and_one_step(lab: Lab) -> None:
    key = lab.key("counter")

    def incr_and_expire(client):
        pipe = client.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, 60)
        count, _ = pipe.execute()
        return "allowed" if count <= 1 else "rejected"

    trace = run_schedule(lab, {"A": incr_and_expire, "B": incr_and_expire}, "AB", watch=[key])
    assert [r.command for r in trace.rows] == [
        "MULTI, INCRBY counter 1, EXPIRE counter 60, EXEC"
    ] * 2
    assert [r.reply for r in trace.rows] == [
        "[1, 1]",
        "[2, 1]",
    ]  # a MULTI block answers with EXEC's reply
    assert trace.results == {"A": "allowed", "B": "rejected"}
    assert trace.final_state == "counter=2 (ttl)"


def test_a_plain_pipeline_is_one_round_trip_with_every_reply(lab: Lab) -> None:
    key = lab.key("counter")

    def two_reads(client):
        pipe = client.pipeline(transaction=False)
        pipe.get(key)
        pipe.exists(key)
        return pipe.execute()

    trace = run_schedule(lab, {"A": two_reads}, "A", setup=lambda c: c.set(key, 7), watch=[key])
    assert (
        trace.rows[0].command == "GET counter, EXISTS counter" and trace.rows[0].reply == "['7', 1]"
    )


def test_watch_and_each_immediate_command_are_round_trips_of_their_own(lab: Lab) -> None:
    key = lab.key("counter")

    def writer(client):
        client.set(key, 100)
        return "wrote"

    aborted = run_schedule(
        lab, {"A": partial(watch_increment, key=key, attempts=1), "B": writer}, "AABA", watch=[key]
    )
    assert [(r.client, r.command) for r in aborted.rows] == [
        ("A", "WATCH counter"),
        ("A", "GET counter"),
        ("B", "SET counter 100"),
        ("A", "MULTI, SET counter 1, EXEC"),
    ]
    assert aborted.rows[-1].reply == "nil"  # EXEC found the watched key changed: nothing ran
    assert aborted.results["A"] == "gave up" and aborted.final_state == "counter=100"
    committed = run_schedule(
        lab, {"A": partial(watch_increment, key=key), "B": writer}, "BAAA", watch=[key]
    )
    assert committed.results["A"] == "done" and committed.final_state == "counter=101"


def test_a_script_call_is_one_step_shown_by_its_command(lab: Lab) -> None:
    key = lab.key("counter")
    trace = run_schedule(lab, pair(lua_limiter, key=key, limit=1), "AB", watch=[key])
    assert [r.command.split()[0] for r in trace.rows] == ["EVAL", "EVAL"]
    assert "<script of" in trace.rows[0].command and trace.results == {
        "A": "allowed",
        "B": "rejected",
    }


def test_an_evalsha_of_a_lua_file_is_named_after_the_file(lab: Lab) -> None:
    from helpers import lua

    key = lab.key("counter")
    script = lua("rate_limit_fixed_window")

    def limiter(client):
        return script(keys=[key], args=[5, 60], client=client)[0]

    trace = run_schedule(lab, {"A": limiter}, "A", watch=[key])
    assert trace.rows[0].command == "EVALSHA sha1(rate_limit_fixed_window.lua) 1 counter 5 60"
    assert trace.results == {"A": 1}  # preloaded: no NOSCRIPT round trip inside the schedule


def test_clock_actor_expires_a_lease_only_if_it_has_a_ttl(lab: Lab) -> None:
    lock, plain = lab.key("lock"), lab.key("plain")
    trace = run_schedule(
        lab,
        {
            "A": partial(lock_holder, key=lock, token="tok-A"),
            "T": lease_expires(lock),
            "U": lease_expires(plain),
            "B": partial(lock_holder, key=lock, token="tok-B"),
        },
        "ATBAUB",
        setup=lambda c: c.set(plain, "kept"),
        watch=[lock, plain],
        reset=[lock, plain],
    )
    states = [r.state for r in trace.rows]
    assert states[0] == "lock=tok-A (ttl), plain=kept"
    assert states[1] == "lock=nil, plain=kept"  # the lease ran out
    assert states[3] == "lock=nil, plain=kept"  # A's blind DEL removed B's lock
    assert states[4] == "lock=nil, plain=kept"  # no TTL: time changes nothing
    assert trace.results["T"] == "TTL ran out: key expired"
    assert trace.results["U"] == "no TTL: nothing expires"
    assert trace.rows[1].command == "(clock) TTL of lock runs out"


def test_clock_actor_on_a_missing_key_changes_nothing(lab: Lab) -> None:
    trace = run_schedule(
        lab,
        {"T": lease_expires(lab.key("gone"), label="time passes")},
        "T",
        watch=[lab.key("gone")],
    )
    assert (
        trace.results["T"] == "key missing: nothing expires"
        and trace.rows[0].command == "time passes"
    )


def test_state_shows_every_key_type_sorted(lab: Lab) -> None:
    h, s, lst, z = (lab.key(n) for n in ("h", "s", "l", "z"))

    def setup(c) -> None:
        c.hset(h, mapping={"b": "2", "a": "1"})
        c.sadd(s, "y", "x")
        c.rpush(lst, "first", "second")
        c.zadd(z, {"m": 2, "n": 1.5})

    trace = run_schedule(lab, {"A": lambda c: c.ping()}, "A", setup=setup, watch=[h, s, lst, z])
    assert trace.initial_state == "h={a: 1, b: 2}, s={x, y}, l=[first, second], z=[n:1.5, m:2]"


def test_an_actor_that_is_not_callable_is_a_type_error(lab: Lab) -> None:
    with pytest.raises(TypeError, match="not a function of a client"):
        run_schedule(lab, {"A": "GET x"}, "A")


def test_an_actor_stuck_outside_redis_is_reported_not_waited_for_forever(
    lab: Lab, monkeypatch
) -> None:

    monkeypatch.setattr(actor_side, "STEP_TIMEOUT_S", 0.2)
    release = threading.Event()

    def stuck(client):
        client.ping()
        release.wait(5)  # waits for something that is not a round trip
        return "late"

    try:
        with pytest.raises(ScheduleError, match="did not reach its next round trip"):
            run_schedule(lab, {"A": stuck}, "A")
    finally:
        release.set()


def test_connections_and_threads_are_released_after_every_run(lab: Lab) -> None:
    key = lab.key("counter")
    before, threads = len(lab._clients), threading.active_count()
    run_schedule(lab, pair(naive_limiter, key=key), "ABAB", watch=[key])
    with pytest.raises(ScheduleError):
        run_schedule(lab, pair(naive_limiter, key=key), "AB", watch=[key])  # unfinished: aborted
    # no thread left behind (one an earlier test started may end meanwhile: at most, not equal)
    assert len(lab._clients) == before and threading.active_count() <= threads


def test_an_actor_stopped_mid_transaction_leaves_no_watch_behind(lab: Lab) -> None:
    key = lab.key("counter")
    with ScheduleRun(RaceSpec(lab, {"A": partial(watch_increment, key=key)}, watch=[key])) as run:
        run.step("A")  # WATCH sent; A's process "dies" before GET
        assert run.waiting_on() == {"A": "GET counter"}
        assert run.trace().result_text == {"A": "(unfinished)"}
    # A fresh transaction on the same key commits: nobody's stale WATCH is left on the server.
    assert run_schedule(
        lab, {"A": partial(watch_increment, key=key, attempts=1)}, "AAA", watch=[key]
    ).results == {"A": "done"}


def test_schedule_run_lets_the_caller_pick_steps_one_at_a_time(lab: Lab) -> None:
    key = lab.key("counter")
    with ScheduleRun(RaceSpec(lab, pair(naive_limiter, key=key, limit=1), watch=[key])) as run:
        assert run.unfinished == ["A", "B"]
        assert run.waiting_on() == {"A": "GET counter", "B": "GET counter"}
        run.step("A")
        run.step("A")
        assert run.unfinished == ["B"]
        run.step("B")
        trace = run.trace()
    assert isinstance(trace, Trace) and trace.results == {"A": "allowed", "B": "rejected"}
    assert [(op.client_id, op.start_ns, op.end_ns) for op in trace.history()] == [
        ("A", 0, 1),
        ("A", 1, 2),
        ("B", 2, 3),
    ]


def test_gated_clients_count_their_round_trips(lab: Lab) -> None:
    key = lab.key("counter")
    with ScheduleRun(RaceSpec(lab, {"A": partial(watch_increment, key=key)}, watch=[key])) as run:
        for _ in range(3):
            run.step("A")
        client = run.actors["A"].client
        assert client_stats(client).round_trips == 4  # PING to connect, WATCH, GET, MULTI block


def test_parse_and_format_helpers() -> None:
    assert parse_schedule("AB BA") == ["A", "B", "B", "A"] and parse_schedule(["A", "clock"]) == [
        "A",
        "clock",
    ]
    assert schedule_text(["A", "B"]) == "AB" and schedule_text(["A", "clock"]) == "A clock"

    def short(x):
        return (x.decode() if isinstance(x, bytes) else x).removeprefix("racelab:t:0:")

    assert format_value({"racelab:t:0:k": [1, None, b"x"]}, short) == "{'k': [1, nil, b'x']}"
    assert format_value(ValueError("bad"), str) == "ValueError: bad"


def test_schedules_run_on_a_cluster_with_tagged_keys(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("limiter", "counter")
    trace = run_schedule(
        cluster_lab,
        pair(naive_limiter, key=key),
        "ABAB",
        setup=lambda c: c.set(key, 4),
        watch=[key],
    )
    assert [(r.client, r.command, r.reply, r.state) for r in trace.rows] == [
        ("A", "GET {limiter}:counter", "'4'", "{limiter}:counter=4"),
        ("B", "GET {limiter}:counter", "'4'", "{limiter}:counter=4"),
        ("A", "INCRBY {limiter}:counter 1", "5", "{limiter}:counter=5"),
        ("B", "INCRBY {limiter}:counter 1", "6", "{limiter}:counter=6"),
    ]
    assert trace.results == {"A": "allowed", "B": "allowed"}


def test_watch_multi_exec_run_on_a_cluster_with_tagged_keys(cluster_lab: Lab) -> None:
    key = cluster_lab.ns.tagged("tx", "counter")

    def writer(client):
        client.set(key, 100)
        return "wrote"

    aborted = run_schedule(
        cluster_lab,
        {"A": partial(watch_increment, key=key, attempts=1), "B": writer},
        "AABA",
        watch=[key],
    )
    assert aborted.results["A"] == "gave up" and aborted.final_state == "{tx}:counter=100"
    committed = run_schedule(
        cluster_lab, {"A": partial(watch_increment, key=key), "B": writer}, "AAAB", watch=[key]
    )
    assert committed.results["A"] == "done" and committed.final_state == "{tx}:counter=100"


def test_schedules_on_keys_of_several_cluster_nodes_still_run_plain_commands(
    cluster_lab: Lab,
) -> None:
    keys = [cluster_lab.ns.tagged(f"n{i}", "k") for i in range(40)]
    router = cluster_lab.client()
    spread = [
        k
        for k in keys
        if router.get_node_from_key(k).port != router.get_node_from_key(keys[0]).port
    ]
    a, b = keys[0], spread[0]

    def writer(client):
        client.set(a, "1")
        client.set(b, "2")
        return "wrote"

    trace = run_schedule(cluster_lab, {"A": writer}, "AA", watch=[a, b])
    assert trace.results == {"A": "wrote"} and router.get(a) == "1" and router.get(b) == "2"


def test_hostile_keys_and_values_keep_one_line_per_step(lab: Lab) -> None:
    spaced, binary = lab.key("a key\nwith newline"), lab.key("bin").encode() + b"\xff"

    def writer(client):
        client.set(spaced, "two\nlines")
        client.set(binary, b"\x00\xfe")
        client.get(spaced)
        return "done"

    try:
        trace = run_schedule(lab, {"A": writer}, "AAA", watch=[spaced])
    finally:
        lab.client(decode_responses=False).delete(binary)  # binary key names: delete them ourselves
    lines = str(trace).splitlines()
    assert len(lines) == 2 + 1 + 3 + 1  # header, rule, setup, three steps, results
    assert trace.rows[0].command == "SET 'a key\\nwith newline' 'two\\nlines'"
    assert trace.rows[1].command == "SET b'bin\\xff' b'\\x00\\xfe'"
    assert trace.rows[2].reply == "'two\\nlines'"
    assert trace.rows[2].state == "a key\\nwith newline=two\\nlines"
    echo = run_schedule(lab, {"A": lambda c: c.execute_command("ECHO", "a b", "")}, "A")
    assert echo.rows[0].command == "ECHO a b ''"


def test_a_schedule_refuses_to_reset_a_key_outside_the_run_prefix(lab: Lab) -> None:
    other, theirs = lab.client(), f"not-racelab:{lab.ns.run_id}:config"  # somebody else's key
    other.set(theirs, "theirs")
    actor = {"A": partial(naive_limiter, key=lab.key("k"))}
    try:
        for kwargs in (
            {"watch": [theirs]},
            {"watch": [lab.key("k")], "reset": [lab.key("k"), theirs.encode()]},
        ):
            with pytest.raises(ValueError, match="is not under this lab's prefix"):
                run_schedule(lab, actor, "AA", **kwargs)
        assert other.get(theirs) == "theirs"
        # watching a foreign key without resetting it is allowed: only deletion is refused
        trace = run_schedule(lab, actor, "AA", watch=[theirs], reset=[])
        assert trace.results == {"A": "allowed"} and other.get(theirs) == "theirs"
    finally:
        other.delete(theirs)


def _steps_of(run: ScheduleRun, schedule: str) -> list[str]:
    """Return the rows of schedule run to the end on run, as text."""
    rows = [str(run.step(name)) for name in schedule]
    return rows + [str(run.trace().results)]


@pytest.mark.parametrize("program", [naive_limiter, watch_increment])
def test_greenlet_runner_gives_the_same_trace_as_threads(lab: Lab, program) -> None:
    key = lab.key("counter")
    actors = {"A": partial(program, key=key), "B": partial(program, key=key)}
    schedule = "ABAB" if program is naive_limiter else "ABABABBBB"
    seen = []
    for runner in ("thread", "greenlet"):
        with ScheduleRun(
            RaceSpec(lab, actors, lambda c: c.set(key, 4), [key]), runner=runner
        ) as run:
            seen.append(_steps_of(run, schedule))
    assert seen[0] == seen[1]


def test_greenlet_runner_stops_an_unfinished_actor_and_closes_its_connection(lab: Lab) -> None:
    key = lab.key("counter")
    actors = {"A": partial(watch_increment, key=key)}
    with ScheduleRun(RaceSpec(lab, actors, watch=[key]), runner="greenlet") as run:
        run.step("A")  # WATCH sent: the next round trip is GET
        state = run.actors["A"]
        assert run.trace().result_text == {"A": "(unfinished)"}
    assert state.glet.dead and state.aborted and lab.client().get(key) is None


def test_a_crashed_actor_never_runs_again_and_its_watch_ends(lab: Lab) -> None:
    key = lab.key("counter")
    actors = {"A": partial(watch_increment, key=key), "B": partial(naive_limiter, key=key)}
    trace = run_schedule(lab, actors, "AA!BB", watch=[key])
    assert trace.result_text == {"A": "(crashed)", "B": "'allowed'"} and trace.results == {
        "B": "allowed"
    }
    assert parse_schedule("AA!BB") == ["A", "A!", "B", "B"]
    with pytest.raises(ScheduleError, match="clock"):
        with ScheduleRun(RaceSpec(lab, {"T": lease_expires(key)}, watch=[key])) as run:
            faults.apply(run, "T!")
