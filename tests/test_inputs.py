"""Inputs fail fast and clear (issue 28): URLs, databases, binary key names, show(), rtt_ms."""

from __future__ import annotations

import math
from collections.abc import Iterator

import fakeredis
import pytest
import redis
from conftest import need_server_binary

from helpers import connect, show
from helpers.backend.lab import ServerRefused, ServerUnavailable
from helpers.backend.server import RedisServer
from helpers.backend.urls import MalformedURL, redacted
from helpers.errors import RaceLabError
from helpers.instruments.listing import NotShowable
from helpers.tools import acl

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://{SECRET}@127.0.0.1:1/0",
        f"redis://ann:{SECRET}@127.0.0.1:1/0",
        f"redis://:{SECRET}@127.0.0.1:1",
        f"rediss://ann:{SECRET}@127.0.0.1:1/0",
        f"redis://127.0.0.1:1/0?password={SECRET}",
        f"unix://{SECRET}@/nonexistent/redis.sock",
    ],
)
def test_the_password_is_redacted_in_every_url_form_and_every_error(url: str) -> None:
    assert SECRET not in redacted(url) and "***" in redacted(url)
    with pytest.raises((ServerUnavailable, MalformedURL)) as caught:
        connect("inputs", url=url)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_redis_url_is_refused_not_taken_for_embedded(
    monkeypatch: pytest.MonkeyPatch, empty: str
) -> None:
    monkeypatch.setenv("REDIS_URL", empty)
    with pytest.raises(MalformedURL, match="REDIS_URL is set but empty: unset it"):
        connect("inputs")


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    need_server_binary()
    with RedisServer() as started:
        yield started


def test_a_forbidden_database_is_a_suite_error_naming_the_user(server: RedisServer) -> None:
    password = acl.new_password()
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", *acl.learner_setuser_args("dee", password))
    url = acl.user_url(server.url, password, "dee").replace("/0", "/3")
    with pytest.raises(ServerRefused, match="refused this user") as caught:
        connect("inputs", url=url)
    assert isinstance(caught.value, RaceLabError) and password not in str(caught.value)
    lab = connect("inputs", url=acl.user_url(server.url, password, "dee"))  # its own db 0 works
    assert password not in repr(lab)
    lab.close()


BINARY = b"racelab:\xff\xfe:binary"


def _binary_names_scan(lab: object, plant: redis.Redis) -> None:
    plant.set(BINARY, b"theirs")
    plant.set(b"app:\x80", b"theirs")
    try:
        c = lab.client()  # type: ignore[attr-defined]
        found = list(c.scan_iter(match="racelab:*"))
        name = next(k for k in found if k.encode("utf-8", "surrogateescape") == BINARY)
        assert c.type(name) == "string" and c.get(name) == "theirs"  # the same bytes back
    finally:
        plant.delete(BINARY, b"app:\x80")


def test_binary_foreign_names_do_not_break_a_lab_clients_scan_on_a_real_server(
    server: RedisServer,
) -> None:
    lab = connect("inputs", url=server.url, owned=False)
    try:
        with server.client() as plant:
            _binary_names_scan(lab, plant)
    finally:
        lab.close()


def test_binary_foreign_names_do_not_break_a_lab_clients_scan_on_embedded() -> None:
    lab = connect("inputs", backend="embedded")
    try:
        _binary_names_scan(lab, fakeredis.FakeRedis(server=lab.fake_server))
    finally:
        lab.close()


@pytest.mark.parametrize(
    ("obj", "says"),
    [
        (None, "not NoneType None"),
        (42, "not int 42"),
        (b"lock_release", "not bytes b'lock_release'"),
        ([print], "not list"),
        (int, "cannot find the source of int"),  # a builtin class
        (type("Made", (), {}), "cannot find the source of Made"),  # a class with no source file
    ],
)
def test_show_refuses_what_is_not_code_in_one_line(obj: object, says: str) -> None:
    with pytest.raises(NotShowable, match=says) as caught:
        show(obj)
    assert isinstance(caught.value, TypeError) and "\n" not in str(caught.value)


def test_show_still_shows_a_class_with_a_source_file() -> None:
    from races.dictionary import DictKeys

    assert str(show(DictKeys)).startswith("class DictKeys(NamedTuple):")


@pytest.mark.parametrize("rtt_ms", [1e9, 10**400, -1, math.nan, math.inf, 10_000.5, "1"])
def test_rtt_ms_is_bounded_to_ten_seconds(rtt_ms: object) -> None:
    lab = connect("inputs", backend="embedded")
    try:
        with pytest.raises(ValueError, match="milliseconds from 0 to 10,000"):
            lab.client(rtt_ms=rtt_ms)  # type: ignore[arg-type]
        assert lab.client(rtt_ms=10_000) is not None and lab.client(rtt_ms=0) is not None
    finally:
        lab.close()
