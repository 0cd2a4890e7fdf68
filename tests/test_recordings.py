"""Recorded outputs (issue 13.5, helpers.luakit.live_or_recorded): a demo that needs a throwaway
redis-server runs live when one can start, else replays its last real run, labelled as such."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import luakit
from helpers.luakit import (
    RecordingMissing,
    live_or_recorded,
    load_recording,
    recording_path,
    server_available,
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CALL = re.compile(r"live_or_recorded\(\s*\\?[\"']([^\"'\\]+)\\?[\"']")


@pytest.fixture
def recordings(tmp_path, monkeypatch) -> Path:
    """Point the recordings directory at a temporary one."""
    monkeypatch.setattr(luakit, "RECORDINGS", tmp_path / "notebooks" / "recordings")
    return luakit.RECORDINGS


def demo() -> dict:
    print("the server said: hello")
    return {"reply": "hello", "pair": (1, 2)}


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_a_live_run_prints_as_usual_and_is_saved_only_when_asked(
    recordings, monkeypatch, capsys
) -> None:
    monkeypatch.delenv(luakit.RECORD_VARIABLE, raising=False)
    live = live_or_recorded("99.demo", demo)
    assert live.live and live["pair"] == [1, 2]  # JSON-shaped, as a recording gives it back
    assert "the server said: hello" in capsys.readouterr().out
    assert not recording_path("99.demo").exists()
    monkeypatch.setenv(luakit.RECORD_VARIABLE, "1")
    live = live_or_recorded("99.demo", demo)
    stored = json.loads(recording_path("99.demo").read_text())
    assert stored["server"].startswith(("redis-server ", "valkey-server "))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", stored["recorded_at"])
    assert stored["output"] == "the server said: hello\n" and stored["data"] == live.data


def test_without_a_server_the_recording_is_shown_labelled_with_its_server_and_date(
    recordings, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("RACELAB_REDIS_SERVER", "/nonexistent/redis-server")
    recordings.mkdir(parents=True)
    recording_path("99.demo").write_text(
        json.dumps(
            {
                "server": "redis-server 8.6.3",
                "recorded_at": "2026-01-02",
                "data": {"reply": "hello"},
                "output": "the server said: hello\n",
            }
        )
    )
    replay = live_or_recorded("99.demo", demo)
    out = capsys.readouterr().out
    assert not replay.live and replay["reply"] == "hello"
    assert out.startswith("RECORDED, not run here: no redis-server >= 8.4.0")
    assert "make redis" in out and "redis-server 8.6.3, 2026-01-02" in out
    assert out.rstrip().endswith("the server said: hello")
    assert replay.source == "recording of redis-server 8.6.3, 2026-01-02"


def test_without_a_server_or_a_recording_the_error_says_how_to_make_one(recordings) -> None:
    with pytest.raises(RecordingMissing, match="make record"):
        live_or_recorded("99.absent", demo, available=False)


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_a_demo_must_return_json_values(recordings) -> None:
    with pytest.raises(TypeError, match="outcome_text"):
        live_or_recorded("99.bad", lambda: {"error": ValueError("x")})


def test_recording_names_carry_the_notebook_number() -> None:
    with pytest.raises(ValueError):
        recording_path("../etc/passwd")


def _names_used_in_notebooks() -> set[str]:
    return {m for nb in NOTEBOOKS.glob("*.ipynb") for m in CALL.findall(nb.read_text())}


def test_every_demo_a_notebook_replays_has_a_real_recording_and_none_is_orphaned() -> None:
    used = _names_used_in_notebooks()
    stored = {p.stem for p in (NOTEBOOKS / "recordings").glob("*.json")}
    assert used <= stored, f"no recording for {sorted(used - stored)}: run `make record`"
    assert stored <= used, f"recordings no notebook uses: {sorted(stored - used)}"
    for name in stored:
        recording = load_recording(name)
        assert recording.server.startswith(("redis-server ", "valkey-server "))
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", recording.recorded_at)
        assert recording.output.strip(), f"{name}: a recording shows what the run printed"
