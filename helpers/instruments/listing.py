"""Show the code a demo runs: Python functions and Lua scripts, in full, highlighted.

``show(naive_allow)`` displays the function's whole source; ``show("lock_release")`` displays
lua/lock_release.lua, contract header included. In JupyterLab the listing is highlighted (IPython's
``Code`` display); in plain text (nbval, a terminal) it is the same source, line for line.
"""

from __future__ import annotations

import inspect
from typing import Any

from helpers.backend.scripts import lua_path


def source_of(obj: Any) -> tuple[str, str]:
    """Return (source text, language) of a function (or a partial of one) or of a lua/ name."""
    if isinstance(obj, str):
        return lua_path(obj).read_text(), "lua"
    target = getattr(obj, "func", obj)  # functools.partial: show the function it wraps
    return inspect.getsource(target), "python"


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


def show(*objects: Any) -> Listing:
    """Return a Listing of each function's (or lua/ script's) full source, in order."""
    if not objects:
        raise ValueError("show() needs at least one function or lua/ script name")
    return Listing([source_of(obj) for obj in objects])
