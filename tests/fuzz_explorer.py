"""Differential fuzzing of the explorer: the reduced search (DPOR) must equal every schedule.

Hypothesis draws small races (``races()``): 2-3 actors of 1-5 round trips each over 1-3 keys
(GET, SET with NX/PX/IFEQ, DEL, DELEX, INCR, EXPIRE, HSETNX, HGETALL, RPUSH, BLPOP with a
timeout, two short scripts, MULTI/EXEC and WATCH/GET/MULTI/EXEC), steps that branch on an earlier
reply or stop on it, sleeps and reads of the time between round trips (the run's logical clock,
which a sleep moves), a setup, sometimes a clock actor (``Race.lease_expires``, or
``Race.time_passes``, which moves the actors' clock) and a fault (crash or pause), and an
invariant of the final state and the results. Each race is Python
source (``Program.source``): the actors are ordinary functions of a redis-py client, compiled
from that text, so a disagreement prints exactly what ran, runnable as it stands.

``disagreements(race, options)`` runs ``race.explore(**options)`` (reduced) and
``race.explore(reduce=False, **options)`` and lists every difference: the totals, the breaking
schedules, and each schedule's verdict and result text.

``python tests/fuzz_explorer.py --races 2000 --seed 7 [--workers N]`` (``make fuzz-explorer``) checks
that many races on the embedded backend and exits 1 with the shrunk race on a disagreement.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from helpers.backend.lab import Lab, connect
from helpers.errors import RaceLabError
from helpers.instruments.explore import NoVerdict, count_interleavings
from helpers.instruments.progress import progress
from helpers.instruments.scenario import Race

VALUES = ("1", "2", "x")
TTL_MS = 100_000  # leases outlive a run; only a clock step or a pause ends them
CAP = 300  # at most about this many schedules per race (the exhaustive search runs them all)
# Two short scripts the actors call through redis-py's register_script (EVALSHA).
SCRIPTS = {
    # KEYS[1]: the key; ARGV[1]: the value it must hold. Returns 1 deleted, 0 not.
    "cas_del": 'if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0',
    # KEYS[1]: a counter. Returns the new count, or -1 when it already holds 2 or more.
    "incr_below": 'local n = tonumber(redis.call("GET", KEYS[1]) or "0") or 0 '
    'if n >= 2 then return -1 end return redis.call("INCR", KEYS[1])',
}
# name: (call, capability it needs or ""); {c} client, {k} key, {v} value, {w} second value.
CALLS = {
    "get": ("{c}.get({k})", ""),
    "set": ("{c}.set({k}, {v})", ""),
    "set_nx": ("{c}.set({k}, {v}, nx=True)", ""),
    "set_px": (f"{{c}}.set({{k}}, {{v}}, px={TTL_MS})", ""),
    "set_nx_px": (f"{{c}}.set({{k}}, {{v}}, nx=True, px={TTL_MS})", ""),
    "set_ifeq": ("{c}.set({k}, {v}, ifeq={w})", "set_ifeq"),
    "delete": ("{c}.delete({k})", ""),
    "delex": ("{c}.delex({k}, ifeq={w})", "delex"),
    "incr": ("{c}.incr({k})", ""),
    "expire": (f"{{c}}.expire({{k}}, {TTL_MS // 1000})", ""),
    "hsetnx": ('{c}.hsetnx({k}, "f", {v})', ""),
    "hgetall": ("{c}.hgetall({k})", ""),
    "rpush": ("{c}.rpush({k}, {v})", ""),
    "blpop": ("{c}.blpop([{k}], timeout=1)", ""),
    "cas_del": ("cas_del(keys=[{k}], args=[{w}], client={c})", "lua"),
    "incr_below": ("incr_below(keys=[{k}], client={c})", "lua"),
}
QUEUED = ("get", "set", "set_px", "incr", "delete", "rpush", "hsetnx")  # inside MULTI
SETUP = ("set", "set_px", "rpush", "hsetnx")
CONDITIONS = ("{r} is None", "not {r}", "{r} == {v}")


@dataclass(frozen=True)
class Call:
    """One command: its CALLS name, which key, and the values it writes or compares."""

    name: str
    key: int
    v: str = "1"
    w: str = "1"

    def text(self, client: str = "client", aio: bool = False) -> str:
        """Return the call as Python, on client (awaited, with aio: a redis.asyncio client)."""
        text = CALLS[self.name][0].format(
            c=client, k=f"k{self.key}", v=repr(self.v), w=repr(self.w)
        )
        return f"await {text}" if aio else text


@dataclass(frozen=True)
class Step:
    """One statement of an actor: a call, a transaction, a branch on a reply, or a stop."""

    kind: str  # "call", "multi", "watch", "if", "stop", "pool", "sleep", "now" (reads the time)
    calls: tuple[Call, ...] = ()  # call: 1; multi: 1-2 queued; watch: the queued one; if, pool: 2
    ref: int = 0  # if/stop: which earlier reply (0 = the first)
    condition: str = CONDITIONS[0]
    v: str = "1"

    @property
    def round_trips(self) -> int:
        """Return how many round trips the step makes (a stop makes none)."""
        trips = {"call": 1, "multi": 1, "watch": 3, "if": 1, "pool": 2}
        return trips.get(self.kind, 0)

    @property
    def replies(self) -> int:
        """Return how many reply variables the step assigns."""
        return {"watch": 2, "stop": 0, "sleep": 0}.get(self.kind, 1)


@dataclass(frozen=True)
class Program:
    """A generated race: actors' steps, setup, clock, faults and invariant; printable as Python."""

    keys: int
    actors: tuple[tuple[Step, ...], ...]
    setup: tuple[Call, ...] = ()
    clock: tuple[int, str] | None = None  # (key, value or "") of a lease_expires actor "T"
    passes: bool = False  # "T" is instead time_passes(1, [the clock's key])
    faults: tuple[str, ...] = ()
    invariant: tuple[Any, ...] = ("digest", 2)
    names: tuple[str, ...] = field(default=("A", "B", "C"), repr=False)

    @property
    def options(self) -> dict[str, Any]:
        """Return the explore() options of this race (its faults)."""
        return {"faults": self.faults} if self.faults else {}

    @property
    def source(self) -> str:
        """Return the race as a runnable Python module (build(lab) returns the Race)."""
        return render(self)

    @property
    def async_source(self) -> str:
        """Return the same race with async def actors of a redis.asyncio client."""
        return render(self, aio=True)

    def race(self, lab: Lab, aio: bool = False) -> Race:
        """Return the Race on lab, compiled from source (async_source, with aio)."""
        namespace: dict[str, Any] = {"__name__": "fuzzed_race"}
        source = self.async_source if aio else self.source
        exec(compile(source, "<fuzzed race>", "exec"), namespace)  # noqa: S102 - our own text
        race: Race = namespace["build"](lab)
        return race


