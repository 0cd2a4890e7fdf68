"""Small tools for the Lua notebooks (04-06): throwaway servers, stable reply text, one background call.

``scratch_server(...)`` starts a throwaway redis-server for one demo (SCRIPT FLUSH, busy scripts,
maxmemory): never the user's server, never the embedded backend. ``reply_text(call)`` turns a
reply *or* an error into one stable line, so a notebook prints the same text on every server,
and ``text_table`` lays such lines out. ``run_in_background`` runs one blocking call (a long
script) in a thread; ``longest_wait_during`` measures how long another client waits while that
call runs. ``restarted`` restarts a throwaway server on its saved data, and
``set_memory_headroom`` sets its maxmemory just above current use.

``live_or_recorded(name, demo)`` runs a demo that needs a throwaway server live when a
redis-server can start, and otherwise replays the output of its last real run from
``notebooks/recordings/<name>.json`` (server version and date included, labelled as a recording).
``RACELAB_RECORD=1`` (``make record``) makes live runs save their recordings.

This is not a load harness: concurrent clients run through ``helpers.run_clients``.

The advanced notebooks import everything they use from here or from ``helpers``, never from the
inner packages, so this module also hands on the few plumbing names they show: how a script or
library reaches the server (``lua_source``, ``lua_path``, ``load_library``, ``delete_library``,
``fcall_reloading``), the throwaway servers themselves (``RedisServer``, ``RedisClusterServer``),
07's failover steps (``fail_over``, ``stall_replication``, ``fence_after_failover``) and
``available(lab, kind)``: why the explorer refuses a fault (restart, failover) on a lab ('' if not).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, TextIO, TypeVar

import redis
from redis.exceptions import RedisClusterException

from helpers.backend.scripts import (
    delete_library,
    fcall_reloading,
    load_library,
    lua_path,
    lua_source,
)
from helpers.backend.server import (
    RedisClusterServer,
    RedisServer,
    ServerNotFound,
    find_binary,
    server_description,
)
from helpers.errors import RaceLabError
from helpers.instruments.failover import fail_over, fence_after_failover, stall_replication
from helpers.instruments.faults import available

T = TypeVar("T")

# Redis appends where a script failed: " script: <sha>, on @user_script:1." and prefixes
# "user_script:1: "; fakeredis does neither. Both are noise for a learner comparing servers.
_SCRIPT_SUFFIX = re.compile(r"\s*script: [\w-]+, on @[\w:]+\.?$")  # a SHA1 or a function name
_SCRIPT_PREFIX = re.compile(r"^(@?user_script|@user_function):\d+: ")


def server_available() -> bool:
    """Return True if a redis-server >= 8.4 binary can be started on this machine."""
    try:
        find_binary()
        return True
    except ServerNotFound:
        return False


def missing_server_text(live: bool = True) -> str:
    """Return why no throwaway server can start, e.g. 'no redis-server >= 8.4.0 (found: 7.0.15 ...)'.

    live=False drops the closing 'This demo is explained, not run.' (a recording is shown instead).
    """
    try:
        find_binary()
    except ServerNotFound as exc:
        return f"{exc} This demo is explained, not run." if live else str(exc)
    return ""


@contextmanager
def scratch_server(*args: str) -> Iterator[RedisServer | None]:
    """Yield a throwaway redis-server started with extra args (None if no binary); stop it on exit."""
    if not server_available():
        yield None
        return
    server = RedisServer(extra_args=list(args)).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def restarted(server: RedisServer) -> Iterator[RedisServer]:
    """Shut server down with SAVE, yield a new throwaway server started on its saved data; stop it on exit."""
    with server.client() as client:
        client.shutdown(save=True)
    if server.process is not None:
        server.process.wait(timeout=10)
    new = RedisServer(extra_args=[*server.extra_args, "--dir", str(server.workdir)]).start()
    try:
        yield new
    finally:
        new.stop()


def error_text(exc: BaseException) -> str:
    """Return 'ExceptionClass: message' with the script location noise removed."""
    message = _SCRIPT_PREFIX.sub("", str(exc).strip())
    message = _SCRIPT_SUFFIX.sub("", message)
    return f"{type(exc).__name__}: {message}"


def outcome_of(call: Callable[[], T]) -> T | redis.RedisError | RedisClusterException:
    """Run call(); return its result, or the redis (or redis-py cluster) error it raised."""
    try:
        return call()
    except (redis.RedisError, RedisClusterException) as exc:
        return exc


def outcome_text(outcome: object) -> str:
    """Return error_text for an exception, else repr of the value."""
    return error_text(outcome) if isinstance(outcome, BaseException) else repr(outcome)


def short_outcomes(replies: Sequence[object]) -> list[object]:
    """Return replies with each exception replaced by its class name (pipeline results, for printing)."""
    return [type(r).__name__ if isinstance(r, BaseException) else r for r in replies]


def set_memory_headroom(client: redis.Redis, headroom_bytes: int) -> int:
    """CONFIG SET maxmemory to used_memory + headroom_bytes (an owned server only); return the limit."""
    limit = int(client.info("memory")["used_memory"]) + headroom_bytes
    client.config_set("maxmemory", limit)
    return limit


def reply_text(call: Callable[[], object]) -> str:
    """Run call(); return repr(result), or error_text of the redis (or redis-py cluster) error it raised."""
    return outcome_text(outcome_of(call))


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Return rows as a plain-text table with left-aligned columns under the headers."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


@dataclass
class BackgroundCall:
    """One call running in its own thread; join() returns its result or the exception it raised."""

    thread: threading.Thread
    outcome: dict[str, Any] = field(default_factory=dict)

    def join(self, timeout: float = 30.0) -> Any:
        """Wait for the call; return its result, or the exception instance it raised."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise TimeoutError(f"the background call did not finish within {timeout}s")
        return self.outcome.get("error", self.outcome.get("result"))

    @property
    def seconds(self) -> float:
        """Return how long the call ran (wall clock, in its own thread); 0.0 until it returned."""
        return self.outcome.get("seconds", 0.0)

    def is_running(self) -> bool:
        """Return True while the call has not returned."""
        return self.thread.is_alive()


