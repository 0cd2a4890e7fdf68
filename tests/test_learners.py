"""Many learners on one server: each attack of issue 28, run as a learner's own user, refused or harmless.

The module's server is set up as docs/workshop.md says: the default user locked, the settings of
``helpers.tools.acl.server_settings`` (noeviction, maxmemory, maxclients, proto-max-bulk-len; the
sizes scaled down so the test is fast), the suite's code loaded by the instructor
(``acl.load``), one user per learner (``acl.apply_learners``) and foreign data. Each test names
the layer that stops the attack: the server's ACL, the server's settings, or the client-side
guard (which only a ``Lab`` client has).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import need_server_binary

from helpers import connect
from helpers.backend.guard import ForeignLibraryError
from helpers.backend.runs import alive_key, record_key, sweep
from helpers.backend.scripts import CodeNotLoaded, delete_library, fcall_reloading, load_script
from helpers.backend.server import RedisServer
from helpers.backend.urls import url_options
from helpers.tools import acl, foreign

MAXMEMORY = 48 * 2**20
MAXCLIENTS = 40
LEARNERS = ("ann", "bob")


@dataclasses.dataclass
class Room:
    """A shared server as the workshop sets it up: admin password, each learner's URL, the foreign data."""

    server: RedisServer
    admin_password: str
    urls: dict[str, str]
    before: foreign.Snapshot | None = None

    def admin(self, **kwargs: Any) -> redis.Redis:
        """Return a client as the administrator (the default user)."""
        return self.server.client(password=self.admin_password, **kwargs)

    def raw(self, learner: str, **kwargs: Any) -> redis.Redis:
        """Return a plain redis-py client as that learner: no guard, only the server."""
        return redis.Redis.from_url(self.urls[learner], **kwargs)


def _refused_by_acl(call: Any) -> str:
    with pytest.raises(redis.ResponseError) as caught:
        call()
    assert "no permissions" in str(caught.value).lower(), caught.value
    return str(caught.value)


@pytest.fixture(scope="module")
def room() -> Iterator[Room]:
    need_server_binary()
    admin_password = acl.new_password()
    passwords = {name: acl.new_password() for name in LEARNERS}
    with RedisServer() as server:
        with server.client() as open_default:
            open_default.execute_command(
                "ACL", "SETUSER", "default", "resetpass", f">{admin_password}"
            )
        state = Room(
            server,
            admin_password,
            {n: acl.user_url(server.url, pw, n) for n, pw in passwords.items()},
        )
        with state.admin() as admin:
            settings = {name: value for name, value, _why in acl.server_settings(len(LEARNERS))}
            settings.update(maxmemory=str(MAXMEMORY), maxclients=str(MAXCLIENTS))
            for name, value in settings.items():
                admin.config_set(name, value)
            assert acl.load([admin]) and acl.apply_learners([admin], passwords) == len(LEARNERS)
            foreign.plant_keys(admin, 300)
            state.before = foreign.snapshot(admin)
        yield state
        with state.admin() as admin:
            problems = foreign.compare(state.before, foreign.snapshot(admin))
            problems += foreign.suite_leftovers(admin, state.before)
        assert problems == [], "an attack got through:\n" + "\n".join(problems)


@pytest.fixture
def ann(room: Room) -> Iterator[Any]:
    """Learner ann's Lab (her own user, a server the suite does not own)."""
    lab = connect("learners", url=room.urls["ann"])
    try:
        yield lab
    finally:
        lab.cleanup()
        lab.close()


def test_a_learner_runs_what_the_notebooks_run_in_her_own_keys(ann: Any, room: Room) -> None:
    assert ann.ns.prefix.startswith("racelab:@ann:learners:")  # the URL's user comes first
    c, key = ann.client(), ann.key("counter")
    assert c.incr(key) == 1
    pipe = c.pipeline()
    pipe.watch(key)
    pipe.multi()
    pipe.incr(key)
    assert pipe.execute() == [2]
    lock = ann.key("lock")
    c.set(lock, "me")
    assert load_script(c, "lock_release")(keys=[lock], args=["me"]) == 1  # EVALSHA, pre-loaded
    words = [ann.ns.tagged("d", part) for part in ("ids", "index", "meta")]
    assert fcall_reloading(c, "dict_library", "racelab_dict_get_or_put", words, ["w"]) is not None
    assert delete_library(c, "dict_library") is False  # the instructor's library stays
    _refused_by_acl(lambda: c.scan(0))  # no SCAN: cleanup finds the keys it recorded
    written = ann.ns.keys(c)
    assert key in written and lock not in written and set(written) <= {key, *words}
    assert ann.cleanup() == len(written) and ann.ns.keys(c) == []


