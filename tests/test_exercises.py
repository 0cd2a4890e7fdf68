"""Every exercise's self-check rejects the stub and each wrong answer, and accepts the solution.

For each cell tagged ``exercise`` (the learner's stub), the test runs the notebook's setup cell
(tag ``setup``) on the embedded backend, then the stub, each wrong answer registered with the
check (``exercises/exNN.py``), and the solution cell (tag ``solution``) that follows
the stub, and asks ``check`` for its verdict on each.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from exercises import CORRECT, FAULT, UNANSWERED, WRONG, ServerDidNotAnswer, check, load_all

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECK_CALL = re.compile(r"""check\(\s*lab\s*,\s*["']([\w.-]+)["']""")


def cells(path: Path) -> list[dict]:
    """Return the cells of a notebook."""
    return json.loads(path.read_text())["cells"]


def tags(cell: dict) -> list[str]:
    """Return a cell's tags."""
    return cell.get("metadata", {}).get("tags", [])


def source(cell: dict) -> str:
    """Return a cell's source as one string."""
    return "".join(cell["source"])


def exercise_cells(path: Path) -> list[tuple[str, dict, dict | None]]:
    """Return (name, stub cell, the solution cell after it or None) for each exercise in path."""
    found = []
    all_cells = cells(path)
    for i, cell in enumerate(all_cells):
        if "exercise" not in tags(cell):
            continue
        match = CHECK_CALL.search(source(cell))
        name = match.group(1) if match else f"<no check(lab, ...) call in cell {i}>"
        solution = next(
            (c for c in all_cells[i + 1 :] if "solution" in tags(c) and name in source(c)), None
        )
        found.append((name, cell, solution))
    return found


EXERCISE_CELLS = [
    (path, name, stub, solution)
    for path in NOTEBOOKS
    for name, stub, solution in exercise_cells(path)
]


def run_cell(code: str, namespace: dict) -> None:
    """Execute a cell's code in namespace, its printed output swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "<cell>", "exec"), namespace)  # noqa: S102 - the notebook's own cell


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the notebook cells on the embedded backend, from notebooks/ as JupyterLab does."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("RACELAB_BACKEND", "embedded")
    monkeypatch.chdir(ROOT / "notebooks")


def test_every_registered_exercise_is_in_a_notebook_once() -> None:
    names = [name for _, name, _, _ in EXERCISE_CELLS]
    registry = load_all()
    assert sorted(names) == sorted(registry), "each registered check needs one `exercise` cell"
    assert len(set(names)) == len(names), "an exercise name is used by two stub cells"
    with_exercises = {path.name for path, _, _, _ in EXERCISE_CELLS}
    assert with_exercises == {path.name for path in NOTEBOOKS}, "every notebook has an exercise"


@pytest.mark.parametrize(
    "path,name,stub,solution",
    EXERCISE_CELLS,
    ids=[f"{p.stem[:2]}-{n}" for p, n, _, _ in EXERCISE_CELLS],
)
def test_check_rejects_stub_and_wrong_answers_and_accepts_the_solution(
    embedded: None, path: Path, name: str, stub: dict, solution: dict | None
) -> None:
    registry = load_all()
    assert name in registry, f"{path.name}: no check registered for {name!r}"
    exercise = registry[name]
    assert solution is not None, f"{path.name}: no cell tagged `solution` after the {name} stub"
    assert solution.get("metadata", {}).get("jupyter", {}).get("source_hidden"), (
        f"{path.name}: the {name} solution must be collapsed (metadata jupyter.source_hidden)"
    )
    assert exercise.wrong, f"{name}: register at least one wrong answer"
    setup = [source(c) for c in cells(path) if "setup" in tags(c)]
    assert len(setup) == 1, f"{path.name}: tag exactly one cell `setup` (found {len(setup)})"

    namespace: dict = {"__name__": "__main__"}
    run_cell(setup[0], namespace)
    lab = namespace["lab"]
    try:
        stub_ns = dict(namespace)
        run_cell(source(stub), stub_ns)
        verdict = check(lab, name, stub_ns[exercise.answer])
        assert verdict.status == UNANSWERED, f"the stub should be unanswered: {verdict!r}"

        for snippet in exercise.wrong:
            wrong_ns = dict(namespace)
            run_cell(snippet, wrong_ns)
            verdict = check(lab, name, wrong_ns[exercise.answer])
            assert verdict.status == WRONG, f"wrong answer {snippet!r} was {verdict!r}"
            assert verdict.message, "a wrong answer must be told what is wrong"

        solution_ns = dict(namespace)
        run_cell(source(solution), solution_ns)  # the cell's own assert runs here
        verdict = check(lab, name, solution_ns[exercise.answer])
        assert verdict.status == CORRECT, repr(verdict)
    finally:
        lab.cleanup()
        lab.close()


def test_a_solution_never_runs_before_its_check() -> None:
    for path in NOTEBOOKS:
        seen_stubs: set[str] = set()
        for cell in cells(path):
            text = source(cell)
            if "exercise" in tags(cell):
                seen_stubs.update(CHECK_CALL.findall(text))
            if "solution" in tags(cell):
                names = CHECK_CALL.findall(text)
                assert names, f"{path.name}: a solution cell must end with assert check(lab, ...)"
                assert set(names) <= seen_stubs, f"{path.name}: solution {names} precedes its stub"


def test_verdicts_print_one_line_and_are_truthy_only_when_correct() -> None:
    from exercises import Verdict

    assert not Verdict("x", UNANSWERED, "fill in")
    assert not Verdict("x", WRONG, "no")
    assert Verdict("x", CORRECT, "yes")
    fault = Verdict("x", FAULT, "the server did not answer (ConnectionError: refused)")
    assert repr(fault) == "x: ✗ no verdict: the server did not answer (ConnectionError: refused)"
    with pytest.raises(ServerDidNotAnswer, match="x: the server did not answer"):
        assert fault
    assert repr(Verdict("x", UNANSWERED, "fill in `a`")) == "x: ✗ not answered yet: fill in `a`"
    assert "\n" not in repr(Verdict("x", WRONG, "off by one"))


def test_placeholders_are_found_anywhere_in_an_answer_and_none_is_an_answer() -> None:
    from exercises import has_placeholder

    assert has_placeholder(...)
    assert has_placeholder({"ABBA": {"admitted": ...}}) and has_placeholder([1, (2, ...)])
    assert not has_placeholder({"ABBA": {"admitted": 0}}) and not has_placeholder(set())
    assert not has_placeholder(None) and not has_placeholder({"ABBA": {"admitted": None}})
    assert not has_placeholder((None, None))


def test_no_stub_uses_none_as_its_placeholder() -> None:
    for path, name, stub, _ in EXERCISE_CELLS:
        code = source(stub)
        assert not re.search(r"\bNone\b", code), (
            f"{path.name} {name}: the stub's placeholder is `...`; None is an answer"
        )


def test_a_hostile_answer_is_a_wrong_answer_not_an_exception() -> None:
    load_all()
    cyclic: list = []
    cyclic.append(cyclic)

    class Explodes:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("boom")

        __hash__ = object.__hash__

    for name in ("00.aabb", "01.schedules"):
        for answer in (cyclic, Explodes(), {"ABBA": Explodes()}, "x" * 10_000):
            verdict = check(None, name, answer)  # type: ignore[arg-type]
            assert verdict.status == WRONG and verdict.message, (name, verdict)
            assert "\n" not in repr(verdict)


def test_check_names_an_unknown_exercise() -> None:
    with pytest.raises(KeyError, match="no exercise called"):
        check(None, "no.such.exercise", 1)  # type: ignore[arg-type]


def test_a_learners_answer_is_checked_on_an_embedded_lab_of_the_same_notebook() -> None:
    # A learner's ACL user on a shared server may not EVAL their own Lua, and answers often are
    # exactly that: check() runs them on an embedded lab instead, one per notebook and kernel.
    import dataclasses

    from exercises import checking_lab
    from helpers import connect
    from helpers.backend.namespace import Namespace

    lab = connect("02_blind_del", backend="embedded")
    try:
        learner = dataclasses.replace(lab, ns=Namespace("02_blind_del", "0123abcd", learner="ann"))
        used = checking_lab(learner)
        assert used is not learner and used.kind == "embedded" and not used.ns.learner
        assert used.ns.notebook == "02_blind_del" and checking_lab(learner) is used
        assert checking_lab(lab) is lab  # self-study: the lab itself
        assert "learner: ann, on a shared server" in learner.describe()
    finally:
        lab.close()
