"""Notebook 07's committed prediction (exercises.predict): which fence the next holder gets after
a failover that lost a grant."""

from __future__ import annotations

from exercises.predict import Choice, prediction

prediction(
    "07.after_failover",
    "X took the lock (fence 1) and let go, and the replica has it. Then A takes the lock on the "
    "primary (fence 2), the primary fails over to the replica (which applied nothing since X) "
    "and B asks the new primary for the lock. What does B get?",
    {
        "held": Choice(
            "Nothing: A still holds the lock, and the lock key is replicated",
            "acknowledged-means-replicated",
            "Replication is asynchronous: the primary acknowledged A's SET before any replica had "
            "it, and the promoted replica never saw it.",
        ),
        "three": Choice(
            "The lock, with fence 3: a counter never goes back",
            "counters-never-go-back",
            "A's INCR was lost with the old primary: the promoted replica's counter is 1, so B's "
            "INCR makes 2 again.",
        ),
        "two": Choice("The lock, with fence 2: the number A already holds, handed out again"),
    },
    outcome=lambda fences: (
        "held" if fences["B"] is None else "two" if fences["B"] == fences["A"] else "three"
    ),
)
