"""A search walks the states it met before, and still answers every schedule as live replays do.

Two paths that reach the same state (the same keyspace, the same round trips, replies and clock
for each actor, the same clocks) go on alike, so a search keeps a graph of the states its live
replays reached and walks later replays through it (``helpers.instruments.states``). Each test
compares such a search with the plain one (share_prefixes=False): the same schedules in the same
order, each with the same verdict, results and footprints, and the same replays cut short. The
fuzzer checks it on generated races (tests/fuzz_explorer.py).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import pytest
import redis
from fakeredis.model import Hash, ZSet
from searches import shared_and_live

from benchmarks.explorer import read_modify_write  # GET, then SET the value read plus one
from helpers import Lab, explore
from helpers.instruments.dpor import NotDeterministic
from helpers.instruments.sharing import _value_key, keyspace_key


def both(lab: Lab, actors: dict[str, Any], invariant: Any, **options: Any) -> Any:
    """Explore with and without the graph; assert the same answer; return the first."""
    walked, live = shared_and_live(lab, actors, invariant, **options)
    assert (walked.runs, walked.pruned, walked.classes) == (live.runs, live.pruned, live.classes)
    if lab.kind != "embedded":
        assert walked.walked == 0 and walked.sharing_off
    return walked


def get_or_put(client: Any, key: str, word: str) -> int:
    """The notebook's HGETALL + HSETNX id mapping, one word."""
    ids = client.hgetall(key)
    if word in ids:  # (the lab's clients decode replies to str)
        return int(ids[word])
    client.hsetnx(key, word, len(ids) + 1)
    return int(client.hget(key, word))


@pytest.mark.parametrize("reduce", [False, True])
def test_replays_end_in_the_states_met_before(lab: Lab, reduce: bool) -> None:
    key = lab.key("n")
    race = {n: partial(read_modify_write, key=key, steps=4) for n in "AB"}
    found = both(lab, race, lambda c, r: int(c.get(key)) == 4, watch=[key], reduce=reduce)
    assert found.total == 70 and found.bad_count == 64
    assert found.runs == (34 if reduce else 70)
    if lab.kind == "embedded":
        assert found.walked > found.runs // 2  # (55 of 70, 19 of 34)
        assert found.sharing_off == ""


@pytest.mark.parametrize("reduce", [False, True])
@pytest.mark.parametrize(
    "shape", ["hash", "list and set", "three actors", "clock", "transaction", "footprints"]
)
def test_walked_searches_answer_as_live_ones(lab: Lab, shape: str, reduce: bool) -> None:
    key, other = lab.key("ids"), lab.key("seen")
    invariant = lambda c, r: True  # noqa: E731 (the schedules' results are what is compared)
    options: dict[str, Any] = {"watch": [key, other], "reduce": reduce}
    if shape == "hash":
        race = {n: partial(get_or_put, key=key, word="x") for n in "AB"}  # (B may find it)

        def invariant(c: Any, r: dict[str, Any]) -> bool:
            return len(set(c.hvals(key))) == c.hlen(key)

    elif shape == "list and set":

        def race_actor(client: Any, name: str) -> int:
            client.rpush(key, name)
            client.sadd(other, name)
            return client.llen(key) + client.scard(other)

        race = {n: partial(race_actor, name=n) for n in "AB"}
    elif shape == "three actors":
        race = {n: partial(read_modify_write, key=key, steps=2) for n in "ABC"}
    elif shape == "clock":  # a sleep moves the actor's own clock: part of the state

        def race_actor(client: Any, name: str) -> str:
            value = client.get(key)
            if name == "A":
                time.sleep(5)
            client.set(key, f"{name}@{time.time():.0f}")
            return f"{value!r} {time.time():.0f}"

        race = {n: partial(race_actor, name=n) for n in "AB"}
    elif shape == "transaction":  # a WATCH open: no state told inside it; a sleep shows later

        def race_actor(client: Any, name: str) -> tuple[Any, ...]:
            if name == "B":
                time.sleep(1)
            with client.pipeline() as pipe:
                try:
                    pipe.watch(key)
                    seen = pipe.get(key)
                    pipe.multi()
                    pipe.set(key, name, px=100_000)
                    done = pipe.execute()
                except redis.WatchError:
                    done = "aborted"
            return seen, done, client.get(key), int(time.time()) % 100

        race = {n: partial(race_actor, name=n) for n in "AB"}
    else:
        race = {n: partial(read_modify_write, key=key, steps=3) for n in "AB"}
        options["classes"] = True  # every outcome keeps its footprints: merged ones too
    found = both(lab, race, invariant, **options)
    if shape == "footprints":
        assert all(len(o.steps) == 6 for o in found.outcomes)


def test_a_bounded_search_walks_the_graph_too(lab: Lab) -> None:
    key = lab.key("n")
    race = {n: partial(read_modify_write, key=key, steps=4) for n in "AB"}
    found = both(lab, race, lambda c, r: True, watch=[key], preemptions=1)
    assert not found.complete


