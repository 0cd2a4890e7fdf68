"""A hostile learner: every attack of issue 37 on a shared Redis, with the learner's own URL only.

    python scripts/hostile_learner.py REDIS_URL [--hold 5]    # scripts/workshop_sim.py --hostile

Only the learner's own user is used, as a learner in the room could: no administrator. Each attack
runs, is held for ``--hold`` seconds where it holds something (memory, buffers, connections), is
undone, and prints one line ``hostile: <attack>: <what happened>``:

* an unbounded count: SRANDMEMBER of a one-member set of one's own with count -150,000,000;
* unread replies: 100 GETRANGE ... 0 -1 (a copy each) and then 100 GETs (Redis 8 may send the
  value itself) of a 16 MB value of one's own, on a socket that reads nothing;
* a memory fill: one's own keys, 4 MB each, until the server refuses (OOM);
* a connection flood through the suite's API (``run_clients`` with 2,000 clients), then through
  raw sockets (as many as the server takes, up to 3,000);
* an oversized value: 16 MB + 1 byte, through a Lab client, then through plain redis-py;
* slow scripts: an EVAL loop, and EVALSHA of a lesson's loop (``runaway_spin``).

The exit status is 0: an attack's outcome is a finding, not a failure of this script.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import connect, run_clients  # noqa: E402
from helpers.backend.lab import Lab  # noqa: E402
from helpers.backend.limits import MAX_BULK_BYTES  # noqa: E402
from helpers.backend.scripts import load_script  # noqa: E402
from helpers.backend.urls import url_options  # noqa: E402

BIG = MAX_BULK_BYTES - 1024  # a value the server takes (under proto-max-bulk-len)
CHUNK = 4 * 2**20
Attack = Callable[[Lab, float], str]


def _raw(url: str) -> redis.Redis:
    """Return a plain redis-py client as the learner: no guard, no suite limit."""
    return redis.Redis.from_url(url, socket_timeout=120)


def _timed(call: Callable[[], object]) -> tuple[float, str]:
    """Return (seconds, outcome) of call: what it returned, or the error it raised."""
    began = time.monotonic()
    try:
        outcome = f"returned {type(call()).__name__}"
    except Exception as exc:  # noqa: BLE001 - the outcome is the finding
        outcome = f"{type(exc).__name__}: {str(exc)[:120]}"
    return time.monotonic() - began, outcome


def unbounded_count(lab: Lab, hold: float) -> str:
    """SRANDMEMBER of a one-member set with count -150,000,000: how long it ran and what came back."""
    key = lab.key("one")
    with _raw(lab.url or "") as raw:
        seconds, outcome = _timed(lambda: (raw.sadd(key, "x"), raw.srandmember(key, -150_000_000)))
    return f"SADD, SRANDMEMBER -150,000,000 took {seconds:.1f} s: {outcome}"


def _auth_socket(url: str) -> socket.socket:
    """Return a socket logged in as the URL's user (AUTH read), nothing else read from it after."""
    options = url_options(url)
    sock = socket.create_connection((options.get("host", "localhost"), options.get("port", 6379)))
    user, password = options.get("username") or "default", options.get("password") or ""
    sock.sendall(_command(b"AUTH", user.encode(), password.encode()))
    reply = sock.recv(256)
    if not reply.startswith(b"+OK"):
        sock.close()
        raise ConnectionRefusedError(reply.decode(errors="replace").strip() or "closed")
    return sock


def _command(*args: bytes) -> bytes:
    """Return args as one RESP array."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def unread_replies(lab: Lab, hold: float) -> str:
    """100 GETRANGE (then GET) of a 16 MB value of one's own, never read, each held hold seconds."""
    key = lab.key("big")
    with _raw(lab.url or "") as raw:
        raw.set(key, b"x" * BIG)
    found = []
    for command in ((b"GETRANGE", key.encode(), b"0", b"-1"), (b"GET", key.encode())):
        sock = _auth_socket(lab.url or "")
        try:
            sock.sendall(_command(*command) * 100)
            time.sleep(hold)
            found.append(f"{command[0].decode()} x100: {_fate(sock)}")
        finally:
            sock.close()
    return f"unread 16 MB replies held {hold:g} s: " + "; ".join(found)


