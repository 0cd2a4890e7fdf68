"""Every URL redis-py takes works through a Lab: redis://, rediss:// (TLS) and unix://, on every
client mode; a malformed URL is refused in one line that names it, its password redacted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import _no_real

from helpers import Lab, client_stats, connect
from helpers.backend.modes import ClientStats, mode_of
from helpers.backend.server import RedisServer, ServerNotFound, find_binary, has_tls
from helpers.backend.urls import MalformedURL, redacted, url_options
from helpers.errors import RaceLabError
from helpers.instruments.schedule import run_schedule


@pytest.fixture(scope="module")
def tls_server() -> Iterator[RedisServer]:
    """A throwaway server that listens only on TLS (self-signed) and on a Unix socket."""
    try:
        binary = find_binary()
    except ServerNotFound as exc:
        _no_real(str(exc))
    if not has_tls(binary):
        _no_real(f"{binary} was built without TLS; run `make redis` (it builds with BUILD_TLS=yes)")
    with RedisServer(tls=True, unix_socket=True) as server:
        yield server


@pytest.fixture(params=["rediss", "unix"])
def url_lab(request: pytest.FixtureRequest, tls_server: RedisServer) -> Iterator[Lab]:
    """A Lab through rediss:// or unix:// (owned=False: the guard is on, as on a managed Redis)."""
    url = tls_server.url if request.param == "rediss" else tls_server.unix_url
    assert url.startswith(f"{request.param}://")
    lab = connect(f"test_urls_{request.param}", url=url, owned=False)
    try:
        yield lab
    finally:
        lab.cleanup()
        lab.close()


def _incr_twice(lab: Lab, **client_options: object) -> ClientStats:
    """Return the client's counts after a GET, an INCR and a MULTI/EXEC block of one INCR."""
    c, key = lab.client(**client_options), lab.key("n")
    assert c.get(key) is None
    assert c.incr(key) == 1
    with c.pipeline(transaction=True) as pipe:
        pipe.incr(key)
        assert pipe.execute() == [2]
    return client_stats(c)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"mode": "think", "think_s": 0.001},
        {"mode": "lockstep"},
        {"rtt_ms": 0.5},
    ],
    ids=["straight", "think", "lockstep", "rtt"],
)
def test_every_client_mode_works_through_tls_and_a_unix_socket(
    url_lab: Lab, options: dict[str, object]
) -> None:
    assert _incr_twice(url_lab, **options) == ClientStats(
        round_trips=3, commands=5
    )  # GET, INCR, MULTI INCR EXEC


def test_a_gated_schedule_runs_through_tls_and_a_unix_socket(url_lab: Lab) -> None:
    key = url_lab.key("hits")

    def get_then_incr(client: object) -> int:
        seen = int(client.get(key) or 0)  # type: ignore[attr-defined]
        client.set(key, seen + 1)  # type: ignore[attr-defined]
        return seen + 1

    trace = run_schedule(url_lab, {"A": get_then_incr, "B": get_then_incr}, "ABAB")
    assert trace.results == {"A": 1, "B": 1}  # the lost update, in the forced order
    assert url_lab.client().get(key) == "1"


def test_the_connection_really_is_tls_or_the_socket(url_lab: Lab, tls_server: RedisServer) -> None:
    c = url_lab.client()
    local = c.client_info()["laddr"]
    if url_lab.url.startswith("unix://"):
        assert str(tls_server.socket_path) in local
    else:
        assert local.endswith(f":{tls_server.port}")  # the server's only port is its TLS port


def test_the_guard_and_its_side_connection_work_through_tls_and_a_unix_socket(
    url_lab: Lab,
) -> None:
    from helpers.backend.guard import UnsafeCommandError

    c = url_lab.client()
    with pytest.raises(UnsafeCommandError):
        c.flushall()
    # FUNCTION DELETE of a racelab* library asks the server for its code on a side connection
    # of the same transport; an absent library is the server's to refuse.
    with pytest.raises(Exception, match="(?i)library not found"):
        c.function_delete("racelab_absent_library")
    assert mode_of(c).stats.round_trips == 1  # the side connection is not the client's


def test_a_reconnect_through_tls_is_counted(url_lab: Lab) -> None:
    c = url_lab.client()
    c.ping()
    c.connection_pool.disconnect()
    c.ping()
    assert client_stats(c).reconnects == 1


SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"redis://user:{SECRET}@127.0.0.1:6379/x", "the database 'x' is not a number"),
        (f"redis://{SECRET}@127.0.0.1:6379/x", "the database 'x' is not a number"),
        (f"redis://:{SECRET}@127.0.0.1:0/0", "port 0 is no port"),
        (f"rediss://user:{SECRET}@127.0.0.1:0", "port 0 is no port"),
        (f"redis://127.0.0.1:6379/0?password={SECRET}&db=x", "Invalid value for 'db'"),
        (f"unix://user:{SECRET}@", "needs a socket path"),
        (f"http://user:{SECRET}@127.0.0.1:6379", "the scheme must be one of"),
        (f"redis://user:{SECRET}@127.0.0.1:99999/0", "out of range"),
    ],
)
def test_a_malformed_url_is_refused_in_one_line_naming_it_without_its_password(
    url: str, says: str
) -> None:
    with pytest.raises(MalformedURL) as refused:
        connect("test_urls", url=url)
    message = str(refused.value)
    assert says in message
    assert redacted(url) in message and SECRET not in message
    assert "\n" not in message
    assert isinstance(refused.value, RaceLabError) and isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://racelab:pw@127.0.0.1:6379/0", "redis://racelab:***@127.0.0.1:6379/0"),
        ("redis://pw@127.0.0.1:6379", "redis://***@127.0.0.1:6379"),
        ("rediss://:pw@h:6380/0?ssl_cert_reqs=none", "rediss://:***@h:6380/0?ssl_cert_reqs=none"),
        ("unix://u:pw@/run/redis.sock?db=1", "unix://u:***@/run/redis.sock?db=1"),
        ("redis://h/0?password=pw&db=0", "redis://h/0?password=***&db=0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_redacted_hides_the_password_in_every_url_form(url: str, shown: str) -> None:
    assert redacted(url) == shown


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("redis://h:6380/2", {"host": "h", "port": 6380, "db": 2}),
        ("redis://h", {"host": "h"}),
        ("redis://h/", {"host": "h"}),
        ("unix:///run/redis.sock?db=3", {"path": "/run/redis.sock", "db": 3}),
    ],
)
def test_clean_urls_read_as_redis_py_reads_them(url: str, options: dict[str, object]) -> None:
    got = url_options(url)
    got.pop("connection_class", None)
    assert got == options
