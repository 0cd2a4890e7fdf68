"""The notebooks' shape: few helper names in the race notebooks, one Race per race, short cells, no test markers.

These read the .ipynb files; nbval (make test) is what executes them.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
RACE_NOTEBOOKS = [nb for nb in NOTEBOOKS if nb.name[:2] in ("01", "02", "03")]
LESSON_NOTEBOOKS = [nb for nb in NOTEBOOKS if nb.name[:2] in ("00", "01", "02", "03")]
MAX_HELPER_NAMES, MAX_CELLS, MAX_ALL_CELLS, MAX_LINE = 8, 40, 40, 100
INNER_PACKAGES = ("helpers.instruments", "helpers.backend", "helpers.tools")
RACE_INSTRUMENTS = {"run_schedule", "explore", "Stepper", "ScheduleRun", "run_clients"}


def code_cells(notebook: Path) -> list[str]:
    """Return the source of every code cell, IPython magics and shell lines blanked out."""
    cells = json.loads(notebook.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return [
        "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in s.splitlines())
        for s in sources
    ]


def helper_names(sources: list[str]) -> set[str]:
    """Return the distinct names a notebook takes from the helpers package."""
    names: set[str] = set()
    aliases: set[str] = set()
    for source in sources:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "helpers":
                names.update(alias.name for alias in node.names)
                if node.module == "helpers":
                    continue
            elif isinstance(node, ast.Import):
                aliases.update(
                    a.asname or a.name for a in node.names if a.name.split(".")[0] == "helpers"
                )
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                names.add(node.attr)
    return names


def test_helper_names_counts_imports_and_module_attributes() -> None:
    sources = [
        "from helpers import connect, show\nimport helpers.instruments.plots as p\np.latency_cdf(1)",
        "from helpers.instruments.load import run_clients\nx = connect",
    ]
    assert helper_names(sources) == {"connect", "show", "latency_cdf", "run_clients"}


def inner_imports(sources: list[str]) -> list[str]:
    """Return the modules under helpers.instruments, .backend or .tools that sources import."""
    found = []
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
                modules += [f"{node.module}.{a.name}" for a in node.names]  # from helpers import x
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            found += [m for m in modules if m.startswith(INNER_PACKAGES)]
    return found


def instrument_calls(sources: list[str]) -> list[str]:
    """Return the race instruments called by name (run_schedule(...)), not as a Race's methods."""
    return [
        node.func.id
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in RACE_INSTRUMENTS
    ]


def test_inner_imports_and_instrument_calls_are_found() -> None:
    sources = [
        "from helpers.instruments.history import lease_span\nimport helpers.backend.lab",
        "from helpers import instruments\nfrom helpers import Race, show",
        "explore(lab, actors, inv)\nrace.explore()\nStepper(lab, actors)\nrace.stepper()",
    ]
    assert inner_imports(sources) == [
        "helpers.instruments.history",
        "helpers.instruments.history.lease_span",
        "helpers.backend.lab",
        "helpers.instruments",
    ]
    assert instrument_calls(sources) == ["explore", "Stepper"]


@pytest.mark.parametrize("notebook", LESSON_NOTEBOOKS, ids=lambda p: p.stem)
def test_a_lesson_notebook_imports_only_the_learner_surface(notebook: Path) -> None:
    found = inner_imports(code_cells(notebook))
    assert found == [], f"{notebook.name} imports from inside helpers: {found}"


@pytest.mark.parametrize("notebook", LESSON_NOTEBOOKS, ids=lambda p: p.stem)
def test_a_lesson_notebook_asks_its_races_not_the_instruments(notebook: Path) -> None:
    found = instrument_calls(code_cells(notebook))
    assert found == [], f"{notebook.name} calls {sorted(set(found))} directly: use a Race's methods"


@pytest.mark.parametrize("notebook", RACE_NOTEBOOKS, ids=lambda p: p.stem)
def test_a_race_notebook_uses_at_most_8_helper_names(notebook: Path) -> None:
    names = helper_names(code_cells(notebook))
    assert len(names) <= MAX_HELPER_NAMES, (
        f"{notebook.name} uses {len(names)} helper names: {sorted(names)}"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_has_at_most_40_required_cells_and_no_code_line_over_100_characters(
    notebook: Path,
) -> None:
    cells = json.loads(notebook.read_text())["cells"]
    required = [c for c in cells if "optional" not in c.get("metadata", {}).get("tags", [])]
    assert len(required) <= MAX_CELLS, f"{notebook.name} has {len(required)} required cells"
    assert len(cells) <= MAX_ALL_CELLS, f"{notebook.name} has {len(cells)} cells in all"
    long = [
        line
        for source in code_cells(notebook)
        for line in source.splitlines()
        if len(line) > MAX_LINE
    ]
    assert long == [], (
        f"{notebook.name}: {len(long)} code lines over {MAX_LINE} characters, e.g. {long[0]!r}"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_test_markers_are_cell_tags_not_comments_the_learner_reads(notebook: Path) -> None:
    assert not any("NBVAL_" in source for source in code_cells(notebook)), notebook.name
