"""Build the lesson site (`make site`): a learner and an instructor view, offline, no execution.

Sphinx with MyST-NB renders the committed notebooks with their stored outputs (execution off).
Each view gets its own source folder under ``build/site-src/<view>/`` laid out like the
repository, so the notebooks' and docs' relative links work unchanged:

- ``index.md``: the README's story (up to its first section) and the workshop's schedule (the
  learner view leaves out its subsections for instructors, e.g. "Pacing (for instructors)");
- ``notebooks/NN_*.ipynb``: one page per notebook, cells selected as the handouts select them
  (scripts/handouts.py: the learner view is the student edition, without cells tagged
  ``solution`` or ``instructor``; no test markers), with a "launch" line under the title:
  Binder (the README's badge address) and a local ``make lab``;
- each run of cells tagged ``optional`` opens with an "Optional" admonition, and the cells have a
  dashed border (both views); a cell tagged ``predict`` shows the question and its choices (its
  stored HTML output, or the registered prediction's, as in the handouts);
- a notebook's link to a glossary entry, ``[**round trip**](../docs/glossary.md#round-trip)``,
  becomes a link to that entry on the glossary page (``docs/glossary.html#round-trip``): the
  sources keep the repository's layout and MyST makes the same heading anchors as GitHub;
- a figure shows as its ``<img alt=...>`` twin (helpers.instruments.plots): MyST-NB prefers
  text/html to image/png, and reads no alt text from an output's metadata;
- ``docs/setup.md`` (per-platform setup), ``docs/glossary.md``, ``docs/security.md`` (a shared
  Redis) and the cheat sheet (``docs/cheatsheet.md``, when there is one);
- ``docs/workshop.md`` (the learner view stops before its "Instructor notes" section);
- instructor view only: ``docs/notes/NN.md`` and each notebook's notes inserted after its title,
  as in the instructor handout; solutions are shown, marked.

The HTML goes to ``site/learner/`` and ``site/instructor/`` (git-ignored). Sphinx warnings fail
the build (a broken cross-reference is a warning).

    python scripts/lesson_site.py [--out site] [--view learner|instructor]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbconvert.preprocessors import TagRemovePreprocessor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handouts  # noqa: E402 - the handouts' cell selection, reused (scripts/ is not a package)

from helpers.errors import RaceLabError  # noqa: E402

REPO = handouts.REPO
VIEWS = {"learner": "student", "instructor": "instructor"}  # view -> handout edition
SOURCE_ROOT = REPO / "build" / "site-src"
LAB_URL = "http://localhost:8888/lab/tree/{path}"
BADGE = re.compile(r"^\[!\[Binder\]\([^)]*\)\]\(([^)]*)\)\s*$", re.M)

CSS = """
/* the site: solutions and instructor notes marked in the instructor view */
.tag_solution { border-left: 4px solid #1a7f37; padding-left: 0.5em; }
.tag_solution::before { content: "Solution"; color: #1a7f37; font-weight: bold; }
.handout-notes, .tag_handout-notes { border-left: 4px solid #8250df; padding-left: 0.5em; }
.cell_output img { max-width: 100%; height: auto; }
.tag_optional { border-left: 4px dashed #0072B2; padding-left: 0.5em; }
.racelab-predict { border: 1px solid #0072B2; padding: 0 0.5em; }
"""
OPTIONAL_ADMONITION = f"""\
:::{{admonition}} Optional
:class: optional
{handouts.OPTIONAL_TEXT[0].upper()}{handouts.OPTIONAL_TEXT[1:]}
:::"""


class SiteError(RaceLabError, RuntimeError):
    """The site cannot be built (a missing source, a Sphinx warning, ...)."""


def binder_url(readme: str) -> str:
    """Return the Binder address of the README's badge, without its labpath."""
    found = BADGE.search(readme)
    if found is None:
        raise SiteError("README.md has no Binder badge line to take the launch address from")
    return found[1].split("?")[0]


def launch_line(binder: str, path: str) -> str:
    """Return the markdown "launch" line of the notebook at path (relative to the repository)."""
    quoted = path.replace("/", "%2F")
    return (
        f"Run this notebook: [launch it on Binder]({binder}?labpath={quoted}) (nothing to "
        f"install), or on your machine: `make lab`, then open `{path}` "
        f"([localhost:8888]({LAB_URL.format(path=path)}) once JupyterLab is running)."
    )


def home_page(readme: str, workshop: str, view: str) -> str:
    """Return index.md: the README's story and the schedule, then the table of contents."""
    story = readme.split("\n## ", 1)[0]
    story = BADGE.sub(r"[Launch the notebooks on Binder](\1)", story).strip()  # no badge image
    schedule = workshop.split("\n## Schedule\n", 1)[1].split("\n## ", 1)[0]
    if view == "learner":  # the learner's home page carries no instructor text
        schedule = "\n### ".join(
            part
            for part in schedule.split("\n### ")
            if "instructor" not in part.partition("\n")[0].lower()
        )
    schedule = schedule.replace("](../notebooks/", "](notebooks/").replace(
        "](#", "](docs/workshop.md#"
    )
    pages = [f"notebooks/{p.stem}" for p in sorted(handouts.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
    docs = ["docs/setup", "docs/glossary", "docs/security"] + (
        ["docs/cheatsheet"] if (REPO / "docs/cheatsheet.md").exists() else []
    )
    docs.append("docs/workshop")
    if view == "instructor":
        docs += [f"docs/notes/{p.stem}" for p in sorted((REPO / "docs/notes").glob("*.md"))]
    toc = "\n".join(["```{toctree}", ":maxdepth: 1", ":caption: Lessons", "", *pages, "```"])
    ref = "\n".join(["```{toctree}", ":maxdepth: 1", ":caption: Reference", "", *docs, "```"])
    heading = "" if view == "learner" else " (instructor view: solutions and notes shown)"
    return (
        f"{story}\n\nThe notebooks, in order{heading}: each page is the notebook with its stored "
        "outputs, and a link to run it.\n\n## Schedule\n"
        f"{schedule.strip()}\n\n{toc}\n\n{ref}\n"
    )


def view_notebook(path: Path, view: str, binder: str) -> nbformat.NotebookNode:
    """Return the notebook as the view shows it: the handout's cells, a launch line, notes."""
    edition = VIEWS[view]
    nb = nbformat.read(path, as_version=4)
    remover = TagRemovePreprocessor(remove_cell_tags=handouts.REMOVED[edition], enabled=True)
    nb, _ = remover.preprocess(nb, {})
    handouts._clean(nb)
    nb.cells = handouts.mark_optional(nb.cells, OPTIONAL_ADMONITION)
    handouts.show_predictions(nb.cells)
    title, _, rest = nb.cells[0].source.partition("\n")  # the launch line goes under the title
    nb.cells[0].source = f"{title}\n\n{launch_line(binder, f'notebooks/{path.name}')}\n{rest}"
    notes = REPO / "docs" / "notes" / f"{path.name[:2]}.md"
    if edition == "instructor" and notes.exists():
        text = handouts._demoted(notes.read_text(), 1).replace("](../", "](../docs/")
        nb.cells.insert(1, handouts._markdown(text, notes=True))  # links from notebooks/
    return nb


def write_sources(view: str, root: Path) -> Path:
    """Write the view's source folder (fresh) under root; return it."""
    src = root / view
    if src.exists():
        shutil.rmtree(src)
    (src / "notebooks").mkdir(parents=True)
    (src / "docs").mkdir()
    readme = (REPO / "README.md").read_text()
    workshop = (REPO / "docs" / "workshop.md").read_text()
    binder = binder_url(readme)
    (src / "index.md").write_text(home_page(readme, workshop, view))
    for path in sorted(handouts.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nbformat.write(view_notebook(path, view, binder), src / "notebooks" / path.name)
    for doc in ("setup.md", "glossary.md", "security.md", "cheatsheet.md"):
        if (REPO / "docs" / doc).exists():
            shutil.copy(REPO / "docs" / doc, src / "docs" / doc)
    if view == "instructor":
        shutil.copytree(REPO / "docs" / "notes", src / "docs" / "notes")
    else:
        workshop = workshop.split("\n## Instructor notes\n", 1)[0]
        workshop = "\n".join(
            line for line in workshop.splitlines() if "(#instructor-notes)" not in line
        )
    (src / "docs" / "workshop.md").write_text(workshop)
    (src / "_static").mkdir()
    (src / "_static" / "site.css").write_text(CSS)
    return src


def config(view: str) -> dict[str, object]:
    """Return the Sphinx configuration, written to the generated sources' conf.py."""
    return {
        "project": "redis-race-lab",
        "html_title": f"redis-race-lab ({view} view)",
        "extensions": ["myst_nb"],
        "nb_execution_mode": "off",  # the stored outputs, never re-executed
        "nb_output_stderr": "show",
        "myst_heading_anchors": 3,  # #round-trip style anchors, as on GitHub
        "myst_enable_extensions": ["colon_fence"],
        "html_theme": "furo",
        "html_static_path": ["_static"],
        "html_css_files": ["site.css"],
        "html_show_sourcelink": False,
        "html_copy_source": False,
        "exclude_patterns": ["_build"],
        "suppress_warnings": ["mystnb.unknown_mime_type"],
    }


def build(view: str, out: Path, root: Path = SOURCE_ROOT) -> Path:
    """Build one view into out/<view>; return the folder. Raise SiteError on any Sphinx warning."""
    src = write_sources(view, root)
    settings = "".join(f"{key} = {value!r}\n" for key, value in config(view).items())
    (src / "conf.py").write_text(
        "# Generated by scripts/lesson_site.py: edit it there.\n" + settings
    )
    target = out / view
    if target.exists():
        shutil.rmtree(target)
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html"]
    command += ["-d", str(root / f"{view}-doctrees"), str(src), str(target)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SiteError(f"the {view} view did not build (Sphinx warnings fail it):\n{done.stderr}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "site", help="output folder")
    parser.add_argument("--view", choices=sorted(VIEWS), action="append", help="default: both")
    args = parser.parse_args(argv)
    for view in args.view or list(VIEWS):
        start = time.monotonic()
        try:
            target = build(view, args.out)
        except SiteError as exc:
            print(f"site: {exc}", file=sys.stderr)
            return 1
        pages = len(list(target.rglob("*.html")))
        print(f"site: {view} view: {pages} pages in {target} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
