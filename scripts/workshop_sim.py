"""A workshop on one machine: N learners run the core notebooks at once on one shared Redis.

    python scripts/workshop_sim.py --learners 10     # make workshop-sim N=10
    python scripts/workshop_sim.py --learners 3      # what .ci/run runs
    python scripts/workshop_sim.py --learners 10 --hostile [--room]
                                                     # make workshop-sim N=10 HOSTILE=1 [ROOM=1]

The server is set up the way docs/workshop.md tells an instructor to: a throwaway redis-server
with the recommended settings (``maxmemory`` with ``noeviction``, a ``maxclients`` with room for
the administrator), the default user off, an administrator user, foreign data planted as on
someone's real server (``helpers.tools.foreign``), the suite's scripts and libraries loaded by the
instructor, and one ACL user per learner (``helpers.tools.acl``).

Then one learner runs notebooks 00-03 alone under nbval (the baseline), and then all N at once,
each kernel as its own user with its own REDIS_URL, all on this machine. The report gives pass or
fail per learner, the wall time against the one learner alone, the server's peak memory and CPU,
and the shared-server check: the foreign data intact, no suite keys left, the libraries as the
instructor loaded them. The exit status is 0 only if every learner passed and the check held.

``--hostile`` adds one more learner, with a user of its own, who tries every attack of issue 37
while the others run (``scripts/hostile_learner.py``: an unbounded count, unread replies, a memory
fill, connection floods through the suite's API and through raw sockets, an oversized value, slow
scripts). The report then adds what each attack met, the longest time the server kept the
instructor's PING waiting (sampled every 0.1 s), the peak ``used_memory`` against ``maxmemory``
plus ``maxmemory-clients``, and, for each learner who failed, which documented Redis limit the
log names. ``--room`` gives every learner (the hostile one too) a server of their own
(``helpers.tools.room``), each with foreign data planted, instead of one shared server.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.backend.server import RedisServer  # noqa: E402
from helpers.tools import acl, foreign, room  # noqa: E402

CORE = ["00_start_here", "01_get_then_incr", "02_blind_del", "03_hgetall_hsetnx"]
ADMIN = "instructor"
CELL_TIMEOUT_S = 900  # per cell: ten kernels share two cores
HOSTILE = "hostile"
HOSTILE_WAIT_S = 20.0  # the others are into their notebooks by then
# What a failed learner's log says (an exception's line, not code in a traceback) -> the
# documented Redis limit that stopped the cell.
LIMITS = {
    "OutOfMemoryError: ": "maxmemory (noeviction): the server was full",
    "max number of clients reached": "maxclients: the server took no more connections",
    "BUSY Redis is busy": "a script ran past busy-reply-threshold",
    "NoReply: ": "a command kept the server busy past the client's reply timeout",
    "TooManyConnections: ": "the suite's share of maxclients",
    "ValueTooLarge: ": "proto-max-bulk-len",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nbval colours its tracebacks
SECTION = re.compile(r"^_{3,} (\S+::Cell \d+) _{3,}$", re.M)  # pytest's header of one failure


@dataclass
class Learner:
    """One simulated learner: a name, a REDIS_URL, and how the run went."""

    name: str
    url: str
    returncode: int | None = None
    seconds: float = 0.0
    summary: str = ""
    log: Path | None = None


def start_server(learners: int) -> tuple[RedisServer, redis.Redis, dict[str, str]]:
    """Start the throwaway server as an instructor would set it up; return it, an admin, settings."""
    server = RedisServer().start()
    password = acl.new_password()
    settings = {name: value for name, value, _why in acl.server_settings(learners)}
    with server.client() as default:
        for name, value in settings.items():
            default.config_set(name, value)
        default.execute_command(
            "ACL", "SETUSER", ADMIN, "reset", "on", f">{password}", "~*", "&*", "+@all"
        )
        default.execute_command("ACL", "SETUSER", "default", "off")
    admin = redis.Redis(port=server.port, username=ADMIN, password=password)
    admin.ping()
    return server, admin, settings


def make_learners(admin: redis.Redis, server: RedisServer, names: list[str]) -> list[Learner]:
    """Create one ACL user per learner (python -m helpers acl --learners); return them with URLs."""
    passwords = {name: acl.new_password() for name in names}
    acl.apply_learners([admin], passwords)
    return [
        Learner(name, acl.user_url(server.url, password, user=name))
        for name, password in passwords.items()
    ]


def nbval_command(notebooks: list[str]) -> list[str]:
    """Return the nbval command that runs the given notebooks, as CI runs them."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--nbval",
        f"--nbval-cell-timeout={CELL_TIMEOUT_S}",
        "--nbval-sanitize-with",
        "tests/nbval-sanitize.cfg",
        *(f"notebooks/{nb}.ipynb" for nb in notebooks),
    ]


