"""lua/sandbox_open_file.lua: a real Redis has no io; the embedded backend opens files."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab


def test_a_real_server_refuses_io_and_the_embedded_backend_opens_the_file(
    lab: Lab, tmp_path
) -> None:
    path = tmp_path / "note.txt"
    path.write_text("x")
    script = lab.script("sandbox_open_file")
    if lab.kind == "embedded":
        assert script(args=[str(path)]) == "opened"
        assert script(args=[str(tmp_path / "missing")]) == "cannot open"
    else:
        with pytest.raises(redis.ResponseError, match="nonexistent global variable 'io'"):
            script(args=[str(path)])


def test_a_missing_path_is_an_argument_error(lab: Lab) -> None:
    with pytest.raises(redis.ResponseError, match="sandbox_open_file: invalid-arguments: "):
        lab.script("sandbox_open_file")()
