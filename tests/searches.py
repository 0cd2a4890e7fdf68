"""Compare a search that shares prefixes (and walks the states met before) with the plain one.

tests/test_prefix_sharing.py and tests/test_states_met_before.py both ask: does explore() on the
embedded backend, which answers replayed round trips from a record and walks replays through a
graph of states, give what share_prefixes=False gives, every replay live?
"""

from __future__ import annotations

from typing import Any

from helpers import Lab, explore


def ran(found: Any) -> list[tuple[str, bool, str, Any]]:
    """Return each schedule run, in order, with its verdict, results and footprints."""
    return [(o.schedule, o.ok, o.result_text, o.steps) for o in found.outcomes]


def shared_and_live(lab: Lab, actors: dict[str, Any], invariant: Any, **options: Any) -> Any:
    """Explore as is and with share_prefixes=False; assert they ran alike; return both."""
    shared = explore(lab, actors, invariant, keep_traces=False, **options)
    live = explore(lab, actors, invariant, keep_traces=False, share_prefixes=False, **options)
    assert ran(shared) == ran(live)
    assert (shared.total, shared.bad_count) == (live.total, live.bad_count)
    assert live.sharing_off == "share_prefixes=False"
    assert live.shared_steps == 0 and live.walked == 0
    return shared, live
