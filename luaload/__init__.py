"""The Lua files of lua/, assembled at load: each script as written, plus the shared blocks it names.

Redis cannot make one script include another, so the loader does. A script names the validators
it needs on a ``-- uses: name, name`` line, the last line of its contract header; the blocks live
once, in lua/_shared.lua, between ``-- BEGIN shared: <name>`` and ``-- END shared: <name>``, and a
block may have a ``-- uses:`` line of its own. ``lua_source(name)`` returns what Redis runs: the
file with every block it needs put in below that line, each block once and after the blocks it
uses. A ``-- uses:`` name may also be another script (a function library that serves a script's
code): that script's code goes in without its header and without its last line,
``return <function>(KEYS, ARGV)``. The block that makes error replies (``replies``) needs the
script's name: the loader puts ``local SCRIPT = "<name>"`` above it.

``lua_file(name)`` is the file as written (what a lesson shows); ``lua(name)`` is a redis-py
``Script`` of the assembled text (EVALSHA of its SHA1, reloading on NOSCRIPT). Texts are cached
and read again when a file they came from changes. This module needs only the standard library
and redis-py: ``races/`` uses it without importing ``helpers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from redis.commands.core import Script

LUA_DIR = Path(__file__).resolve().parents[1] / "lua"
SHARED = "_shared"  # lua/_shared.lua: the shared blocks; not a script
REPLIES = "replies"  # the shared block that makes error replies; it needs SCRIPT, the name

_BLOCK = re.compile(r"^-- BEGIN shared: (\w+)\n.*?^-- END shared: \1\n", re.S | re.M)
_USES = re.compile(r"^-- uses:(.*)$", re.M)
_ENTRY = re.compile(r"^return \w+\(KEYS, ARGV\)$")


def lua_path(name: str) -> Path:
    """Return the path of lua/<name>.lua, or raise FileNotFoundError naming what exists."""
    path = LUA_DIR / f"{name.removesuffix('.lua')}.lua"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in LUA_DIR.glob("*.lua"))) or "none"
        raise FileNotFoundError(f"no Lua file {path.name} in {LUA_DIR} (known: {known})")
    return path


def lua_file(name: str) -> str:
    """Return lua/<name>.lua as written (the file a lesson shows)."""
    return lua_path(name).read_text()


def names() -> list[str]:
    """Return the names of the scripts and libraries in lua/ (every file but those starting with _)."""
    return sorted(p.stem for p in LUA_DIR.glob("*.lua") if not p.stem.startswith("_"))


def is_library(name: str) -> bool:
    """Return True if lua/<name>.lua is a function library (its first line is '#!lua name=...')."""
    return lua_file(name).startswith("#!lua name=")


def library_name(name: str) -> str:
    """Return the library name declared by lua/<name>.lua's '#!lua name=...' first line."""
    first = lua_file(name).splitlines()[0]
    if not first.startswith("#!lua"):
        raise ValueError(f"lua/{name}.lua is not a function library (no '#!lua name=...' line)")
    for part in first.split():
        if part.startswith("name="):
            return part[5:]
    raise ValueError(f"lua/{name}.lua declares no library name")


def shared_blocks() -> dict[str, str]:
    """Return {name: block text, markers included} of the blocks in lua/_shared.lua."""
    return {m.group(1): m.group(0) for m in _BLOCK.finditer(lua_file(SHARED))}


def uses_of(text: str) -> list[str]:
    """Return the names on the first '-- uses:' line of text (a script or a block), [] if none."""
    found = _USES.search(text)
    if not found:
        return []
    return [word.strip() for word in found.group(1).split(",") if word.strip()]


def split_header(text: str, where: str) -> tuple[str, list[str], str]:
    """Return (header up to its '-- uses:' line included, the names it uses, the rest) of a script.

    The '-- uses:' line must be the last line of the leading comment block; one anywhere else
    raises ValueError, so a misplaced line fails loudly instead of being ignored.
    """
    lines = text.splitlines(keepends=True)
    end = 1 if lines and lines[0].startswith("#!") else 0
    while end < len(lines) and lines[end].startswith("--"):
        end += 1
    header, rest = "".join(lines[:end]), "".join(lines[end:])
    last = lines[end - 1] if end else ""
    uses = uses_of(last) if _USES.match(last) else []
    if _USES.search(rest) or _USES.search(header[: len(header) - len(last)]):
        raise ValueError(f"{where}: '-- uses:' must be the last line of the contract header")
    if _USES.match(last) and not uses:
        raise ValueError(f"{where}: '-- uses:' names nothing")
    return header, uses, rest


