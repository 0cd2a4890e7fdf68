"""Self-checks for notebook 04's exercises (return conversions, keys that share a slot)."""

from __future__ import annotations

from typing import Any

from redis.crc import key_slot

from exercises import Wrong, exercise
from exercises.judge import whole
from helpers.backend.lab import Lab

CONVERSION_CASES = ("float", "array_with_hole", "named_fields")


def _same_reply(said: Any, received: Any) -> bool:
    """Return True if said is what redis-py received: equal and of its type (an int may also be
    numpy's or Decimal's whole number, never a float)."""
    if type(received) is int and not isinstance(said, float) and whole(said) == received:
        return True
    return bool(said == received) and type(said) is type(received)


@exercise(
    "04.return_conversions",
    answer="answer_1",
    wrong=[
        'answer_1 = {"float": 3.99, "array_with_hole": [1, 2, 4], "named_fields": {"name": "x"}}',
        'answer_1 = {"float": 4, "array_with_hole": [1, 2], "named_fields": []}',
        'answer_1 = {"float": 3, "array_with_hole": [1, 2, 4], "named_fields": []}',
        'answer_1 = {"float": 3, "array_with_hole": [1, 2], "named_fields": None}',
        'answer_1 = {"float": "3", "array_with_hole": [1, 2], "named_fields": []}',
    ],
)
def return_conversions(lab: Lab, answer: Any) -> str:
    """Run each case of lua/return_conversions.lua on the lab and compare with the answer."""
    if not isinstance(answer, dict) or set(answer) != set(CONVERSION_CASES):
        raise Wrong(f"answer_1 must be a dict with exactly the cases {list(CONVERSION_CASES)}")
    convert = lab.script("return_conversions")
    wrong, got = [], []
    for case in CONVERSION_CASES:
        received = convert(args=[case])
        said = answer[case]
        if not _same_reply(said, received):
            kind = f" (a {type(said).__name__})" if type(said) is not type(received) else ""
            wrong.append(f"{case}: you said {said!r}{kind}")
            got.append(f"{case} arrived as {received!r} (a {type(received).__name__})")
    if wrong:
        raise Wrong(
            "; ".join(wrong) + ": not what redis-py received; the script's header says what "
            "each Lua value is, the conversion rules what it becomes",
            detail="; ".join(got),
        )
    return "3.99 is truncated to 3, the array stops at its nil, named fields give an empty array"


@exercise(
    "04.same_slot_keys",
    answer="keys_42",
    wrong=[
        'keys_42 = (lab.ns.tagged("bookings", "42"), lab.ns.tagged("waitlist", "42"))',
        'keys_42 = ("{show42}:bookings", "{show42}:waitlist")',
        'keys_42 = (lab.ns.tagged("show42", "bookings"),) * 2',
    ],
)
def same_slot_keys(lab: Lab, answer: Any) -> str:
    """Check two distinct keys under the lab's prefix in one slot, then run a two-key script on them."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Wrong("keys_42 must be a pair: (bookings key, waitlist key)")
    bookings, waitlist = answer
    if not all(isinstance(k, str) for k in answer) or bookings == waitlist:
        raise Wrong("give two different key names (strings)")
    if not all(lab.ns.owns(k) for k in answer):
        raise Wrong("build both with lab.ns so that they start with this run's prefix")
    slots = key_slot(bookings.encode()), key_slot(waitlist.encode())
    if slots[0] != slots[1]:
        raise Wrong(f"slots {slots[0]} and {slots[1]} differ: give both the same {{hash tag}}")
    echoed = lab.script("anatomy_echo")(keys=list(answer))  # CROSSSLOT on a cluster otherwise
    return f"both keys are in slot {slots[0]}; a script received both ({echoed[0]} keys)"
