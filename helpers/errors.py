"""The suite's exceptions share one base, so a caller can catch "anything the lab refused".

Every exception the suite defines derives from ``RaceLabError`` (often together with the
built-in or redis-py class it refines, so ``except redis.ConnectionError`` still works). Each
keeps a one-line message that says what went wrong and, where there is one, what to do.

The class itself is defined in the top-level module ``racelab_errors``, which imports nothing,
so that ``races/`` can derive from it without importing ``helpers``; this is the name to use.
"""

from racelab_errors import RaceLabError

__all__ = ["RaceLabError"]
