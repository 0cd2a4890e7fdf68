"""The command line `python -m helpers run [--cluster] [--shared] -- CMD` that make test uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.backend.server import ServerNotFound, find_binary

from conftest import _no_real

# Run by the child command: it connects like a notebook does (REDIS_URL), then writes its argv.
CHILD = """
import os, sys
import redis
from helpers import connect
lab = connect("cli-check")
print("kind", lab.kind)
lab.client().set(lab.key("mine"), "1")
if "leave" not in sys.argv:
    lab.cleanup()
if "touch" in sys.argv:
    url = os.environ["REDIS_URL"]
    admin = redis.RedisCluster.from_url(url) if lab.kind == "cluster" else redis.Redis.from_url(url)
    admin.set("app:config", "changed")
lab.close()
"""


def _run(*options: str, child_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    try:
        find_binary("redis-cli" if "--cluster" in options else "redis-server")
    except ServerNotFound as exc:
        _no_real(str(exc))
    return subprocess.run([sys.executable, "-m", "helpers", "run", *options, "--",
                           sys.executable, "-c", CHILD, *child_args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("options, kind", [((), "real"), (("--cluster",), "cluster")], ids=["server", "cluster"])
def test_a_clean_command_passes_the_shared_check(options: tuple[str, ...], kind: str) -> None:
    done = _run("--shared", *options)
    assert done.returncode == 0, done.stderr
    assert f"kind {kind}" in done.stdout
    assert "shared-server check passed: 10 foreign keys and 1 foreign libraries intact" in done.stdout


@pytest.mark.parametrize("options", [(), ("--cluster",)], ids=["server", "cluster"])
def test_a_touched_foreign_key_and_a_leftover_fail_the_shared_check(options: tuple[str, ...]) -> None:
    done = _run("--shared", *options, child_args=("touch", "leave"))
    assert done.returncode == 1
    assert "SHARED-SERVER CHECK FAILED: foreign key b'app:config' was modified" in done.stderr
    assert "SHARED-SERVER CHECK FAILED: suite key left behind: racelab:cli-check:" in done.stderr


def test_the_command_s_own_exit_status_is_passed_on() -> None:
    try:
        find_binary()
    except ServerNotFound as exc:
        _no_real(str(exc))
    done = subprocess.run([sys.executable, "-m", "helpers", "run", "--", sys.executable, "-c", "raise SystemExit(7)"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 7


@pytest.mark.parametrize("argv", [["run", "--bogus", "--", "true"], ["run", "--shared", "--"], ["nothing"]])
def test_a_bad_command_line_prints_the_usage_and_exits_2(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "helpers", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "python -m helpers run --cluster [--shared] -- CMD" in done.stderr


@pytest.mark.parametrize("options, what", [([], "server"), (["--cluster"], "cluster")])
def test_no_redis_binary_is_a_one_line_error_not_a_traceback(monkeypatch: pytest.MonkeyPatch, capsys,
                                                             options: list[str], what: str) -> None:
    import helpers.backend.server
    from helpers.tools.cli import main

    def missing(name: str = "redis-server", *args: object) -> None:
        raise ServerNotFound(f"no {name} >= 8.4 found. Run `make redis` to build one.")

    monkeypatch.setattr(helpers.backend.server, "find_binary", missing)
    assert main(["run", *options, "--", "true"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"racelab: cannot start a {what}: no redis-")
    assert "Run `make redis`" in err and "Traceback" not in err
