"""Lua scripts and function libraries from lua/, loaded by file name.

Scripts go through redis-py's ``register_script``: the client sends EVALSHA and, on a
NOSCRIPT reply, loads the source and retries. Each file starts with a comment header that
says what it does, its KEYS, its ARGV and its return contract; ``script_header`` returns it
so a notebook can show the contract straight from the file.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.commands.core import Script

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"
HEADER_FIELDS = ("KEYS", "ARGV", "Returns")


def lua_path(name: str) -> Path:
    """Return the path of lua/<name>.lua, or raise FileNotFoundError naming what exists."""
    path = LUA_DIR / f"{name.removesuffix('.lua')}.lua"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in LUA_DIR.glob("*.lua"))) or "none"
        raise FileNotFoundError(f"no Lua file {path.name} in {LUA_DIR} (known: {known})")
    return path


def lua_source(name: str) -> str:
    """Return the full text of lua/<name>.lua."""
    return lua_path(name).read_text()


def script_header(name: str) -> str:
    """Return the leading comment block of lua/<name>.lua (the script's contract)."""
    lines = []
    for line in lua_source(name).splitlines():
        stripped = line.strip()
        if stripped.startswith("#!"):
            continue
        if not stripped.startswith("--"):
            break
        lines.append(stripped[2:].removeprefix(" "))
    return "\n".join(lines).strip()


_NAME_OF_SHA: dict[str, str] = {}


def load_script(client: Any, name: str) -> Script:
    """Return a callable Script for lua/<name>.lua bound to client (EVALSHA, reloads on NOSCRIPT)."""
    script = client.register_script(lua_source(name))
    _NAME_OF_SHA[script.sha] = name
    return script


@functools.cache
def lua(name: str) -> Script:
    """Return lua/<name>.lua as a Script bound to no client: call it as script(keys, args, client=c).

    This is how an application keeps a script: made once, called with whatever client serves
    the request. redis-py sends EVALSHA and, on NOSCRIPT, loads the source and sends it again.
    """
    script = Script(None, lua_source(name).encode())
    _NAME_OF_SHA[script.sha] = name
    return script


def preload(client: Any) -> None:
    """SCRIPT LOAD every script in lua/ (not the function libraries), so an EVALSHA never meets NOSCRIPT.

    A forced schedule needs this: redis-py answers NOSCRIPT with SCRIPT LOAD and a second EVALSHA,
    which would add round trips to a trace on a server that had not seen the script yet. Loading
    a script only caches it; nothing runs.
    """
    import redis  # local: only this helper needs the exception type

    for path in sorted(LUA_DIR.glob("*.lua")):
        if path.name.startswith("_"):
            continue  # not a script (e.g. the shared copies of validators)
        source = path.read_text()
        if source.startswith("#!lua name="):
            continue  # a function library: FUNCTION LOAD, not SCRIPT LOAD
        lua(path.stem)
        try:
            client.script_load(source)
        except redis.ResponseError:
            continue  # a teaching script that does not compile on this server: it is never EVALSHAed


def script_name(sha: str) -> str | None:
    """Return the lua/ name of a script loaded with load_script, by its SHA1, or None."""
    return _NAME_OF_SHA.get(sha)


def library_name(name: str) -> str:
    """Return the library name declared by lua/<name>.lua's '#!lua name=...' first line."""
    first = lua_source(name).splitlines()[0]
    if not first.startswith("#!lua"):
        raise ValueError(f"lua/{name}.lua is not a function library (no '#!lua name=...' line)")
    for part in first.split():
        if part.startswith("name="):
            return part[5:]
    raise ValueError(f"lua/{name}.lua declares no library name")


def load_library(client: Any, name: str) -> str:
    """FUNCTION LOAD REPLACE lua/<name>.lua (a '#!lua name=racelab...' library); return its name.

    A cluster client loads it on every primary and answers {node: name}; the name is returned
    all the same, so a notebook prints the same line on every backend.
    """
    reply = client.function_load(lua_source(name), replace=True)
    if isinstance(reply, dict) and len(set(reply.values())) == 1:
        return next(iter(reply.values()))
    return reply


def delete_library(client: Any, name: str) -> bool:
    """FUNCTION DELETE the library declared in lua/<name>.lua; return False if it was not loaded."""
    import redis  # local: only this helper needs the exception type

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
    import redis  # local: only this helper and delete_library need the exception type

    try:
        return client.fcall(function, len(keys), *keys, *args)
    except redis.ResponseError as exc:
        if "function not found" not in str(exc).lower():
            raise
    load_library(client, name)
    return client.fcall(function, len(keys), *keys, *args)