def run_in_background(call: Callable[[], object]) -> BackgroundCall:
    """Start call() in a daemon thread and return a handle to join it."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        started = time.perf_counter()
        try:
            outcome["result"] = call()
        except redis.RedisError as exc:  # the script's own error is the demo's result
            outcome["error"] = exc
        finally:
            outcome["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=target, name="racelab-background-script", daemon=True)
    background = BackgroundCall(thread, outcome)
    thread.start()
    return background


def wait_for_busy(client: redis.Redis, key: str, timeout: float = 10.0) -> str:
    """Send GET key until the server answers BUSY; return that error's text."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.get(key)
        except redis.ResponseError as exc:
            if str(exc).startswith("BUSY"):
                return str(exc)
            raise
        time.sleep(0.005)
    raise TimeoutError(
        f"no BUSY reply within {timeout}s: is a script running past busy-reply-threshold?"
    )


def wait_for_replica_link(replica: redis.Redis, timeout: float = 30.0) -> None:
    """Poll INFO replication on a replica until its link to the primary is up (synced)."""
    deadline = time.monotonic() + timeout
    while replica.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            raise TimeoutError(f"the replica's link to its primary was not up within {timeout}s")
        time.sleep(0.02)


def longest_wait_during(
    call: Callable[[], object], probe: redis.Redis, key: str
) -> tuple[float, float]:
    """Run call() in a thread while probe sends GET key in a loop; return (call seconds, longest GET wait seconds)."""
    background = run_in_background(call)
    longest = 0.0
    while background.is_running():
        before = time.perf_counter()
        probe.get(key)
        longest = max(longest, time.perf_counter() - before)
    result = background.join()
    if isinstance(result, BaseException):
        raise result
    return background.seconds, longest


# --- Recorded outputs (issue 13.5) ----------------------------------------------------------------
# A demo that needs a throwaway redis-server runs live when one can start; otherwise the notebook
# shows the output of the last real run, stored in notebooks/recordings/<name>.json with the server
# version and date, labelled as a recording. Recordings are written only by live runs with
# RACELAB_RECORD=1 (`make record`), never by hand.

RECORDINGS = Path(__file__).resolve().parents[1] / "notebooks" / "recordings"
RECORD_VARIABLE = "RACELAB_RECORD"


class RecordingMissing(RaceLabError, FileNotFoundError):
    """No redis-server can start and no recording of the demo exists either."""


@dataclass
class Recording:
    """A demo's result: live (run just now) or recorded (the last real run, read from its JSON file)."""

    name: str
    live: bool
    data: dict[str, Any]
    output: str
    server: str
    recorded_at: str

    def __getitem__(self, key: str) -> Any:
        """Return data[key]: the same JSON value whether the demo ran live or was recorded."""
        return self.data[key]

    @property
    def source(self) -> str:
        """Return 'live run on redis-server 8.6.3' or 'recording of redis-server 8.6.3, 2026-01-02'."""
        if self.live:
            return f"live run on {self.server}"
        return f"recording of {self.server}, {self.recorded_at}"


