"""Build the workshop handouts (`make handouts`): a student and an instructor edition, HTML and PDF.

- **student**: every notebook in order with its stored outputs; cells tagged ``solution`` or
  ``instructor`` are removed, and no test marker is left (``nbval-*`` tags dropped, any
  ``# NBVAL_...`` comment line removed).
- **instructor**: the workshop page (docs/workshop.md) first, then every notebook with its
  solutions shown (marked "Solution") and its instructor notes (docs/notes/NN.md) after its title.

Each edition is one HTML file (nbconvert's lab template, plots embedded as data URIs, a table of
contents from the headings, code that wraps instead of being clipped) and a PDF printed from it
by headless chromium (Debian's ``chromium`` package; RACELAB_CHROMIUM names another binary).
Without chromium the build stops, saying how to install it.

    python scripts/handouts.py [--out handouts] [--html-only]
"""

from __future__ import annotations

import argparse
import copy
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import TagRemovePreprocessor
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
EDITIONS = ("student", "instructor")
REMOVED = {"student": {"solution", "instructor"}, "instructor": set()}
NBVAL_LINE = re.compile(r"^\s*#\s*NBVAL_\w+.*\n?", re.MULTILINE)
PRINT_TIMEOUT_S = 300

STYLE = """
<style>
  /* handouts: code wraps instead of being clipped, on screen and in print */
  pre, .highlight pre, .jp-OutputArea-output pre {
    white-space: pre-wrap !important; overflow-wrap: anywhere; word-break: break-word;
  }
  pre, code, .highlight pre { font-family: "DejaVu Sans Mono", monospace !important; }
  .jp-OutputArea-output, .jp-InputArea-editor, .highlight { overflow: visible !important; }
  .jp-Cell { max-width: 100%; }
  img { max-width: 100%; height: auto; }
  nav.handout-toc { font-family: sans-serif; margin: 1em 0 2em; padding: 0.5em 1em; border: 1px solid #d0d7de; }
  nav.handout-toc li.h1 { font-weight: bold; margin-top: 0.4em; }
  nav.handout-toc li.h2 { margin-left: 1.5em; }
  @media print {
    .jp-Notebook { padding: 0 !important; }
    h1 { break-before: page; }
    nav.handout-toc + * h1, h1:first-of-type { break-before: auto; }
    img { break-inside: avoid; }
  }
</style>
"""
INSTRUCTOR_STYLE = """
<style>
  .celltag_solution { border-left: 4px solid #1a7f37; padding-left: 4px; }
  .celltag_solution::before {
    content: "Solution"; color: #1a7f37; font-weight: bold; font-family: sans-serif;
  }
  .handout-notes { border-left: 4px solid #8250df; padding-left: 6px; }
</style>
"""


class HandoutError(RuntimeError):
    """The handouts cannot be built (no chromium, a print that failed, ...)."""


def find_chromium() -> str:
    """Return the chromium binary to print with; raise HandoutError saying how to get one."""
    named = os.environ.get("RACELAB_CHROMIUM")
    found = named or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found or not Path(found).exists():
        raise HandoutError(
            "make handouts prints its PDFs with headless chromium and found none "
            f"({'RACELAB_CHROMIUM=' + named if named else 'chromium is not on PATH'}).\n"
            "Install Debian's package: sudo apt-get install chromium  "
            "(or set RACELAB_CHROMIUM to a chromium binary; --html-only skips the PDFs)"
        )
    return found


# --- the notebooks of one edition ---------------------------------------------------------------


def _markdown(source: str, notes: bool = False) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    if notes:
        cell.metadata["tags"] = ["handout-notes"]
    return cell


def _demoted(text: str, levels: int) -> str:
    """Return markdown text with every heading moved down levels (# -> ###)."""
    return re.sub(r"^(#{1,6}) ", lambda m: "#" * min(6, len(m[1]) + levels) + " ", text, flags=re.M)


def _clean(nb: nbformat.NotebookNode) -> None:
    """Drop test markers: nbval tags and NBVAL comment lines; show hidden sources."""
    for cell in nb.cells:
        tags = [t for t in cell.metadata.get("tags", []) if not t.lower().startswith("nbval")]
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
        if cell.cell_type == "code":
            cell.source = NBVAL_LINE.sub("", cell.source)
        cell.metadata.pop("jupyter", None)  # source_hidden: a handout shows what it keeps
        cell.metadata.pop("collapsed", None)


