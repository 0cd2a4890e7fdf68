"""Build the workshop handouts (`make handouts`): a student and an instructor edition, HTML and PDF.

- **student**: every notebook in order with its stored outputs; cells tagged ``solution`` or
  ``instructor`` are removed, and no test marker is left (``nbval-*`` tags dropped, any
  ``# NBVAL_...`` comment line removed). A prediction's reveal cell (the cell that calls
  ``reveal(...)``) has its outputs folded into one ``<details>``: the demo's outcome and the right
  choice show on a click, so the answer does not stand right under the question (issue 38).
- **instructor**: the workshop page (docs/workshop.md) first, then every notebook with its
  solutions shown (marked "Solution") and its instructor notes (docs/notes/NN.md) after its title;
  reveals stay open.

In both, each run of cells tagged ``optional`` opens with an "Optional" label and is drawn with a
dashed border; a cell tagged ``predict`` shows its question and choices (its stored output, or the
registered prediction's when it has none); the glossary (docs/glossary.md) closes the edition, and
the notebooks' links to its entries (``../docs/glossary.md#round-trip``) jump there.

- **cheatsheet**: one page to take home: which fix for which race, what each costs per operation
  (round trips and commands, counted by ``helpers.count_work`` while the sheet is built: no
  figure is typed), the Redis commands those fixes run, and the fencing rule.

Each edition is one HTML file (nbconvert's lab template, plots embedded as data URIs, a table of
contents from the headings, code that wraps instead of being clipped) and a PDF printed from it
by headless chromium (Debian's ``chromium`` package; RACELAB_CHROMIUM names another binary).
Without chromium the build stops, saying how to install it.

Every handout is printed on one paper size, A4 unless ``--paper Letter`` asks for US Letter.

    python scripts/handouts.py [--out handouts] [--html-only] [--cheatsheet-only] [--paper A4|Letter]
"""

from __future__ import annotations

