"""A server per learner: ``python -m helpers room --learners N`` (also ``--status``, ``--stop``).

Each learner gets a small redis-server of their own on the instructor's machine (127.0.0.1 by
default, ``--bind ADDR`` for the room's network), set up as a shared server is
(``helpers.tools.acl``): the recommended settings (``acl.server_settings`` for one learner, with a
smaller ``maxmemory``), the default user behind an administrator password, the learner's own ACL
user, and the suite's scripts and libraries loaded by ``acl.load``. One learner's OOM, BUSY
script or connection flood then reaches nobody else's server.

The servers are daemons (``daemonize yes``): they outlive the command that started them. Each one's
pid, the start time the kernel gave that pid, its port and its directory are recorded in
``<dir>/room.json`` (mode 0600: it holds the passwords). ``--stop`` stops exactly those servers,
each only if its pid still runs a redis-server on that port with that start time, and never
looks for a process by name; ``--status`` prints each server's memory, clients and slowest command.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from helpers.backend.runs import DEFAULT_LEASE_S, set_instructor_lease
from helpers.backend.server import PROJECT_ROOT, find_binary, free_port, server_description
from helpers.errors import RaceLabError
from helpers.tools import acl

DEFAULT_DIR = PROJECT_ROOT / ".room"
STATE_FILE = "room.json"
MAXMEMORY = "64mb"  # one learner's share: notebooks 00-08 stay under a few MB each
SLOWLOG_US = 1000  # log every command slower than 1 ms, so --status sees a learner's slow call
STARTUP_S = 10.0


class RoomError(RaceLabError):
    """A room cannot start (one is running, a server would not answer) or there is no room to act on."""


@dataclass
class Seat:
    """One learner's server: where it listens, its process, its directory and its two passwords."""

    learner: str
    host: str
    port: int
    pid: int
    started: int  # the pid's start time (clock ticks after boot): a reused pid has another
    workdir: str
    admin_password: str
    password: str

    @property
    def url(self) -> str:
        """Return the learner's REDIS_URL (their user and password in it)."""
        return acl.user_url(f"redis://{self.host}:{self.port}/0", self.password, self.learner)

    def admin(self, timeout: float = 2.0) -> redis.Redis:
        """Return a client of this server as its administrator (the default user), no retry."""
        return redis.Redis(
            host=self.host,
            port=self.port,
            password=self.admin_password,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )


def settings(maxmemory: str = MAXMEMORY) -> list[tuple[str, str]]:
    """Return (parameter, value) of a learner's server: acl's recommended settings for one learner."""
    chosen = [(name, value) for name, value, _why in acl.server_settings(1)]
    chosen = [(n, maxmemory if n == "maxmemory" else v) for n, v in chosen]
    return chosen + [("slowlog-log-slower-than", str(SLOWLOG_US)), ("slowlog-max-len", "128")]


def config_text(host: str, port: int, workdir: Path, admin_password: str, maxmemory: str) -> str:
    """Return the redis.conf of one learner's server (daemon, no persistence, its own directory)."""
    lines = [
        f"bind {host}",
        f"port {port}",
        "daemonize yes",
        f"pidfile {workdir / 'redis.pid'}",
        f"dir {workdir}",
        f"logfile {workdir / 'redis.log'}",
        "loglevel warning",
        'save ""',
        "appendonly no",
        f"requirepass {admin_password}",
        *[f"{name} {value}" for name, value in settings(maxmemory)],
    ]
    return "\n".join(lines) + "\n"


