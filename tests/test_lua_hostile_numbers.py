"""Every script in lua/ that takes a number refuses the strings Lua's tonumber would accept
("nan", "inf", "1e400", "0x10", " 7 " ...), in every numeric argument and stored number it
validates, before writing anything: on the embedded backend and on a real Redis (issue 14.5).

tonumber("nan") is NaN, and NaN compares false to everything, so a check such as
``if n > limit then refuse end`` lets it through; the suite's validators match the text against
a strict pattern first (``integer_in`` in lua/_shared.lua, or the script's own pattern).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from helpers import Lab
from helpers.backend.scripts import delete_library, load_library

# What tonumber accepts, or what a loose pattern lets in; none is a canonical decimal integer.
HOSTILE = [
    "nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e400", "0x10", "0X1A", "0x1p4", "1e3",
    "2.5", "-3", "+5", " 7 ", "7 ", "5\n", "007", "", "1_000", "\u0663",
    "99999999999999999999999",
]  # fmt: skip


@dataclass(frozen=True)
class Validator:
    """One numeric input of one script: how to call it with a given text, and what refusal says."""

    name: str
    call: Callable[[Lab, Any, str], Any]  # (lab, client, text) -> reply
    refusal: str  # a substring of the error reply, or the status the script returns
    allowed: tuple[str, ...] = ()  # texts of HOSTILE this input rightly accepts (a signed integer)


def _script(lab: Lab, c: Any, stem: str, keys: list[str], args: list[str]) -> Any:
    return lab.script(stem, c)(keys=keys, args=args)


def _tagged(lab: Lab, *names: str) -> list[str]:
    return [lab.ns.tagged("hostile", n) for n in names]


def _stored(key_index: int, stem: str, keys: Callable[[Lab], list[str]], args: list[str]):
    """Return a call that stores text in keys[key_index] and then runs the script with args."""

    def call(lab: Lab, c: Any, text: str) -> Any:
        ks = keys(lab)
        c.set(ks[key_index], text)
        return _script(lab, c, stem, ks, args)

    return call


def _fcall_hit(lab: Lab, c: Any, text: str) -> Any:
    load_library(c, "demo_library")
    try:
        return c.fcall("racelab_demo_hit", 1, lab.key("counter"), text)
    finally:
        delete_library(c, "demo_library")


def _fcall_stored(function: str, args: list[str]) -> Callable[[Lab, Any, str], Any]:
    def call(lab: Lab, c: Any, text: str) -> Any:
        c.set(lab.key("counter"), text)
        load_library(c, "demo_library")
        try:
            return c.fcall(function, 1, lab.key("counter"), *args)
        finally:
            delete_library(c, "demo_library")

    return call


def _dict_stored(stem: str) -> Callable[[Lab, Any, str], Any]:
    def call(lab: Lab, c: Any, text: str) -> Any:
        ids, index, meta = (lab.ns.tagged("dict:hostile", n) for n in ("ids", "index", "meta"))
        c.hset(meta, "last_id", text)
        return _script(lab, c, stem, [ids, index, meta], ["a string"])

    return call


def _sliding(position: int) -> Callable[[Lab, Any, str], Any]:
    def call(lab: Lab, c: Any, text: str) -> Any:
        args = ["5", "1000", "1700000000000", "req-1"]
        args[position] = text
        return _script(lab, c, "rate_limit_sliding_window", [lab.key("log")], args)

    return call


VALIDATORS = [
    Validator(
        "anatomy_add_points ARGV[1] points",
        lambda lab, c, t: _script(lab, c, "anatomy_add_points", [lab.key("score")], [t]),
        "anatomy_add_points: invalid-points",
    ),
    Validator(
        "anatomy_add_points stored score",
        _stored(0, "anatomy_add_points", lambda lab: [lab.key("score")], ["5"]),
        "anatomy_add_points: invalid-score",
        allowed=("-3",),  # a score may be negative
    ),
    Validator(
        "delivery_record_score ARGV[1] score",
        lambda lab, c, t: _script(lab, c, "delivery_record_score", [lab.key("score")], [t]),
        "delivery_record_score: invalid-arguments",
    ),
    Validator("racelab_demo_hit ARGV[1] amount", _fcall_hit, "racelab_demo_hit: invalid-arguments"),
    Validator(
        "racelab_demo_hit stored counter",
        _fcall_stored("racelab_demo_hit", ["1"]),
        "racelab_demo_hit: invalid-counter",
        allowed=("-3",),  # a counter may be negative
    ),
    Validator(
        "racelab_demo_peek stored counter",
        _fcall_stored("racelab_demo_peek", []),
        "racelab_demo_peek: invalid-counter",
        allowed=("-3",),
    ),
    Validator(
        "dict_get_or_put stored last_id",
        _dict_stored("dict_get_or_put"),
        "dict_get_or_put: invalid-counter",
    ),
    Validator(
        "dict_get_or_put_batch stored last_id",
        _dict_stored("dict_get_or_put_batch"),
        "dict_get_or_put_batch: invalid-counter",
    ),
    Validator(
        "fenced_write ARGV[1] token",
        lambda lab, c, t: _script(lab, c, "fenced_write", _tagged(lab, "res", "fence"), [t, "v"]),
        "fenced_write: invalid-arguments",
    ),
    Validator(
        "fenced_write stored fence",
        _stored(1, "fenced_write", lambda lab: _tagged(lab, "res", "fence"), ["5", "v"]),
        "WRONGTYPE fenced_write",
    ),
    Validator(
        "lock_extend ARGV[2] lease ms",
        lambda lab, c, t: _script(lab, c, "lock_extend", [lab.key("lock")], ["token", t]),
        "lock_extend: invalid-arguments",
    ),
    Validator(
        "primer_count_visit ARGV[1] cap",
        lambda lab, c, t: _script(lab, c, "primer_count_visit", [lab.key("visits")], [t]),
        "primer_count_visit: invalid-arguments",
    ),
    Validator(
        "primer_count_visit stored counter",
        _stored(0, "primer_count_visit", lambda lab: [lab.key("visits")], ["10"]),
        "primer_count_visit: invalid-counter",
    ),
    Validator(
        "rate_limit_fixed_window ARGV[1] limit",
        lambda lab, c, t: _script(lab, c, "rate_limit_fixed_window", [lab.key("n")], [t, "60"]),
        "invalid-arguments",
    ),
    Validator(
        "rate_limit_fixed_window ARGV[2] window",
        lambda lab, c, t: _script(lab, c, "rate_limit_fixed_window", [lab.key("n")], ["5", t]),
        "invalid-arguments",
    ),
    Validator(
        "rate_limit_fixed_window stored counter",
        _stored(0, "rate_limit_fixed_window", lambda lab: [lab.key("n")], ["5", "60"]),
        "invalid-counter",
    ),
    Validator("rate_limit_sliding_window ARGV[1] limit", _sliding(0), "invalid-arguments"),
    Validator("rate_limit_sliding_window ARGV[2] window", _sliding(1), "invalid-arguments"),
    Validator("rate_limit_sliding_window ARGV[3] now", _sliding(2), "invalid-arguments"),
    Validator(
        "reserve_seats ARGV[2] seats",
        lambda lab, c, t: _script(lab, c, "reserve_seats", _tagged(lab, "left", "bk"), ["b1", t]),
        "reserve_seats: invalid-seats",
    ),
    Validator(
        "reserve_seats stored seats left",
        _stored(0, "reserve_seats", lambda lab: _tagged(lab, "left", "bk"), ["b1", "2"]),
        "reserve_seats: corrupt-inventory",
    ),
    Validator(
        "runaway_spin ARGV[1] iterations",
        lambda lab, c, t: _script(lab, c, "runaway_spin", [lab.key("marker")], [t, "write"]),
        "runaway_spin: invalid-arguments",
    ),
]


@pytest.fixture
def client(lab: Lab) -> Iterator[Any]:
    """A client of the lab (decode_responses); the lab's keys are removed by the lab fixture."""
    yield lab.client()


