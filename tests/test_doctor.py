"""``python -m helpers doctor``: each problem a learner can bring gets its ✗ and its fix.

The REDIS_URL cases run on real throwaway servers (skipped without a redis-server binary): a dead
URL, a wrong password, a workshop user without EVALSHA, the default user with every right (a
warning: it works, but it is not least privilege) and the workshop user itself (all ✓).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest
import redis

from helpers.backend.server import RedisServer, free_port
from helpers.tools import acl, doctor
from helpers.tools.doctor import Status

ROOT = Path(__file__).resolve().parents[1]


def _workshop_url(server: RedisServer, password: str) -> str:
    """Create the workshop user on server (python -m helpers acl's rules); return its URL."""
    with server.client() as admin:
        acl.apply([admin], password)
    return acl.user_url(server.url, password)


def _by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.what: check for check in checks}


def test_the_embedded_smoke_test_overshoots():
    check = doctor.check_embedded()
    assert check.status is Status.OK and "admitted 2 requests under a limit of 1" in check.detail


def run_doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Return the finished `python -m helpers doctor`, run as a learner would, with env."""
    return subprocess.run(
        [sys.executable, "-m", "helpers", "doctor"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_doctor_passes_on_this_machine_without_redis_url():
    # What a learner runs the day before; a missing redis-server or chromium is optional.
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    done = run_doctor(env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "racelab doctor: can this machine run the workshop?"
    assert lines[-1].startswith("ready for the core session (00-03)")
    for what in ("Python", "packages", "Jupyter kernel", "embedded backend", "ports"):
        assert any(line.startswith(f"✓ {what}: ") for line in lines), (what, done.stdout)
    assert not any(line.startswith("✗") and "(optional)" not in line for line in lines)
    assert "REDIS_URL" not in done.stdout


def test_a_dead_url_fails_with_its_fix_and_blocks():
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    env = dict(os.environ, REDIS_URL=url)
    done = run_doctor(env)
    assert done.returncode == 1
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("✗ REDIS_URL")]
    # refused at once: no talk of waiting 5 s
    assert f"{url} refused the connection: nothing listens at that host and port" in line
    assert "within 5 s" not in line
    fix = done.stdout.split(line, 1)[1].splitlines()[1]
    assert fix.startswith("    fix: check the host and port")
    assert done.stdout.splitlines()[-1].startswith("NOT READY: 1 problem(s)")


def test_reachability_gives_up_after_its_time():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="no answer within 0.2 s"):
        doctor._within(0.2, lambda: time.sleep(5))
    assert time.monotonic() - start < 4  # it did not wait for the call


def test_the_report_marks_optional_failures_and_gives_each_fix():
    checks = [
        doctor.Check("one", Status.OK, "fine", "never shown"),
        doctor.Check("two", Status.FAIL, "broken", "do this", blocking=False),
        doctor.Check("three", Status.FAIL, "broken too", "do that"),
    ]
    text = doctor.report(checks)
    assert "never shown" not in text
    assert "✗ two (optional): broken\n    fix: do this" in text
    assert "✗ three: broken too\n    fix: do that" in text
    assert doctor.blocked(checks) == [checks[2]]


def test_a_wrong_password_fails_with_its_fix(owned_server):
    url = _workshop_url(owned_server, acl.new_password())
    wrong = acl.user_url(owned_server.url, acl.new_password())
    assert url != wrong
    check = doctor.check_reachable(wrong)
    assert check.status is Status.FAIL and check.blocking
    assert "refuses user 'racelab'" in check.detail and "***@" in check.detail
    assert "password" in check.fix
    assert doctor.check_redis_url(wrong) == [check]  # nothing else is tried


def test_the_workshop_user_has_exactly_the_rights_needed(owned_server):
    url = _workshop_url(owned_server, acl.new_password())
    checks = _by_name(doctor.check_redis_url(url))
    assert [c.status for c in checks.values()] == [Status.OK] * 4, checks
    assert "as user 'racelab'" in checks["REDIS_URL"].detail
    assert "redis 8." in checks["server version"].detail.lower()
    assert "SCRIPT LOAD + EVALSHA" in checks["ACL rights"].detail
    assert "refused CONFIG GET (@admin) and a key outside racelab:*" in (
        checks["least privilege"].detail
    )
    with owned_server.client() as admin:  # the doctor left nothing behind
        assert admin.keys("racelab:*") == [] and admin.function_list() == []


def test_a_user_lacking_evalsha_fails_and_says_who_fixes_it(owned_server):
    url = _workshop_url(owned_server, acl.new_password())
    with owned_server.client() as admin:
        admin.execute_command("ACL", "SETUSER", acl.USER, "-evalsha")
    checks = _by_name(doctor.check_rights(url))
    rights = checks["ACL rights"]
    assert rights.status is Status.FAIL and rights.blocking
    assert rights.detail.startswith("user 'racelab' may not run SCRIPT LOAD + EVALSHA (")
    assert "NoPermissionError" in rights.detail and "python -m helpers acl" in rights.fix
    assert checks["least privilege"].status is Status.OK


def test_the_default_user_with_every_right_is_a_warning(owned_server):
    checks = doctor.check_redis_url(owned_server.url)
    by = _by_name(checks)
    assert by["ACL rights"].status is Status.OK
    warning = by["least privilege"]
    assert warning.status is Status.WARN and not warning.blocking
    assert "user 'default' may also run CONFIG GET (@admin) and read a key outside racelab:*" in (
        warning.detail
    )
    assert "not least privilege" in warning.detail and "python -m helpers acl" in warning.fix
    assert doctor.blocked(checks) == []


def test_a_server_that_needs_a_password_the_url_lacks(owned_server):
    with owned_server.client() as admin:
        admin.execute_command("ACL", "SETUSER", "default", "resetpass", ">secret")
    try:
        check = doctor.check_reachable(owned_server.url)
        assert check.status is Status.FAIL and "refuses user 'default'" in check.detail
    finally:
        with redis.Redis(port=owned_server.port, password="secret") as admin:
            admin.execute_command("ACL", "SETUSER", "default", "nopass")


def test_pins_missing_or_moved_are_named(tmp_path):
    installed = metadata.version("redis")
    learner = tmp_path / "learner.lock"
    learner.write_text(
        f"redis=={installed}\n    # via\n"
        "appnope==1.0.0 ; sys_platform == 'no-such-platform'\n"  # not for this machine
    )
    lock = tmp_path / "all.lock"
    lock.write_text(f"-r {learner.name}\n")
    assert doctor.check_packages(lock).status is Status.OK
    lock.write_text(f"-r {learner.name}\nfakeredis==0.0.1\n")
    moved = doctor.check_packages(lock)
    assert moved.status is Status.WARN and not moved.blocking
    assert "1 of the 2 pins of all.lock are at another version: fakeredis " in moved.detail
    lock.write_text(f"-r {learner.name}\nno-such-package-racelab==1.0\n")
    missing = doctor.check_packages(lock)
    assert missing.status is Status.FAIL and missing.blocking
    assert missing.detail.endswith("are not installed: no-such-package-racelab")


def test_a_kernel_that_does_not_exist_is_a_blocking_failure():
    check = doctor.check_kernel("no-such-kernel-racelab")
    assert check.status is Status.FAIL and check.blocking
    assert "no usable kernel 'no-such-kernel-racelab'" in check.detail and "make lab" in check.fix


def test_chromium_is_optional_and_racelab_chromium_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RACELAB_CHROMIUM", str(tmp_path / "no-chromium"))
    check = doctor.check_chromium()
    assert check.status is Status.FAIL and not check.blocking
    assert check.detail.startswith(f"RACELAB_CHROMIUM={tmp_path / 'no-chromium'} does not exist")
    assert "(optional)" in check.lines()[0]
    browser = tmp_path / "chromium"
    browser.write_text("")
    monkeypatch.setenv("RACELAB_CHROMIUM", str(browser))
    assert doctor.check_chromium().status is Status.OK


def test_before_make_lab_the_doctor_checks_what_needs_no_package(tmp_path):
    # No .venv yet (PY names none): the standard library's checks run beside the venv's ✗.
    if shutil.which("make") is None:
        pytest.skip("no make on PATH")
    done = subprocess.run(
        ["make", "--no-print-directory", "doctor", f"PY={tmp_path / 'no-venv' / 'python'}"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = done.stdout.splitlines()
    assert lines[0] == "racelab doctor: can this machine run the workshop?"
    assert any(line.startswith("✓ Python: ") for line in lines), done.stdout
    assert any(line.startswith("✗ venv: no .venv yet") for line in lines), done.stdout
    assert any(line.startswith(("✓ chromium", "✗ chromium (optional)")) for line in lines)
    assert any(line.startswith(("✓ ports: 8888", "⚠ ports: 8888")) for line in lines)
    assert lines[-1].startswith("NOT READY: 1 problem(s)"), done.stdout


def test_the_check_before_make_lab_needs_only_the_standard_library():
    # -I -S: no site-packages at all, as for a system Python on which nothing is installed.
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(ROOT / "helpers" / "tools" / "machine.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert "✗ venv: no .venv yet" in done.stdout


@pytest.mark.parametrize("url", ["http://localhost:6379/0", "https://redis.example/0", "h:6379"])
def test_a_url_that_is_not_a_redis_url_says_which_schemes_to_use(url):
    check = doctor.check_reachable(url)
    assert check.status is Status.FAIL and check.blocking
    assert "is not a Redis URL" in check.detail
    assert check.fix.startswith("use redis:// or rediss://")
    assert "make lab" not in check.fix and "report it" not in check.fix
    assert doctor.check_redis_url(url) == [check]


def test_a_malformed_redis_url_is_named_before_any_connection():
    check = doctor.check_reachable("redis://127.0.0.1:0/0")
    assert check.status is Status.FAIL and "port 0" in check.detail
    assert check.fix.startswith("write it as redis://")


def _path_with(tmp_path, *names):
    """Return a PATH of one folder holding an executable stub for each name."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return str(folder)


