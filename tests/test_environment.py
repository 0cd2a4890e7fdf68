"""The pinned environment: pyproject.toml's ranges, requirements.lock, binder/, environment.yml.

requirements.lock is the one source of exact versions (scripts/lock.py, `make lock`); the others
must agree with it, and the installed .venv must hold exactly what it pins.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
BINDER = ROOT / "binder"


def _load_lock_script():
    """Return scripts/lock.py as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("lock_script", ROOT / "scripts" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _requirements(path: Path) -> list[Requirement]:
    """Return the requirement lines of a pip requirements file (comments and options dropped)."""
    lines = path.read_text().splitlines()
    return [Requirement(line) for line in lines if re.match(r"^[A-Za-z0-9]", line)]


def _pinned(req: Requirement) -> str:
    """Return the exact version a lock line pins; fail if it pins none."""
    (spec,) = req.specifier
    assert spec.operator == "==", f"{req}: not an exact pin"
    return spec.version


def _pyproject_requirements() -> list[Requirement]:
    """Return every dependency pyproject.toml names: the learner's and every extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    return [Requirement(d) for d in project["dependencies"] + sum(extras.values(), [])]


LOCKED = _requirements(LOCK)
LOCKED_BY_NAME: dict[str, list[Requirement]] = {}
for _req in LOCKED:
    LOCKED_BY_NAME.setdefault(canonicalize_name(_req.name), []).append(_req)


def test_every_lock_line_is_an_exact_pin():
    assert LOCKED, "requirements.lock pins nothing"
    for req in LOCKED:
        _pinned(req)
        assert not req.extras, f"{req}: a lock line names a package, not its extras"


@pytest.mark.parametrize("req", _pyproject_requirements(), ids=str)
def test_every_pyproject_dependency_is_locked_within_its_range(req: Requirement):
    locked = LOCKED_BY_NAME.get(canonicalize_name(req.name))
    assert locked, f"{req} (pyproject.toml) is missing from requirements.lock: run `make lock`"
    for line in locked:
        assert req.specifier.contains(_pinned(line), prereleases=True), (
            f"requirements.lock pins {line} outside pyproject.toml's {req}: run `make lock`"
        )


def test_extras_of_dependencies_are_locked():
    """fakeredis[lua] needs lupa: without it the embedded backend has no EVAL."""
    assert "lupa" in LOCKED_BY_NAME
    assert any(str(r).startswith("fakeredis[lua]") for r in _pyproject_requirements())


def test_hiredis_is_a_learner_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(canonicalize_name(Requirement(d).name) == "hiredis" for d in project["dependencies"])


def test_binder_pins_only_locked_packages_at_the_locked_versions():
    binder = _requirements(BINDER / "requirements.txt")
    assert binder, "binder/requirements.txt pins nothing"
    for req in binder:
        locked = LOCKED_BY_NAME.get(canonicalize_name(req.name), [])
        assert _pinned(req) in {_pinned(r) for r in locked}, (
            f"binder/requirements.txt: {req} is not in requirements.lock at that version"
        )
    learner = [r for r in _pyproject_requirements() if r not in _test_extra()]
    names = {canonicalize_name(r.name) for r in binder}
    for req in learner:
        assert canonicalize_name(req.name) in names, f"binder/ lacks the learner package {req}"


def _test_extra() -> list[Requirement]:
    """Return the test extra's requirements (not part of the learner's environment)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(d) for d in project.get("optional-dependencies", {}).get("test", [])]


def test_binder_builds_the_suite_on_the_locks_python():
    lock_script = _load_lock_script()
    assert (BINDER / "runtime.txt").read_text().strip() == f"python-{lock_script.PYTHON}"
    post_build = BINDER / "postBuild"
    assert post_build.stat().st_mode & 0o111, "binder/postBuild must be executable"
    assert "pip install --no-deps -e ." in post_build.read_text()


def test_environment_yml_carries_the_binder_pins():
    """environment.yml is generated from binder/requirements.txt: same pins, all through pip."""
    text = (ROOT / "environment.yml").read_text()
    assert text == _load_lock_script().environment_text(), "environment.yml is stale: make lock"
    dependencies = yaml.safe_load(text)["dependencies"]
    conda = [d for d in dependencies if isinstance(d, str)]
    assert conda == ["python=3.11", "pip"], "conda installs only Python and pip; pip the rest"
    (pip,) = [d["pip"] for d in dependencies if isinstance(d, dict)]
    binder = [str(r) for r in _requirements(BINDER / "requirements.txt")]
    assert [str(Requirement(p)) for p in pip if p != "-e ."] == binder


def test_the_venv_holds_exactly_the_locked_versions():
    """What `pip freeze` says in .venv matches the lock for every package locked for here."""
    wrong = []
    for req in LOCKED:
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            installed = "missing"
        if installed != _pinned(req):
            wrong.append(f"{req.name}: installed {installed}, locked {_pinned(req)}")
    assert not wrong, "run `make venv` to install requirements.lock:\n" + "\n".join(wrong)
