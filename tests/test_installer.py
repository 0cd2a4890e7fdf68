"""`make lab`'s installer: uv on PATH, else the pinned uv wheel put into the new venv, else pip.

Each test asks make what it would run (`make -n`, nothing is installed) for a venv that does not
exist yet, with a PATH that has or has not a `uv` on it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV_PIN = re.search(r"^(uv==\S+)", (ROOT / "requirements.lock").read_text(), flags=re.M)

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(tmp_path: Path, path: str, *variables: str) -> str:
    """Return what `make -n lab` would run for a new venv in tmp_path, with PATH=path."""
    env = {**os.environ, "PATH": path}
    env.pop("INSTALLER", None)
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["make", "-n", "lab", f"VENV={venv}", *variables],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.replace(str(venv), "VENV")


def path_with_uv(tmp_path: Path) -> str:
    """Return a PATH whose first folder holds a `uv` (a stand-in script; make -n never runs it)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "uv").write_text("#!/bin/sh\nexit 1\n")
    (folder / "uv").chmod(0o755)
    return f"{folder}{os.pathsep}{bare_path()}"


def bare_path() -> str:
    """Return a PATH that has make, git and python3 but no uv."""
    folders = {str(Path(shutil.which(tool) or "/usr/bin/x").parent) for tool in ("make", "python3")}
    assert not any((Path(f) / "uv").exists() for f in folders), "uv beside make or python3"
    return os.pathsep.join(sorted(folders))


def test_the_lock_pins_the_uv_that_the_bootstrap_installs() -> None:
    assert UV_PIN, "requirements.lock pins no uv"


def test_without_uv_on_path_pip_installs_the_pinned_uv_and_uv_installs_the_lock(
    tmp_path: Path,
) -> None:
    plan = dry_run(tmp_path, bare_path())
    assert "(uv-in-venv installs)" in plan
    assert UV_PIN and "VENV/bin/python -m pip install" in plan and UV_PIN.group(1) in plan
    installs = [line for line in plan.splitlines() if "-r requirements-learner.lock" in line]
    assert installs and installs[0].startswith("VENV/bin/uv pip install"), installs
    assert plan.index(UV_PIN.group(1)) < plan.index("-r requirements-learner.lock")


def test_installer_pip_keeps_to_pip(tmp_path: Path) -> None:
    plan = dry_run(tmp_path, bare_path(), "INSTALLER=pip")
    assert "uv" not in plan.replace("uv-in-venv", "").split("(pip installs)")[1]
    assert "VENV/bin/python -m pip install --quiet" in plan


def test_uv_on_path_is_used_for_the_venv_and_the_lock(tmp_path: Path) -> None:
    path = path_with_uv(tmp_path)
    plan = dry_run(tmp_path, path)
    uv = str(tmp_path / "bin" / "uv")
    assert "(uv installs)" in plan
    assert f"{uv} venv" in plan and f"{uv} pip install" in plan
    assert "-m pip install" not in plan
