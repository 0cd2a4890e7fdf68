"""Committed predictions of notebook 05 (errors, the sandbox, Functions)."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "05.no_rollback",
    "lua/errors_write_then_fail.lua runs SET order, then INCR counter; the counter holds the text "
    "'many', so the INCR fails. Is the order there afterwards?",
    {
        "a": Choice("Yes: the SET stays written, and the client receives the INCR's error"),
        "b": Choice(
            "No: the error rolls the whole script back, as a transaction would",
            "script-rollback",
            "A script runs atomically (no other client runs in between), but Redis has no "
            "rollback: every write done before the error stays.",
        ),
        "c": Choice(
            "No: Redis checks the script's commands before running it, so nothing is written",
            "checked-before-run",
            "Redis only compiles the script first; what INCR will meet is known when it runs, "
            "after the SET. Only the script itself can check before its first write.",
        ),
    },
    outcome=lambda order: {"2 tickets": "a", None: "b"}[order],
)
