"""The least-privilege workshop user for a shared Redis: ``python -m helpers acl``.

An instructor runs the printed ``ACL SETUSER`` line once on the shared server (on every node
of a cluster: ACL users are not replicated) and gives learners a ``REDIS_URL`` with that user
in it. The server then enforces, whatever a client sends or a Lua script computes at run time:

* keys: ``racelab:*`` (every key of every run lives there), and a key with ``racelab:`` after a
  separator (``~*[-_.:/{}]racelab:*``): the keys a library derives from a run's names, such as
  python-redis-lock's ``lock:racelab:...`` or limits' ``LIMITS:{LIMITER/racelab:...``
  (``helpers.backend.namespace.library_head``). A foreign key is out of reach unless it has
  ``racelab:`` in its name after a separator (``lock:payments``, ``user:1`` are);
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

**Many learners on one server** (``python -m helpers acl --learners N`` or ``--learners ann,bob``):
one user per learner instead, each with its own password and ``REDIS_URL``, keys only under
``racelab:@<learner>:*`` (``helpers.backend.namespace`` puts the URL's user first) or with that
prefix after a library's head of 1 to 32 characters, none of them ``@`` (``lock:racelab:@ann:...``;
``learner_key_patterns``: one pattern per head length, since a glob's ``*`` could hold another
learner's prefix), and no code
of its own on the server: no EVAL, SCRIPT LOAD or FUNCTION LOAD/DELETE, only EVALSHA of the
suite's scripts and FCALL of the suite's functions, named one by one (``+evalsha|<sha1>``,
``+fcall|<function>``), which the instructor loads once (``python -m helpers acl --load``).
Nor SCAN, RANDOMKEY, DBSIZE or CLIENT TRACKING (they tell other people's key names) or FUNCTION
LIST (WITHCODE shows other people's code; an ACL cannot allow FUNCTION LIST without WITHCODE).

One thing no ACL rule can take away: RESET (like AUTH and HELLO) needs no permission, and it
logs the connection back in as the ``default`` user. So the default user must have a password
or be off; otherwise RESET, or simply a URL without the user, has the default user's rights.

``python -m helpers run --shared`` (what ``make test`` uses) creates this user on its throwaway
server, on every node of its cluster, and runs the notebooks as that user.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import redis

from helpers.backend.guard import library_functions
from helpers.backend.limits import CONNECTIONS_PER_LEARNER
from helpers.backend.namespace import (
    HEAD_SEPARATORS,
    LEARNER_NAME,
    LIBRARY_HEAD_MAX,
    SHARED_USER,
    SUITE_PREFIX,
)
from helpers.backend.runs import LEASE_KEY
from helpers.errors import RaceLabError
from luaload import is_library, library_name, lua_source, names

USER = SHARED_USER
# Lessons in taking a server down (a loop, a fill, over maxmemory): a throwaway server's, never
# callable by a learner on a shared one.
NOT_FOR_LEARNERS = ("runaway_", "oom_")


class SuiteCodeMismatch(RaceLabError):
    """The shared server holds a racelab script or library that is not byte for byte the suite's."""


# (rules, why): one group per line of the printed explanation.
_GROUPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (f"~{SUITE_PREFIX}:*", f"~*[{HEAD_SEPARATORS}]{SUITE_PREFIX}:*", "resetchannels"),
        f"keys under {SUITE_PREFIX}:* (every run's keys), or with {SUITE_PREFIX}: after a separator "
        f"(a library's lock:{SUITE_PREFIX}:...); no pub/sub channels",
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


# ----------------------------------------------------------------------------------------------
# Many learners on one server: one user each, the suite's code loaded by the instructor.


def learner_scripts() -> dict[str, str]:
    """Return {lua/ name: SHA1 of its assembled text} of every script a learner may EVALSHA."""
    return {
        n: hashlib.sha1(lua_source(n).encode()).hexdigest()
        for n in names()
        if not is_library(n) and not n.startswith(NOT_FOR_LEARNERS)
    }


def learner_libraries() -> dict[str, str]:
    """Return {library name: assembled code} of every function library a learner may FCALL."""
    return {
        library_name(n): lua_source(n)
        for n in names()
        if is_library(n) and not n.startswith(NOT_FOR_LEARNERS)
    }


def learner_functions() -> list[str]:
    """Return the names of the functions the learner libraries register, sorted."""
    return sorted(f for code in learner_libraries().values() for f in library_functions(code))