START_APART_S = 2.0  # between two learners' starts (their kernels' first moments)


def run_learners(learners: list[Learner], notebooks: list[str], logs: Path) -> float:
    """Run every learner's notebooks at once; return the wall time in seconds."""
    env = {k: v for k, v in os.environ.items() if k not in ("RACELAB_BACKEND", "REDIS_URL")}
    started = time.monotonic()
    running = []
    for number, learner in enumerate(learners):
        if number:  # a room does not press Run at the same millisecond; kernels started at one
            time.sleep(START_APART_S)  # instant can race for the same ports (jupyter_client#487)
        learner.log = logs / f"{learner.name}.log"
        out = learner.log.open("w")
        process = subprocess.Popen(
            nbval_command(notebooks),
            cwd=ROOT,
            env=dict(env, REDIS_URL=learner.url),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        running.append((learner, process, out, time.monotonic()))
    for learner, process, out, began in running:
        learner.returncode = process.wait()
        learner.seconds = time.monotonic() - began
        out.close()
        lines = [line for line in learner.log.read_text().splitlines() if line.strip()]
        learner.summary = lines[-1].strip("= ") if lines else "(no output)"
    return time.monotonic() - started


class ServerSampler:
    """Sample the servers' memory, CPU and PING wait in the background while the learners run."""

    def __init__(self, admins: list[redis.Redis]) -> None:
        self.admins, self.peak_memory, self.peak_cpu, self.longest_ping = admins, 0, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self) -> float:
        infos = [admin.info("cpu") for admin in self.admins]
        return sum(float(i["used_cpu_user"]) + float(i["used_cpu_sys"]) for i in infos)

    def _ping(self) -> float:
        """Return the longest time one of the servers took to answer PING now."""
        longest = 0.0
        for admin in self.admins:
            began = time.monotonic()
            try:
                admin.ping()
            except redis.RedisError:
                pass  # no answer in the client's timeout: the wait is what counts
            longest = max(longest, time.monotonic() - began)
        return longest

    def _run(self) -> None:
        last, when, samples = self._cpu(), time.monotonic(), 0
        while not self._stop.wait(0.1):
            self.longest_ping = max(self.longest_ping, self._ping())
            memory = [int(admin.info("memory")["used_memory"]) for admin in self.admins]
            self.peak_memory = max(self.peak_memory, *memory)
            samples += 1
            if samples % 10 == 0:
                cpu, now = self._cpu(), time.monotonic()
                self.peak_cpu = max(self.peak_cpu, 100 * (cpu - last) / (now - when))
                last, when = cpu, now

    def __enter__(self) -> ServerSampler:
        self.cpu_start, self.wall_start = self._cpu(), time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.mean_cpu = 100 * (self._cpu() - self.cpu_start) / (time.monotonic() - self.wall_start)


def shared_server_check(admin: redis.Redis, before: foreign.Snapshot) -> list[str]:
    """Return what changed on the server that the suite must not touch (empty: the check held)."""
    after = foreign.snapshot(admin)
    problems = foreign.compare(before, after)
    problems += [f"suite key left behind: {k!r}" for k in foreign.suite_leftovers(admin, before)]
    return problems


@dataclass
class Setup:
    """Where the learners run: their URLs, the servers the others use, and how to check and stop."""

    learners: list[Learner]  # the baseline learner first
    hostile: Learner | None
    admins: list[redis.Redis]  # of the servers the (non-hostile) learners use
    check: Callable[[], list[str]]
    stop: Callable[[], None]
    bound: int  # maxmemory plus maxmemory-clients of one server, in bytes
    describe: str


