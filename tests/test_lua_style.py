"""lua/*.lua: one house style, one error convention, and shared validators written once.

* Style: 4-space indentation (no tabs), double-quoted strings (long brackets allowed), and a
  contract header that opens each file: "<file>.lua: <what it does>", then KEYS, ARGV, Returns,
  and every status and error code the code can reply; a file that needs shared blocks names
  them on a last header line ``-- uses: <name>, <name>``. Every file but _shared.lua is at most
  60 lines, header included.
* Errors: a script whose contract is a status table answers bad input with
  ``{2, "invalid-arguments"}`` and never with an error reply. Every other script replies with
  ``"ERR <script>: <code>: <detail>"`` (``WRONGTYPE <script>: ...`` for a key of another type),
  <script> being the file's name, or the FCALLed function's name in a library: through the
  shared ``fail``/``wrong_type`` (block ``replies``), or a literal ``redis.error_reply``.
* Shared validators live once, in lua/_shared.lua; the loader (``luaload``) puts the blocks a
  file uses into what Redis runs. No file of lua/ carries a copy of another's code.

The checks read the files as text (as written, and as assembled); what the scripts do is pinned
by tests/test_lua_<name>.py.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import luaload

LUA_DIR = luaload.LUA_DIR
SHARED = LUA_DIR / "_shared.lua"
SCRIPTS = sorted(p for p in LUA_DIR.glob("*.lua") if p != SHARED)
NAMES = [p.stem for p in SCRIPTS]
BLOCKS = luaload.shared_blocks()
MAX_LINES = 60
REPLY_HELPERS = ("fail", "wrong_type")  # defined by the replies block (or a script's own one-liner)
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
    """Return the lexed text of a Lua file as written."""
    return lex(path.read_text(), path.name)


def assembled(path: Path) -> Lua:
    """Return the lexed text Redis runs for a Lua file (its shared blocks put in)."""
    return lex(luaload.lua_source(path.stem), path.name)


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


def defined_functions(code: str) -> list[str]:
    """Return the names of the local functions that code defines, in order."""
    return re.findall(r"^\s*local function (\w+)", code, re.M)


def called(code: str) -> set[str]:
    """Return the names that code calls as plain functions (not methods, not definitions)."""
    return set(re.findall(r"(?<![\w.:])(?<!function )(\w+)\(", code))


def block_functions(name: str) -> list[str]:
    """Return the functions that shared block name defines."""
    return defined_functions(lex(BLOCKS[name]).code)


SHARED_FUNCTIONS = {fn: name for name in BLOCKS for fn in block_functions(name)}


def reply_names(path: Path) -> set[str]:
    """Return the names an error reply of this file may carry: its stem, or its library's functions."""
    code = assembled(path).code
    if not code.startswith("#!lua"):
        return {path.stem}
    return set(
        re.findall(r'register_function\s*\(?\s*"(\w+)"', code)
        + re.findall(r'function_name\s*=\s*"(\w+)"', code)
        + re.findall(r'^SCRIPT\s*=\s*"(\w+)"', code, re.M)
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


def is_status_script(path: Path) -> bool:
    """Return True if the script's contract answers bad input with a status table."""
    return '{2, "invalid-arguments"}' in header(path)


def code_lines(path: Path) -> list[str]:
    """Return the file's lines of code as written: comments and blank lines dropped, blanks folded."""
    lines = (" ".join(line.split()) for line in parse(path).code.splitlines())
    return [line for line in lines if line]


# ------------------------------------------------------------------------------------------------
# The shared blocks and the '-- uses:' lines


def test_the_shared_file_holds_only_blocks_and_is_no_script() -> None:
    lua = parse(SHARED)
    assert BLOCKS, "lua/_shared.lua holds no '-- BEGIN shared: <name>' block"
    outside = re.sub(
        r"^-- BEGIN shared: (\w+)\n.*?^-- END shared: \1\n", "", lua.text, flags=re.S | re.M
    )
    assert lex(outside).code.strip() == "", "lua/_shared.lua: code outside a shared block"
    assert not re.search(r"\b(KEYS|ARGV|register_function)\b", lua.bare), (
        "lua/_shared.lua runs nothing"
    )
    text = SHARED.read_text()
    begins = re.findall(r"^-- BEGIN shared: (\S+)$", text, re.M)
    ends = re.findall(r"^-- END shared: (\S+)$", text, re.M)
    assert begins == ends == list(BLOCKS), "lua/_shared.lua: unmatched or nested shared markers"


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_each_block_defines_its_namesake_and_builds_no_error_reply_but_the_replies_block(
    name: str,
) -> None:
    lua = lex(BLOCKS[name], name)
    if name == luaload.REPLIES:
        assert block_functions(name) == list(REPLY_HELPERS)
        return
    assert block_functions(name) == [name], (
        f"block {name} must define exactly 'local function {name}'"
    )
    assert not first_arguments(lua, "redis.error_reply"), (
        f"block {name} builds an error reply: call fail or wrong_type (uses: replies)"
    )


@pytest.mark.parametrize("name", NAMES + [f"_shared:{b}" for b in sorted(BLOCKS)])
def test_every_uses_line_names_what_the_code_calls_and_nothing_else(name: str) -> None:
    if name.startswith("_shared:"):
        text = BLOCKS[name.split(":")[1]]
        uses = luaload.uses_of(text)
        own = lex(text).code
    else:
        _, uses, rest = luaload.split_header(luaload.lua_file(name), name)
        own = lex(rest).code
    local = set(defined_functions(own))  # a block's own function, a script's own fail
    needed = {SHARED_FUNCTIONS[fn] for fn in called(own) - local if fn in SHARED_FUNCTIONS}
    scripts_used = {u for u in uses if u not in BLOCKS}
    assert set(uses) - scripts_used == needed, (
        f"{name}: '-- uses:' names {sorted(set(uses) - scripts_used)}, its code calls the shared "
        f"{sorted(needed)}"
    )
    assert len(uses) == len(set(uses)), f"{name}: a name twice on its '-- uses:' line"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_uses_name_resolves_and_the_assembly_defines_each_function_before_its_use(
    path: Path,
) -> None:
    order = luaload.dependency_order(path.stem)  # raises on an unknown name or a circle
    assert len(order) == len(set(order))
    # A name defined below its use is a global to Lua: Redis raises only when that line runs.
    code = assembled(path).code
    defined: dict[str, int] = {}
    for m in re.finditer(r"^\s*local function (\w+)", code, re.M):
        assert m.group(1) not in defined, (
            f"{path.name}: {m.group(1)} is defined twice once assembled"
        )
        defined[m.group(1)] = m.start()
    wanted = set(SHARED_FUNCTIONS) | set(REPLY_HELPERS)
    for m in re.finditer(r"(?<![\w.:])(?<!function )(\w+)\(", code):
        if m.group(1) in wanted:
            line = code.count("\n", 0, m.start()) + 1
            assert defined.get(m.group(1), len(code)) < m.start(), (
                f"{path.name}:{line} (assembled): {m.group(1)} is used before (or without) its "
                "definition; name its block on the '-- uses:' line"
            )
    if re.search(r"\bSCRIPT\b", code):
        assert f'local SCRIPT = "{path.stem}"' in code, f"{path.name}: SCRIPT is not its name"


def test_every_shared_block_serves_at_least_two_files() -> None:
    users = {b: [n for n in NAMES if b in luaload.dependency_order(n)] for b in BLOCKS}
    lonely = {b: who for b, who in users.items() if len(who) < 2}
    assert not lonely, f"shared blocks used by fewer than two files (inline them): {lonely}"


def test_the_misplaced_or_unknown_uses_lines_are_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(luaload, "LUA_DIR", tmp_path)
    (tmp_path / "_shared.lua").write_text(SHARED.read_text())
    contract = "-- x.lua: x\n-- KEYS none\n-- ARGV none\n-- Returns: 1\n"
    cases = {
        "unknown": (contract + "-- uses: no_such_block\n\nreturn 1\n", "names no block"),
        "below": (contract + "\n-- uses: integer_in\nreturn 1\n", "last line of the contract"),
        "empty": (contract + "-- uses:\n\nreturn 1\n", "names nothing"),
        "circle": ("-- circle.lua: c\n-- uses: circle\n\nreturn f(KEYS, ARGV)\n", "circle"),
    }
    for stem, (text, message) in cases.items():
        (tmp_path / f"{stem}.lua").write_text(text)
        with pytest.raises(ValueError, match=message):
            luaload.lua_source(stem)


# ------------------------------------------------------------------------------------------------
# No copies: the assembled text is the file plus its blocks, and the files share no code


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_the_assembled_text_is_the_file_with_its_blocks_put_in_below_the_uses_line(
    path: Path,
) -> None:
    written, text = path.read_text(), luaload.lua_source(path.stem)
    head, uses, rest = luaload.split_header(written, path.name)
    if not uses:
        assert text == written
        return
    assert text.startswith(head) and text.endswith(rest)
    middle = text[len(head) : len(text) - len(rest)]
    for name in luaload.dependency_order(path.stem):
        assert (BLOCKS[name] if name in BLOCKS else f"-- BEGIN script: {name}.lua") in middle


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_the_sha_is_of_the_assembled_text(path: Path) -> None:
    text = luaload.lua_source(path.stem)
    sha = hashlib.sha1(text.encode()).hexdigest()
    assert luaload.lua(path.stem).sha == sha
    assert luaload.script_name(sha) == path.stem


def test_the_dictionary_library_runs_the_scripts_code_and_holds_no_copy_of_it() -> None:
    script = luaload.split_header(luaload.lua_file("dict_get_or_put"), "dict_get_or_put")[2]
    code = script.strip("\n").rsplit("\n", 1)[0]  # all but 'return get_or_put(KEYS, ARGV)'
    assert code in luaload.lua_source("dict_library")
    assert "local function" not in luaload.lua_file("dict_library")


def test_no_two_files_of_lua_share_six_lines_of_code() -> None:
    # What duplicates(1) would pair: six code lines in a row, the same in two places.
    seen: dict[tuple[str, ...], str] = {}
    repeated = []
    for path in [SHARED, *SCRIPTS]:
        lines = code_lines(path)
        for i in range(len(lines) - 5):
            run = tuple(lines[i : i + 6])
            if seen.setdefault(run, path.name) != path.name:
                repeated.append(f"{seen[run]} ~ {path.name}: {run[0]!r}...")
    assert not repeated, "code written twice in lua/ (make it a shared block):\n" + "\n".join(
        sorted(set(repeated))
    )


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_file_redefines_a_shared_function_or_carries_a_block(path: Path) -> None:
    text = path.read_text()
    assert "-- BEGIN shared:" not in text, (
        f"{path.name}: a pasted shared block; name it on '-- uses:'"
    )
    redefined = set(defined_functions(parse(path).code)) & set(SHARED_FUNCTIONS) - set(
        REPLY_HELPERS
    )
    assert not redefined, f"{path.name}: defines shared functions itself: {sorted(redefined)}"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_file_is_at_most_60_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{path.name}: {lines} lines, over {MAX_LINES}: move a validator to lua/_shared.lua or "
        "tighten the header"
    )


