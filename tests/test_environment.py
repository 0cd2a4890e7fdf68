"""environment.yml and pyproject.toml name the same packages."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names that differ from PyPI names
CONDA_TO_PYPI = {"redis-py": "redis", "python-xxhash": "xxhash", "lupa": "fakeredis[lua]"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ ;]", spec.strip(), maxsplit=1)[0].lower()


def test_environment_yml_and_pyproject_name_the_same_packages():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pypi = {_name(d).split("[")[0] for d in pyproject["project"]["dependencies"]}
    conda = set()
    text = (ROOT / "environment.yml").read_text()
    for line in text[text.index("dependencies:") :].splitlines():
        m = re.match(r"^\s+-\s+([A-Za-z0-9_.\-]+)", line)
        if m and m.group(1) not in ("python", "pip", "-e"):
            conda.add(CONDA_TO_PYPI.get(m.group(1), m.group(1)).split("[")[0].lower())
    assert conda == pypi


def test_lua_extra_is_required_for_fakeredis():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(d.startswith("fakeredis[lua]") for d in pyproject["project"]["dependencies"])