import argparse
import copy
import html
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import TagRemovePreprocessor
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
EDITIONS = ("student", "instructor")
REMOVED = {"student": {"solution", "instructor"}, "instructor": set()}
NBVAL_LINE = re.compile(r"^\s*#\s*NBVAL_\w+.*\n?", re.MULTILINE)
GLOSSARY = REPO / "docs" / "glossary.md"
GLOSSARY_LINK = re.compile(r"\]\(\.\./docs/glossary\.md#([a-z0-9-]+)\)")
PREDICT_CALL = re.compile(r"""^\s*predict\(\s*["']([^"']+)["']""")
REVEAL_CALL = re.compile(r"""^\s*reveal\(\s*["']([^"']+)["']""", re.M)
REVEAL_SUMMARY = "Show what happened, and the answer"
FOLDED = {"student"}  # the editions whose reveals are folded
OPTIONAL_TEXT = "not needed for the exercises; skip it when time is short."
OPTIONAL_LABEL = f'<div class="optional-label"><b>Optional</b>: {OPTIONAL_TEXT}</div>'
PRINT_TIMEOUT_S = 300
# Every handout is printed on one paper size: A4 unless --paper Letter asks otherwise. Each page
# says so in CSS (@page), which chromium's --print-to-pdf follows instead of its locale's default.
PAPERS = {"A4": "A4", "Letter": "letter"}  # --paper value -> CSS @page size
DEFAULT_PAPER = "A4"

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
  .celltag_optional { border-left: 4px dashed #0072B2; padding-left: 4px; }
  .optional-label { font-family: sans-serif; color: #000; background: #E8F1F8; padding: 2px 6px; }
  .racelab-predict { border: 1px solid #0072B2; padding: 2px 8px; }
  details.racelab-reveal { border: 1px solid #0072B2; padding: 2px 8px; }
  details.racelab-reveal > summary { cursor: pointer; font-family: sans-serif; color: #0072B2; }
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


def page_style(paper: str = DEFAULT_PAPER) -> str:
    """Return the <style> that sets the printed paper size (A4 or Letter) and its margins."""
    if paper not in PAPERS:
        raise HandoutError(f"unknown paper size {paper!r}: choose one of {', '.join(PAPERS)}")
    return f"\n<style>\n  @page {{ size: {PAPERS[paper]}; margin: 12mm; }}\n</style>\n"


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
    """Drop test markers (nbval tags, NBVAL comment lines) and empty outputs; show hidden sources.

    An empty output is what a finished progress bar leaves (helpers/instruments/progress.py).
    """
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [
                o for o in cell.outputs if o.get("output_type") != "display_data" or o.get("data")
            ]
        tags = [t for t in cell.metadata.get("tags", []) if not t.lower().startswith("nbval")]
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
        if cell.cell_type == "code":
            cell.source = NBVAL_LINE.sub("", cell.source)
        cell.metadata.pop("jupyter", None)  # source_hidden: a handout shows what it keeps
        cell.metadata.pop("collapsed", None)


def mark_optional(cells: list[Any], label: str = OPTIONAL_LABEL) -> list[Any]:
    """Return cells with a markdown label cell before each run of cells tagged optional."""
    marked: list[Any] = []
    for cell in cells:
        optional = "optional" in cell.metadata.get("tags", [])
        before = marked[-1].metadata.get("tags", []) if marked else []
        if optional and "optional" not in before:
            marked.append(_markdown(label))
            marked[-1].metadata["tags"] = ["optional-label"]
        marked.append(cell)
    return marked


def show_predictions(cells: list[Any]) -> None:
    """Give each predict cell without a stored question the registered one (text and HTML)."""
    for cell in cells:
        found = PREDICT_CALL.match(cell.source) if cell.cell_type == "code" else None
        if "predict" not in cell.metadata.get("tags", []) or found is None:
            continue
        if any("text/html" in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        from exercises.predict import predict

        asked = predict(found[1]).prediction
        data = {"text/plain": asked.text(), "text/html": asked.html()}
        cell.outputs = [nbformat.v4.new_output("display_data", data=data)]


def _output_html(output: Any) -> str:
    """Return one stored output as HTML: its own HTML, its image, or its text in a <pre>."""
    if output.get("output_type") == "stream":
        return f"<pre>{html.escape(output.get('text', ''))}</pre>"
    data = output.get("data", {})
    if "text/html" in data:
        return "".join(data["text/html"])
    for kind in ("image/png", "image/jpeg"):
        if kind in data:
            alt = html.escape(str(output.get("metadata", {}).get("alt", "figure")))
            return f'<img alt="{alt}" src="data:{kind};base64,{"".join(data[kind]).strip()}">'
    if output.get("output_type") == "error":
        return (
            f"<pre>{html.escape(output.get('ename', '') + ': ' + output.get('evalue', ''))}</pre>"
        )
    return f"<pre>{html.escape(''.join(data.get('text/plain', '')))}</pre>"


def fold_reveals(cells: list[Any]) -> int:
    """Fold the outputs of every reveal cell into one closed <details>; return how many folded.

    A reveal cell runs the demo and calls ``reveal("NN.name", value)``: its outputs are the
    outcome and the right choice, so they show only when the learner opens them.
    """
    folded = 0
    for cell in cells:
        if cell.cell_type != "code" or not REVEAL_CALL.search(cell.source) or not cell.outputs:
            continue
        inner = "".join(_output_html(o) for o in cell.outputs)
        page = (
            f'<details class="racelab-reveal"><summary>{REVEAL_SUMMARY}</summary>{inner}</details>'
        )
        text = f"{REVEAL_SUMMARY} (folded: open it in the HTML edition)"
        cell.outputs = [
            nbformat.v4.new_output("display_data", data={"text/html": page, "text/plain": text})
        ]
        folded += 1
    return folded


def glossary_cells() -> list[Any]:
    """Return the glossary as a handout section: each entry with the anchor links jump to."""
    text = GLOSSARY.read_text()
    text = re.sub(
        r"^## (.+)$",
        lambda m: f'<a id="glossary-{_anchor(m[1])}"></a>\n\n### {m[1]}',
        text,
        flags=re.M,
    )
    text = re.sub(r"\]\(#([a-z0-9-]+)\)", r"](#glossary-\1)", text)
    return [_markdown(text)]


def _anchor(heading: str) -> str:
    """Return a heading's anchor as GitHub and MyST make it (round-trip)."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def _local_glossary_links(cells: list[Any]) -> None:
    """Point the notebooks' links to glossary entries at the edition's own glossary section."""
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = GLOSSARY_LINK.sub(r"](#glossary-\1)", cell.source)


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
        cells = mark_optional(list(nb.cells))
        show_predictions(cells)
        if edition in FOLDED:
            fold_reveals(cells)
        notes = REPO / "docs" / "notes" / f"{path.name[:2]}.md"
        if edition == "instructor" and notes.exists():
            text = _demoted(notes.read_text(), 2)
            cells.insert(1, _markdown(text, notes=True))
        book.cells.extend(cells)
        if not book.metadata:
            book.metadata = copy.deepcopy(nb.metadata)
    if GLOSSARY.exists():
        book.cells.extend(glossary_cells())
    _local_glossary_links(book.cells)
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


# --- the cheat sheet ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Fix:
    """One row of the decision table: a strategy as a function of a client, and when to pick it."""

    name: str
    call: Callable[[Any], Any]
    advice: str


@dataclass(frozen=True)
class RaceSheet:
    """One race of the decision table: what one operation is, its naive form and its fixes."""

    title: str
    notebook: str
    operation: str
    fixes: tuple[Fix, ...]


# What each command the fixes run does, in one line. The list of commands comes from count_work
# (what the server ran); a command without a line here stops the build.
COMMANDS = {
    "get": "GET key: the value, or nil",
    "set": "SET key value [NX] [PX ms] [IFEQ old]: write; NX only if absent, IFEQ only if equal",
    "incr": "INCR key: add 1 atomically, return the new value",
    "expire": "EXPIRE key s [NX]: set a time to live (NX: only if it has none)",
    "del": "DEL key: delete, whoever wrote it",
    "delex": "DELEX key IFEQ v | IFDEQ digest: delete only if the value (or its XXH3) matches",
    "watch": "WATCH key: make the next EXEC fail if key changes first",
    "unwatch": "UNWATCH: forget the watched keys",
    "multi": "MULTI: queue the next commands",
    "exec": "EXEC: run the queued commands as one step (nil if a watched key changed)",
    "evalsha": "EVALSHA sha n keys args: run a loaded Lua script, atomically",
    "fcall": "FCALL fn n keys args: call a Function of a loaded library, atomically",
    "hget": "HGET key field: one field of a hash",
    "hgetall": "HGETALL key: every field of a hash",
    "hset": "HSET key field value: write fields",
    "hsetnx": "HSETNX key field value: write a field only if absent",
    "hincrby": "HINCRBY key field n: add n to a field atomically",
    "hexists": "HEXISTS key field: 1 if the field exists",
    "hlen": "HLEN key: the number of fields",
    "incrby": "INCRBY key n: add n atomically, return the new value",
    "pttl": "PTTL key: ms left to live (-1: none, -2: no key)",
    "type": "TYPE key: string, hash, ... (scripts check before they write)",
}

CHEAT_STYLE = """
<style>
  @page { margin: 9mm; }
  body { font-family: "DejaVu Sans", sans-serif; font-size: 7.6pt; line-height: 1.25; margin: 0; }
  h1 { font-size: 13pt; margin: 0 0 2px; }
  h2 { font-size: 9.5pt; margin: 7px 0 2px; }
  p { margin: 2px 0; }
  table { border-collapse: collapse; width: 100%; }
  th, td { border: 1px solid #c8ccd0; padding: 1px 4px; text-align: left; vertical-align: top; }
  th { background: #eef1f4; }
  td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
  tr.naive td { color: #8a1c1c; }
  code { font-family: "DejaVu Sans Mono", monospace; font-size: 7.2pt; }
  .commands { columns: 2; column-gap: 14px; margin: 0; padding-left: 12px; }
  .rule { border: 2px solid #1a7f37; padding: 3px 6px; margin-top: 6px; }
</style>
"""


def cheat_races() -> tuple[RaceSheet, ...]:
    """Return the decision table's races: the notebooks' own strategies, one operation each."""
    from races import dictionary, locks
    from races import ratelimit as rl

    def limiter(fn: Callable[..., Any]) -> Callable[[Any], Any]:
        return partial(fn, key="cheat:rate", limit=10**9, window=60)

    def turn(release: Callable[..., Any]) -> Callable[[Any], Any]:
        return lambda c: (
            locks.acquire(c, "cheat:lock", "me", 10_000) and release(c, "cheat:lock", "me")
        )

    def registration(fn: Callable[..., Any]) -> Callable[[Any], Any]:
        keys, numbers = dictionary.DictKeys("{d}:ids", "{d}:index", "{d}:meta"), itertools.count()
        return lambda c: fn(c, f"text{next(numbers)}", keys)

    return (
        RaceSheet("Rate limiter: GET, then INCR", "01", "one admitted request", (
            Fix("GET + INCR (naive)", limiter(rl.naive_allow), "overshoots under concurrency"),
            Fix("INCR first", limiter(rl.incr_first_allow), "the default: atomic, fewest commands"),
            Fix("MULTI: INCR + EXPIRE NX", limiter(rl.multi_allow), "INCR first, TTL set in the same step"),
            Fix("Lua script", limiter(rl.lua_allow), "rules beyond a counter (windows, costs)"),
            Fix("WATCH / MULTI / EXEC", limiter(rl.watch_allow), "no scripts allowed; retries under contention"),
            Fix("SET ... IFEQ (8.4)", limiter(rl.ifeq_allow), "compare-and-set; retries under contention"),
        )),
        RaceSheet("Lock release: blind DEL", "02", "one turn: SET NX PX, then release", (
            Fix("DEL (naive)", turn(locks.release_blind), "deletes the next holder's lock"),
            Fix("GET + DEL (naive)", turn(locks.release_check_then_del), "still races between GET and DEL"),
            Fix("DELEX IFEQ (8.4)", turn(locks.release_delex), "the default on Redis >= 8.4"),
            Fix("DELEX IFDEQ (8.4)", turn(locks.release_digest), "same, sending the token's XXH3 only"),
            Fix("Lua script", turn(locks.release_lua), "any Redis; the classic check-and-delete"),
            Fix("WATCH / MULTI / EXEC", turn(locks.release_watch), "no scripts allowed"),
        )),
        RaceSheet("Dictionary: HGETALL, then HSETNX", "03", "registering one new string", (
            Fix("HGETALL + HSETNX (naive)", registration(dictionary.hgetall_hsetnx_get_or_put), "two ids for one string"),
            Fix("Function (FCALL)", registration(dictionary.function_get_or_put), "the default: named, persisted, replicated"),
            Fix("Lua script", registration(dictionary.lua_get_or_put), "same work; reload after NOSCRIPT"),
            Fix("WATCH / MULTI / EXEC", registration(dictionary.watch_get_or_put), "no scripts allowed; retries"),
        )),
    )  # fmt: skip


def cheat_work(races: tuple[RaceSheet, ...] | None = None) -> dict[str, dict[str, Any]]:
    """Return {race title: {fix name: Work}}, each counted by helpers.count_work on the embedded backend."""
    from helpers import connect, count_work

    lab = connect("cheatsheet", backend="embedded")
    try:
        return {
            race.title: dict(count_work(lab, {fix.name: fix.call for fix in race.fixes}).items())
            for race in races or cheat_races()
        }
    finally:
        lab.close()


def _count(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def cheatsheet_html(
    races: tuple[RaceSheet, ...], work: dict[str, dict[str, Any]], paper: str = DEFAULT_PAPER
) -> str:
    """Return the one-page cheat sheet: decision tables, the commands they run, the fencing rule."""
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>redis-race-lab: cheat sheet",
             "</title>", page_style(paper), CHEAT_STYLE, "</head><body>",
             "<h1>Redis race conditions: which fix, what it costs</h1>",
             "<p>Round trips and commands are per operation, counted exactly by "
             "<code>helpers.count_work</code> when this sheet was built (commands run include those "
             "inside a script, a Function or MULTI/EXEC). Red rows are the broken originals.</p>"]  # fmt: skip
    used: set[str] = set()
    for race in races:
        parts.append(
            f"<h2>{e(race.title)} (notebook {race.notebook}; per {e(race.operation)})</h2>"
        )
        parts.append(
            "<table><tr><th>strategy</th><th>round trips</th><th>commands sent</th>"
            "<th>commands run</th><th>which commands</th><th>when</th></tr>"
        )
        for fix in race.fixes:
            w = work[race.title][fix.name]
            ran = {name: n for name, n in w.executed_by_command.items() if n}
            used |= set(ran)
            listed = ", ".join(f"{name.upper()}×{_count(n)}" for name, n in sorted(ran.items()))
            naive = ' class="naive"' if "naive" in fix.name else ""
            parts.append(
                f'<tr{naive} data-race="{e(race.title)}" data-fix="{e(fix.name)}">'
                f"<td>{e(fix.name)}</td>"
                f'<td class="n" data-field="round_trips">{_count(w.round_trips)}</td>'
                f'<td class="n" data-field="sent">{_count(w.sent)}</td>'
                f'<td class="n" data-field="executed">{_count(w.executed)}</td>'
                f"<td><code>{e(listed)}</code></td><td>{e(fix.advice)}</td></tr>"
            )
        parts.append("</table>")
    missing = sorted(used - set(COMMANDS))
    if missing:
        raise HandoutError(f"cheat sheet: describe these commands in COMMANDS: {missing}")
    parts.append("<h2>The Redis commands these fixes run</h2><ul class='commands'>")
    parts += [f"<li><code>{e(COMMANDS[name])}</code></li>" for name in sorted(used)]
    parts.append("</ul>")
    parts.append(
        "<div class='rule'><b>The fencing rule (notebook 07).</b> A safe release protects the next "
        "holder's <i>lock</i>, not the resource: a holder that paused past its lease still writes. "
        "Give every grant a number that only grows (a fencing token), send it with every write, "
        "and let the <b>resource</b> refuse a token older than the newest it has seen, in one "
        "atomic step (<code>lua/fenced_write.lua</code>). The token must never repeat: an "
        "<code>INCR</code> on a Redis primary can repeat after a failover, so take tokens from a "
        "linearizable store (etcd, ZooKeeper, a database sequence).</div>"
        "<p>Also: a script blocks every client while it runs; <code>SCRIPT KILL</code> / "
        "<code>FUNCTION KILL</code> stop it only before it calls a write command, even one that "
        "changes nothing (notebook 06). Pipelines "
        "are not atomic: only one script, Function or MULTI/EXEC is.</p>"
    )
    parts.append("</body></html>")
    return "".join(parts)


def build_cheatsheet(out: Path, chromium: str = "", paper: str = DEFAULT_PAPER) -> list[Path]:
    """Write cheatsheet.html (and cheatsheet.pdf when chromium is given) into out; return them."""
    races = cheat_races()
    out.mkdir(parents=True, exist_ok=True)
    page = out / "cheatsheet.html"
    page.write_text(cheatsheet_html(races, cheat_work(races), paper))
    if not chromium:
        return [page]
    print_pdf(chromium, page, out / "cheatsheet.pdf")
    return [page, out / "cheatsheet.pdf"]


def build(
    out: Path,
    pdf: bool = True,
    notebooks: list[Path] | None = None,
    editions: bool = True,
    paper: str = DEFAULT_PAPER,
) -> list[Path]:
    """Build the cheat sheet and (editions=True) both editions into out; return the files written.

    Every page is printed on paper (A4 or Letter).
    """
    page_style(paper)  # an unknown size stops the build before anything is written
    chromium = find_chromium() if pdf else ""
    notebooks = notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    out.mkdir(parents=True, exist_ok=True)
    written = build_cheatsheet(out, chromium, paper)
    if not editions:
        return written
    for edition in EDITIONS:
        title = f"redis-race-lab: {edition} edition"
        page = out / f"{edition}.html"
        style = page_style(paper) + STYLE + (INSTRUCTOR_STYLE if edition == "instructor" else "")
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
    parser.add_argument("--cheatsheet-only", action="store_true", help="only the one-page sheet")
    parser.add_argument(
        "--paper", choices=sorted(PAPERS), default=DEFAULT_PAPER, help="paper size of every handout"
    )
    args = parser.parse_args(argv)
    try:
        written = build(
            args.out, pdf=not args.html_only, editions=not args.cheatsheet_only, paper=args.paper
        )
    except HandoutError as exc:
        print(f"handouts: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"handouts: wrote {path} ({path.stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
