"""lua/*.lua: one house style, one error convention, and shared functions copied byte for byte.

* Style: 4-space indentation (no tabs), double-quoted strings (long brackets allowed), and a
  contract header that opens each file: "<file>.lua: <what it does>", then KEYS, ARGV, Returns,
  and every status and error code the code can reply.
* Errors: a script whose contract is a status table answers bad input with
  ``{2, "invalid-arguments"}`` and never with an error reply. Every other script replies with
  ``redis.error_reply("ERR <script>: <code>: <detail>")`` (``WRONGTYPE <script>: ...`` for a key
  of another type), <script> being the file's name, or the FCALLed function's name in a library.
* Shared functions: Redis cannot make one script include another, so a function that several
  scripts need lives in lua/_shared.lua between ``-- BEGIN shared: <name>`` and
  ``-- END shared: <name>``, and each script carries a byte-for-byte copy of that block.
  ``python tests/test_lua_style.py --sync`` pastes the canonical blocks over every copy.

The checks read the files as text; what the scripts do is pinned by tests/test_lua_<name>.py.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LUA_DIR = Path(__file__).resolve().parent.parent / "lua"
SHARED = LUA_DIR / "_shared.lua"
SCRIPTS = sorted(p for p in LUA_DIR.glob("*.lua") if p != SHARED)
BLOCK = re.compile(r"^-- BEGIN shared: (\w+)\n.*?^-- END shared: \1\n", re.S | re.M)
REPLY_HELPERS = ("fail", "wrong_type")  # each script's own, one line, naming the script
CODE = r"[a-z]+(?:-[a-z]+)*"


@dataclass
class Lua:
    """Lua source split into its comment-free code and its string literals."""

    name: str
    text: str
    code: str = ""  # the text with every comment blanked out (strings kept, line numbers kept)
    bare: str = ""  # the code with every string's body blanked out too
    strings: list[tuple[int, str, str]] = field(default_factory=list)  # (line, opening quote, body)


def lex(text: str, name: str = "fragment") -> Lua:
    """Return text lexed: its code without comments, and its string literals (a small Lua lexer)."""
    lua, out, bare, i = Lua(name, text), [], [], 0
    long_open = re.compile(r"\[(=*)\[")
    while i < len(text):
        if text.startswith("--", i):
            opened = long_open.match(text, i + 2)
            if opened:
                end = text.index("]" + opened.group(1) + "]", opened.end()) + len(opened.group(0))
            else:
                end = text.find("\n", i) if "\n" in text[i:] else len(text)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            bare.append(out[-1])
            i = end
        elif text[i] in "\"'":
            j = i + 1
            while text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            lua.strings.append((text.count("\n", 0, i) + 1, text[i], text[i + 1 : j]))
            out.append(text[i : j + 1])
            bare.append(text[i] + re.sub(r"[^\n]", " ", text[i + 1 : j]) + text[i])
            i = j + 1
        elif opened := long_open.match(text, i):
            end = text.index("]" + opened.group(1) + "]", opened.end()) + len(opened.group(0))
            body = text[opened.end() : end - len(opened.group(0))]
            lua.strings.append((text.count("\n", 0, i) + 1, opened.group(0), body))
            out.append(text[i:end])
            bare.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        else:
            out.append(text[i])
            bare.append(text[i])
            i += 1
    lua.code, lua.bare = "".join(out), "".join(bare)
    return lua


def parse(path: Path) -> Lua:
    """Return the lexed text of a Lua file."""
    return lex(path.read_text(), path.name)


def header(path: Path) -> str:
    """Return the leading comment block of a Lua file (after a '#!lua' line), without the '--'."""
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("#!"):
            continue
        if not line.startswith("--"):
            break
        lines.append(line[2:].removeprefix(" "))
    return "\n".join(lines)


def reply_names(lua: Lua) -> set[str]:
    """Return the names an error reply of this file may carry: its stem, or its library's functions."""
    if not lua.text.startswith("#!lua"):
        return {lua.name.removesuffix(".lua")}
    return set(
        re.findall(r'register_function\s*\(?\s*"(\w+)"', lua.code)
        + re.findall(r'function_name\s*=\s*"(\w+)"', lua.code)
    )


