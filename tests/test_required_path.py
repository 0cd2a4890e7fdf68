"""The required path stands alone (issue 38): every notebook, its cells tagged ``optional``
removed, runs top to bottom on the embedded backend without an error.

A learner short of time skips Going further; nothing after it (exercises, Key points' cells,
Cleanup) may need a name an optional cell defined. About 10 s a notebook.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TIMEOUT_S = 300


def required_path(notebook: Path) -> nbformat.NotebookNode:
    """Return the notebook without its cells tagged optional, and without outputs."""
    nb = nbformat.read(notebook, as_version=4)
    nb.cells = [c for c in nb.cells if "optional" not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    return nb


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_the_required_path_runs_without_its_optional_cells(
    notebook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("RACELAB_BACKEND", "embedded")
    here = str(REPO)  # the kernel imports the suite from this checkout
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    )
    nb = required_path(notebook)
    assert any("optional" in c.metadata.get("tags", []) for c in nbformat.read(notebook, 4).cells)
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
        store_widget_state=False,
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        pytest.fail(
            f"{notebook.name} without its optional cells: {exc.ename}: {exc.evalue}",
            pytrace=False,
        )