def _names(args: argparse.Namespace) -> list[str]:
    """Return the learners' names: the baseline and the room, then the hostile one if asked."""
    return acl.learner_names(str(args.learners + 1)) + ([HOSTILE] if args.hostile else [])


def _bound(settings: dict[str, str]) -> int:
    """Return maxmemory plus maxmemory-clients, in bytes, from the settings' 'NNmb'/'1gb' values."""
    units = {"mb": 2**20, "gb": 2**30}
    return sum(
        int(settings[k][:-2]) * units[settings[k][-2:]] for k in ("maxmemory", "maxmemory-clients")
    )


def shared_setup(args: argparse.Namespace) -> Setup:
    """Set up one shared server as docs/workshop.md says; every learner a user on it."""
    names = _names(args)
    server, admin, settings = start_server(len(names))
    planted = foreign.plant_keys(admin, field_ttls=foreign.has_field_ttls(admin))
    foreign.plant_server_wide(admin)
    for line in acl.load([admin]):  # the instructor loads the suite's code, once
        print(f"workshop-sim: {line}", flush=True)
    learners = make_learners(admin, server, names)
    before = foreign.snapshot(admin)

    def stop() -> None:
        admin.close()
        server.stop()

    return Setup(
        [x for x in learners if x.name != HOSTILE],
        next((x for x in learners if x.name == HOSTILE), None),
        [admin],
        lambda: shared_server_check(admin, before),
        stop,
        _bound(settings),
        f"one shared redis-server on port {server.port}, {len(before.keys):,} foreign keys "
        f"({planted['binary name']} with binary names), {len(names)} learner users; "
        f"settings {settings}",
    )


def _room_admin(seat: room.Seat) -> redis.Redis:
    """Return a bytes client of seat's server as its administrator (foreign data is binary)."""
    return redis.Redis(
        host=seat.host, port=seat.port, password=seat.admin_password, socket_timeout=120
    )


def room_setup(args: argparse.Namespace, root: Path) -> Setup:
    """Start a server per learner (helpers.tools.room), foreign data planted on each."""
    seats = room.start_room(_names(args), root)
    admins = {seat.learner: _room_admin(seat) for seat in seats}
    befores = {}
    try:
        for name, admin in admins.items():
            foreign.plant_keys(admin, 300)
            befores[name] = foreign.snapshot(admin)
    except BaseException:
        room.stop_room(root)  # daemons: nothing else would stop them
        raise

    def check() -> list[str]:
        return [f"{n}: {p}" for n, a in admins.items() for p in shared_server_check(a, befores[n])]

    def stop() -> None:
        for admin in admins.values():
            admin.close()
        room.stop_room(root)

    learners = [Learner(seat.learner, seat.url) for seat in seats]
    settings = dict(room.settings())
    return Setup(
        [x for x in learners if x.name != HOSTILE],
        next((x for x in learners if x.name == HOSTILE), None),
        [a for n, a in admins.items() if n != HOSTILE],
        check,
        stop,
        _bound(settings),
        f"a room of {len(seats)} redis-servers, one per learner, 300 foreign keys each; "
        f"settings {settings}",
    )


def start_hostile(hostile: Learner, logs: Path, wait: float) -> subprocess.Popen[bytes]:
    """Start the hostile learner's attacks (scripts/hostile_learner.py) after wait seconds."""
    hostile.log = logs / f"{hostile.name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("RACELAB_BACKEND", "REDIS_URL")}
    with hostile.log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "hostile_learner.py"), hostile.url,
             "--wait", str(wait)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def limits_named(learner: Learner) -> list[str]:
    """Return, for a failed learner, each failed cell and the documented limits its error names."""
    text = ANSI.sub("", learner.log.read_text()) if learner.log else ""
    parts = SECTION.split(text)  # text before, then (cell, its traceback) pairs
    sections = list(zip(parts[1::2], parts[2::2])) or [("the log", text)]
    found = []
    for cell, body in sections:
        limits = [limit for marker, limit in LIMITS.items() if marker in body]
        found.append(f"{cell.split('/')[-1]}: {'; '.join(limits) or 'no documented limit named'}")
    return found