# ------------------------------------------------------------------------------------------------
# House style, as written


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


@pytest.mark.parametrize("path", [SHARED, *SCRIPTS], ids=lambda p: p.name)
def test_no_script_raises_with_error(path: Path) -> None:
    raised = re.findall(r"(?<![\w.])error\s*\(", parse(path).code)
    assert not raised, f"{path.name}: return redis.error_reply(...) instead of raising with error()"


# ------------------------------------------------------------------------------------------------
# Replies, as assembled (the shared blocks' replies are the script's replies)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_the_contract_lists_every_status_the_code_returns(path: Path) -> None:
    lua, contract = assembled(path), header(path)
    statuses = set(re.findall(r'return \{(?:\d+, )?"([\w-]+)"', lua.code))
    missing = sorted(s for s in statuses if f'"{s}"' not in contract)
    assert not missing, f"{path.name}: statuses the header does not list: {missing}"


@pytest.mark.parametrize("path", [p for p in SCRIPTS if is_status_script(p)], ids=lambda p: p.name)
def test_status_scripts_answer_bad_input_with_a_status_and_never_an_error_reply(path: Path) -> None:
    lua = assembled(path)
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
    lua, names = assembled(path), reply_names(path)
    pattern = "|".join(map(re.escape, sorted(names)))
    for line, text in first_arguments(lua, "redis.error_reply"):
        if text is None or text in ("ERR ", "WRONGTYPE "):  # the replies block: "ERR " .. SCRIPT
            assert re.search(
                r'redis\.error_reply\("(ERR|WRONGTYPE) " \.\. SCRIPT \.\. ": "', lua.text
            ), f"{path.name}:{line}: an error reply whose name is not a literal nor SCRIPT"
            continue
        assert re.match(rf"(ERR|WRONGTYPE) ({pattern}): ", text), (
            f"{path.name}:{line}: redis.error_reply must start with a literal 'ERR <name>: ' or "
            f"'WRONGTYPE <name>: ', <name> one of {sorted(names)}"
        )
        if re.fullmatch(rf"(ERR|WRONGTYPE) ({pattern}): ", text):  # the prefix alone
            assert re.match(
                r"local function (fail|wrong_type)\(", lua.text.splitlines()[line - 1]
            ), f"{path.name}:{line}: an error reply with nothing after the script name"


