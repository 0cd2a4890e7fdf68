"""The backend matrix's other servers: Debian's Redis 7.0 and Valkey 9 (scripts/get-other-servers.sh).

The suite must know each for what it is (by INFO, not by the binary's name), report what it
lacks and why, and the 8.4 idioms it has must behave as the notebooks teach them. Without the
binaries these tests skip; with RACELAB_MATRIX=1 (the matrix pass of make test) they must run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import Lab, connect
from helpers.backend.server import (
    BINARY_VARIABLE,
    NO_BINARY,
    RedisServer,
    ServerNotFound,
    find_binary,
)

ROOT = Path(__file__).resolve().parents[1]
REDIS_70 = ROOT / ".redis" / "7.0" / "bin" / "redis-server"
VALKEY = ROOT / ".redis" / "valkey" / "bin" / "valkey-server"


def _binary(path: Path) -> Path:
    if os.environ.get(BINARY_VARIABLE) == NO_BINARY:
        pytest.skip(f"${BINARY_VARIABLE}={NO_BINARY}: every server binary is hidden")
    if path.exists():
        return path
    if os.environ.get("RACELAB_MATRIX") == "1":
        pytest.fail(
            f"RACELAB_MATRIX=1 but {path} is missing (run scripts/get-other-servers.sh)",
            pytrace=False,
        )
    pytest.skip(f"{path} is missing (scripts/get-other-servers.sh fetches it)")


@pytest.fixture(params=["redis-7.0", "valkey"])
def other(request: pytest.FixtureRequest) -> Iterator[Lab]:
    """A Lab on a throwaway Redis 7.0 or Valkey server (the suite does not claim to own it)."""
    binary = _binary(REDIS_70 if request.param == "redis-7.0" else VALKEY)
    with RedisServer(binary=binary) as server:
        lab = connect("matrix", url=server.url, owned=False)
        try:
            yield lab
        finally:
            lab.cleanup()
            lab.close()


def test_each_server_is_known_for_what_it_is(other):
    info = other.client().info("server")
    if other.server.name == "valkey":
        assert other.version == info["valkey_version"] and other.version.startswith("9.")
        assert info["redis_version"] == "7.2.4" != other.version  # what the old check printed
        assert "server: Valkey 9." in other.describe()
    else:
        assert other.server.name == "redis" and other.version.startswith("7.0.")
        assert "server: Redis 7.0." in other.describe()


def test_what_each_server_lacks_is_reported_with_the_reason(other):
    caps = other.caps
    assert caps.lua and caps.functions and caps.eval_ro and caps.script_kill
    assert not caps.delex and not caps.digest
    label = other.server.label()
    assert caps.why("delex") == f"{label} has no DELEX command"
    assert caps.why("digest") == f"{label} has no DIGEST command"
    # Valkey has had SET ... IFEQ since 8.1; Redis 7.0 has not.
    assert caps.set_ifeq == (other.server.name == "valkey")
    if not caps.set_ifeq:
        assert caps.why("set_ifeq") == f"{label} has no SET ... IFEQ option"


def test_set_ifeq_where_present_behaves_as_the_notebooks_teach(other):
    if not other.caps.set_ifeq:
        pytest.skip(other.caps.why("set_ifeq"))
    c, key = other.client(), other.key("k")
    assert c.set(key, "new", ifeq="old") is None  # a missing key is never created
    assert c.exists(key) == 0
    c.set(key, "old")
    assert c.set(key, "new", ifeq="other") is None and c.get(key) == "old"
    assert c.set(key, "new", ifeq="old") is True and c.get(key) == "new"


def test_helpers_run_names_the_server_it_started_and_hands_its_path_on():
    binary = _binary(VALKEY)
    # The command's own throwaway servers use the same binary, wherever the command runs from
    # (a notebook's kernel runs in notebooks/): the path handed on is absolute.
    code = "import os; print(os.environ['RACELAB_REDIS_SERVER'])"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "helpers",
            "run",
            "--binary",
            str(binary.relative_to(ROOT)),
            "--",
            sys.executable,
            "-c",
            code,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("racelab: started valkey-server 9.") and second == str(binary)


def test_an_old_server_is_named_when_84_is_required(monkeypatch):
    binary = _binary(REDIS_70)
    monkeypatch.setenv(BINARY_VARIABLE, str(binary))
    with pytest.raises(ServerNotFound, match=r"^no redis-server >= 8\.4\.0 \(found: 7\.0\.\d+ at "):
        find_binary()
