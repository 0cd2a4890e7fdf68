"""Command line of the suite's helpers (used by the Makefile and .ci/run).

python -m helpers find                    # print the redis-server >= 8.4 it would use, or fail
python -m helpers run -- CMD...           # run CMD with REDIS_URL set to a fresh throwaway server
python -m helpers run --shared -- CMD...  # the same, on a server pre-filled with foreign data
                                          # (2,000+ keys of every type, two databases, libraries,
                                          # a cached script), CMD running as the workshop ACL
                                          # user; fails if CMD touched any of it or left suite
                                          # keys behind (helpers.tools.foreign)
python -m helpers run --binary PATH [--cluster] [--shared] -- CMD...
                                          # the same with that server binary, any version
                                          # (Redis 7.0, Valkey: the backend matrix); CMD's own
                                          # throwaway servers use it too ($RACELAB_REDIS_SERVER)
python -m helpers run --cluster [--shared] -- CMD...
                                          # the same on a fresh 3-node cluster (REDIS_URL is a
                                          # seed node; connect() detects the cluster); --shared
                                          # fills and checks every node, and sets the user on each
python -m helpers acl [--user NAME] [--password PW] [--url URL] [--db N]
                                          # print the ACL SETUSER line of the least-privilege
                                          # workshop user, and its REDIS_URL (helpers.tools.acl)
python -m helpers acl --learners N|NAME,NAME [--url URL] [--db N]
                                          # one user per learner (keys with racelab:@<learner>:,
                                          # only the suite's scripts and functions), the server
                                          # settings, and each learner's REDIS_URL
python -m helpers acl --load --url ADMIN_URL [--max-lease S]
                                          # load the suite's scripts and libraries that learners
                                          # call, on every primary, checked byte for byte; and the
                                          # longest lease a run may have (600 s by default)
python -m helpers room --learners N|NAME,NAME [--bind ADDR] [--maxmemory SIZE] [--dir DIR]
                                          # a small redis-server per learner (helpers.tools.room),
                                          # set up as a shared server is; one URL each
python -m helpers room --status|--stop [--dir DIR]
                                          # each server's memory, clients and slowest command; or
                                          # stop exactly the servers the room started (their pids)
python -m helpers sweep [--url ADMIN_URL] [--max-lease S]
                                          # remove every key of runs whose heartbeat expired
                                          # (a killed kernel's), first cutting every lease to the
                                          # bound (--max-lease, else acl --load's); default URL:
                                          # $REDIS_URL
python -m helpers doctor                  # can this machine run the workshop? a checklist, each
                                          # problem with its fix; exits 1 only when the core
                                          # session is blocked (helpers.tools.doctor)
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import redis

from helpers.backend.runs import (
    DEFAULT_LEASE_S,
    LEASE_KEY,
    checked_lease,
    set_instructor_lease,
    sweep,
)
from helpers.backend.server import (
    BINARY_VARIABLE,
    RedisClusterServer,
    RedisServer,
    ServerNotFound,
    binary_version,
    find_binary,
    server_description,
)
from helpers.backend.urls import MalformedURL, redacted, url_options
from helpers.tools import acl, doctor, foreign, room


def _admin(node: RedisServer, password: str, db: int = 0) -> redis.Redis:
    """Return a client of one node as its default user (the administrator), decode_responses=False."""
    return node.client(password=password, db=db)


def _has_databases(admin: redis.Redis) -> bool:
    return str(admin.info("cluster").get("cluster_enabled", 0)) != "1"


def _summary(
    planted: Counter,
    before: dict[tuple[int, int], foreign.Snapshot],
    nodes: int,
    server_wide: list[foreign.Snapshot],
) -> str:
    """Return the passed-check line: what was verified, counted from the snapshots."""
    by_db: Counter[int] = Counter()
    for (_port, db), snap in before.items():
        by_db[db] += len(snap.keys)
    total = sum(by_db.values())
    with_ttl = sum(
        1 for snap in before.values() for (_t, _p, expiry) in snap.keys.values() if expiry > 0
    )
    plural = {
        "string": "strings",
        "hash": "hashes",
        "list": "lists",
        "set": "sets",
        "zset": "sorted sets",
        "stream": "streams",
    }
    kinds = ", ".join(f"{planted[k]} {plural[k]}" for k in foreign.KINDS)
    dbs = " and ".join(f"database {db} ({n:,})" for db, n in sorted(by_db.items()))
    libraries = len(server_wide[0].libraries) - len(acl.learner_libraries())  # less the suite's
    return (
        f"racelab: shared-server check passed: {total:,} foreign keys intact in {dbs}"
        f"{f' over {nodes} nodes' if nodes > 1 else ''}: {kinds}; "
        f"{planted['hash with field TTLs']} hashes with hash-field TTLs, {with_ttl} keys with a TTL "
        f"(same absolute expiry), {planted['binary name']} binary names, "
        f"{planted['look-alike racelab: key']} look-alike racelab: keys. "
        f"{libraries} foreign function libraries (one named like the suite's) and the cached script "
        f"intact, CONFIG ({len(server_wide[0].config)} parameters) and ACL LIST "
        f"({len(server_wide[0].acl)} users) unchanged{' on every node' if nodes > 1 else ''}; "
        f"no suite keys or libraries left. The command ran as ACL user {acl.USER!r}."
    )


def _run_on_shared_server(server: RedisServer | RedisClusterServer, command: list[str]) -> int:
    """Run command as the workshop ACL user on a server full of foreign data; fail if any of it changed.

    Like a shared server: the default user gets a password (so RESET or a URL without a user
    cannot fall back on it), the workshop user (helpers.tools.acl) is set on every node, and
    CMD gets a REDIS_URL with that user in it. The foreign keys go in through a client that
    routes by slot (on a cluster each lands on the node that owns it), the libraries and the
    cached script on every node; each node and database is then checked on its own.
    """
    nodes = server.servers if isinstance(server, RedisClusterServer) else [server]
    admin_password, user_password = acl.new_password(), acl.new_password()
    for node in nodes:
        with node.client() as open_default:
            open_default.execute_command(
                "ACL", "SETUSER", "default", "resetpass", f">{admin_password}"
            )
    admins = {(node.port, 0): _admin(node, admin_password) for node in nodes}
    if _has_databases(admins[(nodes[0].port, 0)]):
        admins[(nodes[0].port, foreign.SECOND_DB)] = _admin(
            nodes[0], admin_password, foreign.SECOND_DB
        )
    try:
        acl.apply([admins[(node.port, 0)] for node in nodes], user_password)
        filler = (
            redis.RedisCluster(host="127.0.0.1", port=nodes[0].port, password=admin_password)
            if isinstance(server, RedisClusterServer)
            else _admin(nodes[0], admin_password)
        )
        with filler:
            planted = foreign.plant_keys(
                filler, field_ttls=foreign.has_field_ttls(admins[(nodes[0].port, 0)])
            )
        for (_port, db), admin in admins.items():
            if db == 0:
                foreign.plant_server_wide(admin)
            else:
                planted += foreign.plant_keys(admin, foreign.SECOND_DB_KEYS, label=f"db{db}")
        # The instructor's step: the suite's libraries are loaded before the learners come, so a
        # run's cleanup leaves them for the others (helpers.backend.scripts.delete_library).
        acl.load([admins[(node.port, 0)] for node in nodes])
        before = {
            where: foreign.snapshot(admin, server_wide=where[1] == 0)
            for where, admin in admins.items()
        }
        url = acl.user_url(server.url, user_password)
        print(
            f"racelab: running as ACL user {acl.USER!r} (python -m helpers acl prints its rules)",
            flush=True,
        )
        rc = subprocess.run(command, env=dict(os.environ, REDIS_URL=url)).returncode
        problems = []
        for (port, db), admin in admins.items():
            where = "".join(
                [f" (node {port})" if len(nodes) > 1 else "", f" (database {db})" if db else ""]
            )
            after = foreign.snapshot(admin, server_wide=db == 0)
            problems += [p + where for p in foreign.compare(before[(port, db)], after)]
            problems += [
                f"suite key left behind: {k}{where}"
                for k in foreign.suite_leftovers(admin, before[(port, db)], server_wide=db == 0)
            ]
    finally:
        for admin in admins.values():
            admin.close()
    for line in problems:
        print(f"racelab: SHARED-SERVER CHECK FAILED: {line}", file=sys.stderr)
    if not problems:
        print(
            _summary(planted, before, len(nodes), [s for (_p, db), s in before.items() if db == 0])
        )
    return rc or (1 if problems else 0)


def _primaries(url: str) -> list[redis.Redis]:
    """Return a client of each primary the URL reaches (its one server, or every cluster primary)."""
    url_options(url)  # MalformedURL before anything connects
    first = redis.Redis.from_url(url)
    if str(first.info("cluster").get("cluster_enabled", 0)) != "1":
        return [first]
    first.close()
    with redis.RedisCluster.from_url(url) as cluster:
        nodes = cluster.get_primaries()
        options = url_options(url)
        return [redis.Redis(**{**options, "host": n.host, "port": n.port, "db": 0}) for n in nodes]


def _routing(url: str) -> redis.Redis | redis.RedisCluster:
    """Return a client of the URL's server that routes each key to its node on a cluster."""
    url_options(url)  # MalformedURL before anything connects
    with redis.Redis.from_url(url) as first:
        cluster = str(first.info("cluster").get("cluster_enabled", 0)) == "1"
    return redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)