def process_start(pid: int) -> int | None:
    """Return the start time of pid (field 22 of /proc/<pid>/stat), None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in "ZX" else int(fields[19])


def is_ours(seat: Seat) -> bool:
    """Return True if seat's pid still runs the redis-server the room started on that port."""
    try:
        words = Path(f"/proc/{seat.pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return False
    return (
        bool(words)
        and os.path.basename(words[0].decode(errors="replace")).startswith("redis-server")
        and any(w.decode(errors="replace").endswith(f":{seat.port}") for w in words)
        and process_start(seat.pid) == seat.started
    )


def _launch(
    binary: Path, workdir: Path, host: str, port: int, admin_password: str, mem: str
) -> int:
    """Write the server's config, start it as a daemon; return its pid (0 if it did not start)."""
    conf = workdir / "redis.conf"
    conf.write_text(config_text(host, port, workdir, admin_password, mem))
    conf.chmod(0o600)
    subprocess.run(
        [str(binary), str(conf)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=STARTUP_S,
        check=False,
    )
    return _wait_pid(workdir / "redis.pid")


def _wait_pid(pidfile: Path) -> int:
    """Return the pid the daemon wrote to pidfile, 0 if none came within STARTUP_S."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.02)
    return 0


def _answers(seat: Seat) -> bool:
    """Return True once seat's server answers its administrator as the process that pid names."""
    deadline = time.monotonic() + STARTUP_S
    with seat.admin(timeout=1.0) as admin:
        while time.monotonic() < deadline and process_start(seat.pid) is not None:
            try:
                return int(admin.info("server")["process_id"]) == seat.pid
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(0.02)
    return False


def _prepare(seat: Seat) -> None:
    """Give seat's server its learner's user, the suite's scripts and libraries, the lease bound."""
    with seat.admin(timeout=10.0) as admin:
        acl.apply_learners([admin], {seat.learner: seat.password})
        acl.load([admin])
        set_instructor_lease(admin, DEFAULT_LEASE_S)


def start_seat(learner: str, root: Path, binary: Path, host: str, maxmemory: str) -> Seat:
    """Start and set up one learner's server in root/<learner>; return its seat (RoomError if not)."""
    workdir = root / learner
    for _attempt in range(3):  # a free port may be taken between the check and the bind
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(mode=0o700, parents=True)
        port, admin_password = free_port(), acl.new_password()
        pid = _launch(binary, workdir, host, port, admin_password, maxmemory)
        started = process_start(pid) if pid else None
        if started is not None:
            password = acl.new_password()
            seat = Seat(learner, host, port, pid, started, str(workdir), admin_password, password)
            if _answers(seat):
                _prepare(seat)
                return seat
            stop_seat(seat)
    log = workdir / "redis.log"
    tail = log.read_text(errors="replace")[-600:] if log.exists() else "(no log)"
    raise RoomError(f"{learner}'s server did not start on {host}; its log ends:\n{tail}")


def state_path(root: Path) -> Path:
    """Return the room's state file in root."""
    return root / STATE_FILE


def save(root: Path, seats: list[Seat]) -> None:
    """Write the seats to the state file (mode 0600: it holds passwords)."""
    path = state_path(root)
    path.touch(mode=0o600)
    path.write_text(json.dumps([asdict(s) for s in seats], indent=1) + "\n")


def load_state(root: Path) -> list[Seat]:
    """Return the seats recorded in root's state file; RoomError if there is none."""
    path = state_path(root)
    if not path.exists():
        raise RoomError(
            f"no room recorded in {path} (python -m helpers room --learners N starts one)"
        )
    return [Seat(**entry) for entry in json.loads(path.read_text())]


def start_room(
    learners: list[str],
    root: Path = DEFAULT_DIR,
    host: str = "127.0.0.1",
    maxmemory: str = MAXMEMORY,
    binary: Path | None = None,
) -> list[Seat]:
    """Start one server per learner and record them; return the seats (all stopped if one fails)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if state_path(root).exists() and any(is_ours(s) for s in load_state(root)):
        raise RoomError(
            f"a room is running ({state_path(root)}): room --status, or room --stop first"
        )
    binary = binary or find_binary()
    seats: list[Seat] = []
    try:
        for learner in learners:
            seats.append(start_seat(learner, root, binary, host, maxmemory))
            save(root, seats)  # recorded as it goes: --stop finds every one started so far
    except BaseException:
        for seat in seats:
            stop_seat(seat)
        state_path(root).unlink(missing_ok=True)
        raise
    return seats


def _gone(seat: Seat, timeout: float) -> bool:
    """Return True once seat's process has ended (or its pid runs something else) within timeout."""
    deadline = time.monotonic() + timeout
    while process_start(seat.pid) == seat.started:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def stop_seat(seat: Seat) -> str:
    """Stop seat's server by its pid if that pid is still it (TERM, then KILL); return what happened."""
    if not is_ours(seat):
        shutil.rmtree(seat.workdir, ignore_errors=True)
        return f"{seat.learner}: pid {seat.pid} is no longer its redis-server: left alone"
    os.kill(seat.pid, signal.SIGTERM)
    how = "stopped"
    if not _gone(seat, 5.0) and is_ours(seat):
        os.kill(seat.pid, signal.SIGKILL)
        how = "killed (it did not stop within 5 s of SIGTERM)"
        _gone(seat, 5.0)
    shutil.rmtree(seat.workdir, ignore_errors=True)
    return f"{seat.learner}: {how}, pid {seat.pid} on {seat.host}:{seat.port}"


def stop_room(root: Path = DEFAULT_DIR) -> list[str]:
    """Stop every server the room's state file records; return one line each."""
    lines = [stop_seat(seat) for seat in load_state(root)]
    state_path(root).unlink()
    return lines


def _slowest(admin: redis.Redis) -> str:
    """Return the slowest command in the server's SLOWLOG, e.g. 'SRANDMEMBER 21.9 s'."""
    entries = admin.slowlog_get(128)
    if not entries:
        return f"none over {SLOWLOG_US / 1000:g} ms"
    worst = max(entries, key=lambda e: e["duration"])
    command = worst["command"]
    name = (command.decode() if isinstance(command, bytes) else command).split(" ", 1)[0]
    return f"{name.upper()} {_duration(worst['duration'])}"


def _duration(us: int) -> str:
    """Return microseconds as '850 µs', '12.3 ms' or '21.9 s'."""
    if us < 1000:
        return f"{us} µs"
    return f"{us / 1000:.1f} ms" if us < 1_000_000 else f"{us / 1_000_000:.1f} s"


def status_line(seat: Seat) -> str:
    """Return one line about seat's server: where, pid, used memory, clients, slowest command."""
    where = f"{seat.learner:<12} {seat.host}:{seat.port:<5} pid {seat.pid:<7}"
    if not is_ours(seat):
        return f"{where} not running"
    try:
        with seat.admin() as admin:
            memory, clients = admin.info("memory"), admin.info("clients")
            slowest = _slowest(admin)
    except redis.RedisError as exc:
        return f"{where} running, but does not answer its administrator: {exc}"
    return (
        f"{where} used_memory {memory['used_memory'] / 2**20:.1f} MiB "
        f"(maxmemory {int(memory['maxmemory']) / 2**20:.0f} MiB), "
        f"clients {int(clients['connected_clients']) - 1}, slowest: {slowest}"
    )


def started_text(seats: list[Seat], root: Path, binary: Path | None = None) -> str:
    """Return what ``room --learners`` prints: one URL per learner, then one status line per server."""
    what = server_description(binary or find_binary())
    lines = [
        f"# A room of {len(seats)} {what} servers, one per learner; recorded in "
        f"{state_path(root)} (python -m helpers room --status | --stop).",
        "# Hand each learner their own line:",
        *[f"{s.learner}: export REDIS_URL={s.url}" for s in seats],
        "",
        "# The servers (the administrator's password of each is in the state file):",
        *[status_line(s) for s in seats],
    ]
    return "\n".join(lines)
