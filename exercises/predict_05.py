"""Committed predictions of notebook 05 (errors, the sandbox, Functions)."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "05.no_rollback",
    "lua/errors_write_then_fail.lua runs SET order, then INCR counter; the counter holds the text "
    "'many', so the INCR fails. Is the order there afterwards?",
    {
        "stays": Choice("Yes: the SET stays written, and the client receives the INCR's error"),
        "rollback": Choice(
            "No: the error rolls the whole script back, as a transaction would",
            "script-rollback",
            "A script runs atomically (no other client runs in between), but Redis has no "
            "rollback: every write done before the error stays.",
        ),
        "checked": Choice(
            "No: Redis checks the script's commands before running it, so nothing is written",
            "checked-before-run",
            "Redis only compiles the script first; what INCR will meet is known when it runs, "
            "after the SET. Only the script itself can check before its first write.",
        ),
    },
    outcome=lambda order: {"2 tickets": "stays", None: "rollback"}[order],
)

prediction(
    "05.exec_no_rollback",
    "MULTI, SET order:2, INCR the counter that holds 'many', SET paid:2, EXEC. The INCR fails when "
    "EXEC runs it. Which of the two SETs are applied afterwards?",
    {
        "both": Choice("Both: EXEC runs every queued command, and the INCR fails alone"),
        "neither": Choice(
            "Neither: the failing INCR aborts the transaction (EXECABORT)",
            "exec-all-or-nothing",
            "MULTI/EXEC isolates, it does not roll back: only an error found while queuing "
            "(unknown command, wrong arity) aborts the block; a run-time error fails alone.",
        ),
        "first": Choice(
            "Only SET order:2: EXEC stops at the first error, as a script does",
            "exec-stops-at-error",
            "A script stops at its failing redis.call; EXEC does not stop, it runs every "
            "queued command and returns each one's reply, the error among them.",
        ),
    },
    outcome=lambda applied: {
        ("1 ticket", "yes"): "both",
        (None, None): "neither",
        ("1 ticket", None): "first",
    }[applied],
)
