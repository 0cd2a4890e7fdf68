"""The workshop ACL user on a shared server: every attack of issue 16 is refused, by the guard or the server.

The module's server plays a shared Redis: its default user has a password, the workshop user
(helpers.tools.acl) is set, and it holds foreign data in two databases plus a foreign library
named like the suite's ``racelab_dict``. Each attack runs as the workshop user:

* through a ``Lab`` client, where the client-side guard refuses what it can see
  (``UnsafeCommandError``), and the server refuses what the guard cannot see (a name a script
  computes at run time, a key outside the prefix: ``no permissions``);
* through a plain redis-py client with no guard at all, to show the server's ACL refuses the
  same attack on its own.

At the end of the module, every foreign key, library, the cached script, CONFIG and ACL LIST
must be as they were.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from conftest import need_cluster_binaries, need_server_binary

from helpers import UnsafeCommandError, connect
from helpers.backend.guard import ForeignLibraryError
from helpers.backend.namespace import LIBRARY_HEAD_MAX, Namespace
from helpers.backend.scripts import delete_library, fcall_reloading, load_library, lua_source
from helpers.backend.server import RedisClusterServer, RedisServer
from helpers.tools import acl, foreign

# A foreign library that holds the name of one of the suite's (lua/dict_library.lua's).
FOREIGN_DICT_CODE = (
    "#!lua name=racelab_dict\n"
    "redis.register_function('their_dict_fn', function(keys, args) return 'not yours' end)\n"
)
FOREIGN_KEY = b"app:string:0"  # planted by foreign.plant_keys
SECOND_DB_KEY = b"db3:string:0"
# Plain foreign keys a library or an application of somebody else's would own.
PLAIN_FOREIGN = (b"lock:payments", b"user:1")
LEARNERS = ("ann", "bob")  # learner users on the same server (acl.apply_learners)


@dataclasses.dataclass
class Shared:
    """A shared-looking server: admin URL parts, the workshop user's URL, and what it held at the start."""

    server: RedisServer
    admin_password: str
    url: str
    before: dict[int, foreign.Snapshot]
    learner_urls: dict[str, str] = dataclasses.field(default_factory=dict)

    def admin(self, db: int = 0) -> redis.Redis:
        """Return a client as the administrator (the default user)."""
        return self.server.client(password=self.admin_password, db=db)


def _lock_and_add_user(nodes: list[RedisServer], admin_password: str, user_password: str) -> None:
    for node in nodes:
        with node.client() as c:
            c.execute_command("ACL", "SETUSER", "default", "resetpass", f">{admin_password}")
        with node.client(password=admin_password) as c:
            acl.apply([c], user_password)


@pytest.fixture(scope="module")
def shared() -> Iterator[Shared]:
    need_server_binary()
    admin_password, user_password = acl.new_password(), acl.new_password()
    passwords = {name: acl.new_password() for name in LEARNERS}
    with RedisServer() as server:
        _lock_and_add_user([server], admin_password, user_password)
        state = Shared(server, admin_password, acl.user_url(server.url, user_password), {})
        state.learner_urls = {n: acl.user_url(server.url, pw, n) for n, pw in passwords.items()}
        with state.admin() as admin, state.admin(foreign.SECOND_DB) as second:
            acl.apply_learners([admin], passwords)
            foreign.fill_foreign(admin)
            for key in PLAIN_FOREIGN:
                admin.set(key, b"theirs")
            admin.function_load(FOREIGN_DICT_CODE)
            foreign.plant_keys(second, 50, label="db3")
            state.before = {
                0: foreign.snapshot(admin),
                foreign.SECOND_DB: foreign.snapshot(second, server_wide=False),
            }
        yield state
        with state.admin() as admin, state.admin(foreign.SECOND_DB) as second:
            problems = foreign.compare(state.before[0], foreign.snapshot(admin))
            problems += foreign.compare(
                state.before[foreign.SECOND_DB], foreign.snapshot(second, server_wide=False)
            )
            problems += foreign.suite_leftovers(admin, state.before[0])
            problems += foreign.suite_leftovers(
                second, state.before[foreign.SECOND_DB], server_wide=False
            )
        assert problems == [], "an attack got through:\n" + "\n".join(problems)


