"""How long a learner spends on each notebook, estimated by one stated method (`make timing`).

    python scripts/timing.py            # the table: required cells of every notebook
    python scripts/timing.py --all      # the same, reading the optional cells too (a full read)

The method, per cell that is not tagged ``optional``:

* prose: the words of a markdown cell at 200 words a minute (link targets are not words);
* code: 15 s per non-blank source line; 3 s per line in setup and cleanup cells (tag ``setup`` or
  ``cleanup``, or a cell that calls ``lab.cleanup()``): those are run, not studied;
* listings: 10 s per output line of a cell that calls ``show(``: code the learner reads;
* output: 3 s per other output line; a figure counts as 5 lines;
* predictions: 1 minute per cell tagged ``predict``, and per markdown "Predict" prompt that has
  no such cell after it (the older, uncommitted kind);
* run: 5 s per code cell, plus the cell's run time as measured by the last
  ``scripts/notebooks.py execute`` (``notebooks/runtimes/<notebook>.json``);
* exercises: the minutes each exercise declares, "(N minutes)" in the markdown cell just above
  its ``exercise``-tagged stub. The stub, its solution and that markdown cell are exercise time,
  not teaching time. An exercise must declare at least its floor (``exercise_floor``): its prompt
  (that markdown cell) read at 200 words a minute, its reference solution (the ``solution`` cell,
  without comments and the ``check(...)`` line) typed at 15 s a line, and 5 minutes to run the
  check and read the reply, rounded up to whole minutes; one that declares less does not fit.

Teaching is everything but exercises. ``tests/test_workshop.py`` asserts that each notebook's
stated "Teaching: N minutes. Exercises: M minutes." is at least this estimate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RUNTIMES = NOTEBOOKS / "runtimes"
WORDS_PER_MINUTE = 200
CODE_S, LIGHT_CODE_S, LISTING_S, OUTPUT_S = 15, 3, 10, 3
PREDICTION_S, CELL_RUN_S, FIGURE_LINES = 60, 5, 5
CHECK_S = 300  # an exercise: run the check and read the reply, at least 5 minutes
DECLARED = re.compile(r"\((\d+) minutes?\)")
PROMPT = re.compile(r"(\*\*Predict\b|^#+ Predict\b)", re.M)
TIME_LINE = re.compile(r"Teaching: (\d+) minutes\. Exercises: (\d+) minutes\.")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def cell_key(source: str) -> str:
    """Return the key a cell's measured run time is stored under: a hash of its source."""
    return hashlib.sha1(source.strip().encode()).hexdigest()[:12]


def runtimes_path(notebook: Path) -> Path:
    """Return where notebook's measured cell run times are kept."""
    return RUNTIMES / f"{notebook.stem}.json"


def load_runtimes(notebook: Path) -> dict[str, float]:
    """Return {cell key: seconds} from notebook's last measured execution ({} if none)."""
    path = runtimes_path(notebook)
    return json.loads(path.read_text())["cells"] if path.exists() else {}


@dataclass
class Estimate:
    """One notebook's estimate, in seconds per part, and what it states."""

    notebook: str
    prose: float = 0.0
    code: float = 0.0
    listings: float = 0.0
    output: float = 0.0
    predictions: float = 0.0
    run: float = 0.0
    exercises: float = 0.0
    prediction_cells: int = 0
    unmeasured: int = 0
    undeclared: list[int] = field(default_factory=list)
    short: list[tuple[int, int, int]] = field(default_factory=list)  # (cell, declared, floor)
    stated: tuple[int, int] | None = None

    @property
    def teaching(self) -> float:
        """Return the teaching seconds: every part but the exercises."""
        return self.prose + self.code + self.listings + self.output + self.predictions + self.run

    @property
    def total(self) -> float:
        """Return teaching plus exercise seconds."""
        return self.teaching + self.exercises


def tags(cell: dict) -> list[str]:
    """Return a cell's tags."""
    return list(cell.get("metadata", {}).get("tags", []))


def source(cell: dict) -> str:
    """Return a cell's source as one string."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def output_lines(cell: dict) -> int:
    """Return the number of lines a code cell's stored outputs show (a figure is 5)."""
    lines = 0
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            lines += len(source({"source": output.get("text", "")}).splitlines())
        elif output.get("output_type") == "error":
            lines += len(output.get("traceback", []))
        else:
            data = output.get("data", {})
            if any(k.startswith("image/") for k in data):
                lines += FIGURE_LINES
            elif "text/plain" in data:
                lines += len(source({"source": data["text/plain"]}).splitlines())
    return lines


def words(markdown: str) -> int:
    """Return the number of words a reader reads in markdown (link targets dropped)."""
    return len(LINK_TARGET.sub("]", markdown).split())