def _included_code(name: str) -> str:
    """Return the code of script name for another file: no header, no last 'return f(KEYS, ARGV)'."""
    _, _, rest = split_header(lua_file(name), f"lua/{name}.lua")
    lines = rest.strip("\n").splitlines()
    if not lines or not _ENTRY.match(lines[-1]):
        raise ValueError(
            f"lua/{name}.lua cannot be used by another file: "
            "its last line must be 'return <function>(KEYS, ARGV)'"
        )
    code = "\n".join(lines[:-1]).strip("\n")
    return (
        f"-- BEGIN script: {name}.lua, all but its last line\n{code}\n-- END script: {name}.lua\n"
    )


def dependency_order(name: str) -> list[str]:
    """Return every block (or script) lua/<name>.lua uses, directly or not, each after what it uses."""
    blocks, order = shared_blocks(), []

    def visit(used: str, chain: tuple[str, ...]) -> None:
        if used in order:
            return
        if used in chain:
            raise ValueError(
                f"lua/{name}.lua: '-- uses:' goes round in a circle: {' -> '.join(chain + (used,))}"
            )
        if used in blocks:
            needs = uses_of(blocks[used])
        elif not used.startswith("_") and (LUA_DIR / f"{used}.lua").is_file():
            needs = split_header(lua_file(used), f"lua/{used}.lua")[1]
        else:
            user = f"block {chain[-1]}" if chain[-1] in blocks else f"lua/{chain[-1]}.lua"
            raise ValueError(
                f"{user}: '-- uses: {used}' names no block of lua/_shared.lua "
                f"({', '.join(blocks) or 'none'}) and no script of lua/"
            )
        for need in needs:
            visit(need, chain + (used,))
        order.append(used)

    for used in split_header(lua_file(name), f"lua/{name}.lua")[1]:
        visit(used, (name,))
    return order


def assemble(name: str) -> str:
    """Return the text Redis runs for lua/<name>.lua: the file with the blocks it uses put in."""
    header, uses, rest = split_header(lua_file(name), f"lua/{name}.lua")
    if not uses:
        return header + rest
    blocks, parts = shared_blocks(), []
    for used in dependency_order(name):
        if used == REPLIES:
            parts.append(
                f'local SCRIPT = "{name}"  -- the name in error replies (put in by the loader)\n'
            )
        parts.append(blocks[used] if used in blocks else _included_code(used))
    return header + "\n" + "\n".join(parts) + rest


@dataclass(frozen=True)
class _Cached:
    text: str
    stamps: tuple[tuple[Path, int, int], ...]  # (file, mtime_ns, size) of every file it came from


def _stamps(paths: list[Path]) -> tuple[tuple[Path, int, int], ...]:
    return tuple((p, s.st_mtime_ns, s.st_size) for p in paths for s in [p.stat()])


_TEXTS: dict[tuple[Path, str], _Cached] = {}
_SCRIPTS: dict[tuple[str, str], Script] = {}
_NAME_OF_SHA: dict[str, str] = {}


def lua_source(name: str) -> str:
    """Return the assembled text of lua/<name>.lua (what EVAL, SCRIPT LOAD or FUNCTION LOAD get)."""
    name = name.removesuffix(".lua")
    cached = _TEXTS.get((LUA_DIR, name))
    try:
        if cached is not None and _stamps([p for p, _, _ in cached.stamps]) == cached.stamps:
            return cached.text
    except FileNotFoundError:
        pass  # a file it came from is gone: assemble again, which says what is missing
    files = [lua_path(name)]
    text = assemble(name)
    if split_header(lua_file(name), name)[1]:
        files.append(lua_path(SHARED))
        files += [lua_path(n) for n in dependency_order(name) if n not in shared_blocks()]
    _TEXTS[(LUA_DIR, name)] = _Cached(text, _stamps(files))
    return text


def lua(name: str) -> Script:
    """Return lua/<name>.lua, assembled, as a Script bound to no client: script(keys, args, client=c).

    This is how an application keeps a script: made once, called with whatever client serves
    the request. redis-py sends EVALSHA and, on NOSCRIPT, loads the source and sends it again.
    """
    name = name.removesuffix(".lua")
    text = lua_source(name)
    script = _SCRIPTS.get((name, text))
    if script is None:
        # redis-py's Script takes None (calls then name their client) but its annotation does not say so
        script = _SCRIPTS[(name, text)] = Script(None, text.encode())  # type: ignore[arg-type]
        remember_sha(script.sha, name)
    return script


def remember_sha(sha: str, name: str) -> None:
    """Record that sha is the SHA1 of lua/<name>.lua's assembled text (see script_name)."""
    _NAME_OF_SHA[sha] = name


def script_name(sha: str) -> str | None:
    """Return the lua/ name of a script made by lua() or recorded by remember_sha, by SHA1, or None."""
    return _NAME_OF_SHA.get(sha)


def libraries() -> dict[str, str]:
    """Return {library name: assembled code} of every function library in lua/."""
    return {library_name(n): lua_source(n) for n in names() if is_library(n)}
