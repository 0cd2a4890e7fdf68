"""Show the code a demo runs: Python functions and Lua scripts, in full, highlighted.

``show(naive_allow)`` displays the function's whole source; ``show("lock_release")`` displays
lua/lock_release.lua as written, contract header and ``-- uses:`` line included;
``show("lock_release", assembled=True)`` displays what Redis runs: the file with the shared blocks
it uses put in (see ``luaload``). In JupyterLab the listing is highlighted (IPython's ``Code``
display); in plain text (nbval, a terminal) it is the same source, line for line.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from helpers.errors import RaceLabError
from luaload import lua_file, lua_source


class NotShowable(RaceLabError, TypeError):
    """show() was given something that is neither a function nor a lua/ script name."""


def source_of(obj: Any, assembled: bool = False) -> tuple[str, str]:
    """Return (source text, language) of a function (or a partial of one) or of a lua/ name.

    A lua/ name gives the file as written, or with assembled=True the text Redis runs.
    """
    if isinstance(obj, str):
        return (lua_source(obj) if assembled else lua_file(obj)), "lua"
    target = obj.func if isinstance(obj, functools.partial) else obj  # the function it wraps
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target)):
        raise NotShowable(
            f"show() takes a function, a class or a lua/ script name, not {type(obj).__name__} "
            f"{_brief(obj)}"
        )
    try:
        return inspect.getsource(target), "python"
    except (OSError, TypeError) as exc:  # a builtin, or defined where no file keeps its source
        raise NotShowable(
            f"show() cannot find the source of {target.__qualname__}: {str(exc).splitlines()[0]}"
        ) from None


def _brief(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 40 else text[:37] + "..."


class Listing:
    """Source code that displays highlighted in Jupyter and as plain text elsewhere."""

    def __init__(self, parts: list[tuple[str, str]]) -> None:
        self.parts = parts

    def __str__(self) -> str:
        return "\n".join(text.rstrip("\n") + "\n" for text, _ in self.parts).rstrip("\n")

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from IPython.display import Code  # only in a notebook

        return "".join(Code(text, language=language)._repr_html_() for text, language in self.parts)


def show(*objects: Any, assembled: bool = False) -> Listing:
    """Return a Listing of each function's (or lua/ script's) full source, in order.

    A lua/ script is shown as written; with assembled=True, as Redis runs it (shared blocks put in).
    """
    if not objects:
        raise ValueError("show() needs at least one function or lua/ script name")
    return Listing([source_of(obj, assembled) for obj in objects])