def test_a_refused_url_suggests_redis_cli_only_when_there_is_one(tmp_path, monkeypatch):
    url = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setenv("RACELAB_REDIS_SERVER", "none")  # the suite's own binaries hidden
    monkeypatch.setenv("PATH", _path_with(tmp_path))
    check = doctor.check_reachable(url)
    assert check.status is Status.FAIL and "refused the connection" in check.detail
    assert "within" not in check.detail and "redis-cli" not in check.fix
    monkeypatch.setenv("PATH", _path_with(tmp_path / "with-cli", "redis-cli"))
    assert "redis-cli -u" in doctor.check_reachable(url).fix


def test_a_missing_redis_server_names_make_redis_once(monkeypatch):
    monkeypatch.setenv("RACELAB_REDIS_SERVER", "none")
    check = doctor.check_server_binary()
    assert check.status is Status.FAIL and not check.blocking
    assert "\n".join(check.lines()).count("make redis") == 1, check.lines()


def test_the_doctor_counts_the_pins_as_make_lab_does():
    # make lab prints the lock's pin lines (grep -c '^[a-zA-Z0-9]'); the doctor says how many of
    # them apply here, of that same total.
    makefile = (ROOT / "Makefile").read_text()
    assert "grep -c '^[a-zA-Z0-9]' $(LEARNER_LOCK)" in makefile
    lock = doctor.learner_lock()
    total = len(re.findall(r"^[a-zA-Z0-9]", lock.read_text(), flags=re.M))
    here = len(doctor.pins(lock))
    check = doctor.check_packages(lock)
    assert check.status is Status.OK, check.detail
    assert f"all {here} of the {total} pins of {lock.name} that apply here" in check.detail
    if here < total:
        assert f"the other {total - here} are for other systems" in check.detail
