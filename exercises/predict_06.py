"""Notebook 06's committed predictions (exercises.predict): what another client gets while a
script runs past busy-reply-threshold."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "06.busy",
    "A client starts runaway_spin with 10^12 iterations (hours) on a server whose "
    "busy-reply-threshold is 100 ms. Another client sends GET while it loops. What does that "
    "GET get?",
    {
        "value": Choice(
            "Its value: the server serves other clients between the script's loop steps",
            "scripts-interleave",
            "A script is one command and runs atomically: no other client's command runs in the "
            "middle of it. Past the threshold the server only reads other commands to refuse them.",
        ),
        "waits": Choice(
            "Nothing: it waits until the script ends, hours later",
            "waits-to-the-end",
            "It waits only until the script has run past busy-reply-threshold; from then on the "
            "server answers every other client at once, with an error.",
        ),
        "busy": Choice("A BUSY error: once past the threshold, other clients are answered at once"),
    },
    outcome=lambda reply: "busy" if str(reply).startswith("BUSY") else "value",
)
