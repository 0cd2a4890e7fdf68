"""Self-checks for notebook 06's exercises (a loop budget, which scripts SCRIPT KILL stops, where
partial writes come from). The last two run the experiment on a throwaway redis-server when one
can start, else read the truth from the notebook's recording of its last real run, and say so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from exercises import Wrong, exercise
from exercises.judge import as_bool, as_names, whole
from helpers.backend.lab import Lab
from helpers.backend.scripts import lua_source
from helpers.luakit import (
    RecordingMissing,
    load_recording,
    run_in_background,
    scratch_server,
    server_available,
    set_memory_headroom,
    wait_for_busy,
)

KILL_CASES = ("loops, never wrote", "wrote one key, then loops")
WAYS = (
    "one script, 16 SETs",
    "pipeline of 4 scripts",
    "MULTI/EXEC of 4 scripts",
    "pipeline of 16 SETs",
    "MULTI/EXEC of 16 SETs",
)
_truth_cache: dict[str, tuple[Any, str]] = {}


@exercise(
    "06.loop_budget",
    answer="max_loop",
    wrong=[
        "def max_loop(iterations_per_ms, budget_ms):\n"
        "    return int(iterations_per_ms * budget_ms * 1000)",
        "def max_loop(iterations_per_ms, budget_ms):\n    return int(iterations_per_ms / budget_ms)",
        "def max_loop(iterations_per_ms, budget_ms):\n"
        "    return round(iterations_per_ms * budget_ms) + 1",
    ],
)
def loop_budget(lab: Lab, answer: Any) -> str:
    """Check that answer(rate, budget) is the largest loop that runs within budget_ms at rate."""
    for rate, budget in [(42_252.5, 10), (1_000, 10), (3.5, 2), (50_000, 0.5), (7, 0.1)]:
        given = answer(rate, budget)
        n = whole(given)
        if n is None:
            raise Wrong(
                f"max_loop({rate}, {budget}) returned {given!r}: a loop length is a whole number"
            )
        if n / rate > budget:
            raise Wrong(
                f"max_loop({rate}, {budget}) = {n}: that loop runs {n / rate:.7g} ms, over the budget"
            )
        if (n + 1) / rate <= budget:
            raise Wrong(f"max_loop({rate}, {budget}) = {n}: {n + 1} iterations still fit")
    return "iterations per ms x budget in ms, rounded down (a budget is a ceiling)"


def _spin_is_killable(mode: str) -> bool:
    """Run runaway_spin in mode on a throwaway server; return True if SCRIPT KILL stopped it."""
    with scratch_server("--busy-reply-threshold", "100") as server:
        runner, other = server.client(), server.client()
        spin = runner.register_script(lua_source("runaway_spin"))
        marker = "racelab:06:exercise:marker"
        running = run_in_background(lambda: spin(keys=[marker], args=[10**12, mode]))
        wait_for_busy(other, marker)
        try:
            return bool(other.script_kill())
        except redis.ResponseError as exc:
            if not str(exc).startswith("UNKILLABLE"):
                raise
            other.shutdown(nosave=True)
            return False
        finally:
            running.join()


def _truth(name: str, live: Callable[[], Any], recorded: Callable[[], Any]) -> tuple[Any, str]:
    """Return (truth, where it comes from): a live run if a server can start, else the recording."""
    if name not in _truth_cache:
        if server_available():
            _truth_cache[name] = (live(), "checked on a throwaway redis-server just now")
        else:
            try:
                _truth_cache[name] = (recorded(), "checked against the recorded real run")
            except RecordingMissing:
                return None, "no server and no recording"
    return _truth_cache[name]


@exercise(
    "06.killable",
    answer="answer_2",
    wrong=[
        'answer_2 = {"loops, never wrote": True, "wrote one key, then loops": True}',
        'answer_2 = {"loops, never wrote": False, "wrote one key, then loops": True}',
        'answer_2 = {"loops, never wrote": None, "wrote one key, then loops": None}',
        'answer_2 = {"loops, never wrote": "yes", "wrote one key, then loops": "no"}',
    ],
)
def killable(lab: Lab, answer: Any) -> str:
    """Compare the answer with what SCRIPT KILL does to a read-only and a writing runaway script."""
    if not isinstance(answer, dict) or set(answer) != set(KILL_CASES):
        raise Wrong(f"answer_2 must have exactly the keys {list(KILL_CASES)}")
    truth, source = _truth(
        "killable",
        lambda: {
            KILL_CASES[0]: _spin_is_killable("read"),
            KILL_CASES[1]: _spin_is_killable("write"),
        },
        lambda: {
            KILL_CASES[0]: load_recording("06.kill_read").data["killed"],
            KILL_CASES[1]: load_recording("06.unkillable").data["killed"],
        },
    )
    if truth is None:  # no server, no recording: the documented behaviour of SCRIPT KILL
        truth, source = {KILL_CASES[0]: True, KILL_CASES[1]: False}, "the documented answer"
    given = {case: as_bool(answer[case], repr(case)) for case in KILL_CASES}
    for case in KILL_CASES:
        if given[case] is not truth[case]:
            raise Wrong(
                f"{case!r}: not what SCRIPT KILL did ({source}); what could the server not "
                "undo if it stopped that script halfway?",
                detail=f"SCRIPT KILL {'stopped' if truth[case] else 'could not stop'} {case!r}"
                + ("" if truth[case] else ": it answered UNKILLABLE (SHUTDOWN NOSAVE ends it)"),
            )
    return f"only a script that has not called a write command can be killed ({source})"


def _written_by_way() -> dict[str, int]:
    """Send 16 values of 256 KB five ways into 2 MB of headroom; return keys written per way."""
    source, big = lua_source("runaway_fill"), "x" * 256_000
    keys = [f"racelab:06:exercise:{{fill}}:k{i:02d}" for i in range(16)]
    written = {}
    for way in WAYS:
        with scratch_server("--maxmemory-policy", "noeviction") as server:
            r = server.client()
            fill = r.register_script(source)
            r.script_load(source)
            set_memory_headroom(r, 2_000_000)
            transaction = way.startswith("MULTI")
            try:
                if way == "one script, 16 SETs":
                    fill(keys=keys, args=[big])
                elif "scripts" in way:
                    pipe = r.pipeline(transaction=transaction)
                    for start in range(0, 16, 4):
                        fill(keys=keys[start : start + 4], args=[big], client=pipe)
                    pipe.execute(raise_on_error=False)
                else:
                    pipe = r.pipeline(transaction=transaction)
                    for key in keys:
                        pipe.set(key, big)
                    pipe.execute(raise_on_error=False)
            except redis.ResponseError:
                pass  # EXECABORT: counted below as what was written (nothing)
            written[way] = r.exists(*keys)
    return written


@exercise(
    "06.partial_writes",
    answer="answer_3",
    wrong=[
        'answer_3 = {"pipeline of 16 SETs"}',
        'answer_3 = {"pipeline of 4 scripts", "pipeline of 16 SETs", "MULTI/EXEC of 16 SETs"}',
        'answer_3 = {"one script, 16 SETs"}',
    ],
)
def partial_writes(lab: Lab, answer: Any) -> str:
    """Compare the answer with the ways that left 0 < written < 16 keys under maxmemory."""
    chosen = as_names(answer, "answer_3", '{"one script, 16 SETs"}')
    if not chosen <= set(WAYS):
        raise Wrong(f"answer_3 must be a set of names from the ways table: {list(WAYS)}")
    written, source = _truth(
        "partial_writes", _written_by_way, lambda: load_recording("06.five_ways").data["written"]
    )
    if written is None:
        written, source = {w: 8 if w.startswith("pipeline") else 16 for w in WAYS}, "documented"
        written["MULTI/EXEC of 16 SETs"] = 0
    partial = {w for w, n in written.items() if 0 < n < 16}
    if chosen != partial:
        off = sorted(partial ^ chosen)
        raise Wrong(
            f"{len(off)} of the {len(WAYS)} ways are on the wrong side of your set: look for "
            "0 < written < 16 in the table",
            detail="; ".join(f"{way!r} wrote {written[way]} of 16" for way in off),
        )
    return f"pipelines check each command alone; a script or EXEC is refused whole ({source})"
