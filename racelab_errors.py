"""The root of the suite's exceptions, in a module that imports nothing.

``helpers.errors.RaceLabError`` is this class: import it from there in ``helpers/``,
``exercises/`` and ``benchmarks/``. It lives here, outside ``helpers``, because ``races/`` (the
subject, which depends only on redis and the Lua loader) must not import ``helpers``, and its
``GaveUp`` still has to be a ``RaceLabError``: ``except RaceLabError`` matches by real
inheritance only, so one class has to be importable from both sides.
"""


class RaceLabError(Exception):
    """Base of every exception redis-race-lab raises on purpose."""