# ---------------------------------------------------------------------------- rendering


def _actor_lines(name: str, steps: Sequence[Step], aio: bool = False) -> list[str]:
    """Return the lines of one actor function (inside build, so indented by 4); with aio, an
    async def of a redis.asyncio client, line for line the same."""
    lines, made = [f"    {'async ' if aio else ''}def {name}(client):"], list[str]()
    wait, with_ = ("await ", "async with") if aio else ("", "with")
    for step in steps:
        if step.kind == "stop":
            ref = made[min(step.ref, len(made) - 1)]
            cond = step.condition.format(r=ref, v=repr(step.v))
            lines += [f"        if {cond}:", f"            return ('stopped', {', '.join(made)},)"]
            continue
        if step.kind == "sleep":  # the actor's clock moves; the others see it from its next step
            lines.append(f"        {wait}{'asyncio' if aio else 'time'}.sleep(1)")
            continue
        reply = f"r{len(made) + 1}"
        if step.kind == "now":
            lines.append(f"        {reply} = int(time.time()) % 100")
        elif step.kind == "call":
            lines.append(f"        {reply} = {step.calls[0].text(aio=aio)}")
        elif step.kind == "if":
            ref = made[min(step.ref, len(made) - 1)]
            cond = step.condition.format(r=ref, v=repr(step.v))
            lines += [
                f"        if {cond}:",
                f"            {reply} = {step.calls[0].text(aio=aio)}",
                "        else:",
                f"            {reply} = {step.calls[1].text(aio=aio)}",
            ]
        elif step.kind == "pool":  # two calls at once, from a thread pool's two workers
            if aio:
                raise ValueError("a thread pool step has no async twin")
            first, second = (f"lambda: {call.text()}" for call in step.calls)
            lines += [
                "        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:",
                f"            futures = [pool.submit({first}), pool.submit({second})]",
                f"            {reply} = [f.result() for f in futures]",
            ]
        elif step.kind == "multi":
            lines.append(f"        {with_} client.pipeline() as p:")
            lines += [f"            {call.text('p')}" for call in step.calls]
            lines.append(f"            {reply} = {wait}p.execute()")
        else:  # watch: WATCH, GET, then MULTI/queued/EXEC, aborted when the key changed
            seen, done = reply, f"r{len(made) + 2}"
            key = f"k{step.calls[0].key}"
            lines += [
                f"        {with_} client.pipeline() as p:",
                "            try:",
                f"                {wait}p.watch({key})",
                f"                {seen} = {wait}p.get({key})",
                "                p.multi()",
                f"                {step.calls[0].text('p')}",
                f"                {done} = {wait}p.execute()",
                "            except redis.WatchError:",
                f"                {done} = 'aborted'",
            ]
            made.append(seen)
            reply = done
        made.append(reply)
    lines.append(f"        return ({', '.join(made)},)")
    return lines


