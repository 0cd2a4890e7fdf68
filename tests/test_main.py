"""The command line `python -m helpers run [--cluster] [--shared] -- CMD` that make test uses."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import _no_real

from helpers.backend.server import ServerNotFound, find_binary

# Run by the child command: it connects like a notebook does (REDIS_URL), then writes its argv.
# It runs as the workshop ACL user: a foreign key is refused by the server, a look-alike
# racelab: key is not (only the namespace keeps the suite away from it), so "touch" changes one.
CHILD = """
import os, sys
import redis
from helpers import connect
from helpers.tools import foreign
lab = connect("cli-check")
print("kind", lab.kind, "user", os.environ["REDIS_URL"].split("//")[1].split(":")[0])
c = lab.client()
c.set(lab.key("mine"), "1")
try:
    c.set("app:string:0", "changed")
except redis.ResponseError as exc:
    print("foreign key refused:", exc)
if "leave" not in sys.argv:
    lab.cleanup()
if "touch" in sys.argv:
    c.set(foreign.LOOKALIKE_KEY, "changed")
lab.close()
"""


def _run(*options: str, child_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    try:
        find_binary("redis-cli" if "--cluster" in options else "redis-server")
    except ServerNotFound as exc:
        _no_real(str(exc))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "helpers",
            "run",
            *options,
            "--",
            sys.executable,
            "-c",
            CHILD,
            *child_args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "options, kind", [((), "real"), (("--cluster",), "cluster")], ids=["server", "cluster"]
)
def test_a_clean_command_passes_the_shared_check(options: tuple[str, ...], kind: str) -> None:
    done = _run("--shared", *options)
    assert done.returncode == 0, done.stderr
    assert f"kind {kind} user racelab" in done.stdout
    assert "foreign key refused: No permissions to access a key" in done.stdout
    passed = re.search(
        r"shared-server check passed: ([\d,]+) foreign keys intact in (.*?)(?: over 3 nodes)?: "
        r"(\d+) strings, (\d+) hashes, (\d+) lists, (\d+) sets, (\d+) sorted sets, (\d+) streams; "
        r"(\d+) hashes with hash-field TTLs, (\d+) keys with a TTL",
        done.stdout,
    )
    assert passed, done.stdout
    assert int(passed[1].replace(",", "")) >= 2000
    # 2,003 in database 0: 2,000 less the 27 binary and look-alike names, shared out by type
    # (each share rounded up), plus those 27 names (LIBRARY_LOOKALIKE_KEYS added 13 of them).
    assert passed[2] == (
        "database 0 (2,003)" if kind == "cluster" else "database 0 (2,003) and database 3 (202)"
    )
    assert all(int(n) >= 100 for n in passed.groups()[2:])
    assert (
        "2 foreign function libraries (one named like the suite's) and the cached script intact"
        in done.stdout
    )
    assert "ACL LIST (2 users) unchanged" in done.stdout


@pytest.mark.parametrize("options", [(), ("--cluster",)], ids=["server", "cluster"])
def test_a_touched_foreign_key_and_a_leftover_fail_the_shared_check(
    options: tuple[str, ...],
) -> None:
    done = _run("--shared", *options, child_args=("touch", "leave"))
    assert done.returncode == 1
    assert (
        "SHARED-SERVER CHECK FAILED: foreign key b'racelab:someone:deadbeef:counter' was modified"
        in done.stderr
    )
    assert "SHARED-SERVER CHECK FAILED: suite key left behind: racelab:cli-check:" in done.stderr


def test_the_command_s_own_exit_status_is_passed_on() -> None:
    try:
        find_binary()
    except ServerNotFound as exc:
        _no_real(str(exc))
    done = subprocess.run(
        [sys.executable, "-m", "helpers", "run", "--", sys.executable, "-c", "raise SystemExit(7)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 7


@pytest.mark.parametrize(
    "argv", [["run", "--bogus", "--", "true"], ["run", "--shared", "--"], ["nothing"]]
)
def test_a_bad_command_line_prints_the_usage_and_exits_2(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "helpers", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "python -m helpers run --cluster [--shared] -- CMD" in done.stderr


@pytest.mark.parametrize("options, what", [([], "server"), (["--cluster"], "cluster")])
def test_no_redis_binary_is_a_one_line_error_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys, options: list[str], what: str
) -> None:
    import helpers.backend.server
    from helpers.tools.cli import main

    def missing(name: str = "redis-server", *args: object) -> None:
        raise ServerNotFound(f"no {name} >= 8.4 found. Run `make redis` to build one.")

    monkeypatch.setattr(helpers.backend.server, "find_binary", missing)
    assert main(["run", *options, "--", "true"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"racelab: cannot start a {what}: no redis-")
    assert "Run `make redis`" in err and "Traceback" not in err


def test_acl_prints_the_setuser_line_and_the_url() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "helpers",
            "acl",
            "--password",
            "s3cret",
            "--url",
            "redis://redis.example:6380/0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    setuser = next(line for line in lines if line.startswith("ACL SETUSER"))
    assert setuser.startswith(
        "ACL SETUSER racelab reset on '>s3cret' '~racelab:*' '~*[-_.:/{}]racelab:*' resetchannels"
        " -@all +@read"
    )
    assert (
        "-@admin -@dangerous" in setuser
        and "+@admin" not in setuser
        and "+@dangerous" not in setuser
    )
    assert "export REDIS_URL=redis://racelab:s3cret@redis.example:6380/0" in lines
    assert any("EVERY node of a cluster" in line for line in lines)
    assert any("default user must not be open" in line for line in lines)


def test_acl_makes_a_random_password_and_refuses_a_bad_command_line() -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-m", "helpers", "acl"], capture_output=True, text=True, timeout=60
        )
        for _ in range(2)
    ]
    urls = [
        next(line for line in r.stdout.splitlines() if line.startswith("export REDIS_URL="))
        for r in runs
    ]
    assert urls[0] != urls[1]
    bad = subprocess.run(
        [sys.executable, "-m", "helpers", "acl", "--bogus", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "python -m helpers acl" in bad.stderr


def test_the_security_page_shows_the_acl_line_the_command_prints() -> None:
    from pathlib import Path

    from helpers.tools import acl

    readme = Path(__file__).resolve().parents[1].joinpath("docs", "security.md").read_text()
    block = readme[
        readme.index("ACL SETUSER racelab") : readme.index(
            "export REDIS_URL=redis://racelab:PASSWORD"
        )
    ]
    assert " ".join(block.split()) == acl.setuser_line("PASSWORD")
