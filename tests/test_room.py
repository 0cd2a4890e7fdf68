"""python -m helpers room: a server per learner, started, reported and stopped by its recorded pids.

A room of three real servers (N=3; the instructor's N=30 is measured by hand) in a temporary
directory: each learner's URL reaches only their own server, as their own ACL user, with the
recommended settings and the suite's code; one learner filling their server leaves the others
writing; ``--stop`` stops exactly the recorded servers and leaves a pid that is no longer one alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import need_server_binary

from helpers import connect
from helpers.tools import acl, room
from helpers.tools.cli import main

# Spins until the server has spent 20 ms of CPU: a command SLOWLOG records (over 1 ms) on any
# machine. (TIME inside a script is frozen at the script's start, so it cannot end a loop.)
SPIN_20_MS = """
local start = os.clock()
repeat until os.clock() - start >= 0.02
return 1
"""
LEARNERS = ["learner01", "learner02", "learner03"]
MAXMEMORY = "4mb"  # small, so that filling one learner's server is quick


@pytest.fixture(scope="module")
def seats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[room.Seat]]]:
    need_server_binary()
    root = tmp_path_factory.mktemp("room")
    started = room.start_room(LEARNERS, root, maxmemory=MAXMEMORY)
    try:
        yield root, started
    finally:
        if room.state_path(root).exists():
            room.stop_room(root)


def test_each_learner_has_a_server_of_their_own(seats: tuple[Path, list[room.Seat]]) -> None:
    _root, started = seats
    assert [s.learner for s in started] == LEARNERS
    assert len({s.port for s in started}) == len({s.pid for s in started}) == 3
    assert all(room.is_ours(s) for s in started)
    for seat in started:
        lab = connect("room", url=seat.url)
        try:
            assert lab.ns.learner == seat.learner and not lab.owns_server
            lab.client().set(lab.key("mine"), 1)
            with pytest.raises(redis.ResponseError, match="(?i)no permissions"):
                redis.Redis.from_url(seat.url).set("app:somebody-else", 1)
        finally:
            lab.cleanup()
            lab.close()


def test_each_server_has_the_recommended_settings_and_the_suites_code(
    seats: tuple[Path, list[room.Seat]],
) -> None:
    for seat in seats[1]:
        with seat.admin() as admin:
            config = admin.config_get("*")
            libraries = {dict(zip(e[::2], e[1::2]))["library_name"] for e in admin.function_list()}
            scripts = admin.script_exists(*acl.learner_scripts().values())
        for name, value in room.settings(MAXMEMORY):
            assert _same_setting(config[name], value), (name, config[name], value)
        assert libraries == set(acl.learner_libraries()) and all(scripts)
    with pytest.raises(redis.AuthenticationError):  # the default user is not open
        redis.Redis(host=seat.host, port=seat.port).ping()


def _same_setting(got: str, want: str) -> bool:
    """Return True if CONFIG GET's value is the configured one (sizes come back in bytes; the
    output buffer limit comes back for every class, normal first)."""
    units = {"kb": 1024, "mb": 2**20, "gb": 2**30}

    def in_bytes(word: str) -> str:
        unit = word[-2:]
        return str(int(word[:-2]) * units[unit]) if unit in units and word[:-2].isdigit() else word

    expected = " ".join(in_bytes(w) for w in want.split())
    return got == expected or got.startswith(expected + " ")


def test_one_learner_filling_their_server_leaves_the_others_writing(
    seats: tuple[Path, list[room.Seat]],
) -> None:
    first, second = seats[1][0], seats[1][1]
    filler = redis.Redis.from_url(first.url)
    prefix = f"racelab:@{first.learner}:fill:"
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for n in range(100):
            filler.set(f"{prefix}{n}", b"x" * 2**17)
    other = redis.Redis.from_url(second.url)
    assert other.set(f"racelab:@{second.learner}:fill:ok", 1)
    filler.delete(*[f"{prefix}{n}" for n in range(100)])
    other.delete(f"racelab:@{second.learner}:fill:ok")


def test_status_prints_memory_clients_and_the_slowest_command(
    seats: tuple[Path, list[room.Seat]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, started = seats
    with started[2].admin() as admin:
        admin.eval(SPIN_20_MS, 0)  # the administrator's: at least 20 ms by the server's clock
    assert main(["room", "--status", "--dir", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == LEARNERS
    assert all(" used_memory " in line and ", clients " in line for line in lines)
    assert re.search(r"slowest: EVAL (\d\d+\.\d ms|\d+\.\d s)$", lines[2]), lines[2]


def test_a_second_room_is_refused_while_one_runs(seats: tuple[Path, list[room.Seat]]) -> None:
    with pytest.raises(room.RoomError, match="a room is running"):
        room.start_room(["ann"], seats[0])


def test_bad_arguments_print_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["room"]) == 2
    assert main(["room", "--stop", "--status"]) == 2
    assert main(["room", "--learners", "2", "--user", "x"]) == 2
    assert "python -m helpers room" in capsys.readouterr().err


def test_stop_stops_exactly_the_recorded_servers(tmp_path: Path) -> None:
    """A recorded pid that now runs something else (here a sleep) is left alone."""
    need_server_binary()
    seats = room.start_room(["ann", "bob"], tmp_path, maxmemory=MAXMEMORY)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stranger = room.Seat(
            "eve", "127.0.0.1", seats[0].port, decoy.pid, 0, str(tmp_path / "e"), "", ""
        )
        room.save(tmp_path, [*seats, stranger])
        lines = room.stop_room(tmp_path)
        assert lines[:2] == [
            f"{s.learner}: stopped, pid {s.pid} on {s.host}:{s.port}" for s in seats
        ]
        assert lines[2] == f"eve: pid {decoy.pid} is no longer its redis-server: left alone"
        assert decoy.poll() is None  # still running
        assert not any(room.is_ours(s) for s in seats)
        assert all(room.process_start(s.pid) is None for s in seats)
        assert not room.state_path(tmp_path).exists() and not (tmp_path / "ann").exists()
    finally:
        decoy.kill()
        decoy.wait(10)
        for seat in seats:
            room.stop_seat(seat)


def test_the_state_file_is_private_and_records_pid_port_and_directory(
    seats: tuple[Path, list[room.Seat]],
) -> None:
    root, started = seats
    path = room.state_path(root)
    assert path.stat().st_mode & 0o077 == 0
    recorded = json.loads(path.read_text())
    assert [(e["pid"], e["port"], e["workdir"]) for e in recorded] == [
        (s.pid, s.port, s.workdir) for s in started
    ]


def test_the_workshop_page_says_how_to_run_a_room_and_when() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "workshop.md").read_text()
    section = page.split("### A server per learner", 1)[1].split("\n### ", 1)[0]
    for needed in ("make room N=30", "make room-status", "make room-stop", "When to use which"):
        assert needed in section, needed
    assert f"`maxmemory` {room.MAXMEMORY[:-2]} MB" in section
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "-m helpers room --learners $(N)" in makefile and "-m helpers room --stop" in makefile


def test_without_a_server_binary_room_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RACELAB_REDIS_SERVER", "none")  # a machine without Redis
    assert main(["room", "--learners", "2", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("racelab: no redis-server >= 8.4") and err.count("\n") == 1
    assert not room.state_path(tmp_path).exists()