def edition_notebook(edition: str, notebooks: list[Path]) -> nbformat.NotebookNode:
    """Return one notebook holding every notebook of the edition, in order."""
    remover = TagRemovePreprocessor(remove_cell_tags=REMOVED[edition], enabled=True)
    book = nbformat.v4.new_notebook()
    if edition == "instructor" and (REPO / "docs" / "workshop.md").exists():
        book.cells.append(_markdown((REPO / "docs" / "workshop.md").read_text()))
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        nb, _ = remover.preprocess(nb, {})
        _clean(nb)
        cells = list(nb.cells)
        notes = REPO / "docs" / "notes" / f"{path.name[:2]}.md"
        if edition == "instructor" and notes.exists():
            text = _demoted(notes.read_text(), 2)
            cells.insert(1, _markdown(text, notes=True))
        book.cells.extend(cells)
        if not book.metadata:
            book.metadata = copy.deepcopy(nb.metadata)
    book.metadata.pop("widgets", None)
    book.metadata.pop("jupytext", None)
    return book


# --- HTML and PDF -----------------------------------------------------------------------------

HEADING = re.compile(r'<h([12]) id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)


def _toc(page: str) -> str:
    """Return a table of contents (nav) of the page's h1 and h2 headings."""
    items = []
    for level, anchor, inner in HEADING.findall(page):
        text = re.sub(r"<[^>]+>", "", inner).replace("¶", "").strip()
        items.append(f'<li class="h{level}"><a href="#{anchor}">{text}</a></li>')
    return '<nav class="handout-toc"><h2>Contents</h2><ul>' + "".join(items) + "</ul></nav>"


def to_html(nb: nbformat.NotebookNode, title: str, style: str = STYLE) -> str:
    """Return the notebook as one self-contained HTML page with a table of contents."""
    config = Config()
    config.HTMLExporter.exclude_input_prompt = True
    config.HTMLExporter.exclude_output_prompt = True
    config.HTMLExporter.embed_images = True
    exporter = HTMLExporter(config=config, template_name="lab")
    page, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    header = f'<div class="jp-Cell"><h1 id="handout-title">{html.escape(title)}</h1></div>'
    body = re.search(r'<main>|<div[^>]*class="[^"]*jp-Notebook[^"]*"[^>]*>', page)
    if body is None:
        raise HandoutError("nbconvert's page has no notebook body to put the contents in")
    page = page[: body.end()] + header + _toc(page) + page[body.end() :]
    page = re.sub(r"celltag_handout-notes", "handout-notes", page)
    return page.replace("</head>", style + "</head>", 1)


def print_pdf(chromium: str, page: Path, pdf: Path) -> None:
    """Print page to pdf with headless chromium; raise HandoutError with its output on failure."""
    with tempfile.TemporaryDirectory() as profile:
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
            "--generate-pdf-document-outline", f"--user-data-dir={profile}",
            "--run-all-compositor-stages-before-draw", "--virtual-time-budget=20000",
            f"--print-to-pdf={pdf}", page.resolve().as_uri(),
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PRINT_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise HandoutError(
                f"chromium did not print {page.name} in {PRINT_TIMEOUT_S} s"
            ) from exc
    if done.returncode != 0 or not pdf.exists() or pdf.stat().st_size == 0:
        raise HandoutError(
            f"chromium could not print {page.name} (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )


def build(out: Path, pdf: bool = True, notebooks: list[Path] | None = None) -> list[Path]:
    """Build both editions into out; return the files written."""
    chromium = find_chromium() if pdf else ""
    notebooks = notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for edition in EDITIONS:
        title = f"redis-race-lab: {edition} edition"
        page = out / f"{edition}.html"
        style = STYLE + (INSTRUCTOR_STYLE if edition == "instructor" else "")
        page.write_text(to_html(edition_notebook(edition, notebooks), title, style))
        written.append(page)
        if pdf:
            print_pdf(chromium, page, out / f"{edition}.pdf")
            written.append(out / f"{edition}.pdf")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "handouts", help="output folder")
    parser.add_argument("--html-only", action="store_true", help="skip the PDFs (no chromium)")
    args = parser.parse_args(argv)
    try:
        written = build(args.out, pdf=not args.html_only)
    except HandoutError as exc:
        print(f"handouts: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"handouts: wrote {path} ({path.stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