INVARIANTS = {
    "absent": ("k{0} is missing", "client.exists(k{0}) == 0"),
    "not_value": (
        "k{0} does not hold {1!r}",
        'client.type(k{0}) != "string" or client.get(k{0}) != {1!r}',
    ),
    "first_none": (
        "{0}'s first reply was None, or {0} did not finish",
        "not isinstance(results.get({0!r}), tuple) or results[{0!r}][0] is None",
    ),
    "digest": (
        "the final state and results do not hash to 0 mod {0}",
        "zlib.crc32(repr((state(client), sorted((n, repr(r)) for n, r in "
        "results.items()))).encode()) % {0} != 0",
    ),
}


def _pools(program: Program) -> bool:
    """Return True if an actor of program has a thread pool step."""
    return any(step.kind == "pool" for steps in program.actors for step in steps)


def render(program: Program, aio: bool = False) -> str:
    """Return program as a Python module: build(lab) -> Race, and a __main__ that compares; with
    aio, its actors are async def of a redis.asyncio client (the scripts are AsyncScripts)."""
    keys = [f"k{i}" for i in range(program.keys)]
    used = {c.name for steps in program.actors for s in steps for c in s.calls}
    kinds = {s.kind for steps in program.actors for s in steps}
    kind, *args = program.invariant
    says, check = INVARIANTS[kind]
    lines = [
        '"""A race the explorer fuzzer generated: reduced and exhaustive search must agree."""',
        "",
        *(["import asyncio"] if aio and "sleep" in kinds else []),
        *(["import concurrent.futures"] if _pools(program) else []),
        *(["import time"] if kinds & {"sleep", "now"} else []),
        "import zlib",
        "",
        "import redis",
        *(["import redis.asyncio"] if aio else []),
        "",
        "from helpers import Race, connect",
        "",
        "",
        "def build(lab):",
        '    """Return the race on lab."""',
        f"    {', '.join(keys)} = {', '.join(f'lab.key({k!r})' for k in keys)}",
    ]
    scripts_of = "redis.asyncio.Redis()" if aio else "lab.client()"  # never connects: adopted
    for script in sorted(used & set(SCRIPTS)):
        lines.append(f"    {script} = {scripts_of}.register_script({SCRIPTS[script]!r})")
    lines.append("")
    for name, steps in zip(program.names, program.actors):
        lines += [*_actor_lines(name, steps, aio), ""]
    lines.append("    def setup(client):")
    lines += [f"        {call.text()}" for call in program.setup] or ["        pass"]
    lines += [
        "",
        "    def state(client):",
        "        found = []",
        f"        for key in [{', '.join(keys)}]:",
        "            kind = client.type(key)",
        '            if kind == "hash":',
        "                value = sorted(client.hgetall(key).items())",
        '            elif kind == "list":',
        "                value = client.lrange(key, 0, -1)",
        "            else:",
        "                value = client.get(key)",
        "            found.append((kind, value, client.pttl(key) > 0))",
        "        return found",
        "",
        "    def invariant(client, results):",
        f'        """{says.format(*args)}."""',
        f"        return {check.format(*args)}",
        "",
    ]
    actors = [f"{n!r}: {n}" for n in program.names[: len(program.actors)]]
    if program.clock is not None:
        key, value = program.clock
        extra = f", value={value!r}" if value else ""
        if program.passes:
            actors.append(f"'T': Race.time_passes(1, [k{key}])")
        else:
            actors.append(f"'T': Race.lease_expires(k{key}{extra})")
    lines += [
        f"    actors = {{{', '.join(actors)}}}",
        f"    return Race(lab, actors, setup, watch=[{', '.join(keys)}], invariant=invariant)",
        "",
        "",
        f"OPTIONS = {program.options!r}",
        "",
        'if __name__ == "__main__":',
        '    lab = connect("fuzz", backend="embedded")',
        "    try:",
        "        race = build(lab)",
        "        fewer, every = race.explore(**OPTIONS), race.explore(reduce=False, **OPTIONS)",
        "        print('reduced:   ', fewer.summary())",
        "        print('exhaustive:', every.summary())",
        "        print('breaking in one only:', sorted(set(fewer.bad) ^ set(every.bad)))",
        "    finally:",
        "        lab.cleanup()",
        "        lab.close()",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- generating


def estimate(counts: Sequence[int], clock: bool, faults: Sequence[str]) -> int:
    """Return about how many schedules actors of these round trips have (a fault: one more step)."""
    steps = [*counts, *([1] if clock else [])]
    total = count_interleavings(*steps)
    if faults:
        total += sum(
            count_interleavings(*steps[:i], c + 1, *steps[i + 1 :]) for i, c in enumerate(counts)
        )
    return total


def _units(steps: Sequence[Step]) -> list[int]:
    """Return an actor's round trips as the schedule count sees them: its own in a row, then a 1
    for each call a pool step makes at once (a sub-actor: it interleaves with everyone)."""
    pools = sum(step.kind == "pool" for step in steps)
    own = sum(step.round_trips for step in steps) - 2 * pools
    return [n for n in (own, *[1] * (2 * pools)) if n]


def _fitted(
    actors: list[tuple[Step, ...]], clock: bool, faults: Sequence[str], cap: int
) -> tuple[tuple[Step, ...], ...]:
    """Return the actors, each pool step made two calls in a row while the schedules would
    number over about cap (a pool's calls interleave with every other step)."""
    while estimate([u for steps in actors for u in _units(steps)], clock, faults) > cap:
        pooled = [i for i, steps in enumerate(actors) if any(s.kind == "pool" for s in steps)]
        if not pooled:
            break
        i = pooled[-1]
        j = max(k for k, s in enumerate(actors[i]) if s.kind == "pool")
        pool = actors[i][j]
        one, two = (Step("call", (call,)) for call in pool.calls)
        actors[i] = (*actors[i][:j], one, two, *actors[i][j + 1 :])
    return tuple(actors)


def _calls(keys: int, caps: frozenset[str], names: Sequence[str]) -> st.SearchStrategy[Call]:
    usable = [n for n in names if not CALLS[n][1] or CALLS[n][1] in caps]
    return st.builds(
        Call,
        st.sampled_from(usable),
        st.integers(0, keys - 1),
        st.sampled_from(VALUES),
        st.sampled_from(VALUES),
    )


@st.composite
def _actor(
    draw: Any, round_trips: int, keys: int, caps: frozenset[str], threads: bool = False
) -> tuple[Step, ...]:
    """Draw one actor's steps: exactly round_trips round trips, branches and stops between;
    with threads, some pairs of calls made at once by a thread pool (the actor's sub-actors)."""
    steps: list[Step] = []
    left, replies = round_trips, 0
    call = _calls(keys, caps, list(CALLS))
    while left:
        kinds = ["call", "call", "multi"] + (["if", "if", "stop"] if replies else [])
        kinds += ["watch"] if left >= 3 else []
        kinds += ["pool"] if threads and left >= 2 else []
        kinds += ["sleep", "now"] if not steps or steps[-1].kind not in ("sleep", "now") else []
        kind = draw(st.sampled_from(kinds))
        ref = draw(st.integers(0, max(replies - 1, 0)))
        condition, v = draw(st.sampled_from(CONDITIONS)), draw(st.sampled_from(VALUES))
        if kind in ("call", "if", "pool"):
            calls = tuple(draw(call) for _ in range(1 if kind == "call" else 2))
        elif kind == "multi":
            calls = tuple(draw(st.lists(_calls(keys, caps, QUEUED), min_size=1, max_size=2)))
        elif kind == "watch":
            calls = (draw(_calls(keys, caps, QUEUED)),)
        else:  # stop, sleep, now
            calls = ()
        step = Step(kind, calls, ref, condition, v)
        steps.append(step)
        left -= step.round_trips
        replies += step.replies
    if draw(st.integers(0, 3)) == 0:  # the time, read after the last reply
        steps.append(Step("now"))
    return tuple(steps)


@st.composite
def races(
    draw: Any,
    caps: frozenset[str],
    cap: int = CAP,
    fault_kinds: Sequence[tuple[str, ...]] = ((), (), ("crash",), ("pause",)),
    clocks: Sequence[bool] = (False, True),
    threads: bool = False,
) -> Program:
    """Draw a small race whose schedules number at most about cap (faults, clocks: the choices;
    threads: actors may have thread pool steps)."""
    keys = draw(st.integers(1, 3))
    clock = draw(st.sampled_from(clocks))
    faults = draw(st.sampled_from(fault_kinds))
    n = draw(st.integers(2, 3))
    counts: list[int] = []
    for i in range(n):
        rest = [1] * (n - i - 1)
        most = max(
            [s for s in range(1, 6) if estimate([*counts, s, *rest], clock, faults) <= cap],
            default=1,
        )
        counts.append(draw(st.integers(1, most)))
    actors = _fitted([draw(_actor(c, keys, caps, threads)) for c in counts], clock, faults, cap)
    setup = tuple(draw(st.lists(_calls(keys, caps, SETUP), max_size=2, unique_by=lambda c: c.key)))
    clock_part, passes = None, False
    if clock:
        clock_part = (draw(st.integers(0, keys - 1)), draw(st.sampled_from(("", *VALUES))))
        passes = draw(st.booleans())
        if passes:
            clock_part = (clock_part[0], "")
    key = draw(st.integers(0, keys - 1))
    invariant = draw(
        st.sampled_from(
            [
                ("digest", 2),
                ("digest", 3),
                ("absent", key),
                ("not_value", key, draw(st.sampled_from(VALUES))),
                ("first_none", draw(st.sampled_from("AB"))),
            ]
        )
    )
    return Program(keys, actors, setup, clock_part, passes, faults, invariant)


def capabilities(lab: Lab) -> frozenset[str]:
    """Return the capability names the generator may use on lab (lua, set_ifeq, delex)."""
    return frozenset(n for n in ("lua", "set_ifeq", "delex") if getattr(lab.caps, n))


# ---------------------------------------------------------------------------- comparing


def _explored(race: Race, options: dict[str, Any]) -> tuple[Any, str]:
    """Return (exploration, '') or (None, the error it raised)."""
    # Garbage is collected between searches, not during one: a redis-py Pipeline left watching by
    # an actor a replay stopped sends UNWATCH from __del__, and a collection that runs inside a
    # fakeredis command (its server lock held) then waits on that lock forever.
    gc.disable()
    try:
        return race.explore(**options), ""
    except NoVerdict as exc:  # every actor raised in every schedule: still compared
        return exc.exploration, ""
    except Exception as exc:  # noqa: BLE001 - an error in one search only is a disagreement
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        gc.enable()
        gc.collect()


def _verdict(ok: bool, text: str) -> str:
    return f"{'ok' if ok else 'BROKEN'}  {text}"


def disagreements(
    race: Race,
    options: dict[str, Any],
    examples: int = 5,
    workers: int = 1,
    share: bool = True,
) -> list[str]:
    """Return how the reduced search differs from the exhaustive one ([]: they agree).

    workers=N runs the exhaustive search in N processes; the reduced one runs in one, so
    that the split search is checked against the plain one too. One of the two shares replayed
    prefixes (``helpers.instruments.sharing``) and the other replays every schedule live, the
    reduced one (share=True, the default) or the exhaustive one (``check`` takes turns by the
    race's source), so that either way of sharing is checked against the plain search.
    """
    reduced_shares = share
    fewer, fewer_error = _explored(race, {**options, "share_prefixes": reduced_shares})
    every, every_error = _explored(
        race,
        {**options, "reduce": False, "workers": workers, "share_prefixes": not reduced_shares},
    )
    if fewer_error or every_error:
        if fewer_error.split(":")[0] == every_error.split(":")[0]:
            return []  # both refused the race alike
        return [f"reduced raised {fewer_error or 'nothing'}; exhaustive {every_error or 'nothing'}"]
    found: list[str] = []
    if (fewer.total, fewer.bad_count) != (every.total, every.bad_count):
        found.append("the counts differ")
    mine = {o.schedule: (o.ok, o.result_text) for o in fewer.schedules}
    theirs = {o.schedule: (o.ok, o.result_text) for o in every.outcomes}
    if len(mine) != len(fewer.schedules):
        found.append(f"reduced stands for {len(fewer.schedules) - len(mine)} schedules twice")
    missing, extra = sorted(set(theirs) - set(mine)), sorted(set(mine) - set(theirs))
    differ = [s for s in sorted(set(mine) & set(theirs)) if mine[s] != theirs[s]]
    for what, schedules in (
        ("only in the exhaustive search", missing),
        ("only in the reduced search", extra),
        ("judged differently (reduced | exhaustive)", differ),
    ):
        if schedules:
            found.append(f"{len(schedules)} schedules {what}, e.g.")
        for s in schedules[:examples]:
            seen = [_verdict(*found_in[s]) for found_in in (mine, theirs) if s in found_in]
            found.append(f"  {s}: {' | '.join(seen)}")
    if set(fewer.bad) != set(every.bad) and not (missing or extra or differ):
        found.append("the breaking schedules differ")
    if found:
        found[:0] = [f"reduced:    {fewer.summary()}", f"exhaustive: {every.summary()}"]
    return found


def async_disagreements(lab: Lab, program: Program, examples: int = 5) -> list[str]:
    """Return how the race with async actors, reduced, differs from its sync twin run on every
    schedule ([]: the same schedules, verdicts and results)."""
    twin, twin_error = _explored(program.race(lab, aio=True), program.options)
    every, every_error = _explored(program.race(lab), {**program.options, "reduce": False})
    if twin_error or every_error:
        if twin_error.split(":")[0] == every_error.split(":")[0]:
            return []
        return [f"async raised {twin_error or 'nothing'}; sync {every_error or 'nothing'}"]
    found: list[str] = []
    if (twin.total, twin.bad_count) != (every.total, every.bad_count):
        found.append(f"async: {twin.summary()}; sync: {every.summary()}")
    mine = {o.schedule: (o.ok, o.result_text) for o in twin.schedules}
    theirs = {o.schedule: (o.ok, o.result_text) for o in every.outcomes}
    differ = sorted(s for s in set(mine) | set(theirs) if mine.get(s) != theirs.get(s))
    for s in differ[:examples]:
        found.append(f"  {s}: async {mine.get(s)} | sync {theirs.get(s)}")
    return found


class Disagreement(RaceLabError, AssertionError):
    """The reduced search answered differently from the exhaustive one on a generated race."""


def check(lab: Lab, program: Program, workers: int = 1) -> None:
    """Raise Disagreement, with the race as runnable Python, unless both searches agree."""
    share = zlib.crc32(program.source.encode()) % 2 == 0  # which search shares prefixes
    found = disagreements(program.race(lab), program.options, workers=workers, share=share)
    if found:
        raise Disagreement(
            "reduced and exhaustive searches disagree:\n"
            + "\n".join(found)
            + "\n\nthe race (run it as a script from the repository root):\n\n"
            + program.source
        )


def check_async(lab: Lab, program: Program) -> None:
    """Raise Disagreement, with the async race as Python, unless it answers as its sync twin."""
    found = async_disagreements(lab, program)
    if found:
        raise Disagreement(
            "async actors (reduced) and their sync twins (every schedule) disagree:\n"
            + "\n".join(found)
            + "\n\nthe async race:\n\n"
            + program.async_source
        )


def fuzz(
    lab: Lab,
    races_wanted: int,
    seed: int,
    cap: int = CAP,
    checker: Callable[[Lab, Program], None] | None = None,
    workers: int = 1,
    threads: bool = True,
) -> list[Program]:
    """Check races_wanted generated races on lab (with checker; default check, reduced against
    exhaustive, that one in workers processes); return those checked (Disagreement if any).

    threads: some actors make calls from a thread pool (sub-actors); an async twin has none.
    """
    checker = checker or functools.partial(check, workers=workers)
    checked: list[Program] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=races_wanted,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(races(capabilities(lab), cap, threads=threads))
    def one(program: Program) -> None:
        checked.append(program)
        bar.update(len(checked))
        checker(lab, program)

    with progress("fuzzing the explorer", total=races_wanted, unit="races") as bar:
        one()  # the explorations inside are silent: only the outermost progress shows
    return checked


def main(argv: Sequence[str] | None = None) -> int:
    """Fuzz the explorer on the embedded backend; print the count and seed; 1 on a disagreement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--cap", type=int, default=CAP, help="most schedules per race, about")
    parser.add_argument(
        "--workers", type=int, default=1, help="processes for each exhaustive search (default 1)"
    )
    args = parser.parse_args(argv)
    chosen = args.seed if args.seed is not None else random.randrange(2**32)
    print(
        f"fuzzing the explorer: {args.races} races, seed {chosen} (SEED={chosen} repeats it), "
        f"exhaustive searches in {args.workers} process{'es' if args.workers > 1 else ''}"
    )
    lab = connect("fuzz_explorer", backend="embedded")
    try:
        ran = len(fuzz(lab, args.races, chosen, args.cap, workers=args.workers))
    except Disagreement as exc:
        print(f"\nDISAGREEMENT (seed {chosen}), shrunk:\n{exc}")
        return 1
    finally:
        lab.cleanup()
        lab.close()
    print(f"{ran} races, seed {chosen}: reduced and exhaustive searches agree on every one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