def learner_names(spec: str) -> list[str]:
    """Return learner names from '3' (learner01..learner03) or 'ann,bob'; ValueError on a bad name."""
    if spec.isdigit():
        count = int(spec)
        if not 1 <= count <= 999:
            raise ValueError("--learners N takes 1 to 999 learners")
        return [f"learner{i:02d}" for i in range(1, count + 1)]
    found = [n.strip() for n in spec.split(",") if n.strip()]
    bad = [n for n in found if not LEARNER_NAME.match(n) or n in ("default", USER)]
    if bad or not found or len(set(found)) != len(found):
        raise ValueError(
            f"learner names must be distinct, 1-32 of A-Z a-z 0-9 _ -, not 'default' or {USER!r}: "
            f"{', '.join(bad) or spec!r}"
        )
    return found


# (rules, why) of a learner's user; {learner} and {db} are filled in.
_LEARNER_GROUPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (f"~{SUITE_PREFIX}:@{{learner}}:*", "~{head}" + f"{SUITE_PREFIX}:@{{learner}}:*"),
        f"keys under {SUITE_PREFIX}:@<learner>:*, or that after a head <h> of 1-{LIBRARY_HEAD_MAX} "
        "characters, none '@' (lock:...), one pattern per length: this learner's, nobody else's",
    ),
    (("resetchannels",), "no pub/sub channels"),
    (
        (f"%R~{LEASE_KEY}",),
        "read (only) the instructor's bound on a run's lease (acl --load writes it)",
    ),
    (
        ("-@all", "+{command}"),
        "exactly the commands notebooks 00-03 send as a learner, recorded (learner_commands.txt, "
        "make learner-commands): none with an unbounded count they do not use (SRANDMEMBER, SORT)",
    ),
    (
        ("-@admin", "-@dangerous", "-move", "-copy", "-select", "+select|{db}"),
        "no server-wide command (FLUSHALL, KEYS, CONFIG, DEBUG, MONITOR, ...), no other database",
    ),
    (
        ("-scan", "-randomkey", "-dbsize", "-client|tracking"),
        "nothing that tells other people's key names (SCAN, RANDOMKEY, DBSIZE, CLIENT TRACKING BCAST)",
    ),
    (
        ("-function", "-script", "-eval", "-eval_ro", "-evalsha", "-evalsha_ro", "-fcall"),
        "no code of one's own: FUNCTION LOAD/DELETE are in @write, so they are taken away by name",
    ),
    (
        ("-fcall_ro", "+script|exists"),
        "(nor FUNCTION LIST: WITHCODE shows other people's code); SCRIPT EXISTS tells what is loaded",
    ),
    (
        ("+evalsha|{sha}",),
        "EVALSHA of each of the suite's scripts, by SHA1 (the instructor loads them)",
    ),
    (
        ("+fcall|{function}", "+fcall_ro|{function}"),
        "FCALL of each of the suite's functions, by name (the instructor loads the libraries)",
    ),
    (
        (
            "+info|server",
            "+info|cluster",
            "+info|commandstats",
            "+cluster|slots",
            "+cluster|shards",
        ),
        "the version, cluster mode, server time per call, a cluster's slot map",
    ),
)


COMMANDS_FILE = Path(__file__).with_name("learner_commands.txt")
# What notebooks sent while recording ran under these (the categories the list replaced), so a
# command the list lacks is recorded, not refused.
RECORDING_RULES = ("+@read", "+@write", "+@keyspace", "+@transaction", "+@connection")
# Recorded commands that other groups grant more narrowly (by SHA1, function, section, database).
SCOPED = frozenset(
    {"evalsha", "evalsha_ro", "fcall", "fcall_ro", "info", "select", "script|exists"}
    | {"cluster|slots", "cluster|shards", "auth", "hello"}  # AUTH, HELLO: always allowed
)


def learner_commands() -> frozenset[str]:
    """Return the recorded commands of learner_commands.txt (``name`` or ``name|sub``)."""
    lines = COMMANDS_FILE.read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def commands_file_text(commands: Iterable[str]) -> str:
    """Return learner_commands.txt's text for the recorded commands: a header, one a line."""
    header = (
        "# The commands notebooks 00-03 sent as a learner on a shared server (INFO commandstats),\n"
        "# scripts' redis.call included. Generated by make learner-commands; do not edit by hand.\n"
    )
    return header + "".join(f"{name}\n" for name in sorted(set(commands)))


