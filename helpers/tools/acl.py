"""The least-privilege workshop user for a shared Redis: ``python -m helpers acl``.

An instructor runs the printed ``ACL SETUSER`` line once on the shared server (on every node
of a cluster: ACL users are not replicated) and gives learners a ``REDIS_URL`` with that user
in it. The server then enforces, whatever a client sends or a Lua script computes at run time:

* keys: only ``racelab:*`` (every key of every run lives there);
* commands: reads and writes of data (``@read``, ``@write``, ``@keyspace``), MULTI/EXEC/WATCH
  (``@transaction``) and the connection's own commands (``@connection``), minus everything in
  ``@admin`` and ``@dangerous`` and minus what reaches another database (MOVE, COPY, SELECT of
  any other database) or every library (FUNCTION FLUSH/RESTORE);
* scripts: EVAL/EVALSHA (and _RO), SCRIPT LOAD/EXISTS, FCALL (and _RO), FUNCTION LOAD, DELETE
  and LIST: the function-library allowance. Redis ACLs cannot restrict library *names*, so
  which libraries a run may replace or delete is the client-side guard's job
  (``helpers.backend.guard``);
* what the suite's clients ask the server about itself: INFO server, cluster and commandstats
  (three sections, not all of INFO), and the slot map (CLUSTER SLOTS or SHARDS) that a
  cluster client needs to route;
* no pub/sub channels.

One thing no ACL rule can take away: RESET (like AUTH and HELLO) needs no permission, and it
logs the connection back in as the ``default`` user. So the default user must have a password
or be off; otherwise RESET, or simply a URL without the user, has the default user's rights.

``python -m helpers run --shared`` (what ``make test`` uses) creates this user on its throwaway
server, on every node of its cluster, and runs the notebooks as that user.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from urllib.parse import quote, urlsplit, urlunsplit

import redis

from helpers.backend.namespace import SUITE_PREFIX

USER = "racelab"

# (rules, why): one group per line of the printed explanation.
_GROUPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (f"~{SUITE_PREFIX}:*", "resetchannels"),
        f"keys under {SUITE_PREFIX}:* only (every run's keys live there); no pub/sub channels",
    ),
    (
        ("-@all", "+@read", "+@write", "+@keyspace", "+@transaction", "+@connection"),
        "read and write data, MULTI/EXEC/WATCH, the connection's own commands (PING, HELLO, COMMAND)",
    ),
    (
        ("-@admin", "-@dangerous"),
        "then none of the server-wide commands those include (FLUSHALL, FLUSHDB, KEYS, MIGRATE, RESTORE, "
        "SWAPDB, SORT, CLIENT KILL, CONFIG, DEBUG, MONITOR, ...)",
    ),
    (
        ("-move", "-copy", "-select", "-function|flush", "-function|restore"),
        "nor what reaches another database (MOVE, COPY ... DB, SELECT) or every library",
    ),
    (
        ("+eval", "+evalsha", "+eval_ro", "+evalsha_ro", "+script|load", "+script|exists"),
        "Lua scripts (a script's redis.call runs with these same rights)",
    ),
    (
        ("+fcall", "+fcall_ro", "+function|load", "+function|delete", "+function|list"),
        "the function-library allowance: load, call, list and delete libraries (the guard checks the names)",
    ),
    (
        ("+info|server", "+info|cluster", "+info|commandstats"),
        "INFO server (the version), cluster (cluster mode?) and commandstats (server time per call)",
    ),
    (
        ("+cluster|slots", "+cluster|shards"),
        "the slot map a cluster client reads to route commands (read-only; redis-py asks CLUSTER SLOTS)",
    ),
)


def rules(db: int = 0) -> list[str]:
    """Return the user's ACL rules (without the password), allowing SELECT of db and no other."""
    out: list[str] = []
    for group, _why in _GROUPS:
        out += group
        if "-select" in group:
            out.append(f"+select|{db}")
    return out


def setuser_args(password: str, user: str = USER, db: int = 0) -> list[str]:
    """Return the arguments after ACL SETUSER: the user from scratch (reset), on, its password, its rules."""
    if not password or any(c.isspace() for c in password):
        raise ValueError("the password must be non-empty and have no spaces")
    return [user, "reset", "on", f">{password}", *rules(db)]


def setuser_line(password: str, user: str = USER, db: int = 0) -> str:
    """Return the ACL SETUSER command line an administrator runs (redis-cli), rules quoted where needed."""
    return "ACL SETUSER " + " ".join(_quoted(a) for a in setuser_args(password, user, db))


def _quoted(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in "*|>~&") else arg


def user_url(url: str, password: str, user: str = USER) -> str:
    """Return url (redis://host:port/db) with the user and password put in it."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}" + (
        f":{parts.port}" if parts.port else ""
    )
    return urlunsplit(
        (parts.scheme or "redis", netloc, parts.path or "/0", parts.query, parts.fragment)
    )


def new_password() -> str:
    """Return a random password (32 hex digits: nothing to escape in a URL or a redis-cli line)."""
    return secrets.token_hex(16)


def apply(clients: Iterable[redis.Redis], password: str, user: str = USER, db: int = 0) -> int:
    """Create (or reset) the user on each client's server, e.g. every node of a cluster; return how many."""
    count = 0
    for client in clients:
        client.execute_command("ACL", "SETUSER", *setuser_args(password, user, db))
        count += 1
    return count


def explain(password: str, user: str = USER, url: str = "redis://HOST:6379/0", db: int = 0) -> str:
    """Return what ``python -m helpers acl`` prints: the command, the URL, and what each rule group is for."""
    width = max(len(" ".join(g)) for g, _ in _GROUPS)
    lines = [
        "# Run once on the shared server as an administrator (redis-cli), on EVERY node of a cluster",
        "# (ACL users are not replicated). It creates the user, or resets it to exactly these rules.",
        setuser_line(password, user, db),
        "",
        "# Keep it across restarts: ACL SAVE (with an aclfile), or add to redis.conf the same rules as",
        f"#   user {' '.join(setuser_args(password, user, db)[1:])}",
        "",
        "# The default user must not be open: RESET (which no ACL rule can refuse) logs a connection",
        "# back in as 'default', and a URL without a user is 'default' too. If ACL GETUSER default shows",
        "# nopass, give it a password of yours (ACL SETUSER default resetpass '>...') or turn it off.",
        "",
        "# Then learners run the notebooks with:",
        f"export REDIS_URL={user_url(url, password, user)}",
        "",
        "# What each group of rules allows or takes away:",
    ]
    for group, why in _GROUPS:
        shown = " ".join(group).replace("-select", f"-select +select|{db}")
        lines.append(f"#   {shown:<{width + 12}} {why}")
    return "\n".join(lines)