def first_arguments(lua: Lua, function: str) -> list[tuple[int, str | None]]:
    """Return (line, text of the first argument if it is a string literal, else None) of each call."""
    calls = []
    for m in re.finditer(rf"(?<![\w.])(?<!function ){re.escape(function)}\s*\(\s*", lua.code):
        literal = re.match(r'"((?:[^"\\]|\\.)*)"', lua.code[m.end() :])
        calls.append(
            (lua.code.count("\n", 0, m.start()) + 1, literal.group(1) if literal else None)
        )
    return calls


def shared_blocks(text: str) -> dict[str, str]:
    """Return {name: block text, markers included} of the shared blocks in text."""
    return {m.group(1): m.group(0) for m in BLOCK.finditer(text)}


def outside_blocks(text: str) -> str:
    """Return text with its shared blocks removed."""
    return BLOCK.sub("", text)


def is_status_script(path: Path) -> bool:
    """Return True if the script's contract answers bad input with a status table."""
    return '{2, "invalid-arguments"}' in header(path)


CANONICAL = shared_blocks(SHARED.read_text())


def test_the_canonical_file_holds_only_shared_blocks_and_is_no_script() -> None:
    lua = parse(SHARED)
    assert CANONICAL, "lua/_shared.lua holds no '-- BEGIN shared: <name>' block"
    assert lex(outside_blocks(lua.text)).code.strip() == "", (
        "lua/_shared.lua: code outside a shared block"
    )
    assert not first_arguments(lua, "redis.error_reply"), (
        "a shared block must not build error replies: call the script's fail or wrong_type"
    )
    assert not re.search(r"\b(KEYS|ARGV|register_function)\b", lua.bare), (
        "lua/_shared.lua runs nothing"
    )


@pytest.mark.parametrize("path", [SHARED, *SCRIPTS], ids=lambda p: p.name)
def test_every_marker_opens_and_closes_a_block(path: Path) -> None:
    text = path.read_text()
    begins = re.findall(r"^-- BEGIN shared: (\S+)$", text, re.M)
    ends = re.findall(r"^-- END shared: (\S+)$", text, re.M)
    assert begins == ends == list(shared_blocks(text)), (
        f"{path.name}: unmatched or nested shared markers"
    )
    assert len(set(begins)) == len(begins), f"{path.name}: a shared block is copied twice"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_shared_copy_is_byte_for_byte_the_canonical_block(path: Path) -> None:
    for name, block in shared_blocks(path.read_text()).items():
        assert name in CANONICAL, f"{path.name}: block {name!r} is not in lua/_shared.lua"
        assert block == CANONICAL[name], (
            f"{path.name}: block {name!r} differs from lua/_shared.lua; edit the canonical copy, "
            "then run: python tests/test_lua_style.py --sync"
        )


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_shared_function_and_reply_helper_is_defined_above_its_first_use(path: Path) -> None:
    # A name defined below its use is a global to Lua: Redis raises only when that line runs.
    code = parse(path).code
    wanted = set(CANONICAL) | set(REPLY_HELPERS)
    defined = {m.group(1): m.start() for m in re.finditer(r"^local function (\w+)", code, re.M)}
    for m in re.finditer(r"(?<![\w.:])(?<!function )(\w+)\(", code):
        if m.group(1) in wanted:
            line = code.count("\n", 0, m.start()) + 1
            assert defined.get(m.group(1), len(code)) < m.start(), (
                f"{path.name}:{line}: {m.group(1)} is used before (or without) its definition; "
                "copy its shared block (or the script's one-line helper) above this line"
            )


