"""Self-checks for notebook 01's exercises (GET then INCR).

Each check computes the truth on the learner's backend, on keys of its own under the lab's
prefix that it deletes afterwards: the schedules are run, the learner's limiter is driven
through a clock it controls, the explorer and lockstep threads.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from exercises import NotAnswered, Wrong, exercise
from exercises.judge import aborted_exec, as_count, raise_if_fault, short, story
from helpers.backend.lab import Lab
from helpers.instruments.invariant import Invariant
from helpers.instruments.load import run_clients
from helpers.instruments.scenario import Exploration, Race
from helpers.instruments.schedule import run_schedule
from races import ratelimit as rl

SCHEDULES = ("ABBA", "AAB")
LIMIT, WINDOW = 5, 60  # one slot left: the counter holds LIMIT - 1


def _naive_outcome(lab: Lab, schedule: str) -> dict[str, Any]:
    """Return {"admitted", "counter", "steps"} after two naive limiters ran schedule (one slot)."""
    key = lab.key("ex01:schedules")
    naive = partial(rl.naive_allow, key=key, limit=LIMIT, window=WINDOW)
    observer = lab.client()
    try:
        trace = run_schedule(
            lab,
            {"A": naive, "B": naive},
            schedule,
            setup=lambda c: c.set(key, LIMIT - 1, ex=WINDOW),
            watch=[key],
        )
        return {
            "admitted": list(trace.results.values()).count(True),
            "counter": int(observer.get(key) or 0),
            "steps": "; ".join(f"{r.client} {short(r.command)} -> {r.reply}" for r in trace.rows),
        }
    finally:
        observer.delete(key)
        lab.release(observer)


HINTS = {
    ("ABBA", "admitted"): "in ABBA both GETs run before either INCR: what did each client read?",
    ("ABBA", "counter"): "in ABBA count the INCRs that ran",
    ("AAB", "admitted"): "in AAB A's whole request runs first: what does B's GET read?",
    ("AAB", "counter"): "in AAB count the INCRs that ran: what does a rejected client send?",
}


@exercise(
    "01.schedules",
    answer="my_prediction",
    wrong=[
        'my_prediction = {"ABBA": {"admitted": 1, "counter": 5}, '
        '"AAB": {"admitted": 1, "counter": 5}}',
        'my_prediction = {"ABBA": {"admitted": 2, "counter": 6}, '
        '"AAB": {"admitted": 2, "counter": 6}}',
        'my_prediction = {"ABBA": {"admitted": 2, "counter": 6}, '
        '"AAB": {"admitted": 1, "counter": 6}}',
        'my_prediction = {"ABBA": 2, "AAB": 1}',
        'my_prediction = {"ABBA": {"admitted": "2", "counter": "6"}, '
        '"AAB": {"admitted": "1", "counter": "5"}}',
        'my_prediction = {"ABBA": {"admitted": True, "counter": 6}, '
        '"AAB": {"admitted": 1, "counter": 5}}',
    ],
    hint="replace each ... in `my_prediction` with a number (requests admitted, final counter)",
)
def schedules(lab: Lab, answer: Any) -> str:
    """Return why the predictions are right; raise Wrong naming the first part that is off."""
    if not isinstance(answer, dict) or set(answer) != set(SCHEDULES):
        raise Wrong('my_prediction must be {"ABBA": {...}, "AAB": {...}}, one entry per schedule')
    given = {}
    for schedule in SCHEDULES:
        entry = answer[schedule]
        if not isinstance(entry, dict) or set(entry) != {"admitted", "counter"}:
            raise Wrong(f'{schedule}: give {{"admitted": n, "counter": n}}, got {entry!r}')
        given[schedule] = {p: as_count(entry[p], f"{schedule} {p}") for p in entry}
    truth = {schedule: _naive_outcome(lab, schedule) for schedule in SCHEDULES}
    for schedule in SCHEDULES:
        for part in ("admitted", "counter"):
            if given[schedule][part] != truth[schedule][part]:
                raise Wrong(
                    f"{schedule}: {part} {given[schedule][part]!r} is off; {HINTS[schedule, part]}",
                    detail=f"{schedule} ran {truth[schedule]['steps']}",
                )
    abba, aab = truth["ABBA"], truth["AAB"]
    return (
        f"ABBA admits {abba['admitted']} (counter {abba['counter']}): B's INCR landing first "
        f"changes nothing, A decided on the {LIMIT - 1} it read; AAB admits {aab['admitted']} "
        f"(counter {aab['counter']}): B reads {LIMIT}, is rejected and never INCRs, so one step "
        f"is all it has"
    )


# --- exercise 2: a sliding-window log without the race ---------------------------------------

SLIDE_LIMIT, SLIDE_WINDOW_MS = 3, 1000
SLIDE_TIMES_MS = (0, 400, 800, 900, 1000, 1100, 1401)


def sliding_model(times_ms: tuple[int, ...], limit: int, window_ms: int) -> list[bool]:
    """Return what a correct sliding-window log admits at each time (the reference, in Python)."""
    admitted: list[int] = []
    verdicts = []
    for now in times_ms:
        admitted = [t for t in admitted if t > now - window_ms]  # ZREMRANGEBYSCORE -inf now-window
        ok = len(admitted) < limit
        if ok:
            admitted.append(now)
        verdicts.append(ok)
    return verdicts


def _race(lab: Lab, limiter: Callable[..., Any], log: str, slots: int) -> Exploration:
    """Return every order of two clients of limiter (limit 10) when slots are left in the log."""
    invariant = Invariant(
        f"{slots} slot(s) left",
        f"with {slots} slot(s) left, {min(slots, 2)} of 2 requests are admitted",
        lambda client, results: [results.get(n) for n in "AB"].count(True) == min(slots, 2),
    )
    found = Race(
        lab,
        {"A": limiter, "B": limiter},
        setup=lambda c: c.zadd(log, {f"earlier-{i}": 4_000 for i in range(10 - slots)}),
        watch=[log],
        invariant=invariant,
    ).explore()
    for outcome in found.outcomes:
        raise_if_fault(outcome.results.values())
    return found


@exercise(
    "01.sliding",
    answer="my_sliding_allow",
    wrong=[
        # the stub's four commands as they are: slides, but two clients can both take the last slot
        "def my_sliding_allow(client, key, limit, window_ms, now_ms):\n"
        "    client.zremrangebyscore(key, '-inf', now_ms - window_ms)\n"
        "    if client.zcard(key) >= limit:\n"
        "        return False\n"
        "    client.zadd(key, {uuid.uuid4().hex: now_ms})\n"
        "    client.pexpire(key, window_ms)\n"
        "    return True\n",
        # atomic, but a fixed window: never slides
        "def my_sliding_allow(client, key, limit, window_ms, now_ms):\n"
        "    return rl.lua_allow(client, key, limit, max(1, window_ms // 1000))\n",
        # atomic, but forgets to drop the requests that left the window
        "SRC = '''\n"
        "if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end\n"
        "redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])\n"
        "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
        "return 1'''\n"
        "def my_sliding_allow(client, key, limit, window_ms, now_ms):\n"
        "    return client.eval(SRC, 1, key, limit, window_ms, now_ms, uuid.uuid4().hex) == 1\n",
    ],
    hint="write the body of `my_sliding_allow` (one Lua script, sent with client.eval)",
)
def sliding(lab: Lab, answer: Any) -> str:
    """Return why the sliding limiter is right; raise Wrong if it does not slide or overshoots."""
    if not callable(answer):
        raise NotAnswered(
            "my_sliding_allow must be a function (client, key, limit, window_ms, now_ms)"
        )
    fn: Callable[..., Any] = answer
    log = lab.key("ex01:sliding-log")
    observer = lab.client()
    try:
        observer.delete(log)
        expected = sliding_model(SLIDE_TIMES_MS, SLIDE_LIMIT, SLIDE_WINDOW_MS)
        got = [fn(observer, log, SLIDE_LIMIT, SLIDE_WINDOW_MS, t) for t in SLIDE_TIMES_MS]
        if got != expected:
            raise Wrong(
                f"limit {SLIDE_LIMIT} per {SLIDE_WINDOW_MS} ms, requests at "
                f"{list(SLIDE_TIMES_MS)} ms: admitted {got}, a sliding window admits "
                f"{expected}"
            )
        if observer.pttl(log) <= 0:
            raise Wrong("the log has no TTL: an idle customer's log would stay forever")
        limiter = partial(fn, key=log, limit=10, window_ms=60_000, now_ms=5_000)
        found = _race(lab, limiter, log, slots=1)
        if found.bad_count:
            bad = found.trace(found.bad[0])
            raise Wrong(
                f"one slot left, two clients: {found.summary()}: in {bad.schedule} A got "
                f"{bad.result_text.get('A')} and B {bad.result_text.get('B')}; make the check "
                "and the ZADD one step",
                detail=story(bad),
            )
        both = _race(lab, limiter, log, slots=2)
        if both.bad_count:
            bad = both.trace(both.bad[0])
            why = aborted_exec(bad) or f"{story(bad)}, and a request was refused"
            raise Wrong(
                f"two slots left, two clients: {both.summary()}; {why}",
                detail="a refused request with a free slot is a lost customer: when the "
                "transaction is aborted, read again and retry (or use one script)",
            )
        observer.delete(log)
        crowd = run_clients(lab, limiter, clients=8, iterations=10, mode="lockstep")
        if crowd.count(True) != 10:
            raise Wrong(f"8 clients in lockstep, limit 10: {crowd.count(True)} admitted")
        return (
            f"it slides ({sum(got)} of {len(got)} admitted at {list(SLIDE_TIMES_MS)} ms), "
            f"{found.summary()}, {both.summary()}, and {crowd.count(True)} of {crowd.calls} "
            f"concurrent requests were admitted (limit 10)"
        )
    finally:
        observer.delete(log)
        lab.release(observer)
