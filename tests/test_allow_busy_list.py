"""The commands a busy server still serves are read from the server, never typed by hand (issue 39).

Notebook 06 computes the list from the server's COMMAND reply (the allow_busy flag) and records it
(notebooks/recordings/06.allow_busy.json). A paragraph of learner or instructor text that speaks
of a busy server and names many of those commands together is a hand-typed copy of that list,
which goes stale with the next server version: it fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "notebooks" / "recordings" / "06.allow_busy.json"
TEXTS = sorted(
    [*(ROOT / "notebooks" / "md").glob("*.md"), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    + sorted((ROOT / "lua").glob("*.lua"))
)
# The kill commands and SHUTDOWN NOSAVE / FUNCTION STATS are the lesson, and a paragraph may name
# them together; a fourth flagged command in the same paragraph is the start of a hand-made list.
MAX_FLAGGED_PER_PARAGRAPH = 3


def flagged_commands() -> list[str]:
    """Return the allow-busy commands notebook 06 read from a real server (its recording)."""
    return json.loads(RECORDING.read_text())["data"]["flagged"]


def paragraphs(path: Path) -> list[str]:
    """Return path's prose paragraphs and list items (code blocks and Lua code dropped)."""
    text = path.read_text()
    if path.suffix == ".lua":
        text = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    # a blank line, a list item or a table row starts a new paragraph
    return [p for p in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\|))", text) if p.strip()]


def named(paragraph: str, command: str) -> bool:
    """Return True if paragraph names command (e.g. 'UNWATCH', 'FUNCTION KILL') as a word."""
    return re.search(rf"(?<![\w-]){re.escape(command)}(?![\w-])", paragraph) is not None


def test_the_recording_holds_a_list_computed_from_the_server() -> None:
    flagged = flagged_commands()
    assert {"SCRIPT KILL", "FUNCTION KILL", "SHUTDOWN", "MULTI"} <= set(flagged)
    assert "PING" not in flagged and flagged == sorted(flagged)


def test_notebook_06_computes_the_list_from_the_command_reply() -> None:
    cells = json.loads((ROOT / "notebooks" / "06_runaway_scripts.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert ".command()" in code and '"allow_busy"' in code
    assert '"06.allow_busy"' in code


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_text_lists_the_busy_commands_by_hand(path: Path) -> None:
    flagged = flagged_commands()
    for paragraph in (p for p in paragraphs(path) if "busy" in p.lower()):
        names = [c for c in flagged if named(paragraph, c)]
        assert len(names) <= MAX_FLAGGED_PER_PARAGRAPH, (
            f"{path.name}: a paragraph names {names}: say that the list is computed from the "
            f"server (notebook 06, allow_busy) instead of typing it:\n{paragraph[:300]}"
        )


def test_the_check_catches_a_hand_typed_list() -> None:
    typed = "When BUSY, `MULTI`, `DISCARD`, `WATCH`, `UNWATCH` and `HELLO` are still served."
    assert "busy" in typed.lower()
    assert sum(named(typed, c) for c in flagged_commands()) > MAX_FLAGGED_PER_PARAGRAPH