def test_every_shared_block_serves_at_least_two_scripts() -> None:
    users = {
        name: [p.stem for p in SCRIPTS if name in shared_blocks(p.read_text())]
        for name in CANONICAL
    }
    lonely = {name: who for name, who in users.items() if len(who) < 2}
    assert not lonely, f"shared blocks used by fewer than two scripts (inline them): {lonely}"


def test_no_local_function_is_repeated_outside_the_shared_blocks() -> None:
    owners: dict[str, list[str]] = {}
    for path in SCRIPTS:
        for name in set(
            re.findall(
                r"^\s*local function (\w+)", lex(outside_blocks(path.read_text())).code, re.M
            )
        ):
            owners.setdefault(name, []).append(path.stem)
    repeated = {n: who for n, who in owners.items() if len(who) > 1 and n not in REPLY_HELPERS}
    assert not repeated, f"move these into lua/_shared.lua as shared blocks: {repeated}"
    shadowed = {n: who for n, who in owners.items() if n in CANONICAL}
    assert not shadowed, f"a shared function defined outside its markers: {shadowed}"


@pytest.mark.parametrize("path", [SHARED, *SCRIPTS], ids=lambda p: p.name)
def test_indentation_is_four_spaces_and_there_are_no_tabs(path: Path) -> None:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        assert "\t" not in line, f"{path.name}:{number}: a tab"
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 4 == 0, (
            f"{path.name}:{number}: indented by {indent} spaces, not a multiple of 4"
        )
        assert line == line.rstrip(), f"{path.name}:{number}: trailing white space"


@pytest.mark.parametrize("path", [SHARED, *SCRIPTS], ids=lambda p: p.name)
def test_strings_are_double_quoted(path: Path) -> None:
    single = [
        f"{path.name}:{line}: '{body}'" for line, quote, body in parse(path).strings if quote == "'"
    ]
    assert not single, "single-quoted string literals (use double quotes): " + ", ".join(single)


@pytest.mark.parametrize("path", [SHARED, *SCRIPTS], ids=lambda p: p.name)
def test_every_file_opens_with_its_contract(path: Path) -> None:
    contract = header(path)
    assert contract.startswith(f"{path.name}: "), (
        f"{path.name}: the header must open with '{path.name}: <what it does>'"
    )
    for field_name in ("KEYS", "ARGV", "Returns"):
        assert re.search(rf"^{field_name}\b", contract, re.M), (
            f"{path.name}: no line of the header starts with {field_name}"
        )


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_the_contract_lists_every_status_the_code_returns(path: Path) -> None:
    lua, contract = parse(path), header(path)
    statuses = set(re.findall(r'return \{(?:\d+, )?"([\w-]+)"', lua.code))
    missing = sorted(s for s in statuses if f'"{s}"' not in contract)
    assert not missing, f"{path.name}: statuses the header does not list: {missing}"


@pytest.mark.parametrize("path", [p for p in SCRIPTS if is_status_script(p)], ids=lambda p: p.name)
def test_status_scripts_answer_bad_input_with_a_status_and_never_an_error_reply(path: Path) -> None:
    lua = parse(path)
    assert 'return {2, "invalid-arguments"}' in lua.code
    assert not first_arguments(lua, "redis.error_reply") and not first_arguments(lua, "fail"), (
        f'{path.name}: its contract is a status table, so bad input gets {{2, "invalid-arguments"}}'
    )


ERROR_SCRIPTS = [p for p in SCRIPTS if not is_status_script(p)]


def error_reasons(lua: Lua) -> list[tuple[int, str]]:
    """Return (line, reason) of every ERR reply: what follows 'ERR <name>: ', or fail()'s argument."""
    reasons = []
    for line, text in first_arguments(lua, "redis.error_reply"):
        m = re.match(r"ERR \w+: ", text or "")
        if m and text != m.group(0):
            reasons.append((line, text[m.end() :]))
    return reasons + [(line, text or "") for line, text in first_arguments(lua, "fail")]


