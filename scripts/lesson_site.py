"""Build the lesson site (`make site`): a learner and an instructor view, offline, no execution.

Sphinx with MyST-NB renders the committed notebooks with their stored outputs (execution off).
Each view gets its own source folder under ``build/site-src/<view>/`` laid out like the
repository, so the notebooks' and docs' relative links work unchanged:

- ``index.md``: the README's story (up to its first section) and the workshop's schedule (the
  learner view leaves out its subsections for instructors, e.g. "Pacing (for instructors)");
- ``notebooks/NN_*.ipynb``: one page per notebook, cells selected as the handouts select them
  (scripts/handouts.py: the learner view is the student edition, without cells tagged
  ``solution`` or ``instructor``; no test markers), with launch buttons under the title:
  Binder (the README's badge address), a download of the repository's ``.ipynb`` (copied into the
  sources' ``ipynb/``, which is not built as pages) and a local ``make lab``;
- each run of cells tagged ``optional`` opens with an "Optional" admonition, and the cells have a
  dashed border (both views); a cell tagged ``predict`` shows the question and its choices (its
  stored HTML output, or the registered prediction's, as in the handouts); in the learner view
  a reveal cell's outputs (the outcome and the right choice) are folded into a ``<details>``,
  shown on a click (handouts.fold_reveals); the instructor view keeps them open;
- a notebook's link to a glossary entry, ``[**round trip**](../docs/glossary.md#round-trip)``,
  becomes a link to that entry on the glossary page (``docs/glossary.html#round-trip``): the
  sources keep the repository's layout and MyST makes the same heading anchors as GitHub;
- a figure shows as its ``<img alt=...>`` twin (helpers.instruments.plots): MyST-NB prefers
  text/html to image/png, and reads no alt text from an output's metadata;
- ``docs/setup.md`` (per-platform setup), ``docs/glossary.md``, ``docs/security.md`` (a shared
  Redis), ``docs/divergences.md`` (where the embedded backend and Redis differ, which lessons
  link) and the cheat sheet (``docs/cheatsheet.md``, when there is one);
- ``docs/workshop.md`` (the learner view stops before its "Instructor notes" section);
- instructor view only: ``docs/notes/NN.md``, and each notebook's notes as a marked box
  (an admonition of class ``handout-notes``) right after its title; solutions are shown, marked
  "Solution" in green. Code cells have a plain border (not MyST-NB's green margin), and every
  colour has a dark-mode twin with AA contrast on furo's dark background.

Accessibility (axe-core's rules, checked by tests/browser/test_axe.py): a wide output or listing
that scrolls gets ``tabindex=0`` and the theme's two sidebars get names (``_static/site.js``), and
the toctree captions get the ``aria-level`` their heading role needs (the generated ``conf.py``).

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
/* the site's colours: light, then dark (furo's data-theme, or the system's when it is "auto");
   each text colour has at least 4.5:1 on its background (green on #131416: 7.3:1) */
body {
  --racelab-ok: #1a7f37; --racelab-bad: #cf222e;
  --racelab-solution: #1a7f37; --racelab-solution-bg: #dafbe1;
  --racelab-notes: #8250df; --racelab-notes-bg: #fbefff;
  --racelab-optional: #0072B2; --racelab-launch-bg: #f6f8fa;
}
body[data-theme="dark"] {
  --racelab-ok: #3fb950; --racelab-bad: #ff7b72;
  --racelab-solution: #3fb950; --racelab-solution-bg: #0f2d1a;
  --racelab-notes: #bc8cff; --racelab-notes-bg: #271b3d;
  --racelab-optional: #56B4E9; --racelab-launch-bg: #1f2328;
}
@media (prefers-color-scheme: dark) {
  body:not([data-theme="light"]) {
    --racelab-ok: #3fb950; --racelab-bad: #ff7b72;
    --racelab-solution: #3fb950; --racelab-solution-bg: #0f2d1a;
    --racelab-notes: #bc8cff; --racelab-notes-bg: #271b3d;
    --racelab-optional: #56B4E9; --racelab-launch-bg: #1f2328;
  }
}
/* the instruments' HTML outputs colour ok and failed outcomes inline, for a light page; on a
   dark page the same meaning takes the dark-mode twin */
.cell_output [style*="color:#1a7f37"] { color: var(--racelab-ok) !important; }
.cell_output [style*="color:#cf222e"] { color: var(--racelab-bad) !important; }
/* code cells: MyST-NB's green left margin on every cell looked like the "Solution" mark; a plain
   border instead, and only solutions carry green */
div.cell > div.cell_input {
  border-left-color: var(--mystnb-source-border-color);
  border-left-width: var(--mystnb-source-border-width);
}
/* solutions (instructor view): a labelled green bar */
.tag_solution { border-left: 4px solid var(--racelab-solution); padding-left: 0.5em; }
.tag_solution::before {
  content: "Solution"; display: inline-block; margin-bottom: 0.3em; padding: 0 0.5em;
  color: var(--racelab-solution); background: var(--racelab-solution-bg);
  border: 1px solid var(--racelab-solution); border-radius: 0.3em; font-weight: bold;
}
/* instructor notes (instructor view): a box right after the lesson's title */
.admonition.handout-notes {
  border-left: 0.3rem solid var(--racelab-notes); background: var(--racelab-notes-bg);
}
.admonition.handout-notes > .admonition-title {
  background: transparent; color: var(--racelab-notes); font-weight: bold;
}
.admonition.handout-notes > .admonition-title::before { background-color: var(--racelab-notes); }
.cell_output img { max-width: 100%; height: auto; }
.tag_optional { border-left: 4px dashed var(--racelab-optional); padding-left: 0.5em; }
.racelab-predict { border: 1px solid var(--racelab-optional); padding: 0 0.5em; }
details.racelab-reveal { border: 1px solid var(--racelab-optional); padding: 0 0.5em; }
details.racelab-reveal > summary { cursor: pointer; color: var(--racelab-optional); }
/* the launch buttons under each lesson's title */
.racelab-launch a[href*="mybinder.org"], .racelab-launch a.download {
  display: inline-block; margin: 0.15em 0.3em 0.15em 0; padding: 0.15em 0.7em;
  border: 1px solid var(--color-brand-primary); border-radius: 0.3em;
  background: var(--racelab-launch-bg); text-decoration: none; font-weight: bold;
}
.racelab-launch a.download code { background: none; border: none; font: inherit; padding: 0; }
"""
# A wide output or listing scrolls sideways; a keyboard user can only scroll what can take the
# focus (axe-core: scrollable-region-focusable), so each region that overflows gets tabindex=0;
# and the theme's two sidebars get names.
JS = """
function racelabFocusableScroll() {
  document.querySelectorAll("pre, div.highlight, div.cell_output, div.output, .table-wrapper")
    .forEach(function (el) {
      var style = getComputedStyle(el);
      var scrolls = /(auto|scroll)/.test(style.overflowX + style.overflowY) &&
        (el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight);
      if (scrolls && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("data-racelab-scroll", "");
      } else if (!scrolls && el.hasAttribute("data-racelab-scroll")) {
        el.removeAttribute("tabindex");
        el.removeAttribute("data-racelab-scroll");
      }
    });
}
document.addEventListener("DOMContentLoaded", racelabFocusableScroll);
window.addEventListener("resize", racelabFocusableScroll);
// furo's two <aside> landmarks carry no name, so a screen reader lists two identical ones
// (axe-core: landmark-unique)
document.addEventListener("DOMContentLoaded", function () {
  var names = {".sidebar-drawer": "Site navigation", ".toc-drawer": "On this page"};
  Object.keys(names).forEach(function (selector) {
    var aside = document.querySelector("aside" + selector);
    if (aside && !aside.hasAttribute("aria-label")) aside.setAttribute("aria-label", names[selector]);
  });
});
"""
# Sphinx writes a toctree's caption as <p class="caption" role="heading"> with no aria-level,
# which a heading role requires (axe-core: aria-required-attr); the site's conf.py adds it, in the
# page body and in furo's sidebar, after furo has built that sidebar.
CONF_SETUP = """

CAPTION = 'class="caption" role="heading">'


def _caption_levels(app, pagename, templatename, context, doctree):
    for name in ("body", "furo_navigation_tree"):
        if isinstance(context.get(name), str):
            context[name] = context[name].replace(CAPTION, CAPTION[:-1] + ' aria-level="2">')


def setup(app):
    app.connect("html-page-context", _caption_levels, priority=900)
"""
DOWNLOADS = "ipynb"  # the repository's notebooks, copied for the download buttons (not pages)
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
    """Return the "launch" buttons of the notebook at path (relative to the repository).

    Binder, a download of the notebook (the repository's own file, in the site's ipynb/), and the
    local ``make lab``.
    """
    quoted = path.replace("/", "%2F")
    name = Path(path).name
    return (
        ":::{container} racelab-launch\n"
        f"Run this notebook: [launch it on Binder]({binder}?labpath={quoted}) (nothing to "
        f"install), {{download}}`download it </{DOWNLOADS}/{name}>` (.ipynb: it runs in a clone "
        f"of the repository), or on your machine: `make lab`, then open `{path}` "
        f"([localhost:8888]({LAB_URL.format(path=path)}) once JupyterLab is running).\n"
        ":::"
    )


