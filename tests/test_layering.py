"""The packages' layers: helpers never imports races or exercises; races only redis and Lua."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What races/ may import besides the standard library: redis, xxhash (DIGEST's hash),
# the errors root and itself.
RACES_MAY_IMPORT = {"redis", "xxhash", "luaload", "racelab_errors", "races"}


def imports(path: Path) -> list[tuple[int, str]]:
    """Return (line, module) for every import in path, relative imports as written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def offending(package: str, allowed: set[str]) -> list[str]:
    """Return 'file:line module' for every import in package whose top name is not allowed."""
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imports(path):
            top = module.split(".")[0]
            if module.startswith(".") or top in sys.stdlib_module_names:
                continue
            if top not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line} {module}")
    return bad


def test_helpers_never_imports_the_subject_or_the_exercises() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line} {module}"
        for path in sorted((ROOT / "helpers").rglob("*.py"))
        for line, module in imports(path)
        if module.split(".")[0] in {"races", "exercises"}
    ]
    assert bad == [], "helpers/ imports races/ or exercises/ (pass the subject in instead)"


def test_races_imports_only_redis_the_lua_loader_and_itself() -> None:
    assert offending("races", RACES_MAY_IMPORT) == []


def test_the_import_scan_sees_what_it_must_refuse(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import races\nfrom races.locks import acquire\n"
        "import importlib\nimportlib.import_module('races.ratelimit')\n"
    )
    assert [m for _, m in imports(sample)] == [
        "races",
        "races.locks",
        "importlib",
        "races.ratelimit",
    ]
