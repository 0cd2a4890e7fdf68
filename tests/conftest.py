"""Shared fixtures: every backend test runs on the embedded backend and on a real Redis >= 8.4.

The real server is REDIS_URL when set (a server the suite does not own: the guard is on),
else a throwaway redis-server from .redis/bin or PATH, started once per session. With
RACELAB_REQUIRE_REAL=1 (CI), a missing real server is an error, not a skip.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from run_once import add_options, configure

from helpers import Lab, connect
from helpers.backend.server import RedisClusterServer, RedisServer, ServerNotFound, find_binary
from helpers.tools import foreign

REQUIRE_REAL = os.environ.get("RACELAB_REQUIRE_REAL") == "1"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)  # --record-passed / --skip-passed: CI's two legs (tests/run_once.py)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist would hand out the files with
        config.option.loadscopereorder = False  # the most tests first; keep SLOW_FIRST's order


# The files that take longest (make test prints --durations) run first, longest first: under
# pytest-xdist (--dist loadfile: a file's tests stay on one worker) a worker that starts one of
# them last would leave the others idle while it runs. (xdist itself would start the files with
# the most tests first, so the fuzz file, 3 tests and 5 minutes, ran last: see pytest_configure.)
SLOW_FIRST = (
    "test_fuzz_explorer.py",
    "test_benchmark_explorer.py",
    "test_run_once.py",
    "test_required_path.py",
    "test_explore_workers.py",
    "test_cases.py",
    "test_handouts.py",
    "test_doctor.py",
    "test_main.py",
    "test_explorer_regressions.py",
    "test_exercises.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


def _no_real(reason: str) -> None:
    if REQUIRE_REAL:
        pytest.fail(f"RACELAB_REQUIRE_REAL=1 but {reason}", pytrace=False)
    pytest.skip(f"no real Redis: {reason}")


def need_server_binary() -> None:
    """Skip (or fail under RACELAB_REQUIRE_REAL=1) unless a redis-server binary is found."""
    try:
        find_binary()  # RACELAB_REDIS_SERVER may name a missing one
    except ServerNotFound as exc:
        _no_real(str(exc))


def need_cluster_binaries() -> None:
    """Skip (or fail under RACELAB_REQUIRE_REAL=1) unless redis-server and redis-cli are found."""
    try:
        find_binary()  # the nodes: RACELAB_REDIS_SERVER may name a missing one
        find_binary("redis-cli")
    except ServerNotFound as exc:
        _no_real(str(exc))


@pytest.fixture(scope="session")
def real_url() -> Iterator[str]:
    """URL of a real Redis >= 8.4 for this session (REDIS_URL, or a throwaway server)."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    need_server_binary()
    with RedisServer() as server:
        # The session server plays a shared server: it holds somebody else's data, and at the
        # end of the session all of it must be intact and no suite key may remain.
        with server.client() as admin:
            foreign.fill_foreign(admin)
            before = foreign.snapshot(admin)
            yield server.url
            problems = foreign.compare(before, foreign.snapshot(admin))
            problems += [f"suite key left behind: {k}" for k in foreign.suite_leftovers(admin)]
        assert not problems, "the tests harmed the shared server:\n" + "\n".join(problems)


@pytest.fixture(scope="session")
def cluster_url() -> Iterator[str]:
    """URL of a throwaway 3-node Redis Cluster on loopback, for this session."""
    need_cluster_binaries()
    with RedisClusterServer() as cluster:
        yield cluster.url


def _test_namespace(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.originalname)[:64]


@pytest.fixture(params=["embedded", "real"])
def lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    """A Lab on each backend, with a fresh namespace; its keys are removed afterwards."""
    if request.param == "embedded":
        the_lab = connect(_test_namespace(request), backend="embedded")
    else:
        # owned=False: the session server plays a shared server, so the guard is on.
        the_lab = connect(
            _test_namespace(request), url=request.getfixturevalue("real_url"), owned=False
        )
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        the_lab.close()


@pytest.fixture
def cluster_lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    """A Lab on the session's throwaway cluster."""
    the_lab = connect(
        _test_namespace(request), url=request.getfixturevalue("cluster_url"), owned=False
    )
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        the_lab.close()


@pytest.fixture
def owned_server() -> Iterator[RedisServer]:
    """A throwaway redis-server of this test alone (destructive commands allowed)."""
    need_server_binary()
    with RedisServer() as server:
        yield server


def _wait_until_gone(client: Any, key: str, timeout_s: float = 5.0) -> None:
    """Poll until key has expired (the lease ran out), failing the test after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while client.exists(key):
        if time.monotonic() > deadline:
            pytest.fail(f"{key} did not expire within {timeout_s} s")
        time.sleep(0.002)


@pytest.fixture
def wait_until_gone() -> Callable[..., None]:
    """Return a function that waits until a key's TTL has run out (lease-expiry tests)."""
    return _wait_until_gone