def test_the_time_an_actor_read_is_part_of_its_state(lab: Lab) -> None:
    """A found by the fuzzer: A ends in the same keyspace, with the same replies, whether B's
    sleep showed before A's last step or after, but reads another time. Without the clock of
    each step in the state, AAABAB was answered as AAAABB ended."""
    key = lab.key("n")

    def a(client: Any) -> tuple[Any, ...]:
        client.set(key, "1")
        return client.get(key), int(time.time()) % 100

    def b(client: Any) -> tuple[Any, ...]:
        time.sleep(1)
        return client.get(key), client.get(key)

    found = both(lab, {"A": a, "B": b}, lambda c, r: True, watch=[key], reduce=False)
    times = {o.schedule: o.results["A"][1] for o in found.outcomes}
    assert times["AABB"] == 0 and times["ABAB"] == 1


def test_a_state_is_told_by_values_and_types_or_not_at_all() -> None:
    assert _value_key(b"1") != _value_key(1) != _value_key(1.0)
    assert _value_key([b"a", b"b"]) != _value_key([b"b", b"a"])
    assert _value_key({b"a", b"b"}) == _value_key({b"b", b"a"})
    first, second = Hash(), Hash()
    first[b"f"], second[b"f"] = b"1", b"1"
    assert _value_key(first) == _value_key(second)
    second._expirations[b"f"] = 123  # a field's TTL is part of the hash
    assert _value_key(first) != _value_key(second)
    assert _value_key(ZSet()) is None  # a type this does not know: no state, no merge
    assert _value_key(object()) is None


def test_a_keyspace_holding_a_type_not_known_is_never_merged(lab: Lab) -> None:
    if lab.kind != "embedded":
        pytest.skip("the embedded server's keyspace only")
    key = lab.key("board")

    def scorer(client: Any, points: int) -> float:
        client.zincrby(key, points, "me")
        return float(client.zscore(key, "me") or 0)

    assert keyspace_key(lab.fake_server) is not None
    found = both(lab, {"A": partial(scorer, points=1), "B": partial(scorer, points=2)},
                 lambda c, r: True, watch=[key], reduce=False)  # fmt: skip
    assert found.walked == 0


def test_actors_that_share_a_python_object_are_caught_by_the_replays(lab: Lab) -> None:
    """The graph, like the reduction, takes the server as the actors' only shared state. Actors
    that also share a Python object can make a walked schedule wrong; the replays after the
    search (helpers.instruments.determinism) run such schedules again and say so."""
    if lab.kind != "embedded":
        pytest.skip("only the embedded server keeps a graph")
    key, log = lab.key("n"), []

    def actor(client: Any, name: str) -> str:
        client.get(key)
        log.append(name)
        client.get(key)
        return "".join(log)

    race = {n: partial(actor, name=n) for n in "AB"}
    with pytest.raises(NotDeterministic, match="share"):
        explore(
            lab, race, lambda c, r: True, watch=[key], reduce=False, setup=lambda c: log.clear()
        )


def test_an_actor_stopped_between_round_trips_keeps_its_connection(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay cut short (it met a known state, or every choice slept) stops its actors at
    their next round trip. One that had nothing open keeps its connection for the next replay;
    one stopped inside a WATCH has it closed, so that the next replay starts clean (test_explore's
    test_connection_state_does_not_leak_between_replays, and the transaction shape above)."""
    from helpers.backend.connection import LabConnection

    handshakes = []
    handshake = LabConnection.on_connect_check_health

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        handshakes.append(1)
        handshake(self, *args, **kwargs)

    monkeypatch.setattr(LabConnection, "on_connect_check_health", counted)
    key = lab.key("n")
    race = {n: partial(read_modify_write, key=key, steps=6) for n in "AB"}
    found = explore(lab, race, lambda c, r: True, watch=[key])
    assert found.total == 924
    if lab.kind == "embedded":  # about 100 replays were cut when they met a known state
        assert found.walked and len(handshakes) < 10  # (3 here; 103 if each cut one reconnects)


@pytest.mark.parametrize("reduce", [False, True], ids=["exhaustive", "reduced"])
def test_two_errors_that_print_alike_are_other_states(lab: Lab, reduce: bool) -> None:
    # redis-py prints every server error as "server:ResponseError", whatever its message. C's
    # INCR fails with WRONGTYPE on A's list, or with "not an integer" on A's string, and then the
    # keyspace, A's replies and the clock are the same: only the message tells the states apart.
    key = lab.key("k")

    def a(client: Any) -> None:
        client.rpush(key, 1)
        client.set(key, "x")

    def c(client: Any) -> str:
        try:
            return str(client.incr(key))
        except redis.ResponseError as exc:
            return str(exc).split()[0]

    found = both(lab, {"A": a, "C": c}, lambda client, results: True, watch=[key], reduce=reduce)
    told = {o.schedule: o.results["C"] for o in found.outcomes}
    assert told["ACA"] == "WRONGTYPE" and told["AAC"] == "value"
