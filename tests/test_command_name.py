"""command_name: a command's upper-case name, the same when asked again (it keeps the answers)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from helpers.backend import modes
from helpers.backend.modes import command_name


def _reference(args: tuple[Any, ...]) -> str:
    """What command_name returned before it kept its answers."""
    if not args:
        return ""
    name = args[0]
    if isinstance(name, (bytes, bytearray, memoryview)):
        name = bytes(name).decode("latin-1")
    return str(name).upper()


_NAMES = st.one_of(
    st.text(max_size=12),
    st.binary(max_size=12),
    st.binary(max_size=12).map(bytearray),
    st.binary(max_size=12).map(memoryview),
    st.binary(max_size=12).map(lambda b: memoryview(bytearray(b))),  # writable: no hash
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False),
)


@given(st.lists(_NAMES, max_size=3).map(tuple))
def test_a_name_asked_twice_is_the_name_asked_once(args: tuple[Any, ...]) -> None:
    assert command_name(args) == _reference(args)
    assert command_name(args) == _reference(args)  # (now from what it kept, if it kept it)


def test_equal_keys_of_other_types_get_their_own_names() -> None:
    # 1 == 1.0 == True as dict keys: only str and bytes names are kept, so none answers for another.
    assert command_name((1,)) == "1" and command_name((True,)) == "TRUE"
    assert command_name((1.0,)) == "1.0"
    assert command_name(("get",)) == "GET" and command_name((b"get",)) == "GET"


def test_what_it_keeps_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(modes, "_NAMES", {})
    monkeypatch.setattr(modes, "_NAMES_MAX", 8)
    for n in range(50):
        assert command_name((f"cmd{n}",)) == f"CMD{n}"
    assert len(modes._NAMES) == 8
