"""Notebook 01's committed predictions: two clients, every schedule, threaded load, the MULTI fix."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "01.two_clients",
    "The counter holds 4, the limit is 5. A and B each GET, compare, then INCR, in the order "
    "A GET, B GET, A INCR, B INCR. How many requests are admitted?",
    {
        "one": Choice(
            "1: the second INCR sees 5 and is refused",
            "check-at-write",
            "INCR does not check anything: the limit was checked in the client, on a value read "
            "earlier.",
        ),
        "two": Choice("2: both read 4 before either INCR, so both see room"),
        "zero": Choice(
            "0: the conflict makes both fail",
            "conflict-detection",
            "Redis does not detect conflicting clients; plain commands never fail because "
            "another client wrote.",
        ),
    },
    outcome=lambda admitted: {1: "one", 2: "two", 0: "zero"}[admitted],
)

prediction(
    "01.bad_schedules",
    "Two naive clients, one slot left: a client whose GET reads 5 stops there, so the schedules "
    "are AAB, ABAB, ABBA, BAAB, BABA and BBA. How many admit both requests?",
    {
        "two": Choice(
            "2: only ABAB and BABA, where the clients alternate",
            "only-alternating",
            "ABBA and BAAB admit both too: what matters is that both GETs run before either "
            "INCR, not who goes when after that.",
        ),
        "four": Choice("4: every schedule in which both GETs run before either INCR"),
        "zero": Choice(
            "0: GET and INCR are each atomic",
            "atomic-command-atomic-request",
            "Each command is atomic; the request is two commands, and another client's GET fits "
            "in the gap between them.",
        ),
    },
    outcome=lambda bad: {2: "two", 4: "four", 0: "zero"}[bad],
)

prediction(
    "01.lockstep",
    "8 threads, each with its own connection, send 100 requests each against a limit of 100, "
    "in lockstep (every client's GET of a round reaches Redis before any INCR of that round). "
    "In how many of 5 such runs does the window admit more than 100?",
    {
        "none": Choice(
            "none: Python's GIL runs one thread at a time, so the requests cannot interleave",
            "gil-serializes",
            "The GIL serializes Python bytecode, not requests: a thread waiting for Redis's "
            "reply lets the others run, and their GETs reach the server in its gap.",
        ),
        "some": Choice(
            "some, not all: a race is a matter of luck",
            "races-are-luck",
            "Lockstep makes the unlucky order certain: each round's GETs all arrive before its "
            "INCRs, on every run, however busy the machine is.",
        ),
        "all": Choice("all 5: lockstep puts every round's GETs before its INCRs, in every run"),
    },
    outcome=lambda overshot: "none" if overshot == 0 else ("all" if overshot == 5 else "some"),
)

prediction(
    "01.multi_counter",
    "The fix: INCR and EXPIRE NX in one MULTI/EXEC, then compare the count INCR returned. The "
    "counter holds 4, the limit is 5; A runs it, then B. What does the counter hold afterwards?",
    {
        "five": Choice(
            "5: B is refused, so its request is not counted",
            "refused-not-counted",
            "INCR runs before the comparison, so a refused request is counted too; the limit "
            "still holds, because only counts up to 5 are admitted.",
        ),
        "six": Choice("6: B's INCR counts it before the comparison refuses it"),
        "error": Choice(
            "an error: INCR fails once the counter reaches the limit",
            "incr-checks-limit",
            "INCR has no limit: it adds one whatever the value. The comparison happens in the "
            "client, on the value INCR returned.",
        ),
    },
    outcome=lambda counter: {5: "five", 6: "six"}[counter],
)