def allowed_commands(recording: bool = False) -> list[str]:
    """Return a learner's +command rules: the recorded list, or while recording, the categories."""
    if recording:
        return list(RECORDING_RULES)
    return [f"+{name}" for name in sorted(learner_commands() - SCOPED)]


def learner_key_patterns(learner: str) -> list[str]:
    """Return a learner's key patterns: its prefix, then the prefix after a head of each length.

    A key is the learner's if ``racelab:@<learner>:`` starts it or follows a head of 1 to
    LIBRARY_HEAD_MAX characters with no '@' in them (every library head is such:
    ``helpers.backend.namespace``). No key is two learners' (ann's and bob's): at the same place
    the two prefixes differ (a name has no ':'); 1 to 6 characters apart, 'racelab' would overlap
    itself, which it cannot; 7 or 8 apart, the later 'r' would stand on the earlier prefix's ':'
    or '@'; further apart, the later prefix's head would hold the earlier one's '@'. A '*' in
    the head instead could hold another learner's whole prefix (racelab:@bob:...racelab:@ann:).
    """
    prefix = f"{SUITE_PREFIX}:@{learner}:"
    return [f"~{prefix}*"] + [f"~{'[^@]' * n}{prefix}*" for n in range(1, LIBRARY_HEAD_MAX + 1)]


def learner_rules(learner: str, db: int = 0, recording: bool = False) -> list[str]:
    """Return the ACL rules of one learner's user (without the password); see allowed_commands."""
    if not LEARNER_NAME.match(learner):
        raise ValueError(f"learner name {learner!r} must be 1-32 of A-Z a-z 0-9 _ -")
    out: list[str] = []
    for group, _why in _LEARNER_GROUPS:
        for rule in group:
            if "{head}" in rule:
                out += learner_key_patterns(learner)[1:]
            elif "{sha}" in rule:
                out += [rule.format(sha=sha) for sha in learner_scripts().values()]
            elif "{function}" in rule:
                out += [rule.format(function=f) for f in learner_functions()]
            elif "{command}" in rule:
                out += allowed_commands(recording)
            else:
                out.append(rule.format(learner=learner, db=db))
    return out


def learner_setuser_args(
    learner: str, password: str, db: int = 0, recording: bool = False
) -> list[str]:
    """Return the arguments after ACL SETUSER for one learner's user, from scratch (reset)."""
    if not password or any(c.isspace() for c in password):
        raise ValueError("the password must be non-empty and have no spaces")
    return [learner, "reset", "on", f">{password}", *learner_rules(learner, db, recording)]


def apply_learners(
    clients: Iterable[redis.Redis], passwords: dict[str, str], db: int = 0, recording: bool = False
) -> int:
    """Create (or reset) each learner's user on each client's server (every node); return how many."""
    count = 0
    for client in clients:
        for learner, password in passwords.items():
            args = learner_setuser_args(learner, password, db, recording)
            client.execute_command("ACL", "SETUSER", *args)
            count += 1
    return count


OUTPUT_BUFFER_LIMIT = "normal 32mb 8mb 10"  # hard, soft, seconds over soft