def test_another_learners_keys_are_out_of_reach(ann: Any, room: Room) -> None:
    """Layer: the server's ACL (each user's key pattern)."""
    bob = connect("learners", url=room.urls["bob"])
    try:
        theirs = bob.key("counter")
        bob.client().set(theirs, "bob's")
        mine = ann.client()
        for attack in (
            lambda: mine.get(theirs),
            lambda: mine.delete(theirs),
            lambda: mine.set(theirs, "ann's"),
            lambda: mine.rename(ann.key("x"), theirs),
            lambda: mine.unlink(b"app:string:0"),  # foreign data outside the suite too
        ):
            _refused_by_acl(attack)
        assert bob.client().get(theirs) == "bob's"
    finally:
        bob.cleanup()
        bob.close()


FOREIGN_DICT = (
    "#!lua name=racelab_dict\n"
    "redis.register_function('racelab_dict_get_or_put', function(keys, args) return 99 end)"
)
SQUAT = (
    "#!lua name=racelab_zz\n"
    "redis.register_function('racelab_dict_get_or_put', function(keys, args) return 4343 end)"
)


def test_function_load_replace_with_foreign_code_is_refused(ann: Any, room: Room) -> None:
    """Layers: the guard (a Lab client: the new code is not the suite's), the ACL (no FUNCTION LOAD)."""
    with pytest.raises(ForeignLibraryError, match="not byte for byte the suite's"):
        ann.client().function_load(FOREIGN_DICT, replace=True)
    with room.raw("ann") as raw:
        _refused_by_acl(lambda: raw.function_load(FOREIGN_DICT, replace=True))
        _refused_by_acl(lambda: raw.function_delete("racelab_dict"))
    with room.admin() as admin:
        assert (
            foreign.libraries(admin)["racelab_dict"]
            == acl.learner_libraries()["racelab_dict"].encode()
        )


def test_a_squatted_function_name_is_refused_three_times(ann: Any, room: Room) -> None:
    """Layers: the guard, the ACL, and Redis itself (a function name is the server's, once)."""
    with pytest.raises(ForeignLibraryError, match="registers racelab_dict_get_or_put"):
        ann.client().function_load(SQUAT)
    with room.raw("ann") as raw:
        _refused_by_acl(lambda: raw.function_load(SQUAT))
    with room.admin() as admin, pytest.raises(redis.ResponseError, match="already exists"):
        admin.function_load(SQUAT)  # even an administrator's mistake


def test_an_eval_loop_cannot_start(ann: Any, room: Room) -> None:
    """Layer: the ACL: no EVAL, no SCRIPT LOAD, and EVALSHA only of the suite's bounded scripts."""
    spin = acl.hashlib.sha1(acl.lua_source("runaway_spin").encode()).hexdigest()
    with room.raw("ann") as raw:
        _refused_by_acl(lambda: raw.eval("while true do end", 0))
        _refused_by_acl(lambda: raw.script_load("while true do end"))
        _refused_by_acl(lambda: raw.evalsha(spin, 0))  # a lesson's loop: not for learners
        _refused_by_acl(lambda: raw.fcall("racelab_runaway_spin", 0, 10**9))
    with pytest.raises(CodeNotLoaded, match="instructor"):
        load_script(ann.client(), "runaway_spin")(keys=[ann.key("x")])