def estimate(notebook: Path, include_optional: bool = False) -> Estimate:
    """Return the estimate for notebook's required cells (every cell, with include_optional)."""
    cells = json.loads(notebook.read_text())["cells"]
    runtimes = load_runtimes(notebook)
    est = Estimate(notebook.stem)
    exercise_cells = exercise_parts(cells)
    for i, cell in enumerate(cells):
        text = source(cell)
        if cell["cell_type"] == "markdown" and (m := TIME_LINE.search(text)):
            est.stated = (int(m.group(1)), int(m.group(2)))
        if "optional" in tags(cell) and not include_optional:
            continue
        if i in exercise_cells:
            if "exercise" in tags(cell):
                declared = DECLARED.search(source(cells[i - 1])) if i else None
                if declared:
                    est.exercises += 60 * int(declared.group(1))
                    floor = exercise_floor(cells, i)
                    if int(declared.group(1)) < floor:
                        est.short.append((i, int(declared.group(1)), floor))
                else:
                    est.undeclared.append(i)
            continue
        if cell["cell_type"] == "markdown":
            est.prose += 60 * words(text) / WORDS_PER_MINUTE
            if PROMPT.search(text) and not predict_follows(cells, i):
                est.predictions += PREDICTION_S
            continue
        if cell["cell_type"] != "code":
            continue
        light = {"setup", "cleanup"} & set(tags(cell)) or "lab.cleanup()" in text
        lines = [line for line in text.splitlines() if line.strip()]
        est.code += len(lines) * (LIGHT_CODE_S if light else CODE_S)
        shown = output_lines(cell)
        if "show(" in text:
            est.listings += shown * LISTING_S
        else:
            est.output += shown * OUTPUT_S
        if "predict" in tags(cell):
            est.predictions += PREDICTION_S
            est.prediction_cells += 1
        est.run += CELL_RUN_S
        key = cell_key(text)
        if key in runtimes:
            est.run += runtimes[key]
        else:
            est.unmeasured += 1
    return est


def exercise_floor(cells: list[dict], i: int) -> int:
    """Return the fewest whole minutes the exercise whose stub is cell i may declare.

    Its prompt (the markdown cell above) read, its solution typed, the check run and read.
    """
    prompt = source(cells[i - 1]) if i and cells[i - 1]["cell_type"] == "markdown" else ""
    solution = next((c for c in cells[i + 1 :] if "solution" in tags(c)), None)
    typed = [
        line
        for line in source(solution or {}).splitlines()
        if line.strip() and not line.strip().startswith("#") and "check(" not in line
    ]
    seconds = 60 * words(prompt) / WORDS_PER_MINUTE + CODE_S * len(typed) + CHECK_S
    return int(-(-seconds // 60))


def exercise_parts(cells: list[dict]) -> set[int]:
    """Return the indexes of exercise cells: each stub, its solution and the markdown above it."""
    parts: set[int] = set()
    for i, cell in enumerate(cells):
        if {"exercise", "solution"} & set(tags(cell)):
            parts.add(i)
            if "exercise" in tags(cell) and i and cells[i - 1]["cell_type"] == "markdown":
                parts.add(i - 1)
    return parts


def predict_follows(cells: list[dict], i: int) -> bool:
    """Return True if one of the two cells after cell i is a committed prediction."""
    return any("predict" in tags(c) for c in cells[i + 1 : i + 3])


def notebooks() -> list[Path]:
    """Return the lesson notebooks in order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def minutes(seconds: float) -> str:
    """Return seconds as whole minutes, rounded up, for the table."""
    return str(int(-(-seconds // 60)))


def table(estimates: list[Estimate]) -> str:
    """Return the timing table in markdown: minutes per part, the estimate and the stated time."""
    head = "| notebook | prose | code | listings | output | predict | run | teaching | exercises | total | stated | fits |"
    rows = [head, "|" + "---|" * 12]
    for e in estimates:
        stated = f"{e.stated[0]}+{e.stated[1]}" if e.stated else "?"
        fits = "yes" if fits_stated(e) else "NO"
        parts = (e.prose, e.code, e.listings, e.output, e.predictions, e.run)
        rows.append(
            f"| {e.notebook[:2]} | "
            + " | ".join(minutes(p) for p in parts)
            + f" | {minutes(e.teaching)} | {minutes(e.exercises)} | {minutes(e.total)}"
            + f" | {stated} | {fits} |"
        )
    return "\n".join(rows)


def fits_stated(e: Estimate) -> bool:
    """Return True if the estimate fits the notebook's stated teaching and exercise minutes."""
    if e.stated is None or e.undeclared or e.short:
        return False
    return e.teaching <= 60 * e.stated[0] and e.exercises <= 60 * e.stated[1]


def main() -> int:
    """Print the table; exit 1 if a notebook's required cells do not fit its stated time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="read the optional cells too")
    args = parser.parse_args()
    estimates = [estimate(nb, include_optional=args.all) for nb in notebooks()]
    print(table(estimates))
    core = [e for e in estimates if e.notebook[:2] in ("00", "01", "02", "03")]
    print(
        f"\ncore (00-03): {minutes(sum(e.total for e in core))} minutes estimated, "
        f"{sum(sum(e.stated or (0, 0)) for e in core)} stated (before breaks and wrap-up)"
    )
    for e in estimates:
        if e.undeclared:
            print(f"{e.notebook}: exercise cells {e.undeclared} declare no '(N minutes)'")
        for cell, declared, floor in e.short:
            print(
                f"{e.notebook}: the exercise at cell {cell} declares {declared} minutes, under "
                f"its floor of {floor} (prompt read, solution typed, check run and read)"
            )
        if e.unmeasured:
            print(f"{e.notebook}: {e.unmeasured} code cells have no measured run time")
    return 0 if args.all or all(fits_stated(e) for e in estimates) else 1


if __name__ == "__main__":
    sys.exit(main())