def clients_memory_mb(learners: int) -> int:
    """Return maxmemory-clients in MB: 64 MB (a few values of proto-max-bulk-len in flight) and
    32 KB per connection maxclients allows (an idle connection takes 17-34 KB on Redis 8.6)."""
    return 64 + -(-32 * (CONNECTIONS_PER_LEARNER * learners + 32) // 1024)


def server_settings(learners: int) -> list[tuple[str, str, str]]:
    """Return (parameter, value, why) of the shared server's settings for that many learners."""
    return [
        ("maxmemory", "1gb", "a full server refuses writes (OOM) instead of growing without bound"),
        ("maxmemory-policy", "noeviction", "never evicts anybody's key to make room"),
        (
            "maxclients",
            str(CONNECTIONS_PER_LEARNER * learners + 32),
            f"{CONNECTIONS_PER_LEARNER} per learner and room to spare; keep your own redis-cli open "
            "from the start: a full server refuses new connections, never drops an open one",
        ),
        ("proto-max-bulk-len", "16mb", "no single value over 16 MB (the suite's largest are KBs)"),
        (
            "client-output-buffer-limit",
            OUTPUT_BUFFER_LIMIT,
            "a client whose unread replies pass 32 MB, or 8 MB for 10 s, is disconnected",
        ),
        (
            "maxmemory-clients",
            f"{clients_memory_mb(learners)}mb",
            "all clients' buffers together; past it the largest clients are disconnected, so "
            "used_memory stays within maxmemory plus this",
        ),
    ]


def _config_value(value: str) -> str:
    """Return a CONFIG SET value as redis-cli needs it: quoted if it has spaces."""
    return f'"{value}"' if " " in value else value


def explain_learners(
    passwords: dict[str, str], url: str = "redis://HOST:6379/0", db: int = 0
) -> str:
    """Return what ``python -m helpers acl --learners`` prints: settings, one user and URL per learner."""
    lines = [
        "# Many learners on one server. As the administrator (redis-cli), on EVERY node of a cluster:",
        "# 1. The server's settings (CONFIG SET now, and the same lines in redis.conf):",
        *[
            f"CONFIG SET {name} {_config_value(value)}    # {why}"
            for name, value, why in server_settings(len(passwords))
        ],
        f"# Each learner's share of maxclients: {CONNECTIONS_PER_LEARNER} connections. The suite "
        "refuses one call (run_clients,",
        "# Race.load, explore) that would open more, and any value over proto-max-bulk-len.",
        "# 2. The suite's scripts and libraries, loaded once and checked byte for byte:",
        "#      python -m helpers acl --load --url redis://default:ADMIN_PASSWORD@HOST:6379/0",
        "# 3. One user per learner (ACL SAVE keeps them, with an aclfile). Each may touch only its",
        "#    own keys, and call only the suite's code by SHA1 or function name:",
    ]
    for learner, password in passwords.items():
        args = learner_setuser_args(learner, password, db)
        lines.append("ACL SETUSER " + " ".join(_quoted(a) for a in args))
    lines += [
        "",
        "# The default user must not be open (RESET logs a connection back in as 'default').",
        "# Hand each learner their own line:",
        *[
            f"{learner}: export REDIS_URL={user_url(url, pw, learner)}"
            for learner, pw in passwords.items()
        ],
        "",
        "# What each group of a learner's rules allows or takes away:",
    ]
    for group, why in _LEARNER_GROUPS:
        shown = " ".join(group).format(
            learner="<learner>", db=db, sha="<sha1>", function="<fn>", head="<h>", command="<cmd>"
        )
        lines.append(f"#   {shown:<64} {why}")
    lines += [
        "# What Redis cannot enforce: a memory share per learner (one learner can fill maxmemory,",
        "# then everyone's writes get OOM, but no key is lost), a command rate, a connection count",
        "# per user, or a reserved connection for the administrator (maxclients is the server's).",
    ]
    return "\n".join(lines)


def _function_entries(client: redis.Redis, library: str) -> dict[str, bytes]:
    """Return {library name: code} of the libraries named library on client's server (0 or 1)."""
    reply = client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", library, "WITHCODE")
    out = {}
    for entry in reply or []:
        fields = dict(zip(entry[::2], entry[1::2])) if isinstance(entry, list) else entry
        fields = {k.decode() if isinstance(k, bytes) else k: v for k, v in fields.items()}
        name = fields["library_name"]
        name = name.decode() if isinstance(name, bytes) else name
        code = fields["library_code"]
        out[name] = code if isinstance(code, bytes) else code.encode()
    return out


def load(clients: Sequence[redis.Redis]) -> list[str]:
    """Load the learners' scripts and libraries on each node; return one line per check.

    A library of the suite's name whose code differs is left alone (SuiteCodeMismatch): its owner
    decides. Each script's SHA1 and each library's code are read back and compared byte for byte.
    """
    lines = []
    for client in clients:
        for name, sha in learner_scripts().items():
            got = client.script_load(lua_source(name))
            got = got.decode() if isinstance(got, bytes) else got
            if got != sha or not client.script_exists(sha)[0]:
                raise SuiteCodeMismatch(f"script {name}: the server cached {got}, not {sha}")
        lines.append(f"{len(learner_scripts())} scripts cached, each SHA1 as the suite computes it")
        for library, code in learner_libraries().items():
            held = _function_entries(client, library).get(library)
            if held is None:
                client.function_load(code)
            elif held != code.encode():
                raise SuiteCodeMismatch(
                    f"library {library!r} on the server is not byte for byte the suite's; left as it"
                    " is (FUNCTION DELETE it yourself if it is an old version of the suite)"
                )
            if _function_entries(client, library).get(library) != code.encode():
                raise SuiteCodeMismatch(f"library {library!r} did not load as the suite's code")
        lines.append(
            f"{len(learner_libraries())} libraries ({', '.join(sorted(learner_libraries()))}) "
            "byte for byte the suite's"
        )
    return lines
