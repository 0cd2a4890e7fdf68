"""A learner's ACL allows exactly the commands the lessons send (issue 37 item 1).

The list is recorded (``make learner-commands``: notebooks 00-03 run as a learner on a throwaway
server, INFO commandstats read afterwards) into helpers/tools/learner_commands.txt. Here: the
rules are that list and nothing more; the server refuses what no lesson sends (SRANDMEMBER,
SORT, ...) and allows what they do; and, with RACELAB_RECORD_COMMANDS=1 (minutes: it runs the
notebooks), a fresh recording equals the committed list in both directions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import need_server_binary

from helpers.backend.server import RedisServer
from helpers.tools import acl

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = acl.new_password()
# Commands whose cost a count or range argument sets, which no lesson sends: never allowed.
UNBOUNDED = ("srandmember", "sort", "sort_ro", "hrandfield", "zrandmember", "keys", "scan")


def test_the_learner_rules_are_the_recorded_list_and_nothing_more() -> None:
    rules = acl.learner_rules("ann")
    granted = {r[1:] for r in rules if r.startswith("+")}
    assert not [r for r in rules if r.startswith("+@")], "a category is no allow-list"
    plain = {g for g in granted if not g.startswith(("evalsha|", "fcall|", "fcall_ro|"))}
    scoped = {"select|0", "script|exists", "info|server", "info|cluster", "info|commandstats"}
    assert (
        plain - scoped - {"cluster|slots", "cluster|shards"} == acl.learner_commands() - acl.SCOPED
    )


def test_the_committed_list_is_a_recording_with_no_unbounded_command() -> None:
    text = acl.COMMANDS_FILE.read_text()
    commands = acl.learner_commands()
    assert text == acl.commands_file_text(commands), "sorted, one a line, under the header"
    assert {"get", "set", "multi", "exec", "watch", "evalsha"} <= commands
    assert not set(UNBOUNDED) & commands


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """Yield a throwaway server with learner ann's generated ACL user."""
    need_server_binary()
    with RedisServer() as the_server, the_server.client() as admin:
        acl.apply_learners([admin], {"ann": PASSWORD})
        yield the_server


@pytest.fixture
def learner(server: RedisServer) -> Iterator[redis.Redis]:
    """Yield a plain client as learner ann."""
    with redis.Redis.from_url(acl.user_url(server.url, PASSWORD, "ann")) as client:
        yield client


@pytest.mark.parametrize("command", UNBOUNDED)
def test_the_server_refuses_an_unbounded_command_no_lesson_sends(
    learner: redis.Redis, command: str
) -> None:
    key = "racelab:@ann:test:set"
    args = {"srandmember": (key, -150_000_000), "keys": ("*",), "scan": (0,)}.get(command, (key,))
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to run"):
        learner.execute_command(command.upper(), *args)


def test_the_server_allows_every_recorded_command(
    server: RedisServer, learner: redis.Redis
) -> None:
    with server.client(decode_responses=True) as admin:
        user = admin.acl_getuser("ann")
    granted = set(user["commands"])
    missing = [c for c in acl.learner_commands() - acl.SCOPED if f"+{c}" not in granted]
    assert missing == []
    key = "racelab:@ann:test:n"
    assert learner.set(key, 1) and learner.incr(key) == 2 and learner.delete(key) == 1


@pytest.mark.skipif(
    os.environ.get("RACELAB_RECORD_COMMANDS") != "1",
    reason="runs notebooks 00-03 as a learner (minutes); RACELAB_RECORD_COMMANDS=1 to run it",
)
def test_a_fresh_recording_is_the_committed_list() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/learner_commands.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