def _refusal_text(call: Callable[[], Any]) -> str:
    try:
        reply = call()
    except redis.ResponseError as exc:
        return str(exc)
    return repr(reply)


def _state(lab: Lab, c: Any) -> dict[str, Any]:
    """Return every key of the lab's namespace with its type and value (what a refusal must keep)."""
    dump = {}
    for key in lab.ns.keys(c):
        kind = c.type(key)
        dump[key] = (kind, c.get(key) if kind == "string" else c.hgetall(key))
    return dump


@pytest.mark.parametrize("validator", VALIDATORS, ids=[v.name for v in VALIDATORS])
def test_every_hostile_number_is_refused_and_nothing_is_written(
    lab: Lab, client: Any, validator: Validator
) -> None:
    accepted = []
    for text in (t for t in HOSTILE if t not in validator.allowed):
        reply = _refusal_text(lambda: validator.call(lab, client, text))
        stored_input = _state(lab, client)
        if validator.refusal not in reply:
            accepted.append((text, reply))
        # the script wrote nothing: only what the call itself stored as the hostile input remains
        for key, (_kind, value) in stored_input.items():
            assert value in (text, {"last_id": text}), f"{validator.name} wrote {key}={value!r}"
        lab.cleanup()
    assert not accepted, f"{validator.name} accepted hostile numbers: {accepted}"


def test_nan_passes_a_range_check_written_with_comparisons(lab: Lab, client: Any) -> None:
    """Why the pattern must come first: NaN compares false, so `n < 1 or n > 1000` lets it in."""
    naive = (
        "local n = tonumber(ARGV[1]) "
        'if n == nil or n < 1 or n > 1000 then return "refused" end return "accepted"'
    )
    assert client.eval(naive, 0, "nan") == "accepted"
    assert client.eval(naive, 0, "0x10") == "accepted"
    assert client.eval(naive, 0, "inf") == "refused"
    assert client.eval(naive, 0, "1001") == "refused"
