"""Keep notebooks/*.ipynb reproducible and reviewable: execute, strip volatile metadata, pair.

    python scripts/notebooks.py execute [NB ...]  # run on the embedded backend, strip, sync (make notebooks)
    python scripts/notebooks.py sync [NB ...]     # strip and sync only, no kernel (make sync-notebooks)
    python scripts/notebooks.py check [NB ...]    # exit 1 if a pair is stale or metadata is volatile

Without NB, every notebooks/*.ipynb. Each notebook X.ipynb has a MyST markdown pair md/X.md beside
it (jupytext): the cells without outputs, the reviewed text. The .ipynb keeps the outputs nbval
compares. `sync` copies the cells from the newer side: a .md edited after its .ipynb gives its
cells to the .ipynb (outputs kept for the cells left unchanged); otherwise the .md is rewritten.

Volatile metadata, dropped so that re-running an unchanged notebook changes only the outputs that
truly vary: per-cell execution timestamps (`execution`, `ExecuteTime`), output scrolling state,
the widget state, the kernel's Python patch version, and jupytext's own metadata (the pairing is
done here, not by JupyterLab, so a learner's saves never rewrite the .md).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

import jupytext
import nbformat
from jupytext.combine import combine_inputs_with_outputs
from jupytext.compare import NotebookDifference, compare_notebooks

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
FORMAT = "md:myst"
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "scrolled")
VOLATILE_NOTEBOOK_METADATA = ("widgets", "jupytext")  # jupytext: no pairing by JupyterLab
TIMEOUT_S = 300
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def pair_path(notebook: Path) -> Path:
    """Return the path of notebook's MyST markdown pair: md/<stem>.md beside it."""
    return notebook.parent / "md" / f"{notebook.stem}.md"


def volatile(nb: nbformat.NotebookNode) -> list[str]:
    """Return a description of each piece of volatile metadata nb carries (empty: none)."""
    found = [
        f"notebook metadata {key!r}" for key in VOLATILE_NOTEBOOK_METADATA if key in nb.metadata
    ]
    if "version" in nb.metadata.get("language_info", {}):
        found.append("notebook metadata language_info.version")
    for i, cell in enumerate(nb.cells):
        found += [f"cell {i} metadata {k!r}" for k in VOLATILE_CELL_METADATA if k in cell.metadata]
        outputs = cell.get("outputs", [])
        if any(WIDGET_VIEW in output.get("data", {}) for output in outputs):
            found.append(f"cell {i} output: a widget view (a random model id on every run)")
        if len(stable_outputs(copy.deepcopy(outputs))) != len(outputs):
            found.append(f"cell {i} output: one stream split into chunks")
    return found


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Return nb without volatile metadata (changed in place)."""
    for key in VOLATILE_NOTEBOOK_METADATA:
        nb.metadata.pop(key, None)
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if "outputs" in cell:
            cell.outputs = stable_outputs(cell.outputs)
    return nb


def stable_outputs(outputs: list) -> list:
    """Return outputs without what changes on every run although the cell's result did not.

    A widget's view carries a random model id (and, with no widget state stored, shows nothing:
    the text/html and text/plain beside it are the static picture), and the kernel splits one
    cell's printing into stream chunks wherever a flush happened to fall: consecutive chunks of
    the same stream are joined. A display of a widget alone (a progress bar, shown only while a
    slow run lasted) leaves nothing once its view is dropped, and is dropped too.
    """
    stable: list = []
    for output in outputs:
        output.get("data", {}).pop(WIDGET_VIEW, None)
        if output.get("output_type") == "display_data" and not output.get("data"):
            continue  # a widget alone (a progress bar shown while a run lasted): nothing to keep
        previous = stable[-1] if stable else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] = previous["text"] + output["text"]
            continue
        stable.append(output)
    return stable


def markdown(nb: nbformat.NotebookNode) -> str:
    """Return nb's cells as MyST markdown, without the jupytext version (it changes on upgrade)."""
    text = jupytext.writes(nb, fmt=FORMAT)
    return "".join(line for line in text.splitlines(True) if "jupytext_version:" not in line)


def differences(notebook: Path) -> str | None:
    """Return how notebook's cells differ from its pair's, or None if they are the same."""
    md = pair_path(notebook)
    if not md.exists():
        return f"md/{md.name} is missing"
    try:
        compare_notebooks(jupytext.read(md), nbformat.read(notebook, as_version=4), fmt=FORMAT)
    except NotebookDifference as diff:
        return str(diff)
    return None


def write(notebook: Path, nb: nbformat.NotebookNode) -> None:
    """Write nb, stripped, to notebook and its pair (bytes unchanged if nothing changed)."""
    strip(nb)
    text = nbformat.writes(nb) + "\n"
    if not notebook.exists() or notebook.read_text() != text:
        notebook.write_text(text)
    md = pair_path(notebook)
    md.parent.mkdir(exist_ok=True)
    if not md.exists() or md.read_text() != markdown(nb):
        md.write_text(markdown(nb))


def sync(notebook: Path) -> str:
    """Strip notebook and sync its pair from the newer side; return which way it went."""
    nb = nbformat.read(notebook, as_version=4)
    md = pair_path(notebook)
    direction = "ipynb -> md"
    if md.exists() and md.stat().st_mtime > notebook.stat().st_mtime and differences(notebook):
        nb = combine_inputs_with_outputs(jupytext.read(md), nb, fmt=FORMAT)
        direction = "md -> ipynb"
    write(notebook, nb)
    return direction


def execute(notebook: Path, cwd: Path | None) -> None:
    """Run notebook top to bottom on the embedded backend, then strip it and sync its pair."""
    from nbclient import NotebookClient

    sync(notebook)  # an edited .md goes in first: what runs is what will be reviewed
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or notebook.parent)}},
        store_widget_state=False,
        record_timing=True,  # read into notebooks/runtimes/ below, then stripped as volatile
    )
    client.execute()
    record_runtimes(notebook, nb)
    write(notebook, nb)


def record_runtimes(notebook: Path, nb: nbformat.NotebookNode) -> None:
    """Write each code cell's measured run time to notebooks/runtimes/ (scripts/timing.py reads it)."""
    from datetime import datetime

    from timing import cell_key, runtimes_path

    cells = {}
    for cell in nb.cells:
        timing = cell.metadata.get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and start and end:
            seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
            cells[cell_key(cell.source)] = round(max(seconds, 0.0), 1)
    path = runtimes_path(notebook)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"backend": "embedded", "cells": cells}, indent=1) + "\n")


def main() -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["execute", "sync", "check"])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--cwd", type=Path, help="run the kernel here (default: beside the file)")
    args = parser.parse_intermixed_args()
    notebooks = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.command == "execute":
        os.environ.pop("REDIS_URL", None)  # the stored outputs are the embedded backend's
        os.environ["RACELAB_BACKEND"] = "embedded"
    status = 0
    for notebook in notebooks:
        if args.command == "check":
            problems = volatile(nbformat.read(notebook, as_version=4))
            problems += [d] if (d := differences(notebook)) else []
            for problem in problems:
                print(f"{notebook.name}: {problem}", file=sys.stderr)
            status |= bool(problems)
        elif args.command == "sync":
            print(f"{notebook.name}: synced ({sync(notebook)})")
        else:
            print(f"{notebook.name}: executing ...", flush=True)
            execute(notebook, args.cwd)
            print(f"{notebook.name}: executed, stripped, paired")
    if status:
        print("notebooks: run `make sync-notebooks`", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
