"""Committed predictions of notebook 03 (register each string once): four questions, each asked
before the demo that answers it and revealed from the value that demo computes."""

from __future__ import annotations

from exercises.predict import Choice, prediction


def _share_broken(bad: int, total: int) -> str:
    """Return the choice of 03.every_order that bad broken orders out of total match."""
    if bad == 0:
        return "none"
    if bad <= total // 5:
        return "few"
    return "all_but_two" if bad >= total - 2 else "half"


prediction(
    "03.two_ids",
    "A and B both register the new string 'price' with the counter version (HGET the index; on "
    "a miss HINCRBY the counter, HSET id -> string, HSET string -> id), in the order ABAAABBB: "
    "both look up, then A finishes, then B. Which ids do A and B get back, and which one does "
    "the index give afterwards?",
    {
        "same": Choice(
            "both get 1: Redis runs one command at a time, so the registrations cannot mix",
            "single-threaded-cannot-race",
            "Redis runs one command at a time, but a registration is four commands: B's lookup "
            "ran between A's, so B acted on a 'not there' that A was about to make false.",
        ),
        "first": Choice(
            "A gets 1, B gets 2; the index gives 1: the first writer wins",
            "first-writer-wins",
            "HSET overwrites without looking: B's HSET of the index came last and replaced 1 "
            "with 2.",
        ),
        "last": Choice(
            "A gets 1, B gets 2; the index gives 2: B's HSET came last and overwrote A's"
        ),
    },
    outcome=lambda seen: (
        "same" if seen[0] == seen[1] else ("first" if seen[2] == seen[0] else "last")
    ),
)

prediction(
    "03.scan_round_trips",
    "The production version: A registers 'price', B registers 'volume', both new. Both HGETALL "
    "the empty dictionary, A's HSETNX claims id 1, then B's HSETNX of id 1, and B goes on alone. "
    "How many round trips does B need for its one registration?",
    {
        "two": Choice(
            "2: one HGETALL and one HSETNX, which gives B id 1 as well",
            "hsetnx-overwrites",
            "HSETNX writes only if the field is absent: A took id 1 first, so B's HSETNX returns "
            "0 and writes nothing.",
        ),
        "three": Choice(
            "3: the server retries the refused HSETNX with the next id",
            "the-server-retries",
            "Redis never retries for a client: a refused HSETNX just returns 0, and the client's "
            "own loop starts over with a fresh HGETALL.",
        ),
        "four": Choice("4: refused, B reads the whole dictionary again and claims id 2"),
    },
    outcome=lambda trips: {2: "two", 3: "three"}.get(trips, "four"),
)

prediction(
    "03.holes",
    "HINCRBY + HSETNX is the counter version with its last write made conditional: HSETNX "
    "string -> id on the index, and a worker whose HSETNX is refused returns the winner's id. "
    "A and B both register the new string 'price' in the order ABABABAB (both miss). Which ids "
    "do A and B return, and which id does the next new string, 'volume', get?",
    {
        "late": Choice(
            "A 1, B 2, volume 3: the HSETNX comes too late to help",
            "conditional-write-too-late",
            "The index's HSETNX decides: exactly one worker's succeeds, and the loser reads the "
            "winner's id, so both return 1.",
        ),
        "safe": Choice(
            "A 1, B 1, volume 2: HSETNX makes read-then-write safe",
            "hsetnx-makes-it-safe",
            "HSETNX keeps one id per string, but B had already taken id 2 from the counter and "
            "HINCRBY cannot be taken back: id 2 belongs to nobody, and volume gets 3.",
        ),
        "hole": Choice("A 1, B 1, volume 3: the index keeps one id, and B's spent id stays spent"),
    },
    outcome=lambda seen: "late" if seen[0] != seen[1] else ("safe" if seen[2] == 2 else "hole"),
)

prediction(
    "03.every_order",
    "The explorer runs every order of A's and B's round trips (the counter version, both "
    "registering the new 'price'; four steps each when they miss, one when they find it) and "
    "asks the invariant after each. In how many of the orders does the dictionary break?",
    {
        "few": Choice(
            "a few: a race needs unlucky timing",
            "races-are-rare",
            "A race needs no bad luck, only an order: every order in which one worker looks up "
            "before the other has written the index breaks it, and that is almost all of them.",
        ),
        "half": Choice(
            "about half: it depends on who writes the index last",
            "last-writer-decides",
            "Whoever writes last, both workers allocated an id, so 'price' has two: only the "
            "orders in which one worker finishes before the other even looks up are safe.",
        ),
        "all_but_two": Choice(
            "all but two: only where one worker finishes before the other looks up is it safe"
        ),
        "none": Choice(
            "none: every command is atomic",
            "atomic-commands-atomic-code",
            "Each command is atomic, but a registration is four of them: atomic steps do not "
            "make their sequence atomic, and another worker's steps run in between.",
        ),
    },
    outcome=lambda seen: _share_broken(*seen),
)
