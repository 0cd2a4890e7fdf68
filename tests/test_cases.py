"""cases.py (notebook 08): the installed libraries' verdicts on embedded and real, the pins they
were checked against, and what the module may import.

The verdicts are the notebook's, recomputed: mutual exclusion holds and the token-checked release
refuses in every explored lock, the blind DEL control breaks, a lease that runs out lets two
holders overlap, the limiters hold their limit, and what no step controls (pottery's thread pool,
portalocker's subscription) is refused, never given a verdict.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import cases
from exercises import WRONG, check
from helpers import Lab

ROOT = Path(__file__).resolve().parent.parent
EXPLORED = ["redis-py Lock", "python-redis-lock", "redlock-py"]
THIRD_PARTY = {"redis", "greenlet", "limits", "portalocker", "pottery", "redis_lock"}
THIRD_PARTY |= {"redis_rate_limit", "redlock"}


def test_cases_imports_only_the_libraries_redis_and_the_learner_surface() -> None:
    tree = ast.parse((ROOT / "cases.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    outside = {m for m in found if m.split(".")[0] not in sys.stdlib_module_names}
    assert outside <= THIRD_PARTY | {"helpers"}, sorted(outside - THIRD_PARTY)
    assert "helpers" in outside, "the case file asks a Race, from the learner's surface"


def test_every_pinned_library_has_a_case_and_is_installed_at_its_pin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [Requirement(r) for r in project["optional-dependencies"]["cases"]]
    named = {c.distribution for c in (*cases.LOCKS.values(), *cases.LIMITERS.values())}
    assert {r.name for r in pins} == (named - {"redis"}) | {"portalocker"}
    for req in pins:
        (spec,) = req.specifier
        assert spec.operator == "==" and version(req.name) == spec.version, req


def test_the_lock_keys_are_the_runs_own(lab: Lab) -> None:
    name, log, api = cases.names(lab)
    keys = [k.format(name=name) for c in cases.LOCKS.values() for k in c.keys]
    keys += [c.key.format(name=api) for c in cases.LIMITERS.values()]
    assert all(lab.ns.owns(k) for k in [*keys, log])


@pytest.mark.parametrize("library", EXPLORED)
def test_mutual_exclusion_and_the_token_checked_release_hold(lab: Lab, library: str) -> None:
    exclusion = cases.case_file(lab, library, "exclusion")
    release = cases.case_file(lab, library, "release")
    assert (exclusion.bad, release.bad) == (0, 0)
    assert exclusion.total > 1 and release.total > 1


@pytest.mark.parametrize("library", EXPLORED)
def test_a_lease_that_runs_out_lets_two_holders_overlap(lab: Lab, library: str) -> None:
    lease = cases.case_file(lab, library, "lease")
    assert 0 < lease.bad < lease.total
    assert lease.example.endswith("BBAABB")  # A in, T, B takes and goes in, A writes on


def test_the_blind_del_control_breaks_the_release_story(lab: Lab) -> None:
    blind = cases.case_file(lab, "redis-py Lock", "release", release=cases.release_blind)
    assert blind.bad > 0 and blind.example == "ATBA"


def test_the_limiters_hold_their_limit(lab: Lab) -> None:
    for library in cases.LIMITERS:
        every = cases.verdict(cases.limiter_race(lab, library))
        assert every.explored and every.bad == 0 and every.total == 6, (library, every)


def test_what_no_step_controls_is_refused_not_judged(lab: Lab) -> None:
    pottery = cases.case_file(lab, "pottery Redlock", "exclusion")
    portalocker = cases.verdict(cases.portalocker_race(lab))
    assert pottery.reason == cases.THREADS and pottery.cell() == "refused"
    assert portalocker.reason.startswith("refused: it subscribes")


def test_a_verdict_says_its_counts_or_why_it_has_none() -> None:
    assert str(cases.Verdict(2, 9, "ABAB")) == "2 of 9 schedules break it, e.g. ABAB"
    assert cases.Verdict(0, 6).cell() == "0/6"
    assert cases.Verdict(reason="not explored: x").cell() == "no verdict"


def test_the_exercise_refuses_a_library_no_schedule_can_step(lab: Lab) -> None:
    verdict = check(lab, "08.own_library", (cases.take_pottery, cases.release_pottery))
    assert verdict.status == WRONG and "cannot step this library" in verdict.message
    assert check(lab, "08.own_library", (cases.take_redlock_py, cases.release_redlock_py))