def _load(url: str, max_lease: float = DEFAULT_LEASE_S) -> int:
    """python -m helpers acl --load --url ADMIN_URL: the learners' code on every primary, the lease bound."""
    clients = _primaries(url)
    try:
        for i, client in enumerate(clients):
            for line in acl.load([client]):
                print(f"racelab: node {i + 1} of {len(clients)}: {line}")
        with _routing(url) as routing:
            set_instructor_lease(routing, max_lease)
        print(
            f"racelab: a run's lease is at most {max_lease:g} s ({LEASE_KEY}): a learner's "
            "RACELAB_LEASE_S may shorten it, not lengthen it"
        )
    except (acl.SuiteCodeMismatch, redis.RedisError) as exc:
        print(f"racelab: cannot load the suite's code at {redacted(url)}: {exc}", file=sys.stderr)
        return 1
    finally:
        for client in clients:
            client.close()
    return 0


def _sweep(options: list[str]) -> int:
    """python -m helpers sweep [--url URL]: remove the keys of runs whose heartbeat expired."""
    values = dict(zip(options[::2], options[1::2]))
    if len(options) % 2 or set(values) - {"--url", "--max-lease"}:
        print(__doc__, file=sys.stderr)
        return 2
    url = values.get("--url") or os.environ.get("REDIS_URL", "")
    if not url:
        print("racelab: sweep needs --url or REDIS_URL (a user that may SCAN)", file=sys.stderr)
        return 2
    try:
        given = values.get("--max-lease")
        bound = checked_lease(given, "--max-lease") if given is not None else None
        with _routing(url) as client:
            swept = sweep(client, bound)
    except ValueError as exc:
        print(f"racelab: {exc}", file=sys.stderr)
        return 2
    except (MalformedURL, redis.RedisError) as exc:
        print(f"racelab: cannot sweep {redacted(url)}: {exc}", file=sys.stderr)
        return 1
    for prefix in swept:
        print(f"racelab: swept {prefix}* (its heartbeat had expired)")
    print(f"racelab: {len(swept)} abandoned runs swept")
    return 0


