"""The hostile learner of ``make workshop-sim HOSTILE=1``: each attack meets what the settings promise.

``scripts/hostile_learner.py`` runs against one learner's server of a room (the recommended
settings, the learner's own user), holding each attack 0.2 s instead of 5. The simulation itself
(``scripts/workshop_sim.py --hostile``, ten learners) is run by hand, never here.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import need_server_binary

from helpers.tools import room

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def seat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[room.Seat]:
    need_server_binary()
    root = tmp_path_factory.mktemp("hostile")
    (seat,) = room.start_room(["hostile"], root)
    try:
        yield seat
    finally:
        room.stop_room(root)


def _attacks(url: str) -> dict[str, str]:
    """Return {attack: what happened} from one run of the hostile learner."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "hostile_learner.py"), url, "--hold", "0.2"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [
        line.split(": ", 2) for line in done.stdout.splitlines() if line.startswith("hostile:")
    ]
    return {name.split(" at ")[0]: what for _h, name, what in lines}


def test_every_attack_is_refused_or_bounded(seat: room.Seat) -> None:
    found = _attacks(seat.url)
    assert len(found) == 7, found
    # closed by the output buffer limit, or (with the allow-list ACL) refused before it ran
    assert re.search(r"ConnectionError|NoPermissionError", found["unbounded_count"])
    assert float(found["unbounded_count"].split(" took ")[1].split(" s")[0]) < 5
    # GETRANGE copies the value into each reply: the output buffer limit closes the connection,
    # or the allow-list ACL refuses GETRANGE; GET may send the value itself (Redis 8), no copy
    assert re.search(
        r"GETRANGE x100: (closed by the server|refused: -NOPERM)", found["unread_replies"]
    )
    assert "OutOfMemoryError" in found["memory_fill"]
    assert "TooManyConnections" in found["suite_flood"]
    assert "ConnectionRefusedError" in found["socket_flood"]  # maxclients, on this server only
    assert "through the suite ValueTooLarge" in found["oversized_value"]
    assert (
        found["slow_scripts"].count("NoPermissionError")
        + found["slow_scripts"].count("CodeNotLoaded")
        == 2
    )
    with seat.admin() as admin:
        assert admin.ping() and admin.dbsize() == 1  # only the instructor's racelab:#lease left
        assert int(admin.info("memory")["used_memory"]) < 16 * 2**20  # every buffer let go


def _workshop_sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "workshop_sim", ROOT / "scripts" / "workshop_sim.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_failed_learners_log_names_the_limit_that_stopped_each_cell(tmp_path: Path) -> None:
    sim = _workshop_sim()
    log = tmp_path / "learner03.log"
    log.write_text(
        "..F\n____ notebooks/01_get_then_incr.ipynb::Cell 7 ____\n"
        "\x1b[31mOutOfMemoryError\x1b[39m: command not allowed when used memory > 'maxmemory'.\n"
        "____ notebooks/02_blind_del.ipynb::Cell 17 ____\n    except NoReply:\n"
        "ConnectionError: max number of clients reached\n"
        "____ notebooks/02_blind_del.ipynb::Cell 20 ____\nAssertionError\n"
    )
    learner = sim.Learner("learner03", "redis://x", returncode=1, log=log)
    assert sim.limits_named(learner) == [
        "01_get_then_incr.ipynb::Cell 7: maxmemory (noeviction): the server was full",
        "02_blind_del.ipynb::Cell 17: maxclients: the server took no more connections",
        "02_blind_del.ipynb::Cell 20: no documented limit named",
    ]  # a code line naming NoReply in a traceback is no finding
    log.write_text("all fine\n")
    assert sim.limits_named(learner) == ["the log: no documented limit named"]
