"""A workshop on one machine: N learners run the core notebooks at once on one shared Redis.

    python scripts/workshop_sim.py --learners 10     # make workshop-sim N=10
    python scripts/workshop_sim.py --learners 3      # what .ci/run runs

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
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.backend.server import RedisServer  # noqa: E402
from helpers.tools import acl, foreign  # noqa: E402

CORE = ["00_start_here", "01_get_then_incr", "02_blind_del", "03_hgetall_hsetnx"]
ADMIN = "instructor"
CELL_TIMEOUT_S = 900  # per cell: ten kernels share two cores


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


def make_learners(admin: redis.Redis, server: RedisServer, count: int) -> list[Learner]:
    """Create one ACL user per learner (python -m helpers acl --learners); return them with URLs."""
    passwords = {name: acl.new_password() for name in acl.learner_names(str(count))}
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


def run_learners(learners: list[Learner], notebooks: list[str], logs: Path) -> float:
    """Run every learner's notebooks at once; return the wall time in seconds."""
    env = {k: v for k, v in os.environ.items() if k not in ("RACELAB_BACKEND", "REDIS_URL")}
    started = time.monotonic()
    running = []
    for learner in learners:
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
    """Sample the server's memory and CPU in the background while the learners run."""

    def __init__(self, admin: redis.Redis) -> None:
        self.admin, self.peak_memory, self.peak_cpu = admin, 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self) -> float:
        info = self.admin.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def _run(self) -> None:
        last, when = self._cpu(), time.monotonic()
        while not self._stop.wait(1.0):
            cpu, now = self._cpu(), time.monotonic()
            self.peak_cpu = max(self.peak_cpu, 100 * (cpu - last) / (now - when))
            last, when = cpu, now
            self.peak_memory = max(self.peak_memory, int(self.admin.info("memory")["used_memory"]))

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


def main() -> int:
    """Run the simulation and print its report; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=10, help="how many at once (default 10)")
    parser.add_argument("--notebooks", nargs="*", default=CORE, help="default: 00-03")
    args = parser.parse_args()
    if args.learners < 1:
        parser.error("--learners must be at least 1")
    server, admin, settings = start_server(args.learners + 1)
    try:
        planted = foreign.plant_keys(admin, field_ttls=foreign.has_field_ttls(admin))
        foreign.plant_server_wide(admin)
        for line in acl.load([admin]):  # the instructor loads the suite's code, once
            print(f"workshop-sim: {line}", flush=True)
        learners = make_learners(admin, server, args.learners + 1)
        solo, room = learners[:1], learners[1:]
        before = foreign.snapshot(admin)
        print(
            f"workshop-sim: redis-server on port {server.port}, {len(before.keys):,} foreign keys "
            f"({planted['binary name']} with binary names), {len(room)} learner users (+1 for the "
            f"baseline); settings {settings}",
            flush=True,
        )
        with tempfile.TemporaryDirectory(prefix="racelab-sim-") as tmp:
            print("workshop-sim: one learner alone (the baseline) ...", flush=True)
            alone = run_learners(solo, args.notebooks, Path(tmp))
            print(f"workshop-sim: {solo[0].summary} in {alone:.0f} s", flush=True)
            print(f"workshop-sim: {len(room)} learners at once ...", flush=True)
            with ServerSampler(admin) as sampler:
                together = run_learners(room, args.notebooks, Path(tmp))
            failed = [learner for learner in solo + room if learner.returncode != 0]
            for learner in failed:
                print(f"\n--- {learner.name} failed; the end of its log:")
                print("\n".join(learner.log.read_text().splitlines()[-40:]) if learner.log else "")
        problems = shared_server_check(admin, before)
    finally:
        admin.close()
        server.stop()
    print("\n| learner | result | seconds | nbval |\n|---|---|---|---|")
    for learner in solo + room:
        result = "pass" if learner.returncode == 0 else "FAIL"
        print(f"| {learner.name} | {result} | {learner.seconds:.0f} | {learner.summary} |")
    passed = sum(learner.returncode == 0 for learner in room)
    print(
        f"\nworkshop-sim: {passed} of {len(room)} learners passed {', '.join(args.notebooks)}; "
        f"wall time {together:.0f} s for {len(room)} at once against {alone:.0f} s alone "
        f"({together / alone:.1f}x); server peak memory {sampler.peak_memory / 2**20:.1f} MiB, "
        f"CPU {sampler.mean_cpu:.0f}% mean and {sampler.peak_cpu:.0f}% peak of one core; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    for line in problems:
        print(f"workshop-sim: SHARED-SERVER CHECK FAILED: {line}", file=sys.stderr)
    if not problems:
        print(
            f"workshop-sim: shared-server check passed: {len(before.keys):,} foreign keys, "
            f"{len(before.libraries)} libraries, CONFIG and ACL LIST unchanged; no suite keys left"
        )
    return 0 if not failed and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