def run(args: argparse.Namespace, setup: Setup, logs: Path) -> tuple[float, float, ServerSampler]:
    """Run the baseline alone, then the others at once (with the hostile one); return the times."""
    solo, others = setup.learners[:1], setup.learners[1:]
    print("workshop-sim: one learner alone (the baseline) ...", flush=True)
    alone = run_learners(solo, args.notebooks, logs)
    print(f"workshop-sim: {solo[0].summary} in {alone:.0f} s", flush=True)
    print(f"workshop-sim: {len(others)} learners at once ...", flush=True)
    attacker = start_hostile(setup.hostile, logs, args.hostile_wait) if setup.hostile else None
    with ServerSampler(setup.admins) as sampler:
        together = run_learners(others, args.notebooks, logs)
        if attacker is not None:
            setup.hostile.returncode = attacker.wait()  # type: ignore[union-attr]
    for learner in setup.learners:
        if learner.returncode != 0:
            print(f"\n--- {learner.name} failed; the end of its log:")
            print("\n".join(learner.log.read_text().splitlines()[-40:]) if learner.log else "")
    return alone, together, sampler


def report(
    args: argparse.Namespace, setup: Setup, times: tuple[float, float, ServerSampler]
) -> bool:
    """Print the table and the summary; return True if every learner passed."""
    alone, together, sampler = times
    others = setup.learners[1:]
    print("\n| learner | result | seconds | nbval |\n|---|---|---|---|")
    for learner in setup.learners:
        result = "pass" if learner.returncode == 0 else "FAIL"
        print(f"| {learner.name} | {result} | {learner.seconds:.0f} | {learner.summary} |")
    passed = sum(learner.returncode == 0 for learner in others)
    print(
        f"\nworkshop-sim: {passed} of {len(others)} learners passed {', '.join(args.notebooks)}; "
        f"wall time {together:.0f} s for {len(others)} at once against {alone:.0f} s alone "
        f"({together / alone:.1f}x); server peak memory {sampler.peak_memory / 2**20:.1f} MiB, "
        f"CPU {sampler.mean_cpu:.0f}% mean and {sampler.peak_cpu:.0f}% peak of one core; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    if setup.hostile is not None and setup.hostile.log is not None:
        print("\n".join(line for line in setup.hostile.log.read_text().splitlines() if line))
        print(
            f"workshop-sim: with the hostile learner: the longest PING wait on the others' "
            f"server{'s' if len(setup.admins) > 1 else ''} {sampler.longest_ping:.2f} s; peak "
            f"used_memory {sampler.peak_memory / 2**20:.1f} MiB against maxmemory + "
            f"maxmemory-clients {setup.bound / 2**20:.0f} MiB"
        )
    for learner in others:
        if learner.returncode != 0:
            for line in limits_named(learner):
                print(f"workshop-sim: {learner.name} stopped at {line}")
    return passed == len(others) and setup.learners[0].returncode == 0


def main() -> int:
    """Run the simulation and print its report; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=10, help="how many at once (default 10)")
    parser.add_argument("--notebooks", nargs="*", default=CORE, help="default: 00-03")
    parser.add_argument("--hostile", action="store_true", help="one more learner attacks")
    parser.add_argument("--room", action="store_true", help="a server per learner")
    parser.add_argument(
        "--hostile-wait", type=float, default=HOSTILE_WAIT_S, help="seconds before the attacks"
    )
    args = parser.parse_args()
    if args.learners < 1:
        parser.error("--learners must be at least 1")
    with tempfile.TemporaryDirectory(prefix="racelab-sim-") as tmp:
        setup = room_setup(args, Path(tmp) / "room") if args.room else shared_setup(args)
        try:
            print(f"workshop-sim: {setup.describe}", flush=True)
            times = run(args, setup, Path(tmp))
            problems = setup.check()
            passed = report(args, setup, times)
        finally:
            setup.stop()
    for line in problems:
        print(f"workshop-sim: FOREIGN-DATA CHECK FAILED: {line}", file=sys.stderr)
    if not problems:
        print("workshop-sim: foreign-data check passed: every foreign key, library, CONFIG and "
              "ACL LIST unchanged; no suite keys left")  # fmt: skip
    return 0 if passed and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
