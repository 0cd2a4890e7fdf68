"""Notebook 08's committed predictions (exercises.predict): what the installed locks promise."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "08.mutual_exclusion",
    "A and B each take the lock without waiting, write 'in' and 'out' to the log, and release "
    "it; no lease runs out. Over every schedule of every explored lock, how many let both be "
    "inside at once?",
    {
        "none": Choice("None: of two SET NX on a missing key, only the first one writes"),
        "few": Choice(
            "A few: two SET NX that arrive at the same moment can both succeed",
            "simultaneous-commands-both-win",
            "The server runs one command at a time: of two SET NX on a missing key, the second "
            "always finds the key the first wrote.",
        ),
        "redlock": Choice(
            "Some, for the Redlock libraries: Redlock trades safety for availability",
            "redlock-is-weaker-on-one-server",
            "On one server, Redlock's take is the same SET NX PX as the others'; its quorum "
            "matters only across several servers.",
        ),
    },
    outcome=lambda bad: "none" if bad == 0 else "few",
)

prediction(
    "08.lease",
    "Now a clock step T can end the lease while A is inside, and A goes on writing. Which "
    "locks keep B out of A's section in every schedule?",
    {
        "all": Choice(
            "All of them: each release checks its token",
            "safe-release-protects-the-resource",
            "The token check stops A from deleting B's lock, at the release. A's writes before "
            "the release are not checked by anybody.",
        ),
        "redlock": Choice(
            "The Redlock ones (pottery, redlock-py): Redlock is the safe algorithm",
            "redlock-fences",
            "Redlock decides who holds the lock; it hands out no fencing token, so a holder "
            "whose lease ran out is not stopped either.",
        ),
        "none": Choice("None of them: in each, some schedule lets A write inside B's section"),
    },
    outcome=lambda every_lock_broke: "none" if every_lock_broke else "all",
)
