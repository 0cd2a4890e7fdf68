"""Notebook 00's committed predictions: the lost update, INCR, and how many orders lose a visit."""

from __future__ import annotations

from exercises.predict import Choice, prediction

SINGLE_THREADED = (
    "single-threaded-no-race",
    "Redis does run one command at a time, but GET and SET are two commands: B's GET ran "
    "between A's GET and A's SET, so B added one to a value that was already stale.",
)

prediction(
    "00.abab",
    "The counter holds 10. A and B each GET it, add one in Python and SET the result, in the "
    "order ABAB (A GET, B GET, A SET, B SET). What does the counter hold afterwards?",
    {
        "twelve": Choice("12: two visits, two increments", *SINGLE_THREADED),
        "eleven": Choice("11: both read 10, so the second SET writes 11 again"),
        "ten": Choice(
            "10: the two writes conflict and neither counts",
            "conflict-detection",
            "Redis does not detect conflicting clients: every SET succeeds, and the last one "
            "simply replaces the first.",
        ),
    },
    outcome=lambda counter: {12: "twelve", 11: "eleven", 10: "ten"}[counter],
)

prediction(
    "00.incr",
    "The same race from 10, but now each client sends a single command, INCR, which reads, "
    "adds one and writes inside the server. In the order AB, what does the counter hold?",
    {
        "eleven": Choice(
            "11: INCR reads then writes too, so one visit is still lost",
            "incr-is-read-then-write",
            "INCR's read, add and write happen inside the server as one command: no other "
            "client's command can run between them, so there is no gap to lose a visit in.",
        ),
        "twelve": Choice("12: each INCR reads, adds and writes in one command, so both count"),
        "depends": Choice(
            "11 or 12: it depends on which client goes first",
            "order-always-matters",
            "With one command per client, each INCR adds one to whatever the other left: "
            "AB and BA both end at 12.",
        ),
    },
    outcome=lambda counter: {11: "eleven", 12: "twelve"}[counter],
)

prediction(
    "00.orders",
    "Back to GET then SET. Two clients of two commands each can interleave in 6 orders "
    "(AABB, ABAB, ABBA, BAAB, BABA, BBAA). In how many is a visit lost?",
    {
        "all": Choice(
            "all 6: concurrent clients always lose updates",
            "always-races",
            "The race needs one client's GET to fall between the other's GET and SET. When one "
            "client finishes before the other starts (AABB, BBAA), nothing is lost.",
        ),
        "four": Choice("4 of the 6: those in which both clients GET before either SETs"),
        "one": Choice(
            "1: only ABAB, where the clients strictly alternate",
            "one-bad-order",
            "ABBA, BAAB and BABA lose a visit too: in each, both clients read 10 before either "
            "wrote.",
        ),
        "none": Choice("0: Redis runs one command at a time", *SINGLE_THREADED),
    },
    outcome=lambda lost: {6: "all", 4: "four", 1: "one", 0: "none"}[lost],
)