class _Tee(io.TextIOBase):
    """A stdout that writes to the real stdout and keeps a copy."""

    def __init__(self, target: TextIO) -> None:
        self.target, self.copy = target, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()


def recording_path(name: str) -> Path:
    """Return the JSON file of a demo's recording, e.g. notebooks/recordings/04.noscript.json."""
    if not re.fullmatch(r"\d\d\.[a-z0-9_]+", name):
        raise ValueError(f"recording names look like '04.noscript_flush', not {name!r}")
    return RECORDINGS / f"{name}.json"


def _json_round_trip(name: str, data: object) -> dict[str, Any]:
    """Return data as JSON would give it back (tuples become lists), so live and recorded data are equal."""
    if not isinstance(data, dict):
        raise TypeError(
            f"demo {name!r} must return a dict of JSON values, got {type(data).__name__}"
        )
    try:
        return json.loads(json.dumps(data))
    except TypeError as exc:
        raise TypeError(
            f"demo {name!r} returned a value JSON cannot store ({exc}); "
            "turn errors into text with outcome_text/reply_text"
        ) from exc


def load_recording(name: str) -> Recording:
    """Return the stored recording of a demo; RecordingMissing if there is none."""
    path = recording_path(name)
    if not path.exists():
        raise RecordingMissing(
            f"no redis-server here and no recording of {name!r} ({path}): run `make redis`, "
            "then `make record`"
        )
    stored = json.loads(path.read_text())
    return Recording(
        name, False, stored["data"], stored["output"], stored["server"], stored["recorded_at"]
    )


def save_recording(recording: Recording) -> Path:
    """Write a live recording to its JSON file; return the path."""
    if not recording.live:
        raise ValueError("only a live run can be recorded")
    path = recording_path(recording.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = {
        "name": recording.name,
        "server": recording.server,
        "recorded_at": recording.recorded_at,
        "produced_by": "a live run of the notebook cell (helpers.luakit.live_or_recorded)",
        "data": recording.data,
        "output": recording.output,
    }
    path.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n")
    return path


def live_or_recorded(
    name: str, demo: Callable[[], dict[str, Any]], available: bool | None = None
) -> Recording:
    """Run demo() live if a redis-server can start, else replay its recording; return either.

    Live: demo's printed output shows as usual and is kept; with RACELAB_RECORD=1 it is saved
    with the server version and today's date. Recorded: prints a label saying so, why no server,
    and how to run it live, then the stored output. The returned data is JSON-shaped both ways.
    """
    if available is None:
        available = server_available()
    if not available:
        recording = load_recording(name)
        print(
            f"RECORDED, not run here: {missing_server_text(live=False)}\n"
            f"Below: the output of the last real run ({recording.server}, {recording.recorded_at})."
        )
        print("-" * 72)
        print(recording.output, end="" if recording.output.endswith("\n") else "\n")
        return recording
    tee = _Tee(sys.stdout)
    with redirect_stdout(tee):
        data = demo()
    recording = Recording(
        name,
        True,
        _json_round_trip(name, data),
        tee.copy.getvalue(),
        server_description(find_binary()),
        date.today().isoformat(),
    )
    if os.environ.get(RECORD_VARIABLE) == "1":
        print(f"(recorded to {recording_path(name).relative_to(RECORDINGS.parents[1])})")
        save_recording(recording)
    return recording


__all__ = [
    "available",
    "BackgroundCall",
    "delete_library",
    "error_text",
    "fail_over",
    "fcall_reloading",
    "fence_after_failover",
    "live_or_recorded",
    "load_library",
    "load_recording",
    "longest_wait_during",
    "lua_path",
    "lua_source",
    "missing_server_text",
    "outcome_of",
    "outcome_text",
    "Recording",
    "recording_path",
    "RecordingMissing",
    "RedisClusterServer",
    "RedisServer",
    "reply_text",
    "restarted",
    "run_in_background",
    "save_recording",
    "scratch_server",
    "server_available",
    "ServerNotFound",
    "set_memory_headroom",
    "short_outcomes",
    "stall_replication",
    "text_table",
    "wait_for_busy",
    "wait_for_replica_link",
]
