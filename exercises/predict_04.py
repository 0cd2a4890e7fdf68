"""Committed predictions of notebook 04 (the anatomy of EVAL)."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "04.numkeys",
    "EVAL sends the words a b 7 with numkeys 1 to lua/anatomy_echo.lua. How many entries does "
    "ARGV hold, and is the 7 a number inside the script?",
    {
        "string": Choice(
            '2 entries, b and 7; the 7 is the string "7": every word of a command arrives as text'
        ),
        "number": Choice(
            "2 entries, b and 7; the 7 is the number 7: Redis passes numbers as numbers",
            "typed-arguments",
            'Every word of a command travels as a string: the script receives "7" and must '
            "convert it, and check it, itself.",
        ),
        "three": Choice(
            "3 entries, a, b and 7: KEYS is only a view of the first ARGV entries",
            "keys-are-args",
            "numkeys splits the words: the first numkeys go to KEYS only, the rest to ARGV.",
        ),
    },
    outcome=lambda seen: {(2, "str"): "string", (2, "int"): "number", (3, "str"): "three"}[seen],
)
