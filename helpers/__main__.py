"""Command line of the suite's helpers (used by the Makefile and .ci/run).

    python -m helpers find                    # print the redis-server >= 8.4 it would use, or fail
    python -m helpers run -- CMD...           # run CMD with REDIS_URL set to a fresh throwaway server
    python -m helpers run --shared -- CMD...  # the same, on a server pre-filled with foreign data;
                                              # fails if CMD touched any of it or left suite keys
                                              # behind (helpers.foreign)
"""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import foreign
from helpers.server import RedisServer, ServerNotFound, binary_version, find_binary


def _run_on_shared_server(server: RedisServer, command: list[str]) -> int:
    """Run command against a server full of foreign data; fail if any of it changed or suite keys remain."""
    with server.client() as admin:
        foreign.fill_foreign(admin)
        before = foreign.snapshot(admin)
        rc = subprocess.run(command, env=dict(os.environ, REDIS_URL=server.url)).returncode
        problems = foreign.compare(before, foreign.snapshot(admin))
        problems += [f"suite key left behind: {k}" for k in foreign.suite_leftovers(admin)]
    for line in problems:
        print(f"racelab: SHARED-SERVER CHECK FAILED: {line}", file=sys.stderr)
    if not problems:
        print(f"racelab: shared-server check passed: {len(before.keys)} foreign keys and "
              f"{len(before.libraries)} foreign libraries intact, no suite keys left.")
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
        shared = "--shared" in argv[:argv.index("--")]
        command = argv[argv.index("--") + 1:]
        with RedisServer() as server:
            print(f"racelab: started redis-server "
                  f"{'.'.join(map(str, binary_version(server.binary)))} at {server.url}"
                  f"{' (pre-filled with foreign data)' if shared else ''}", flush=True)
            if not shared:
                return subprocess.run(command, env=dict(os.environ, REDIS_URL=server.url)).returncode
            return _run_on_shared_server(server, command)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
