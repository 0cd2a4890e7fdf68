"""The reduction is sound on generated programs: reduced and exhaustive search answer alike.

The search core (helpers.instruments.dpor) runs here on an in-memory model (tests/dpor_model.py),
no Redis, so thousands of programs take seconds. For each one, every schedule the reduced
search answers for (each class run, expanded to its orders) must be a schedule the exhaustive
search runs, with the same outcome, and none may be missing or counted twice.
RACELAB_DPOR_EXAMPLES sets how many programs (make fuzz-explorer runs more).
"""

from __future__ import annotations

import os

from dpor_model import OPS, STOPS, Op, Program, answers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("RACELAB_DPOR_EXAMPLES", "500"))

ops = st.builds(
    Op,
    op=st.sampled_from(OPS),
    key=st.sampled_from("xyz"),
    arg=st.integers(1, 2),
    stop=st.sampled_from(STOPS),
)
programs = st.dictionaries(
    st.sampled_from("ABC"), st.lists(ops, min_size=1, max_size=4).map(tuple), min_size=2
)


def _check(actors: dict[str, Program]) -> None:
    every = answers(actors, reduce=False)
    reduced = answers(actors, reduce=True)
    missing = sorted("".join(s) for s in set(every) - set(reduced))
    extra = sorted("".join(s) for s in set(reduced) - set(every))
    assert not missing and not extra, f"missing {missing[:5]}, not possible {extra[:5]}"
    differ = [s for s in every if every[s] != reduced[s]]
    assert not differ, f"outcomes differ in {''.join(differ[0])}"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(programs)
def test_reduced_search_answers_for_exactly_the_schedules_of_exhaustive_search(
    actors: dict[str, Program],
) -> None:
    _check(dict(sorted(actors.items())))


def test_the_racing_actor_asleep_where_another_step_must_run_first() -> None:
    """Found by the generator: Flanagan-Godefroid reversal (the racing actor itself) lost BCAAB.

    B's GET x races C's SET x; reversing it adds B where B is asleep, while C must run first
    there. Source-set reversal adds an initial (C). The same shape lost 18 of 08's lease
    schedules (BBT...: the clock must run first).
    """
    _check(
        {
            "A": (Op("get", "x"), Op("get", "y")),
            "B": (Op("get", "x"), Op("set", "y")),
            "C": (Op("set", "x"),),
        }
    )