@pytest.mark.parametrize("path", ERROR_SCRIPTS, ids=lambda p: p.name)
def test_every_error_reply_starts_with_the_script_name(path: Path) -> None:
    lua = parse(path)
    names = "|".join(map(re.escape, sorted(reply_names(lua))))
    for line, text in first_arguments(lua, "redis.error_reply"):
        assert text is not None and re.match(rf"(ERR|WRONGTYPE) ({names}): ", text), (
            f"{path.name}:{line}: redis.error_reply must start with a literal 'ERR <name>: ' or "
            f"'WRONGTYPE <name>: ', <name> one of {sorted(reply_names(lua))}"
        )
        if re.fullmatch(rf"(ERR|WRONGTYPE) ({names}): ", text):  # the prefix alone
            assert re.match(
                r"local function (fail|wrong_type)\(", lua.text.splitlines()[line - 1]
            ), f"{path.name}:{line}: an error reply with nothing after the script name"


@pytest.mark.parametrize("path", ERROR_SCRIPTS, ids=lambda p: p.name)
def test_reply_helpers_are_the_one_line_forms(path: Path) -> None:
    helpers = re.findall(r"^local function (?:fail|wrong_type)\b.*$", parse(path).code, re.M)
    for helper in helpers:
        form = re.fullmatch(
            r"local function (fail|wrong_type)\(reason\) return redis\.error_reply\("
            r'"(ERR|WRONGTYPE) \w+: " \.\. reason\) end',
            helper.rstrip(),
        )
        assert form and (form.group(1) == "fail") == (form.group(2) == "ERR"), (
            f"{path.name}: {helper}"
        )


@pytest.mark.parametrize("path", ERROR_SCRIPTS, ids=lambda p: p.name)
def test_every_err_reason_opens_with_a_code_the_header_lists(path: Path) -> None:
    lua, contract = parse(path), header(path)
    for line, reason in error_reasons(lua):
        code = re.match(rf"({CODE})(?::|$)", reason)
        assert code, (
            f"{path.name}:{line}: {reason!r} does not open with a code such as 'invalid-arguments: '"
        )
        assert re.search(rf"^ +{re.escape(code.group(1))}\b", contract, re.M), (
            f"{path.name}: the header does not list the error code {code.group(1)!r}"
        )
    if error_reasons(lua):
        forms = [f'"ERR {name}: <code>: <detail>"' for name in (*reply_names(lua), "<function>")]
        assert any(form in contract for form in forms), (
            f"{path.name}: the header does not say {forms[0]}"
        )
    wrong_types = [
        t for _, t in first_arguments(lua, "redis.error_reply") if t and t.startswith("WRONGTYPE")
    ]
    if wrong_types or first_arguments(lua, "wrong_type"):
        assert "WRONGTYPE" in contract, (
            f"{path.name}: replies WRONGTYPE but the header does not say so"
        )


@pytest.mark.parametrize("path", [SHARED, *SCRIPTS], ids=lambda p: p.name)
def test_no_script_raises_with_error(path: Path) -> None:
    raised = re.findall(r"(?<![\w.])error\s*\(", parse(path).code)
    assert not raised, f"{path.name}: return redis.error_reply(...) instead of raising with error()"


def sync() -> list[str]:
    """Paste every canonical block of lua/_shared.lua over its copies; return the files changed."""
    changed = []
    for path in SCRIPTS:
        text = path.read_text()
        new = BLOCK.sub(lambda m: CANONICAL.get(m.group(1), m.group(0)), text)
        if new != text:
            path.write_text(new)
            changed.append(path.name)
    return changed


if __name__ == "__main__":
    if sys.argv[1:] != ["--sync"]:
        sys.exit(
            "usage: python tests/test_lua_style.py --sync   (paste lua/_shared.lua's blocks over their copies)"
        )
    print("\n".join(sync()) or "every copy already matches lua/_shared.lua")
