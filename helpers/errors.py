"""The suite's exceptions share one base, so a caller can catch "anything the lab refused".

Every exception the suite defines derives from ``RaceLabError`` (often together with the
built-in or redis-py class it refines, so ``except redis.ConnectionError`` still works). Each
keeps a one-line message that says what went wrong and, where there is one, what to do.
"""


class RaceLabError(Exception):
    """Base of every exception redis-race-lab raises on purpose."""
