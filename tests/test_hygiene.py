"""Repository hygiene: LICENSE, CONTRIBUTING.md, README links, make check inside make test."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_license_is_the_mit_license_pyproject_declares():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the redis-race-lab authors" in text


def test_contributing_covers_what_a_contributor_needs():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    for needle in (
        "## The shape of a notebook",
        "## Truth in cells",
        "## Exercises",
        "## Adding a strategy",
        "## Adding a notebook",
        "## Adding a Lua script",
        "## Refreshing outputs",
        "## Never harm data",
        "make notebooks",
        "make sync-notebooks",
        "make check",
        "-- uses:",
        "assembled=True",
    ):
        assert needle in text, f"CONTRIBUTING.md lacks {needle!r}"


def _relative_links(text: str) -> list[str]:
    """Return the targets of the markdown links in text that are not URLs or anchors."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t for t in targets if not re.match(r"[a-z]+:|#", t)]


def test_readme_and_contributing_link_only_inside_the_repository():
    for name in ("README.md", "CONTRIBUTING.md"):
        text = (ROOT / name).read_text()
        assert "../" not in text, f"{name} points outside the repository"
        for target in _relative_links(text):
            assert (ROOT / target.split("#")[0]).exists(), f"{name}: broken link {target}"
    assert "](CONTRIBUTING.md)" in README


def test_binder_badge_opens_the_first_notebook():
    (url,) = re.findall(r"\((https://mybinder\.org/v2/gh/[^)]+)\)", README)
    labpath = unquote(url.split("labpath=", 1)[1])
    assert labpath == "notebooks/00_start_here.ipynb" and (ROOT / labpath).exists()


def test_make_test_runs_make_check():
    makefile = (ROOT / "Makefile").read_text()
    (prerequisites,) = re.findall(r"^test:([^#\n]*)", makefile, flags=re.M)
    assert "check" in prerequisites.split()
    assert re.search(r"^check:.*\n(\t.*\n)*\t.*ruff check", makefile, flags=re.M)
    assert re.search(r"^check:.*\n(\t.*\n)*\t.*ruff format --check", makefile, flags=re.M)


def test_no_generated_folder_or_symlink_is_tracked():
    """A venv, a built server or a symlink to one (a worktree's .redis link) never lands in git."""
    tracked = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    generated = (".venv", ".redis", "site/", "handouts/", "build/", ".browser-")
    bad = [
        line.split("\t", 1)[1]
        for line in tracked
        if line.startswith("120000") or line.split("\t", 1)[1].startswith(generated)
    ]
    assert bad == [], f"tracked but generated (or a symlink): {bad}"
