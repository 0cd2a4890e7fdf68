"""The pinned environment: pyproject.toml's ranges, the two locks, binder/, environment.yml.

requirements-learner.lock pins what the notebooks need (`make lab`); requirements.lock includes
it and adds one line per test-only package (`make venv`). Together they are the one source of
exact versions (scripts/lock.py, `make lock`); binder/ and environment.yml carry the learner's
pins, no notebook imports a test-only package, and the installed .venv holds exactly the pins.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LEARNER_LOCK = ROOT / "requirements-learner.lock"
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
    lines = [line.split(" #", 1)[0].strip() for line in path.read_text().splitlines()]
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


LEARNER = _requirements(LEARNER_LOCK)
TEST_ONLY = _requirements(LOCK)
LOCKED = LEARNER + TEST_ONLY
LOCKED_BY_NAME: dict[str, list[Requirement]] = {}
for _req in LOCKED:
    LOCKED_BY_NAME.setdefault(canonicalize_name(_req.name), []).append(_req)


def _names(requirements: list[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def test_every_lock_line_is_an_exact_pin():
    assert LEARNER and TEST_ONLY, "a lock pins nothing"
    for req in LOCKED:
        _pinned(req)
        assert not req.extras, f"{req}: a lock line names a package, not its extras"


def test_the_test_lock_includes_the_learners_and_pins_no_package_twice():
    options = [line for line in LOCK.read_text().splitlines() if line.startswith("-")]
    assert options == [f"-r {LEARNER_LOCK.name}"], "requirements.lock: one include, then pins"
    assert not _names(LEARNER) & _names(TEST_ONLY), "a package pinned in both locks"


def test_the_learners_lock_holds_no_test_tool():
    """make lab installs only what the notebooks need: no test runner, linter or browser driver."""
    tools = _names(_test_extra())
    assert tools and not tools & _names(LEARNER), sorted(tools & _names(LEARNER))
    assert _names(_learner_requirements()) <= _names(LEARNER)


def _imported_modules(source: str) -> set[str]:
    """Return the top-level module names a Python source imports."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module.split(".")[0])
    return modules


def _learner_code() -> dict[str, str]:
    """Return {place: source} of what a learner runs: notebook code cells and the packages."""
    code = {}
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for n, cell in enumerate(json.loads(notebook.read_text())["cells"]):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                lines = [
                    line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))
                ]
                code[f"{notebook.name} cell {n}"] = "\n".join(lines)
    for package in ("helpers", "races", "exercises"):
        for path in sorted((ROOT / package).rglob("*.py")):
            code[str(path.relative_to(ROOT))] = path.read_text()
    return code


def test_no_notebook_or_learner_module_imports_a_test_only_package():
    distributions = importlib.metadata.packages_distributions()
    test_only = _names(TEST_ONLY)
    found = [
        f"{place} imports {module} ({', '.join(distributions[module])})"
        for place, source in _learner_code().items()
        for module in sorted(_imported_modules(source))
        if _names([Requirement(d) for d in distributions.get(module, [])]) & test_only
    ]
    assert not found, "move the package to pyproject.toml's dependencies:\n" + "\n".join(found)


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


def test_binder_pins_exactly_the_learners_lock():
    binder = [str(r) for r in _requirements(BINDER / "requirements.txt")]
    assert binder == [str(r) for r in LEARNER], "binder/requirements.txt is stale: make lock"


def _learner_requirements() -> list[Requirement]:
    """Return pyproject.toml's dependencies: what the notebooks need."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(d) for d in project["dependencies"]]


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
    assert not wrong, "run `make venv` to install both locks:\n" + "\n".join(wrong)
