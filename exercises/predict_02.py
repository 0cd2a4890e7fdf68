"""Committed predictions for notebook 02 (the blind DEL): one per demo, each wrong choice a misconception.

Each is shown by ``predict("02.name")`` before the demo and revealed by ``reveal("02.name", value)``
in the demo cell, with the value that cell computed.
"""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "02.blind_del",
    "A takes the lock; its lease runs out while it stalls (T); B takes the lock; A wakes up and "
    "runs DEL lock; then C tries SET lock tok-C NX PX. What happens to C?",
    {
        "refused": Choice(
            "C is refused: the lock is B's now",
            "del-checks-the-owner",
            "DEL removes the key whoever wrote it: A's DEL answered 1, but the key held B's token.",
        ),
        "both": Choice("C gets the lock: B and C both believe they hold it"),
        "told": Choice(
            "C gets the lock: B is told that it lost it, and stops",
            "the-holder-is-told",
            "Nothing tells B: a holder learns that its lock is gone only if it looks, and B has "
            "no reason to look.",
        ),
    },
    outcome=lambda c_took_it: "both" if c_took_it else "refused",
)

prediction(
    "02.every_order",
    "Blind DEL again, without C: A sends SET then DEL, the clock T and B one round trip each, "
    "11 orders in all. In how many of them does B lose its lock?",
    {
        "none": Choice(
            "none: it takes a real stall, which a schedule cannot make",
            "needs-real-timing",
            "The clock step is the stall: a schedule puts it anywhere, and one order is enough.",
        ),
        "one": Choice("exactly one: T, B's SET and A's DEL must each come in one place"),
        "several": Choice(
            "several: every order in which T comes before A's DEL",
            "any-expiry-breaks-it",
            "The lease running out is harmless on its own: A's SET must come first, and B must "
            "take the lock between T and A's DEL.",
        ),
        "all": Choice(
            "all 11: a blind DEL is always wrong",
            "always-broken",
            "In most orders the DEL removes A's own lock, or nothing: the bug needs one order, "
            "which is why tests miss it.",
        ),
    },
    outcome=lambda broken: {0: "none", 1: "one", 11: "all"}.get(broken, "several"),
)

prediction(
    "02.check_first",
    "release_check_then_del GETs the lock and DELs it only if it still holds A's token. "
    "Can A's release still delete B's lock?",
    {
        "own": Choice(
            "No: A deletes only after seeing its own token",
            "check-then-act",
            "The check was true when A made it. In the round trip between A's GET and its DEL the "
            "lease can run out and B can take the lock.",
        ),
        "yes": Choice("Yes: in some order of the round trips, B takes the lock in between"),
        "single": Choice(
            "No: Redis is single-threaded, so nothing runs between A's two commands",
            "single-threaded-cannot-race",
            "Redis runs one command at a time, but between two commands of one client any other "
            "client's commands can run.",
        ),
    },
    outcome=lambda broke: "yes" if broke else "own",
)

prediction(
    "02.watch_exec",
    "A releases with WATCH: WATCH lock, GET lock (its own token). Then A stalls: its lease runs "
    "out and B takes the lock. Then A sends MULTI, DEL, EXEC. What happens to B's lock?",
    {
        "stale": Choice(
            "A deletes it: A's GET saw its own token",
            "stale-read",
            "The GET was true when it ran. WATCH notices the change after it, and EXEC then runs "
            "nothing.",
        ),
        "stays": Choice("It stays: EXEC runs nothing, A checks again and sees B's token"),
        "waited": Choice(
            "It stays: B's SET waited for A's transaction",
            "watch-locks-the-key",
            "WATCH locks nothing: B's SET ran at once. WATCH only makes A's EXEC fail afterwards.",
        ),
        "retried": Choice(
            "A deletes it: EXEC fails, then Redis retries the DEL",
            "watch-retries-by-itself",
            "Redis never retries a transaction: the client's own loop checks again, and finds "
            "the lock is not A's any more.",
        ),
    },
    outcome=lambda a_released: "stale" if a_released else "stays",
)