@pytest.fixture
def lab(shared: Shared, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Lab connected as the workshop user (a server the suite does not own: the guard is on)."""
    the_lab = connect(request.node.originalname[:60], url=shared.url)
    assert not the_lab.owns_server
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        the_lab.close()


@pytest.fixture
def raw(shared: Shared) -> Iterator[redis.Redis]:
    """A plain redis-py client as the workshop user: no guard, only the server's ACL."""
    with redis.Redis.from_url(shared.url) as client:
        yield client


def _refused_by_server(call: Callable[[], Any]) -> str:
    """Run call; return the server's refusal, failing the test if it was not an ACL refusal."""
    with pytest.raises(redis.ResponseError) as caught:
        call()
    assert "no permissions" in str(caught.value).lower(), caught.value
    return str(caught.value)


def test_the_workshop_user_can_do_what_the_notebooks_do(lab: Any) -> None:
    c, key = lab.client(), lab.key("counter")
    assert c.incr(key) == 1
    assert c.eval("return redis.call('INCR', KEYS[1])", 1, key) == 2
    pipe = c.pipeline()
    pipe.watch(key)
    pipe.multi()
    pipe.incr(key)
    assert pipe.execute() == [3]
    assert c.set(lab.key("lock"), "me", nx=True, px=10_000)
    assert lab.ns.keys(c) == [key, lab.key("lock")]  # what cleanup SCANs
    assert lab.caps.lua and lab.caps.functions and lab.caps.set_ifeq and lab.caps.eval_ro


# --- what the guard sees: refused before anything is sent (and by the server without the guard) --

GUARD_VISIBLE: dict[str, tuple[Callable[[Any, str], Any], str]] = {
    "memoryview FLUSHALL": (lambda c, k: c.execute_command(memoryview(b"FLUSHALL")), "FLUSHALL"),
    "SCRIPT + memoryview FLUSH": (
        lambda c, k: c.execute_command("SCRIPT", memoryview(b"FLUSH")),
        "SCRIPT FLUSH",
    ),
    "memoryview CONFIG SET": (
        lambda c, k: c.execute_command(memoryview(b"CONFIG"), "SET", "maxmemory", "1mb"),
        "CONFIG SET",
    ),
    "bytearray flushdb": (lambda c, k: c.execute_command(bytearray(b"flushdb")), "FLUSHDB"),
    "mixed-case Function Flush": (
        lambda c, k: c.execute_command("Function Flush"),
        "FUNCTION FLUSH",
    ),
    "COPY ... DB 3 REPLACE": (
        lambda c, k: c.execute_command("COPY", k, k, "DB", foreign.SECOND_DB, "REPLACE"),
        "COPY ... DB",
    ),
    "MIGRATE": (
        lambda c, k: c.execute_command("MIGRATE", "127.0.0.1", 1, "app:string:1", 0, 1000),
        "MIGRATE",
    ),
    "MOVE": (lambda c, k: c.execute_command("MOVE", k, foreign.SECOND_DB), "MOVE"),
    "SELECT": (lambda c, k: c.execute_command("SELECT", foreign.SECOND_DB), "SELECT"),
    "SWAPDB": (lambda c, k: c.execute_command("SWAPDB", 0, foreign.SECOND_DB), "SWAPDB"),
    "KEYS": (lambda c, k: c.execute_command("KEYS", "*"), "KEYS"),
    "DEBUG": (lambda c, k: c.execute_command("DEBUG", "SLEEP", 0), "DEBUG"),
    "FUNCTION DELETE of a foreign library": (
        lambda c, k: c.function_delete(foreign.FOREIGN_LIBRARY),
        "FUNCTION DELETE",
    ),
}


@pytest.mark.parametrize("attack", GUARD_VISIBLE, ids=list(GUARD_VISIBLE))
def test_the_guard_refuses_what_it_sees(lab: Any, attack: str) -> None:
    send, refused = GUARD_VISIBLE[attack]
    c, key = lab.client(), lab.key("x")
    c.set(key, "mine")
    with pytest.raises(UnsafeCommandError, match=f"refusing {refused}"):
        send(c, key)


# DEBUG is left out: the server refuses it before the ACL is asked (enable-debug-command no).
@pytest.mark.parametrize(
    "attack", [a for a in GUARD_VISIBLE if "foreign library" not in a and a != "DEBUG"]
)
def test_the_server_refuses_the_same_without_the_guard(
    raw: redis.Redis, lab: Any, attack: str
) -> None:
    send, _refused = GUARD_VISIBLE[attack]
    key = lab.key("x")
    raw.set(key, "mine")
    _refused_by_server(lambda: send(raw, key))


def test_pubsub_clients_are_guarded_and_the_server_refuses_them_too(
    lab: Any, raw: redis.Redis
) -> None:
    with pytest.raises(UnsafeCommandError, match="refusing FLUSHALL"):
        lab.client().pubsub().execute_command("FLUSHALL")
    pubsub = raw.pubsub()
    pubsub.execute_command("FLUSHALL")
    _refused_by_server(pubsub.parse_response)
    pubsub.close()


def test_every_other_way_a_lab_client_sends_is_guarded(lab: Any) -> None:
    c = lab.client()
    with pytest.raises(UnsafeCommandError, match="refusing MONITOR"):
        with c.monitor():
            pass
    conn = c.connection_pool.get_connection()
    try:
        with pytest.raises(UnsafeCommandError, match="refusing FLUSHALL"):
            conn.send_command("FLUSHALL")
        with pytest.raises(UnsafeCommandError, match="refusing FLUSHALL"):
            conn.send_packed_command(
                [b"*1\r\n$8\r\nFLUSH", b"ALL\r\n"]
            )  # packed by hand, in two chunks
        with pytest.raises(UnsafeCommandError, match="cannot read"):
            conn.send_packed_command([b"FLUSHALL\r\n"])  # an inline command
        conn.send_packed_command([b"*1\r\n$4\r\nPING\r\n"])  # readable and harmless: sent
        assert conn.read_response() in (b"PONG", "PONG")
    finally:
        c.connection_pool.release(conn)
    single = lab.client(single_connection_client=True)
    with pytest.raises(UnsafeCommandError):
        single.connection.send_command("FLUSHDB")


def test_reset_is_refused_by_the_guard_and_logs_out_on_the_server(
    lab: Any, raw: redis.Redis
) -> None:
    """No ACL rule can refuse RESET; it logs the connection in as 'default', which has a password here."""
    with pytest.raises(UnsafeCommandError, match="refusing RESET"):
        lab.client().execute_command("RESET")
    with redis.Redis.from_url(lab.url, single_connection_client=True) as one:
        assert one.execute_command("RESET") in (b"RESET", "RESET")
        with pytest.raises(redis.AuthenticationError):
            one.execute_command("SET", lab.key("after-reset"), 1)


# --- what only the server can see: names computed at run time, keys outside the prefix ---------

COMPUTED = {
    "redis.call(ARGV[1])": ("return redis.call(ARGV[1])", ["FLUSHALL"]),
    "'FLUSH'..'ALL'": ("return redis.call('FLUSH'..'ALL')", []),
    "string.char": ("return redis.call(string.char(70, 76, 85, 83, 72, 65, 76, 76))", []),
    "string.reverse": ("return redis.call(string.reverse('llahsulf'))", []),
    "decimal escape": ("return redis.call('\\102lushall')", []),
    "SELECT computed": (
        "redis.call('sel'..'ect', ARGV[1]) return redis.call('SET', KEYS[1], 'x')",
        [str(foreign.SECOND_DB)],
    ),
    "COPY ... DB computed": (
        "return redis.call('CO'..'PY', KEYS[1], KEYS[1], 'DB', ARGV[1], 'REPLACE')",
        [str(foreign.SECOND_DB)],
    ),
    "MOVE computed": (
        "return redis.call(string.upper('mo'..'ve'), KEYS[1], ARGV[1])",
        [str(foreign.SECOND_DB)],
    ),
    "foreign key computed": ("return redis.call('DEL', 'app:'..'string:0')", []),
    "SWAPDB computed": ("return redis.call('SWAP'..'DB', 0, ARGV[1])", [str(foreign.SECOND_DB)]),
}


@pytest.mark.parametrize("attack", COMPUTED)
def test_scripts_that_compute_the_command_are_refused_by_the_server(lab: Any, attack: str) -> None:
    body, args = COMPUTED[attack]
    c, key = lab.client(), lab.key("x")
    c.set(key, "mine")
    _refused_by_server(lambda: c.eval(body, 1, key, *args))


def test_script_load_then_evalsha_register_script_and_a_pipeline_are_refused_by_the_server(
    lab: Any,
) -> None:
    c = lab.client()
    body = "return redis.call(ARGV[1])"
    sha = c.script_load(body)
    _refused_by_server(lambda: c.evalsha(sha, 0, "FLUSHALL"))
    wipe = c.register_script(body)
    _refused_by_server(lambda: wipe(args=["FLUSHDB"]))
    pipe = c.pipeline()
    wipe(args=["FLUSHALL"], client=pipe)
    _refused_by_server(pipe.execute)


def test_a_racelab_library_that_computes_flushall_is_refused_by_the_server(lab: Any) -> None:
    c = lab.client()
    c.function_load(
        "#!lua name=racelab_evil\n"
        "redis.register_function('racelab_evil', function(keys, args) return redis.call(args[1]) end)",
        replace=True,
    )
    try:
        _refused_by_server(lambda: c.fcall("racelab_evil", 0, "FLUSHALL"))
    finally:
        c.function_delete("racelab_evil")  # loaded by this process: the guard lets it go


FOREIGN_KEY_WRITES = {
    "DEL": lambda c, k: c.delete(FOREIGN_KEY),
    "SET": lambda c, k: c.set(FOREIGN_KEY, "mine now"),
    "EXPIRE": lambda c, k: c.expire(FOREIGN_KEY, 1),
    "RENAME foreign -> ours": lambda c, k: c.rename(FOREIGN_KEY, k),
    "RENAME ours -> foreign": lambda c, k: c.rename(k, FOREIGN_KEY),
    "GET": lambda c, k: c.get(FOREIGN_KEY),
}


@pytest.mark.parametrize("attack", FOREIGN_KEY_WRITES)
def test_foreign_keys_are_refused_by_the_server_not_the_guard(lab: Any, attack: str) -> None:
    c, key = lab.client(), lab.key("x")
    c.set(key, "mine")
    _refused_by_server(lambda: FOREIGN_KEY_WRITES[attack](c, key))


@pytest.mark.parametrize(
    "command",
    [
        ("FLUSHALL",),
        ("FLUSHDB",),
        ("FUNCTION", "FLUSH"),
        ("SCRIPT", "FLUSH"),
        ("FUNCTION", "RESTORE", b"x"),
        ("CONFIG", "SET", "maxmemory", "1mb"),
        ("CONFIG", "GET", "*"),
        ("ACL", "SETUSER", "racelab", "+@all"),
        ("SHUTDOWN", "NOSAVE"),
        ("MONITOR",),
        ("CLIENT", "KILL", "ID", "1"),
        ("SCRIPT", "KILL"),
        ("FUNCTION", "KILL"),
        ("SELECT", 1),
        ("RESTORE", "racelab:x", 0, b"x"),
        ("SORT", "racelab:x"),
        ("INFO",),
        ("PUBLISH", "racelab:c", "m"),
    ],
    ids=lambda c: " ".join(str(a) for a in c[:2]),
)
def test_server_wide_commands_are_refused_by_the_server(
    raw: redis.Redis, command: tuple[Any, ...]
) -> None:
    _refused_by_server(lambda: raw.execute_command(*command))


# --- library heads: lock:<prefix>... is the run's, on the server too ---------------------------


def _allowed(admin: redis.Redis, user: str, keys: list[bytes]) -> list[bool]:
    """Return, for each key, whether the server lets user GET it (ACL DRYRUN: nothing is run)."""
    pipe = admin.pipeline(transaction=False)
    for key in keys:
        pipe.execute_command("ACL", "DRYRUN", user, "GET", key)
    return [reply in (b"OK", "OK") for reply in pipe.execute(raise_on_error=False)]


def _library_keys(prefix: str) -> list[str]:
    """Return keys with prefix after each library's head (test_namespace_foreign's), and alone."""
    heads = (
        "lock:",
        "lock-signal:",
        "redlock:",
        "rate_limit:",
        "LIMITS:LIMITER/",
        "LIMITS:{LIMITER/",
    )
    longest = "x" * (LIBRARY_HEAD_MAX - 1) + ":"
    return [f"{prefix}job"] + [f"{head}{prefix}job" for head in (*heads, longest)]


def test_the_workshop_user_reaches_its_runs_library_keys_and_no_plain_foreign_key(
    lab: Any, raw: redis.Redis
) -> None:
    """Layer: the server's ACL (~racelab:* and ~*[-_.:/{}]racelab:*), without the guard."""
    mine = _library_keys(lab.ns.prefix)
    assert all(lab.ns.owns(k) for k in mine)
    for key in mine:
        raw.set(key, "mine")
    assert raw.exists(*mine) == len(mine)
    raw.delete(*mine)
    for key in (*PLAIN_FOREIGN, f"lock{lab.ns.prefix}job", f"my app {lab.ns.prefix}job"):
        _refused_by_server(lambda key=key: raw.get(key))
        _refused_by_server(lambda key=key: raw.set(key, "mine"))


@pytest.fixture
def ann_lab(shared: Shared) -> Iterator[Any]:
    """Learner ann's Lab: her own user (no SCAN: cleanup deletes what her clients sent)."""
    the_lab = connect("test_acl", url=shared.learner_urls["ann"])
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        the_lab.close()


def test_a_learner_writes_her_library_keys_and_no_other_learners_nor_foreign_ones(
    ann_lab: Any, shared: Shared
) -> None:
    """Layer: the server's ACL (a learner's key patterns), with the foreign data present."""
    assert ann_lab.ns.prefix.startswith("racelab:@ann:test_acl:")
    c = ann_lab.client()
    mine = _library_keys(ann_lab.ns.prefix)
    for key in mine:
        assert c.set(key, "ann's") and c.get(key) == "ann's"
    bob = connect("test_acl", url=shared.learner_urls["bob"])
    try:
        theirs = _library_keys(bob.ns.prefix)
        for key in theirs:
            bob.client().set(key, "bob's")
        out_of_reach = [
            *theirs,
            bob.ns.key(f"names-{ann_lab.ns.prefix}job"),  # bob's key that names ann's prefix
            f"lock:{bob.ns.prefix}{ann_lab.ns.prefix}job",
            *(k.decode() for k in PLAIN_FOREIGN),
            FOREIGN_KEY.decode(),
            "x" * LIBRARY_HEAD_MAX + ":" + ann_lab.ns.prefix + "job",  # a head over the bound
            f"lock@x:{ann_lab.ns.prefix}job",  # an '@' in the head
        ]
        with redis.Redis.from_url(shared.learner_urls["ann"]) as raw:
            for key in out_of_reach:
                _refused_by_server(lambda key=key: raw.get(key))
                _refused_by_server(lambda key=key: raw.set(key, "ann's"))
                _refused_by_server(lambda key=key: raw.delete(key))
            _refused_by_server(lambda: raw.rename(mine[1], theirs[1]))
        assert all(bob.client().get(k) == "bob's" for k in theirs)
    finally:
        bob.cleanup()
        bob.close()
    assert ann_lab.cleanup() == len(mine)  # no SCAN: the keys her client sent were recorded
    with shared.admin() as admin:
        assert admin.exists(*mine) == 0


def test_no_key_is_two_learners(shared: Shared) -> None:
    """Every key some learner's patterns allow is refused to every other learner: pieces of both
    prefixes, '@', 'racelab' and fillers of every length up to past the head bound, put together."""
    a, b = (f"racelab:@{n}:" for n in LEARNERS)
    pieces = ["", "lock:", "@", "r", "racela", "racelab", "racelab:", "racelab:@", a, b, a[:-1]]
    fillers = ["x" * n for n in range(LIBRARY_HEAD_MAX + 10)]
    keys = sorted(
        {
            (f + p + q + r).encode()
            for f, p, q, r in itertools.product(fillers[:10], pieces, pieces, pieces)
        }
        | {(f + p + q).encode() for f, p, q in itertools.product(fillers, pieces, pieces)}
    )
    with shared.admin() as admin:
        ann, bob = (_allowed(admin, n, keys) for n in LEARNERS)
    both = [k for k, x, y in zip(keys, ann, bob) if x and y]
    assert len(keys) > 10_000  # docs/workshop.md: "over 10,000 keys"
    assert both == [] and sum(ann) > 500 and sum(bob) > 500, (both[:5], sum(ann), sum(bob))


def test_a_learner_reaches_every_key_her_run_owns(shared: Shared) -> None:
    """The ACL allows what the namespace owns: every head the grammar allows, up to its bound."""
    ns = Namespace("test_acl", learner="ann")
    heads = ["", "-", "lock:", "a.b_c-d/e{f}:", "Z" * (LIBRARY_HEAD_MAX - 1) + "}"]
    keys = [f"{h}{ns.prefix}k".encode() for h in heads] + [f"{ns.prefix}racelab:@bob:k".encode()]
    assert all(ns.owns(k) for k in keys)
    with shared.admin() as admin:
        assert _allowed(admin, "ann", keys) == [True] * len(keys)
        assert _allowed(admin, "bob", keys) == [False] * len(keys)


# --- library names: the suite replaces or deletes only its own code ----------------------------


def test_a_foreign_library_named_like_ours_is_refused_byte_for_byte(
    lab: Any, shared: Shared
) -> None:
    c = lab.client()
    for attempt in (
        lambda: load_library(c, "dict_library"),
        lambda: fcall_reloading(
            c, "dict_library", "racelab_dict_get_or_put", [lab.key("a")], ["x"]
        ),
        lambda: c.function_load(lua_source("dict_library"), replace=True),
        lambda: c.function_delete("racelab_dict"),
        lambda: c.function_delete(foreign.LOOKALIKE_LIBRARY),
    ):
        with pytest.raises(ForeignLibraryError, match="library 'racelab_(dict|someone_elses)'"):
            attempt()
    assert delete_library(c, "dict_library") is False  # cleanup deletes no library here at all
    conn = c.connection_pool.get_connection()
    try:
        with pytest.raises(ForeignLibraryError, match="library 'racelab_dict'"):
            conn.send_command(
                "FUNCTION", "DELETE", "racelab_dict"
            )  # a pooled connection checks it too
    finally:
        c.connection_pool.release(conn)
    with shared.admin() as admin:
        assert foreign.libraries(admin)["racelab_dict"] == FOREIGN_DICT_CODE.encode()


def test_the_suite_s_own_library_loads_replaces_and_deletes_only_what_it_brought(
    lab: Any, shared: Shared
) -> None:
    c = lab.client()
    assert load_library(c, "demo_library") == "racelab_demo"  # absent: this run brings it
    assert load_library(c, "demo_library") == "racelab_demo"  # REPLACE of the suite's own code
    assert delete_library(c, "demo_library") is True
    assert delete_library(c, "demo_library") is False  # absent: nothing to check, nothing deleted


def test_cleanup_leaves_a_library_the_instructor_loaded(lab: Any, shared: Shared) -> None:
    with shared.admin() as admin:
        admin.function_load(
            lua_source("demo_library")
        )  # before the room: python -m helpers acl --load
    c = lab.client()
    assert load_library(c, "demo_library") == "racelab_demo"  # REPLACE, the same bytes
    assert delete_library(c, "demo_library") is False  # others may call it: cleanup leaves it
    with shared.admin() as admin:
        assert foreign.libraries(admin)["racelab_demo"] == lua_source("demo_library").encode()
        admin.function_delete("racelab_demo")


def test_a_load_posing_as_the_suite_s_code_is_refused(lab: Any) -> None:
    c = lab.client()
    hijack = "#!lua name=racelab_demo\nredis.register_function('racelab_demo_hit', function() return 99 end)"
    squat = "#!lua name=racelab_zz\nredis.register_function('racelab_demo_hit', function() return 4343 end)"
    with pytest.raises(ForeignLibraryError, match="not byte for byte the suite's"):
        c.function_load(hijack, replace=True)
    with pytest.raises(ForeignLibraryError, match="registers racelab_demo_hit"):
        c.function_load(squat)


def test_the_library_check_is_not_a_round_trip_of_the_client(lab: Any, shared: Shared) -> None:
    from helpers import client_stats

    c = lab.client()
    before = client_stats(c)
    load_library(c, "demo_library")
    assert (client_stats(c) - before).round_trips == 1  # FUNCTION LOAD, nothing else
    with shared.admin() as admin:
        admin.function_delete("racelab_demo")


# --- a cluster: the user on every node -------------------------------------------------------


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[tuple[RedisClusterServer, str, str]]:
    need_cluster_binaries()
    admin_password, user_password = acl.new_password(), acl.new_password()
    with RedisClusterServer() as cluster:
        _lock_and_add_user(cluster.servers, admin_password, user_password)
        yield cluster, admin_password, acl.user_url(cluster.url, user_password)


def test_on_a_cluster_the_user_is_on_every_node_and_refuses_there(shared_cluster) -> None:
    cluster, admin_password, url = shared_cluster
    lab = connect("acl_cluster", url=url)
    try:
        assert lab.kind == "cluster" and not lab.owns_server
        c = lab.client()
        for n in range(20):  # keys on every node
            c.set(lab.key(f"k{n}"), n)
        _refused_by_server(lambda: c.eval("return redis.call(ARGV[1])", 0, "FLUSHALL"))
        with pytest.raises(UnsafeCommandError):
            c.get_redis_connection(
                c.get_primaries()[-1]
            ).flushall()  # a node's own client is guarded too
        assert load_library(c, "demo_library") == "racelab_demo" and delete_library(
            c, "demo_library"
        )
        with cluster.servers[-1].client(password=admin_password) as last_node:
            last_node.function_load(FOREIGN_DICT_CODE)  # somebody's racelab_dict, on one node only
        with pytest.raises(ForeignLibraryError, match="racelab_dict"):
            load_library(c, "dict_library")
        with cluster.servers[-1].client(password=admin_password) as last_node:
            assert foreign.libraries(last_node)["racelab_dict"] == FOREIGN_DICT_CODE.encode()
    finally:
        lab.cleanup()
        lab.close()
    password = url.split(":")[2].split("@")[0]
    for node in cluster.servers:
        with node.client(username=acl.USER, password=password) as as_user:
            _refused_by_server(as_user.flushall)
        with node.client(password=admin_password) as admin:
            assert admin.execute_command("ACL", "GETUSER", acl.USER) is not None