def _print_acl(options: list[str]) -> int:
    """python -m helpers acl [--user NAME] [--password PW] [--url URL] [--db N]: print the workshop user."""
    if "--load" in options:
        rest = [o for o in options if o != "--load"]
        given = dict(zip(rest[::2], rest[1::2]))
        if len(rest) % 2 or "--url" not in given or set(given) - {"--url", "--max-lease"}:
            print(__doc__, file=sys.stderr)
            return 2
        try:
            bound = checked_lease(given.get("--max-lease", str(DEFAULT_LEASE_S)), "--max-lease")
        except ValueError as exc:
            print(f"racelab: {exc}", file=sys.stderr)
            return 2
        return _load(given["--url"], bound)
    values = dict(zip(options[::2], options[1::2]))
    allowed = {"--user", "--password", "--url", "--db", "--learners"}
    if len(options) % 2 or set(values) - allowed:
        print(__doc__, file=sys.stderr)
        return 2
    if "--learners" in values:
        if set(values) & {"--user", "--password"}:
            print("racelab: --learners makes one user and password each", file=sys.stderr)
            return 2
        try:
            learners = acl.learner_names(values["--learners"])
            print(
                acl.explain_learners(
                    {name: acl.new_password() for name in learners},
                    url=values.get("--url", "redis://HOST:6379/0"),
                    db=int(values.get("--db", 0)),
                )
            )
        except ValueError as exc:
            print(f"racelab: {exc}", file=sys.stderr)
            return 2
        return 0
    password = values.get("--password") or acl.new_password()
    try:
        print(
            acl.explain(
                password,
                user=values.get("--user", acl.USER),
                url=values.get("--url", "redis://HOST:6379/0"),
                db=int(values.get("--db", 0)),
            )
        )
    except ValueError as exc:
        print(f"racelab: {exc}", file=sys.stderr)
        return 2
    return 0