def _fate(sock: socket.socket) -> str:
    """Return what became of a connection whose replies were not read: refused, closed or kept."""
    sock.settimeout(2)
    try:
        first = sock.recv(256)
    except TimeoutError:
        return "kept, nothing sent"
    except OSError as exc:
        return f"closed by the server ({type(exc).__name__})"
    if not first:
        return "closed by the server"
    if first.startswith(b"-"):
        return "refused: " + first.split(b"\r\n", 1)[0].decode(errors="replace")[:80]
    read = len(first)
    try:
        while read < 64 * 2**20:  # a few replies' worth: the server still sends them
            chunk = sock.recv(2**20)
            if not chunk:
                return f"closed by the server after {read / 2**20:.0f} MB"
            read += len(chunk)
    except TimeoutError:
        return f"kept open, {read / 2**20:.0f} MB sent"
    except OSError as exc:
        return f"closed by the server ({type(exc).__name__})"
    return "kept open, the replies still coming"


def memory_fill(lab: Lab, hold: float) -> str:
    """Own keys of 4 MB each until the server refuses; held for hold seconds, then deleted."""
    written: list[str] = []
    with _raw(lab.url or "") as raw:
        try:
            for n in range(10_000):
                raw.set(lab.key(f"fill{n}"), b"x" * CHUNK)
                written.append(lab.key(f"fill{n}"))
            outcome = "never refused"
        except redis.RedisError as exc:
            outcome = f"refused after {len(written) * CHUNK / 2**20:.0f} MB: {type(exc).__name__}"
        time.sleep(hold)
        for start in range(0, len(written), 100):
            raw.delete(*written[start : start + 100])
    return f"memory fill: {outcome}"


def suite_flood(lab: Lab, hold: float) -> str:
    """run_clients with 2,000 clients: what the suite's API does with it."""
    seconds, outcome = _timed(
        lambda: run_clients(lab, lambda c: c.ping(), clients=2000, iterations=1)
    )
    return f"run_clients(clients=2000) in {seconds:.1f} s: {outcome}"


def socket_flood(lab: Lab, hold: float) -> str:
    """As many raw connections as the server takes (up to 3,000), held for hold seconds."""
    socks: list[socket.socket] = []
    try:
        for _ in range(3000):
            sock = _auth_socket(lab.url or "")
            socks.append(sock)
        refused = "none refused"
    except OSError as exc:
        refused = f"then {type(exc).__name__}"
    time.sleep(hold)
    for sock in socks:
        sock.close()
    return f"raw socket flood: {len(socks)} connections opened ({refused}), held {hold:g} s"


def oversized_value(lab: Lab, hold: float) -> str:
    """A value of proto-max-bulk-len + 1 through a Lab client, then through plain redis-py."""
    key, value = lab.key("huge"), b"x" * (MAX_BULK_BYTES + 1)
    _s, suite = _timed(lambda: lab.client().set(key, value))
    with _raw(lab.url or "") as raw:
        _s, plain = _timed(lambda: raw.set(key, value))
    return f"16 MB + 1 byte: through the suite {suite}; through redis-py {plain}"


def slow_scripts(lab: Lab, hold: float) -> str:
    """An EVAL loop, and EVALSHA of a lesson's loop: refused, or how long they ran."""
    with _raw(lab.url or "") as raw:
        _s, loop = _timed(lambda: raw.eval("while true do end", 0))
    _s, lesson = _timed(lambda: load_script(lab.client(), "runaway_spin")(keys=[lab.key("x")]))
    return f"slow scripts: EVAL loop {loop}; runaway_spin {lesson}"


ATTACKS: tuple[Attack, ...] = (
    unbounded_count,
    unread_replies,
    memory_fill,
    suite_flood,
    socket_flood,
    oversized_value,
    slow_scripts,
)


def main() -> int:
    """Run every attack in turn with the URL given; print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the hostile learner's own REDIS_URL")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds an attack holds (5)")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds before the first (0)")
    args = parser.parse_args()
    time.sleep(args.wait)
    lab, started = connect("hostile", url=args.url), time.monotonic()
    try:
        for attack in ATTACKS:
            at = time.monotonic() - started
            print(
                f"hostile: {attack.__name__} at +{at:.0f} s: {attack(lab, args.hold)}", flush=True
            )
    finally:
        lab.cleanup()
        lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