def notes_box(notes: str) -> str:
    """Return an instructor notes page as a marked box (an admonition titled by its heading)."""
    first, _, body = notes.strip().partition("\n")
    title = first.lstrip("#").strip()
    body = handouts._demoted(body, 1).replace("](../", "](../docs/")  # links from notebooks/
    return f"::::{{admonition}} {title}\n:class: handout-notes\n{body.strip()}\n::::"


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
    docs = ["docs/setup", "docs/glossary", "docs/security", "docs/divergences"] + (
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
    if edition in handouts.FOLDED:
        handouts.fold_reveals(nb.cells)
    title, _, rest = nb.cells[0].source.partition("\n")  # the launch line goes under the title
    nb.cells[0].source = f"{title}\n\n{launch_line(binder, f'notebooks/{path.name}')}"
    if rest.strip():
        nb.cells.insert(1, handouts._markdown(rest.strip()))
    notes = REPO / "docs" / "notes" / f"{path.name[:2]}.md"
    if edition == "instructor" and notes.exists():  # right after the title, before the story
        nb.cells.insert(1, handouts._markdown(notes_box(notes.read_text()), notes=True))
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
    (src / DOWNLOADS).mkdir()
    for path in sorted(handouts.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nbformat.write(view_notebook(path, view, binder), src / "notebooks" / path.name)
        shutil.copy(path, src / DOWNLOADS / path.name)
    for doc in ("setup.md", "glossary.md", "security.md", "divergences.md", "cheatsheet.md"):
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
    (src / "_static" / "site.js").write_text(JS)
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
        "html_js_files": ["site.js"],
        "html_show_sourcelink": False,
        "html_copy_source": False,
        "exclude_patterns": ["_build", f"{DOWNLOADS}/**"],
        # the notes' own headings become rubrics inside their box (a box holds no section)
        "suppress_warnings": ["mystnb.unknown_mime_type", "myst.nested_header"],
    }


def build(view: str, out: Path, root: Path = SOURCE_ROOT) -> Path:
    """Build one view into out/<view>; return the folder. Raise SiteError on any Sphinx warning."""
    src = write_sources(view, root)
    settings = "".join(f"{key} = {value!r}\n" for key, value in config(view).items())
    (src / "conf.py").write_text(
        "# Generated by scripts/lesson_site.py: edit it there.\n" + settings + CONF_SETUP
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