def _room(options: list[str]) -> int:
    """python -m helpers room --learners N | --status | --stop: a server per learner."""
    action = [o for o in options if o in ("--status", "--stop")]
    rest = [o for o in options if o not in action]
    values = dict(zip(rest[::2], rest[1::2]))
    allowed = {"--dir"} if action else {"--dir", "--learners", "--bind", "--maxmemory"}
    if (
        len(action) > 1
        or len(rest) % 2
        or set(values) - allowed
        or not (action or values.get("--learners"))
    ):
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(values.get("--dir", room.DEFAULT_DIR))
    try:
        if action == ["--stop"]:
            print("\n".join(room.stop_room(root)))
        elif action == ["--status"]:
            print("\n".join(room.status_line(s) for s in room.load_state(root)))
        else:
            seats = room.start_room(
                acl.learner_names(values["--learners"]),
                root,
                host=values.get("--bind", "127.0.0.1"),
                maxmemory=values.get("--maxmemory", room.MAXMEMORY),
            )
            print(room.started_text(seats, root))
    except (ValueError, room.RoomError, ServerNotFound) as exc:
        print(f"racelab: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["find"]:
        try:
            path = find_binary()
        except ServerNotFound as exc:
            print(exc, file=sys.stderr)
            return 1
        version = binary_version(path.with_name("redis-server")) or ()
        print(f"{path} (version {'.'.join(map(str, version))})")
        return 0
    if argv[:1] == ["acl"]:
        return _print_acl(argv[1:])
    if argv[:1] == ["sweep"]:
        return _sweep(argv[1:])
    if argv[:1] == ["room"]:
        return _room(argv[1:])
    if argv == ["doctor"]:
        return doctor.main()
    if argv[:1] == ["run"] and "--" in argv:
        options, command = argv[1 : argv.index("--")], argv[argv.index("--") + 1 :]
        binary: Path | None = None
        if "--binary" in options[:-1]:  # --binary PATH: this server binary, whatever its version
            at = options.index("--binary")
            binary, options = Path(options[at + 1]), options[:at] + options[at + 2 :]
            # CMD's own throwaway servers use it too
            os.environ[BINARY_VARIABLE] = os.path.abspath(binary)
        if set(options) - {"--shared", "--cluster"} or not command:
            print(__doc__, file=sys.stderr)
            return 2
        shared, cluster = "--shared" in options, "--cluster" in options
        server: RedisClusterServer | RedisServer
        try:
            server = (
                RedisClusterServer(binary=binary) if cluster else RedisServer(binary=binary)
            ).start()
        # Only a missing binary is caught: the other start failures (a port, a timeout) keep
        # their traceback.
        except ServerNotFound as exc:
            print(
                f"racelab: cannot start a {'cluster' if cluster else 'server'}: {exc}",
                file=sys.stderr,
            )
            return 1
        with server:
            node = server.servers[0] if isinstance(server, RedisClusterServer) else server
            print(
                f"racelab: started {'a 3-node cluster of ' if cluster else ''}"
                f"{server_description(node.binary or find_binary())} "
                f"at {server.url}"
                f"{' (pre-filled with foreign data)' if shared else ''}",
                flush=True,
            )
            if not shared:
                return subprocess.run(
                    command, env=dict(os.environ, REDIS_URL=server.url)
                ).returncode
            return _run_on_shared_server(server, command)
    print(__doc__, file=sys.stderr)
    return 2