def test_a_memory_fill_is_refused_and_evicts_nothing(ann: Any, room: Room) -> None:
    """Layer: the settings: maxmemory with noeviction (and proto-max-bulk-len for one huge value)."""
    c, chunk = ann.client(), b"x" * (4 * 2**20)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for i in range(2 * MAXMEMORY // len(chunk)):
            c.set(ann.key(f"fill{i}"), chunk)
    with room.raw("ann") as raw, pytest.raises(redis.RedisError):
        raw.set(ann.key("huge"), b"x" * (17 * 2**20))  # over proto-max-bulk-len 16mb
    with room.admin() as admin:
        assert not foreign.compare(room.before, foreign.snapshot(admin))  # nothing evicted
    ann.cleanup()


def test_a_connection_flood_leaves_the_admin_connected(ann: Any, room: Room) -> None:
    """Layer: the settings (maxclients) and an admin connection opened first; Redis cannot cap one user."""
    with room.admin() as admin:
        admin.ping()  # opened before the flood, like the instructor's redis-cli
        flood, refused = [], 0
        try:
            for _ in range(MAXCLIENTS + 10):
                try:
                    conn = redis.Redis.from_url(room.urls["ann"], single_connection_client=True)
                    flood.append(conn)
                except redis.ConnectionError as exc:
                    assert "max number of clients" in str(exc)
                    refused += 1
            assert refused >= 10 and admin.ping()  # the open admin connection still answers
            assert admin.dbsize() >= len(room.before.keys)
        finally:
            for conn in flood:
                conn.close()


@pytest.mark.parametrize(
    "attack",
    [
        "SCAN 0",
        "KEYS *",
        "RANDOMKEY",
        "DBSIZE",
        "FUNCTION LIST WITHCODE",
        "CLIENT TRACKING ON BCAST",
    ],
)
def test_nothing_tells_other_peoples_names_or_code(room: Room, attack: str) -> None:
    """Layer: the ACL (-scan -randomkey -dbsize -client|tracking, no FUNCTION LIST, KEYS in @dangerous)."""
    with room.raw("ann", protocol=3) as raw:
        _refused_by_acl(lambda: raw.execute_command(*attack.split()))


# --- abandoned runs ---------------------------------------------------------------------------

KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    from helpers import connect
    lab = connect("abandoned", url=sys.argv[1])
    c = lab.client()
    for n in range(5):
        c.set(lab.key(f"k{n}"), n)  # no TTL: the lesson's kind of key
    print(lab.ns.prefix, flush=True)
    time.sleep(600)
    """
)


def test_a_killed_kernels_keys_are_swept_after_its_lease(room: Room) -> None:
    env = dict(os.environ, RACELAB_LEASE_S="1")
    kernel = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, room.urls["ann"]],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    try:
        assert kernel.stdout is not None
        prefix = kernel.stdout.readline().strip()
        live = connect("alive", url=room.urls["bob"])  # a run that still beats (600 s lease)
        live.client().set(live.key("kept"), 1)
        with room.admin() as admin:
            assert prefix.startswith("racelab:@ann:abandoned:") and sweep(admin) == []
            kernel.send_signal(signal.SIGKILL)
            kernel.wait(10)
            time.sleep(1.5)  # past the lease: the server expired the alive key
            assert sweep(admin) == [prefix]
            assert list(admin.scan_iter(match=prefix + "*")) == []
            assert admin.get(live.key("kept")) == b"1"  # bob's live run was not touched
        live.cleanup()
        live.close()
        with room.admin() as admin:
            assert not admin.exists(record_key(live.ns), alive_key(live.ns))  # close removed them
    finally:
        kernel.kill()
        kernel.wait(10)


# --- the command line: what the instructor prints and loads ------------------------------------


def test_acl_learners_prints_one_working_user_and_url_each(
    room: Room, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.tools.cli import main

    assert main(["acl", "--learners", "cy,dee", "--url", room.server.url]) == 0
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("ACL SETUSER ")]
    urls = dict(
        line.split(": export REDIS_URL=") for line in printed.splitlines() if "export" in line
    )
    assert [shlex.split(line)[2] for line in lines] == ["cy", "dee"] and set(urls) == {"cy", "dee"}
    assert len({url_options(u)["password"] for u in urls.values()}) == 2  # one password each
    assert "CONFIG SET maxmemory-policy noeviction" in printed
    with room.admin() as admin:
        for line in lines:
            admin.execute_command(*shlex.split(line))  # as redis-cli would send it
        try:
            with redis.Redis.from_url(urls["cy"]) as cy:
                cy.set("racelab:@cy:x:y:k", 1)
                _refused_by_acl(lambda: cy.set("racelab:@dee:x:y:k", 1))
                cy.delete("racelab:@cy:x:y:k")
        finally:
            admin.execute_command("ACL", "DELUSER", "cy", "dee")


def test_acl_load_checks_the_code_byte_for_byte(capsys: pytest.CaptureFixture[str]) -> None:
    from helpers.tools.cli import main

    need_server_binary()
    with RedisServer() as server:
        assert main(["acl", "--load", "--url", server.url]) == 0
        assert "libraries (racelab_demo, racelab_dict) byte for byte" in capsys.readouterr().out
        assert main(["acl", "--load", "--url", server.url]) == 0  # again: nothing to change
        with server.client() as admin:
            admin.function_load(FOREIGN_DICT, replace=True)
        assert main(["acl", "--load", "--url", server.url]) == 1
        assert "'racelab_dict' on the server is not byte for byte" in capsys.readouterr().err
        with server.client() as admin:
            assert foreign.libraries(admin)["racelab_dict"] == FOREIGN_DICT.encode()  # left alone


def test_the_workshop_page_gives_the_settings_the_command_prints() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "workshop.md").read_text()
    section = page.split("### Many learners on one server", 1)[1].split("\n### ", 1)[0]
    for name, value, _why in acl.server_settings(1):
        if name == "maxclients":
            assert int(value) - acl.CONNECTIONS_PER_LEARNER == 32
            assert f"{acl.CONNECTIONS_PER_LEARNER} per learner + 32" in section
        elif name == "maxmemory-clients":
            assert value == "67mb" and acl.server_settings(30)[-1][1] == "125mb"
            assert "64 MB + 32 KB per connection of `maxclients`" in section
            assert "(2 MB per learner + 1 MB: `125mb` for 30)" in section
        else:
            assert f"| `{name}` | `{value}`" in section, name
    assert "python -m helpers acl --load" in section and "python -m helpers sweep" in section
