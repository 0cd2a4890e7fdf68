"""The instructor owns the lease: a learner's RACELAB_LEASE_S can shorten a run's lease, not lengthen it.

``python -m helpers acl --load`` writes the longest lease (``racelab:#lease``), which a learner's
user may read and not write; a run beats with the shorter of its own and that bound; a sweep cuts
every longer alive key down to the bound (``--max-lease``, else the key), so even a lease a
learner sets by hand ends there.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
import redis
from conftest import need_server_binary

from helpers import connect
from helpers.backend.namespace import Namespace
from helpers.backend.runs import (
    LEASE_KEY,
    LEASE_VARIABLE,
    alive_key,
    instructor_lease,
    lease_s,
    record_key,
    set_instructor_lease,
    sweep,
)
from helpers.backend.server import RedisServer
from helpers.tools import acl
from helpers.tools.cli import main


@pytest.mark.parametrize(
    ("own", "bound", "lease"),
    [("3600", 600.0, 600.0), ("60", 600.0, 60.0), ("", 300.0, 300.0), ("", None, 600.0)],
)
def test_a_learners_lease_is_at_most_the_instructors(
    monkeypatch: pytest.MonkeyPatch, own: str, bound: float | None, lease: float
) -> None:
    monkeypatch.setenv(LEASE_VARIABLE, own)
    assert lease_s(bound) == lease


@dataclasses.dataclass
class Server:
    """A shared-looking server: the default user behind a password, learner ann, the suite's code."""

    server: RedisServer
    admin_password: str
    ann_url: str

    def admin(self) -> redis.Redis:
        """Return a client as the administrator."""
        return self.server.client(password=self.admin_password)

    @property
    def admin_url(self) -> str:
        """Return the administrator's URL."""
        return f"redis://default:{self.admin_password}@127.0.0.1:{self.server.port}/0"


@pytest.fixture(scope="module")
def shared() -> Iterator[Server]:
    need_server_binary()
    admin_password, ann_password = acl.new_password(), acl.new_password()
    with RedisServer() as server:
        with server.client() as c:
            c.execute_command("ACL", "SETUSER", "default", "resetpass", f">{admin_password}")
        state = Server(server, admin_password, acl.user_url(server.url, ann_password, "ann"))
        with state.admin() as admin:
            acl.load([admin])
            acl.apply_learners([admin], {"ann": ann_password})
        yield state


def test_acl_load_writes_the_bound_a_learner_may_read_and_not_write(
    shared: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["acl", "--load", "--url", shared.admin_url, "--max-lease", "120"]) == 0
    assert "a run's lease is at most 120 s" in capsys.readouterr().out
    with redis.Redis.from_url(shared.ann_url) as ann:
        assert instructor_lease(ann) == 120.0
        with pytest.raises(redis.exceptions.NoPermissionError):
            ann.set(LEASE_KEY, "86400")
    assert main(["acl", "--load", "--url", shared.admin_url, "--max-lease", "1e9"]) == 2
    assert "--max-lease must be 0.5 to 86400 seconds" in capsys.readouterr().err


def test_a_run_beats_with_the_shorter_lease(
    shared: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    with shared.admin() as admin:
        set_instructor_lease(admin, 30)
    for own, expected in (("3600", 30.0), ("5", 5.0)):
        monkeypatch.setenv(LEASE_VARIABLE, own)
        lab = connect("lease", url=shared.ann_url)
        try:
            assert lab._heartbeat is not None and lab._heartbeat.lease == expected
            with shared.admin() as admin:
                assert 0 < admin.pttl(alive_key(lab.ns)) <= expected * 1000
        finally:
            lab.close()


def _plant_run(client: redis.Redis, run: str, ttl_ms: int) -> Namespace:
    """Write a run's record and alive key by hand, as a learner could; return its namespace."""
    ns = Namespace("lease", run, learner="ann")
    client.set(record_key(ns), ns.prefix)
    client.set(alive_key(ns), "1", px=ttl_ms)
    client.set(ns.prefix + "k", "v")
    return ns


def test_a_sweep_cuts_a_longer_lease_to_the_bound_and_keeps_a_shorter_one(shared: Server) -> None:
    with redis.Redis.from_url(shared.ann_url) as ann:
        long = _plant_run(ann, "long", 86_400_000)  # a day, set by hand
        short = _plant_run(ann, "short", 60_000)
    with shared.admin() as admin:
        set_instructor_lease(admin, 120)
        assert sweep(admin) == []
        assert 0 < admin.pttl(alive_key(long)) <= 120_000
        assert 0 < admin.pttl(alive_key(short)) <= 60_000
        assert sweep(admin, max_lease=0.5) == []  # the option wins over the key
        time.sleep(0.6)
        assert sweep(admin) == [long.prefix, short.prefix]  # both past the cut bound
        assert admin.exists(long.prefix + "k", short.prefix + "k") == 0


def test_sweep_refuses_a_bound_out_of_range(
    shared: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--url", shared.admin_url, "--max-lease", "0"]) == 2
    assert "--max-lease must be 0.5 to 86400 seconds" in capsys.readouterr().err
    assert main(["sweep", "--url", shared.admin_url, "--max-lease", "600"]) == 0
