"""Lua scripts and function libraries from lua/, loaded by file name, for a lab and its clients.

The files are found and assembled by ``luaload`` (a script's ``-- uses:`` blocks from
lua/_shared.lua put in), which needs no ``helpers``: this module is the lab-facing layer on it.
Scripts go through redis-py's ``register_script``: the client sends EVALSHA of the assembled
text and, on a NOSCRIPT reply, loads it and retries. Each file starts with a comment header that
says what it does, its KEYS, its ARGV and its return contract; ``script_header`` returns it so a
notebook can show the contract straight from the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.commands.core import Script

from helpers.backend.guard import brought_here
from helpers.errors import RaceLabError
from luaload import (
    LUA_DIR,
    is_library,
    library_name,
    lua,
    lua_file,
    lua_path,
    lua_source,
    names,
    remember_sha,
    script_name,
)

__all__ = [
    "HEADER_FIELDS",
    "LUA_DIR",
    "delete_library",
    "fcall_reloading",
    "library_name",
    "load_library",
    "load_script",
    "lua",
    "lua_file",
    "lua_path",
    "lua_source",
    "preload",
    "script_header",
    "script_name",
]

HEADER_FIELDS = ("KEYS", "ARGV", "Returns")


class CodeNotLoaded(RaceLabError):
    """A learner's user may not load code, and the suite's script or library is not on the server."""


def _not_loaded(what: str) -> CodeNotLoaded:
    return CodeNotLoaded(
        f"{what} is not on this shared server, and your user may not load code there (the "
        "instructor's job: python -m helpers acl --load). Ask the instructor, or run your own Lua "
        "on the embedded backend or a throwaway server (RACELAB_BACKEND=real)."
    )


def script_header(name: str) -> str:
    """Return the leading comment block of lua/<name>.lua (the script's contract), without '-- uses:'."""
    lines = []
    for line in lua_file(name).splitlines():
        stripped = line.strip()
        if stripped.startswith("#!"):
            continue
        if not stripped.startswith("--"):
            break
        if not stripped.startswith("-- uses:"):
            lines.append(stripped[2:].removeprefix(" "))
    return "\n".join(lines).strip()


class SuiteScript(Script):
    """A redis-py Script whose reload (NOSCRIPT, then SCRIPT LOAD) a learner's ACL refuses in plain words."""

    racelab_name = ""

    def __call__(self, keys: Any = None, args: Any = None, client: Any = None) -> Any:
        """EVALSHA the script (redis-py's Script); CodeNotLoaded if it is not cached and may not be loaded."""
        try:
            return super().__call__(keys or [], args or [], client)
        except redis.exceptions.NoPermissionError as exc:
            if "script|load" not in str(exc).lower() and "evalsha" not in str(exc).lower():
                raise
            raise _not_loaded(f"the suite's script {self.racelab_name!r}") from exc


def load_script(client: Any, name: str) -> Script:
    """Return a callable Script for lua/<name>.lua (assembled) bound to client (EVALSHA, reloads on NOSCRIPT)."""
    script = SuiteScript(client, lua_source(name))
    script.racelab_name = name
    remember_sha(script.sha, name)
    return script


def preload(client: Any) -> None:
    """SCRIPT LOAD every script in lua/ (not the function libraries), so an EVALSHA never meets NOSCRIPT.

    A forced schedule needs this: redis-py answers NOSCRIPT with SCRIPT LOAD and a second EVALSHA,
    which would add round trips to a trace on a server that had not seen the script yet. Loading
    a script only caches it; nothing runs.
    """
    for name in names():
        if is_library(name):
            continue  # a function library: FUNCTION LOAD, not SCRIPT LOAD
        try:
            client.script_load(lua(name).script)
        except redis.ResponseError:
            continue  # a teaching script that does not compile on this server: it is never EVALSHAed


def load_library(client: Any, name: str) -> str:
    """FUNCTION LOAD REPLACE lua/<name>.lua (a '#!lua name=racelab...' library); return its name.

    A cluster client loads it on every primary and answers {node: name}; the name is returned
    all the same, so a notebook prints the same line on every backend.
    """
    try:
        reply = client.function_load(lua_source(name), replace=True)
    except redis.exceptions.NoPermissionError as exc:
        raise _not_loaded(f"the suite's library {library_name(name)!r}") from exc
    if isinstance(reply, dict) and len(set(reply.values())) == 1:
        return next(iter(reply.values()))
    return reply


def delete_library(client: Any, name: str) -> bool:
    """FUNCTION DELETE the library declared in lua/<name>.lua; return False if it was not loaded.

    On a server the suite does not own (a guarded client's), a library that was there before this
    process loaded it (the instructor's, another run's) is never deleted and False is returned:
    others may be calling it. Only one this process brought there itself is deleted.
    """
    if getattr(client, "racelab_owned", True) is False and not brought_here(
        library_name(name), client
    ):
        return False
    try:
        client.function_delete(library_name(name))
        return True
    except redis.ResponseError as exc:
        # Redis 7-8 and fakeredis reply "ERR Library not found".
        if any(text in str(exc).lower() for text in ("not found", "not exist", "no such library")):
            return False
        raise


def fcall_reloading(
    client: Any, name: str, function: str, keys: Sequence[Any] = (), args: Sequence[Any] = ()
) -> Any:
    """Return the reply of FCALL function; on "Function not found" load lua/<name>.lua and call once more.

    Library names are global on a server: another run of the suite on the same server may delete
    a racelab library at its cleanup while this run still calls it. Loading the same code again
    (FUNCTION LOAD REPLACE) is harmless, so the call survives that.
    """
    try:
        return client.fcall(function, len(keys), *keys, *args)
    except redis.ResponseError as exc:
        if "function not found" not in str(exc).lower():
            raise
    load_library(client, name)
    return client.fcall(function, len(keys), *keys, *args)
