"""The README and docs/setup.md say what the repository holds: the notebook table, the figures
it quotes from notebooks, the notebooks with throwaway servers, the setup page and make doctor."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SETUP = (ROOT / "docs" / "setup.md").read_text()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _outputs(path: Path) -> str:
    """Return the stored text outputs of a notebook, joined."""
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


def test_the_notebook_table_lists_every_notebook_and_no_other():
    listed = re.findall(r"^\| `(\d\d_\w+)` \|", README, flags=re.M)
    assert listed == [path.stem for path in NOTEBOOKS]


def test_the_worker_counts_are_notebook_03s():
    (nb03,) = [p for p in NOTEBOOKS if p.name.startswith("03_")]
    source = nb03.read_text()
    (workers,) = set(re.findall(r"for worker in range\((\d+)\)", source))
    (row,) = [line for line in README.splitlines() if line.startswith("| `03_")]
    assert re.findall(r"under (\d+) workers", row) == [workers]
    broken = re.search(r"(\d+) of (\d+) orders", row)
    assert broken and f"{broken.group(1)} of {broken.group(2)} schedules" in _outputs(nb03)


def test_the_notebooks_with_throwaway_servers_are_named():
    # live_or_recorded: a demo on a throwaway server, or its recording without a binary.
    numbers = [p.name[:2] for p in NOTEBOOKS if "live_or_recorded" in p.read_text()]
    assert numbers == [f"{n:02d}" for n in range(int(numbers[0]), int(numbers[-1]) + 1)]
    assert f"Notebooks {numbers[0]}–{numbers[-1]} start their own throwaway servers" in README


def test_the_readme_leads_with_make_doctor_and_links_the_setup_page():
    first_command = re.search(r"^make (\w+)", README, flags=re.M).group(1)
    assert first_command == "doctor"
    assert "](docs/setup.md)" in README
    workshop = (ROOT / "docs" / "workshop.md").read_text()
    setup_section = workshop.split("\n## Setup\n", 1)[1]
    assert setup_section.index("make doctor") < setup_section.index("make lab")
    assert "](setup.md)" in setup_section


def test_the_setup_page_covers_each_system_and_the_troubleshooting():
    headings = re.findall(r"^## (.+)$", SETUP, flags=re.M)
    for needed in (
        "Debian and Ubuntu",
        "macOS (Homebrew)",
        "Windows (WSL2)",
        "Other Linux distributions",
        "Docker",
        "Troubleshooting",
    ):
        assert needed in headings, needed
    for system in ("Debian and Ubuntu", "macOS (Homebrew)", "Windows (WSL2)", "Other Linux"):
        section = SETUP.split(f"## {system}", 1)[1].split("\n## ", 1)[0]
        assert "Works here:" in section, system
    docker = SETUP.split("## Docker", 1)[1].split("\n## ", 1)[0]
    assert "REDIS_URL" in docker and "recordings" in docker
    for problem in ("A proxy.", "A port in use.", "No compiler.", "The wrong kernel."):
        assert f"**{problem}**" in SETUP, problem


def test_make_redis_without_apt_get_points_at_the_setup_page(tmp_path):
    # A PATH with the shell tools the script uses, and no apt-get.
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bash", "sed", "sort", "head", "awk", "mktemp", "dirname", "mkdir", "cp", "rm"):
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "get-redis.sh", copy / "scripts")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "REDIS_CACHE_DIR")}
    done = subprocess.run(
        ["bash", str(copy / "scripts" / "get-redis.sh")],
        env=dict(env, PATH=str(tools)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "apt-get not found" in done.stderr and "see docs/setup.md" in done.stderr


def test_the_readme_is_short_and_points_each_reader_to_their_page():
    assert len(README.encode()) <= 8 * 1024, f"README.md is {len(README.encode())} bytes"
    for page in ("docs/workshop.md", "docs/security.md", "docs/internals.md", "docs/setup.md"):
        assert f"]({page})" in README, page
    # what left the README lives on in docs/, not deleted
    internals = (ROOT / "docs" / "internals.md").read_text()
    for heading in ("Layout", "How a lesson runs a race", "How the embedded backend differs"):
        assert f"\n## {heading}" in internals, heading
    for heading in ("Benchmarks", "Development", "Getting Redis ≥ 8.4 (`make redis`)"):
        assert f"\n## {heading}" in internals, heading
    security = (ROOT / "docs" / "security.md").read_text()
    assert "\n## Three layers\n" in security and "python -m helpers acl" in security


def test_the_setup_page_names_the_repository_the_binder_badge_launches():
    (badge,) = re.findall(r"\((https://mybinder\.org/v2/gh/[^)]+)\)", README)
    owner, name = urlsplit(badge).path.split("/")[3:5]
    assert f"git clone https://github.com/{owner}/{name}.git && cd {name}" in SETUP
    assert "<the repository>" not in SETUP
