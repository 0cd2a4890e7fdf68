"""``python -m helpers doctor`` (``make doctor``): can this machine run the workshop?

The one command a learner runs the day before. It prints one line per check, ✓ (fine),
⚠ (works, but read the note) or ✗ (with the fix below it), then a verdict. It exits non-zero
only when something blocks the core session (notebooks 00-03 on the embedded backend, or on
``REDIS_URL`` when that is set); what only the advanced demos or the handouts need is marked
optional and never fails the run. The report and the checks that need only the standard library
live in ``helpers.tools.machine``, which ``make doctor`` runs alone before ``.venv`` exists.

With ``REDIS_URL`` set it also checks that server, touching nothing outside its own
``racelab:doctor:`` keys: it is a Redis URL (not ``http://``), it answers within 5 s, its version, and whether the URL's ACL user has
exactly the rights the suite needs. Each needed command class is tried, and two things a
least-privilege user must be refused (``CONFIG GET``, and a read of a key outside ``racelab:*``,
both harmless where allowed). Nothing it sends could change data outside its keys, even as an
administrator.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from packaging.requirements import Requirement

from helpers.backend.lab import connect, redacted
from helpers.backend.server import (
    MIN_VERSION,
    PROJECT_ROOT,
    RedisServer,
    ServerNotFound,
    find_binary,
    free_port,
    server_description,
)
from helpers.backend.urls import MalformedURL, url_options
from helpers.instruments.schedule import run_schedule
from helpers.tools.machine import (
    LAB_PORT,
    SETUP_PAGE,
    Check,
    Status,
    blocked,
    check_chromium,
    check_lab_port,
    check_python,
    report,
)

URL_TIMEOUT_S = 5.0  # REDIS_URL must answer within this
BUILD_ONE = " Run `make redis` to build one."  # ServerNotFound's closing advice; the fix says it
ASK_FOR_ACL = (
    "ask the instructor to run, as an administrator, the ACL SETUSER line that "
    "`python -m helpers acl` prints (on every node of a cluster), and to hand out its REDIS_URL"
)


# --- the machine ------------------------------------------------------------------------------


def learner_lock() -> Path:
    """Return the lock file of what the notebooks need (the learner's, where it is split off)."""
    learner = PROJECT_ROOT / "requirements-learner.lock"
    return learner if learner.exists() else PROJECT_ROOT / "requirements.lock"


def all_pins(lock: Path) -> list[Requirement]:
    """Return every pin of a lock file, for any system, following its ``-r`` includes.

    Their number is the one ``make lab`` prints while installing (it counts the lock's lines).
    """
    found = []
    for raw in lock.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += all_pins(lock.parent / line[3:].strip())
        elif line and not line.startswith("-"):
            found.append(Requirement(line))
    return found


def pins(lock: Path) -> list[Requirement]:
    """Return the pins of a lock file that apply to this machine (its system, its Python)."""
    return [req for req in all_pins(lock) if req.marker is None or req.marker.evaluate()]


def check_venv() -> Check:
    """Return whether this interpreter is the project's .venv (conda or Binder work too)."""
    venv = PROJECT_ROOT / ".venv"
    if Path(sys.prefix).resolve() == venv.resolve():
        return Check("venv", Status.OK, f"{venv.relative_to(PROJECT_ROOT)} ({sys.executable})")
    return Check(
        "venv",
        Status.WARN,
        f"running in {sys.prefix}, not the project's .venv",
        "fine if the packages below are right (conda, Binder); otherwise `make lab` creates .venv",
        blocking=False,
    )


def _first(names: list[str], n: int) -> str:
    """Return the first n names, comma-separated, with ' ...' when there are more."""
    return ", ".join(names[:n]) + (" ..." if len(names) > n else "")


def check_packages(lock: Path | None = None) -> Check:
    """Return whether every pin of the learner's lock is installed at its version."""
    lock = lock or learner_lock()
    missing, moved = [], []
    wanted = pins(lock)
    total = len(all_pins(lock))
    rest = total - len(wanted)
    other = f" (the other {rest} are for other systems or Pythons)" if rest else ""
    for req in wanted:
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(req.name)
            continue
        if not req.specifier.contains(have, prereleases=True):
            moved.append(f"{req.name} {have} (pinned {req.specifier})")
    where = lock.name
    if missing:
        return Check(
            "packages",
            Status.FAIL,
            f"{len(missing)} of the {len(wanted)} pins of {where} are not installed: "
            + _first(missing, 8),
            "`make lab` (or `make venv`) installs them into .venv; run the doctor with "
            ".venv/bin/python (`make doctor` does)",
        )
    if moved:
        return Check(
            "packages",
            Status.WARN,
            f"{len(moved)} of the {len(wanted)} pins of {where} are at another version: "
            + _first(moved, 5),
            "`make lab` reinstalls the pinned versions (outputs may differ from the stored ones)",
            blocking=False,
        )
    return Check(
        "packages",
        Status.OK,
        f"all {len(wanted)} of the {total} pins of {where} that apply here are installed{other}",
    )


def kernel_python(name: str = "python3") -> str:
    """Return the interpreter the Jupyter kernel ``name`` starts, as JupyterLab resolves it."""
    from jupyter_client.manager import KernelManager  # noqa: PLC0415 - only the doctor needs it

    return KernelManager(kernel_name=name).format_kernel_cmd()[0]


def check_kernel(name: str = "python3") -> Check:
    """Return whether the notebooks' kernel runs a Python that can import the suite."""
    try:
        python = kernel_python(name)
    # jupyter_client raises NoSuchKernel, or whatever a broken kernel spec makes it raise
    except Exception as exc:  # noqa: BLE001
        return Check(
            "Jupyter kernel",
            Status.FAIL,
            f"no usable kernel {name!r}: {type(exc).__name__}: {exc}",
            "`make lab` installs ipykernel into .venv and starts JupyterLab with its kernel",
        )
    done = subprocess.run(
        [python, "-c", "import helpers, races, exercises"],
        cwd=PROJECT_ROOT / "notebooks",
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 0:
        return Check("Jupyter kernel", Status.OK, f"{name!r} runs {python}, which imports helpers")
    last = (done.stderr.strip().splitlines() or ["no error text"])[-1]
    return Check(
        "Jupyter kernel",
        Status.FAIL,
        f"{name!r} runs {python}, which cannot import the suite ({last})",
        "start JupyterLab with `make lab` (it uses .venv's kernel); if `jupyter kernelspec list` "
        f"shows a {name!r} of your own that points at another Python, remove it "
        f"(`jupyter kernelspec remove {name}`)",
    )


def _get_then_incr(client: redis.Redis, key: str, limit: int) -> bool:
    """Return True if admitted: GET, compare in Python, INCR (notebook 01's racy limiter)."""
    if int(client.get(key) or 0) >= limit:
        return False
    client.incr(key)
    return True


def check_embedded() -> Check:
    """Return whether a forced order on the embedded backend overshoots, as notebook 01 shows."""
    lab = connect("doctor", backend="embedded")
    try:
        key = lab.key("hits")
        allow = partial(_get_then_incr, key=key, limit=1)
        trace = run_schedule(lab, {"A": allow, "B": allow}, "ABAB", watch=[key])
        hits = int(lab.client().get(key) or 0)
        admitted = sum(1 for ok in trace.results.values() if ok is True)
    finally:
        lab.cleanup()
        lab.close()
    if admitted == 2 and hits == 2:
        return Check(
            "embedded backend",
            Status.OK,
            "a forced order (A GET, B GET, A INCR, B INCR) admitted 2 requests under a limit of 1: "
            "the race shows",
        )
    return Check(
        "embedded backend",
        Status.FAIL,
        f"the forced order admitted {admitted} requests and counted {hits}; it must overshoot (2)",
        "reinstall the pinned packages (`make lab`); fakeredis[lua] needs lupa",
    )


def check_server_binary() -> Check:
    """Return whether a redis-server >= 8.4 was found, with its version and capabilities."""
    try:
        binary = find_binary()
    except ServerNotFound as exc:
        return Check(
            "redis-server",
            Status.FAIL,
            f"{str(exc).removesuffix(BUILD_ONE)} Without one, notebooks 04-07 show recordings of the throwaway-server demos, "
            "and RACELAB_BACKEND=real/cluster are unavailable; 00-03 run on the embedded backend",
            f"`make redis` on Debian; on other systems see {SETUP_PAGE}",
            blocking=False,
        )
    with RedisServer(binary=binary) as server:
        lab = connect("doctor", url=server.url, owned=True)
        try:
            caps = lab.caps
        finally:
            lab.close()
    have = [n for n in caps.names() if getattr(caps, n) and n != "cluster"]
    lacks = [n for n in caps.names() if not getattr(caps, n) and n != "cluster"]
    try:
        cli = f"; redis-cli at {find_binary('redis-cli')} (cluster demos)"
    except ServerNotFound:
        cli = "; no redis-cli, so no throwaway cluster"
    return Check(
        "redis-server",
        Status.OK if not lacks else Status.WARN,
        f"{server_description(binary)} at {binary}{cli}; capabilities: {', '.join(have)}"
        + (f"; lacks {', '.join(lacks)}" if lacks else ""),
        f"cells that need what it lacks skip and say so; `make redis` builds Redis >= "
        f"{'.'.join(map(str, MIN_VERSION))}",
        blocking=False,
    )


def check_ports(lab_port: int = LAB_PORT) -> list[Check]:
    """Return whether JupyterLab's port and loopback ports for throwaway servers are free."""
    checks = [check_lab_port(lab_port)]
    try:
        port = free_port(cluster=True)
    except (OSError, RuntimeError) as exc:
        checks.append(
            Check(
                "ports",
                Status.FAIL,
                f"no free loopback port pair for throwaway servers: {exc}",
                "stop what holds the ports, or use REDIS_URL",
                blocking=False,
            )
        )
    else:
        checks.append(
            Check(
                "ports",
                Status.OK,
                f"loopback ports are free for throwaway servers (e.g. {port} and its cluster "
                f"bus {port + 10000})",
            )
        )
    return checks


# --- REDIS_URL --------------------------------------------------------------------------------


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """Return call()'s result, or raise TimeoutError if it takes longer than seconds (DNS too)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def url_user(url: str) -> str:
    """Return the ACL user a URL logs in as ('default' when it names none)."""
    return unquote(urlsplit(url).username or "") or "default"


def _client(url: str) -> redis.Redis:
    """Return a plain client of url with the doctor's timeouts (no retries: one try says it)."""
    options = {
        "socket_connect_timeout": URL_TIMEOUT_S,
        "socket_timeout": URL_TIMEOUT_S,
        "decode_responses": True,
    }
    return redis.Redis.from_url(url, retry=None, **options)


def _redis_cli() -> str | None:
    """Return a redis-cli to suggest to the learner (the suite's, then PATH's), or None."""
    try:
        found = find_binary("redis-cli")
    except ServerNotFound:
        return shutil.which("redis-cli")
    return str(found.relative_to(PROJECT_ROOT) if found.is_relative_to(PROJECT_ROOT) else found)


def _refused_connection(exc: BaseException) -> bool:
    """Return True if exc (or what caused it) is the OS refusing the connection at once."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def check_url_form(url: str) -> Check | None:
    """Return the ✗ of a REDIS_URL that is not a Redis URL (http://, a typo), or None if it is."""
    try:
        url_options(url)
    except MalformedURL as exc:
        scheme = url.partition("://")[0].lower() if "://" in url else ""
        if scheme not in ("redis", "rediss", "unix"):
            return Check(
                "REDIS_URL",
                Status.FAIL,
                f"{redacted(url)} is not a Redis URL: "
                + (f"{scheme}:// is not a Redis scheme" if scheme else "it has no scheme"),
                "use redis:// or rediss:// (TLS), e.g. REDIS_URL=redis://host:6379/0; "
                "Redis speaks its own protocol, not HTTP",
            )
        return Check(
            "REDIS_URL",
            Status.FAIL,
            str(exc),
            "write it as redis://[user:password@]host:port/db, e.g. redis://host:6379/0",
        )
    return None


def check_reachable(url: str) -> Check:
    """Return whether REDIS_URL is a Redis URL that answers PING within 5 s, and as which user."""
    malformed = check_url_form(url)
    if malformed is not None:
        return malformed
    shown = redacted(url)
    user = url_user(url)
    try:
        with _client(url) as client:
            _within(URL_TIMEOUT_S, client.ping)
    except redis.AuthenticationError as exc:
        return Check(
            "REDIS_URL",
            Status.FAIL,
            f"{shown} refuses user {user!r}: {exc}",
            "check the user and password in REDIS_URL (copy it again as the instructor gave it; "
            "characters such as @ : / in a password must be percent-encoded)",
        )
    except (redis.ConnectionError, redis.TimeoutError, TimeoutError, OSError) as exc:
        if _refused_connection(exc):
            finding = "refused the connection: nothing listens at that host and port"
        elif isinstance(exc, (redis.TimeoutError, TimeoutError)):
            finding = f"does not answer PING within {URL_TIMEOUT_S:g} s"
        else:
            finding = "cannot be reached"
        cli = _redis_cli()
        probe = f' (`{cli} -u "$REDIS_URL" ping` tries it alone)' if cli else ""
        return Check(
            "REDIS_URL",
            Status.FAIL,
            f"{shown} {finding}: {type(exc).__name__}: {exc}",
            f"check the host and port and that the server runs{probe}; "
            "an HTTP proxy does not carry Redis traffic, so connect directly (VPN, firewall); "
            "or unset REDIS_URL to use the embedded backend",
        )
    except redis.ResponseError as exc:
        return Check(
            "REDIS_URL", Status.FAIL, f"{shown} answers PING with an error: {exc}", ASK_FOR_ACL
        )
    return Check("REDIS_URL", Status.OK, f"{shown} answers PING as user {user!r}")


def check_server_version(url: str) -> Check:
    """Return the server's version and capabilities as connect() probes them for a notebook."""
    lab = connect("doctor", url=url, owned=False)
    try:
        label, caps = lab.server.label(), lab.caps
    finally:
        lab.cleanup()
        lab.close()
    lacks = [n for n in caps.names() if not getattr(caps, n) and n != "cluster"]
    detail = f"{label}{' (a cluster)' if caps.cluster else ''}"
    if not lacks:
        return Check("server version", Status.OK, f"{detail}, with every capability the suite uses")
    return Check(
        "server version",
        Status.WARN,
        f"{detail} lacks {', '.join(lacks)}: those cells skip and say why",
        f"a Redis >= {'.'.join(map(str, MIN_VERSION))} has them all",
        blocking=False,
    )


def _probes(
    client: Any, tag: str
) -> tuple[list[tuple[str, Callable[[], Any]]], Callable[[], None]]:
    """Return (needed right, call) for each command class the suite uses, and a cleanup call.

    Every key is under racelab:doctor:{tag}: (one hash slot), the library is racelab_doctor_<tag>.
    """
    key = f"racelab:doctor:{{{tag}}}:hits"
    library = f"racelab_doctor_{tag}"
    code = (
        f"#!lua name={library}\n"
        f"redis.register_function('{library}_incr', function(keys) "
        "return redis.call('INCR', keys[1]) end)"
    )
    script = "return redis.call('INCR', KEYS[1])"

    def transaction() -> Any:
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            pipe.multi()
            pipe.incr(key)
            return pipe.execute()

    def script_load_evalsha() -> Any:
        return client.evalsha(client.script_load(script), 1, key)

    def functions() -> Any:
        client.function_load(code, replace=False)
        try:
            client.function_list(library=library)
            return client.fcall(f"{library}_incr", 1, key)
        finally:
            client.function_delete(library)

    needed = [
        ("@read (GET)", lambda: client.get(key)),
        ("@write (SET, INCR)", lambda: (client.set(key, 0), client.incr(key))),
        ("@keyspace (EXPIRE, SCAN)", lambda: (client.expire(key, 300), client.scan(0, key, 10))),
        ("@transaction (WATCH, MULTI, EXEC)", transaction),
        ("EVAL", lambda: client.eval(script, 1, key)),
        ("SCRIPT LOAD + EVALSHA", script_load_evalsha),
        ("FUNCTION LOAD/LIST/DELETE + FCALL", functions),
        ("INFO server", lambda: client.info("server")),
    ]
    return needed, lambda: client.unlink(key)


def _refused(error: redis.ResponseError | None) -> bool:
    """Return True if a command's error is the ACL's refusal (NOPERM, as NoPermissionError)."""
    return isinstance(error, redis.exceptions.NoPermissionError)


def _try(call: Callable[[], Any]) -> redis.ResponseError | None:
    """Return the server's error for call(), or None when it succeeded."""
    try:
        call()
    except redis.ResponseError as exc:
        return exc
    return None


def check_rights(url: str) -> list[Check]:
    """Return whether the URL's user may run each command class the suite needs, and no more."""
    user = url_user(url)
    with _client(url) as probe:
        cluster = str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
    client = redis.RedisCluster.from_url(url, decode_responses=True) if cluster else _client(url)
    tag = secrets.token_hex(4)
    needed, cleanup = _probes(client, tag)
    try:
        failed = {name: err for name, call in needed if (err := _try(call)) is not None}
        must_refuse = {
            "CONFIG GET (@admin)": _try(lambda: client.config_get("maxmemory")),
            "a key outside racelab:*": _try(lambda: client.get(f"racelab-doctor-outside-{tag}")),
        }
        _try(cleanup)
    finally:
        client.close()
    checks = []
    if failed:
        refused = [n for n, e in failed.items() if _refused(e)]
        errors = "; ".join(f"{n}: {type(e).__name__}: {e}" for n, e in failed.items())
        checks.append(
            Check(
                "ACL rights",
                Status.FAIL,
                f"user {user!r} may not run {', '.join(refused) or 'everything it needs'} "
                f"({errors})",
                ASK_FOR_ACL if refused else "read the errors above; the suite needs each of these",
            )
        )
    else:
        checks.append(
            Check(
                "ACL rights",
                Status.OK,
                f"user {user!r} may run every command class the suite needs: "
                + ", ".join(name for name, _ in needed),
            )
        )
    allowed = [name for name, err in must_refuse.items() if not _refused(err)]
    if allowed:
        checks.append(
            Check(
                "least privilege",
                Status.WARN,
                f"user {user!r} may also run {' and read '.join(allowed)}: not least privilege, "
                "a cell that goes wrong could reach data that is not the suite's",
                "on a shared server use the workshop user: "
                f"`python -m helpers acl --url {redacted(url)}` prints the line to run",
                blocking=False,
            )
        )
    else:
        checks.append(
            Check(
                "least privilege",
                Status.OK,
                f"user {user!r} is refused {' and '.join(must_refuse)}, as the workshop user is",
            )
        )
    return checks


def check_redis_url(url: str) -> list[Check]:
    """Return the REDIS_URL checks: reachable, then its version and the user's rights."""
    reach = check_reachable(url)
    if reach.status is not Status.OK:
        return [reach]
    return [reach, *_guarded("server version", check_server_version, url), *check_rights(url)]


# --- the report -------------------------------------------------------------------------------


def _guarded(what: str, check: Callable[..., Check | list[Check]], *args: Any) -> list[Check]:
    """Return check(*args) as a list; a check that crashes becomes a ✗ naming the error."""
    try:
        found = check(*args)
    # the doctor reports every failure as a line, never as a traceback
    except Exception as exc:  # noqa: BLE001
        return [
            Check(
                what,
                Status.FAIL,
                f"the check itself failed: {type(exc).__name__}: {exc}",
                f"run `make lab` again; if this persists, report it with this line ({SETUP_PAGE})",
            )
        ]
    return found if isinstance(found, list) else [found]


def run_checks(environ: Mapping[str, str] | None = None) -> list[Check]:
    """Return every check's outcome for this machine (and REDIS_URL when environ sets it)."""
    env = os.environ if environ is None else environ
    checks = []
    for what, check in (
        ("Python", check_python),
        ("venv", check_venv),
        ("packages", check_packages),
        ("Jupyter kernel", check_kernel),
        ("embedded backend", check_embedded),
        ("redis-server", check_server_binary),
        ("chromium", check_chromium),
        ("ports", check_ports),
    ):
        checks += _guarded(what, check)
    if env.get("REDIS_URL"):
        checks += _guarded("REDIS_URL", check_redis_url, env["REDIS_URL"])
    return checks


def main() -> int:
    """Print the report; return 1 if something blocks the core session, else 0."""
    checks = run_checks()
    print(report(checks))
    return 1 if blocked(checks) else 0
