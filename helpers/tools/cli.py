"""Command line of the suite's helpers (used by the Makefile and .ci/run).

    python -m helpers find                    # print the redis-server >= 8.4 it would use, or fail
    python -m helpers run -- CMD...           # run CMD with REDIS_URL set to a fresh throwaway server
    python -m helpers run --shared -- CMD...  # the same, on a server pre-filled with foreign data;
                                              # fails if CMD touched any of it or left suite keys
                                              # behind (helpers.tools.foreign)
    python -m helpers run --binary PATH [--cluster] [--shared] -- CMD...
                                              # the same with that server binary, any version
                                              # (Redis 7.0, Valkey: the backend matrix); CMD's own
                                              # throwaway servers use it too ($RACELAB_REDIS_SERVER)
    python -m helpers run --cluster [--shared] -- CMD...
                                              # the same on a fresh 3-node cluster (REDIS_URL is a
                                              # seed node; connect() detects the cluster); --shared
                                              # fills and checks every node
"""

from __future__ import annotations

import os
import subprocess
import sys

import redis

from helpers.tools import foreign
from helpers.backend.server import (BINARY_VARIABLE, RedisClusterServer, RedisServer, ServerNotFound,
                                    binary_version, find_binary, server_description)


def _run_on_shared_server(server: RedisServer | RedisClusterServer, command: list[str]) -> int:
    """Run command against a server full of foreign data; fail if any of it changed or suite keys remain.

    The data goes in through a client that routes by slot (on a cluster, each key lands on the node
    that owns it and FUNCTION LOAD reaches every primary); each node is then checked on its own.
    """
    nodes = server.servers if isinstance(server, RedisClusterServer) else [server]
    filler = (redis.RedisCluster(host="127.0.0.1", port=nodes[0].port) if isinstance(server, RedisClusterServer)
              else server.client())
    admins = [node.client() for node in nodes]
    try:
        with filler:
            foreign.fill_foreign(filler)
        before = [foreign.snapshot(admin) for admin in admins]
        rc = subprocess.run(command, env=dict(os.environ, REDIS_URL=server.url)).returncode
        problems = []
        for node, admin, earlier in zip(nodes, admins, before):
            where = f" (node {node.port})" if len(nodes) > 1 else ""
            problems += [p + where for p in foreign.compare(earlier, foreign.snapshot(admin))]
            problems += [f"suite key left behind: {k}{where}" for k in foreign.suite_leftovers(admin)]
    finally:
        for admin in admins:
            admin.close()
    for line in problems:
        print(f"racelab: SHARED-SERVER CHECK FAILED: {line}", file=sys.stderr)
    if not problems:
        keys = sum(len(b.keys) for b in before)
        print(f"racelab: shared-server check passed: {keys} foreign keys and {len(before[0].libraries)} "
              f"foreign libraries intact{' on every node' if len(nodes) > 1 else ''}, no suite keys left.")
    return rc or (1 if problems else 0)


def main(argv: list[str]) -> int:
    if argv[:1] == ["find"]:
        try:
            path = find_binary()
        except ServerNotFound as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"{path} (version {'.'.join(map(str, binary_version(path.with_name('redis-server'))))})")
        return 0
    if argv[:1] == ["run"] and "--" in argv:
        options, command = argv[1:argv.index("--")], argv[argv.index("--") + 1:]
        binary = None
        if "--binary" in options[:-1]:  # --binary PATH: this server binary, whatever its version
            at = options.index("--binary")
            binary, options = options[at + 1], options[:at] + options[at + 2:]
            os.environ[BINARY_VARIABLE] = binary  # CMD's own throwaway servers use it too
        if set(options) - {"--shared", "--cluster"} or not command:
            print(__doc__, file=sys.stderr)
            return 2
        shared, cluster = "--shared" in options, "--cluster" in options
        try:
            server = (RedisClusterServer(binary=binary) if cluster else RedisServer(binary=binary)).start()
        except ServerNotFound as exc:  # the other start failures (a port, a timeout) keep their traceback
            print(f"racelab: cannot start a {'cluster' if cluster else 'server'}: {exc}", file=sys.stderr)
            return 1
        with server:
            binary = server.servers[0].binary if cluster else server.binary
            print(f"racelab: started {'a 3-node cluster of ' if cluster else ''}{server_description(binary)} "
                  f"at {server.url}"
                  f"{' (pre-filled with foreign data)' if shared else ''}", flush=True)
            if not shared:
                return subprocess.run(command, env=dict(os.environ, REDIS_URL=server.url)).returncode
            return _run_on_shared_server(server, command)
    print(__doc__, file=sys.stderr)
    return 2

