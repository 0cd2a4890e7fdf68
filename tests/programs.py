"""Toy schedule programs shared by the tests of helpers.instruments.schedule and helpers.explore."""

from __future__ import annotations

from helpers.instruments.schedule import cmd


def naive_limiter(key: str, limit: int = 5):
    """GET, compare in Python, INCR: the racy limiter of the module docstring of helpers.schedule."""
    def program():
        count = int((yield cmd("GET", key)) or 0)
        if count < limit:
            yield cmd("INCR", key)
            return "allowed"
        return "rejected"
    return program
