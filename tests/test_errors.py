"""One errors tree: every exception class the suite defines derives from RaceLabError."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil

import racelab_errors
from helpers.errors import RaceLabError

PACKAGES = ("helpers", "races", "exercises")


def suite_modules() -> list[str]:
    """Return the name of every module of PACKAGES (``__main__`` modules are not imported)."""
    names = []
    for package in PACKAGES:
        names.append(package)
        path = importlib.import_module(package).__path__
        for info in pkgutil.walk_packages(path, prefix=f"{package}."):
            if not info.name.endswith(".__main__"):
                names.append(info.name)
    return names


@functools.cache
def exception_classes() -> dict[str, type[Exception]]:
    """Return {module.Class: class} of every Exception subclass a suite module defines."""
    found = {}
    for name in suite_modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, Exception):
                found[f"{name}.{cls.__qualname__}"] = cls
    return found


def test_the_root_is_one_class_importable_without_helpers() -> None:
    assert RaceLabError is racelab_errors.RaceLabError
    tree = ast.parse(inspect.getsource(racelab_errors))
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert imports == [], "racelab_errors must import nothing (races/ imports it)"


def test_the_walk_finds_the_classes_of_all_three_packages() -> None:
    found = exception_classes()
    for name in (
        "races.GaveUp",
        "races.ratelimit.LimiterStateError",
        "exercises.Wrong",
        "helpers.luakit.RecordingMissing",
        "helpers.backend.guard.UnsafeCommandError",
        "helpers.backend.connection.NoReply",
        "helpers.instruments.load.RunTimeout",
        "helpers.instruments.actors.ScheduleError",
        "helpers.instruments.dpor.TooManySchedules",
    ):
        assert name in found, f"{name} is not found by the walk"


def test_every_suite_exception_derives_from_racelaberror() -> None:
    loose = [name for name, cls in exception_classes().items() if not issubclass(cls, RaceLabError)]
    assert loose == [], f"derive these from helpers.errors.RaceLabError: {loose}"


def test_a_converted_exception_still_is_what_it_refines() -> None:
    from exercises import NotAnswered, Wrong
    from helpers.luakit import RecordingMissing
    from races import GaveUp
    from races.ratelimit import LimiterStateError

    assert issubclass(GaveUp, RuntimeError) and issubclass(LimiterStateError, RuntimeError)
    assert issubclass(RecordingMissing, FileNotFoundError)
    assert str(GaveUp(3)) == "gave up after 3 attempts: the key kept changing under us"
    assert str(LimiterStateError("x")) == "rate limiter refused to run: x"
    assert all(issubclass(cls, RaceLabError) for cls in (Wrong, NotAnswered))
