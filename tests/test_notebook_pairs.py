"""Every notebook has a MyST markdown pair with the same cells, and no volatile metadata.

`make sync-notebooks` (scripts/notebooks.py) fixes what these tests find; `make notebooks`
re-executes first. The helpers themselves are tested on a temporary copy.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _load_script():
    """Return scripts/notebooks.py as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location(
        "notebooks_script", ROOT / "scripts" / "notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = _load_script()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_and_its_markdown_pair_have_the_same_cells(notebook: Path):
    difference = script.differences(notebook)
    assert difference is None, f"{notebook.name}: {difference}\nrun `make sync-notebooks`"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_carries_no_volatile_metadata(notebook: Path):
    found = script.volatile(nbformat.read(notebook, as_version=4))
    assert not found, f"{notebook.name}: {found}\nrun `make sync-notebooks`"


def test_every_pair_belongs_to_a_notebook():
    stems = {p.stem for p in NOTEBOOKS}
    orphans = [p.name for p in (ROOT / "notebooks" / "md").glob("*.md") if p.stem not in stems]
    assert not orphans, f"markdown pairs without a notebook: {orphans}"


def _notebook(tmp_path: Path) -> Path:
    """Return a small notebook with outputs and volatile metadata, written in tmp_path."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"state": {}}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.2"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A title\n\nSome prose."),
        nbformat.v4.new_code_cell("x = 1\nprint(x)", metadata={"tags": ["setup"]}),
        nbformat.v4.new_code_cell("x + 1", metadata={"jupyter": {"source_hidden": True}}),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.cells[1].metadata["execution"] = {"iopub.status.busy": "2026-12-01T03:00:00.000000Z"}
    path = tmp_path / "01_example.ipynb"
    nbformat.write(nb, path)
    return path


def test_sync_strips_volatile_metadata_and_writes_a_pair(tmp_path: Path):
    path = _notebook(tmp_path)
    assert script.volatile(nbformat.read(path, as_version=4))
    assert script.differences(path) == "md/01_example.md is missing"
    assert script.sync(path) == "ipynb -> md"
    nb = nbformat.read(path, as_version=4)
    assert script.volatile(nb) == []
    assert script.differences(path) is None
    assert nb.cells[1].outputs[0]["text"] == "1\n", "outputs are kept"
    md = script.pair_path(path).read_text()
    assert "```{code-cell}" in md and "setup" in md and "jupytext_version" not in md
    before = (path.read_bytes(), script.pair_path(path).read_bytes())
    script.sync(path)
    assert (path.read_bytes(), script.pair_path(path).read_bytes()) == before, "not idempotent"


def test_an_edited_pair_gives_its_cells_to_the_notebook_and_keeps_outputs(tmp_path: Path):
    path = _notebook(tmp_path)
    script.sync(path)
    md = script.pair_path(path)
    md.write_text(md.read_text().replace("Some prose.", "Better prose."))
    later = path.stat().st_mtime + 5
    os.utime(md, (later, later))
    assert "Better prose." in (script.differences(path) or "")
    assert script.sync(path) == "md -> ipynb"
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].source == "# A title\n\nBetter prose."
    assert nb.cells[1].outputs[0]["text"] == "1\n", "an unchanged cell keeps its outputs"
    assert "jupytext" not in nb.metadata, "no pairing metadata: JupyterLab must not pair"
    assert script.differences(path) is None


def test_an_unsynced_cell_edit_is_a_difference(tmp_path: Path):
    path = _notebook(tmp_path)
    script.sync(path)
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = "x + 2"
    nbformat.write(nb, path)
    assert "x + 2" in (script.differences(path) or "")


def test_the_pair_reads_back_as_the_notebooks_cells(tmp_path: Path):
    copy = tmp_path / NOTEBOOKS[0].name
    shutil.copy(NOTEBOOKS[0], copy)
    script.sync(copy)
    pair = jupytext.read(script.pair_path(copy))
    nb = nbformat.read(copy, as_version=4)
    assert [c.source for c in pair.cells] == [c.source for c in nb.cells]
    assert [c.metadata.get("tags") for c in pair.cells] == [
        c.metadata.get("tags") for c in nb.cells
    ]