@pytest.mark.parametrize("path", ERROR_SCRIPTS, ids=lambda p: p.name)
def test_reply_helpers_are_the_one_line_forms(path: Path) -> None:
    helpers = re.findall(r"^local function (?:fail|wrong_type)\b.*$", assembled(path).code, re.M)
    for helper in helpers:
        form = re.fullmatch(
            r"local function (fail|wrong_type)\(reason\) return redis\.error_reply\("
            r'"(ERR|WRONGTYPE) (?:\w+: "|" \.\. SCRIPT \.\. ": ") \.\. reason\) end',
            helper.rstrip(),
        )
        assert form and (form.group(1) == "fail") == (form.group(2) == "ERR"), (
            f"{path.name}: {helper}"
        )


@pytest.mark.parametrize("path", ERROR_SCRIPTS, ids=lambda p: p.name)
def test_every_err_reason_opens_with_a_code_the_header_lists(path: Path) -> None:
    lua, contract = assembled(path), header(path)
    for line, reason in error_reasons(lua):
        code = re.match(rf"({CODE})(?::|$)", reason)
        assert code, (
            f"{path.name}:{line}: {reason!r} does not open with a code such as 'invalid-arguments: '"
        )
        assert re.search(rf"^ +{re.escape(code.group(1))}\b", contract, re.M), (
            f"{path.name}: the header does not list the error code {code.group(1)!r}"
        )
    if error_reasons(lua):
        forms = [f'"ERR {name}: <code>: <detail>"' for name in (*reply_names(path), "<function>")]
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
