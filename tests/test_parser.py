"""hiredis: lab.parser says whether it is active, and everything works with the Python parser."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from redis._parsers import _HiredisParser, _RESP2Parser, _RESP3Parser

import helpers.backend.redispy as redispy_module
from helpers import Lab, connect
from helpers.backend.lab import parser_description
from helpers.backend.redispy import PYTHON_PARSER, hiredis_version
from races import dictionary as dc
from races import locks
from races import ratelimit as rl

PYTHON_PARSERS = (_RESP2Parser, _RESP3Parser)  # redis-py takes RESP3's when the protocol is 3


def _parser_of(client: Any) -> type:
    if hasattr(client, "get_default_node"):  # a cluster client: one of its nodes' connections
        client.ping()
        client = client.get_default_node().redis_connection
    connection = client.connection_pool.get_connection()
    try:
        return type(connection._parser)
    finally:
        client.connection_pool.release(connection)


def test_the_embedded_backend_needs_no_parser() -> None:
    with connect("test_parser", backend="embedded") as lab:
        assert lab.parser.startswith("none: the embedded backend")


def test_lab_parser_says_what_a_real_client_uses(lab: Lab) -> None:
    if lab.kind == "embedded":
        pytest.skip("no RESP parser on the embedded backend")
    expected = (_HiredisParser,) if hiredis_version() else PYTHON_PARSERS
    assert _parser_of(lab.client()) in expected
    assert lab.parser.startswith("hiredis" if hiredis_version() else "Python parser")


def test_without_hiredis_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redispy_module, "HIREDIS_AVAILABLE", False)
    assert parser_description("real").startswith("Python parser (hiredis not installed")
    assert parser_description("real", PYTHON_PARSER).startswith("Python parser")


def _strategies_work(lab: Lab) -> None:
    client, key = lab.client(), lab.key("rl")
    for allow in (rl.naive_allow, rl.lua_allow, rl.watch_allow, rl.multi_allow):
        assert [allow(client, key, 3, 60) for _ in range(4)] == [True, True, True, False]
        client.delete(key)
    token = locks.new_token()
    assert locks.acquire(client, lab.key("lock"), token, 60_000)
    assert locks.release_lua_checked(client, lab.key("lock"), token) == locks.RELEASED
    keys, words = dc.dict_keys(lab.ns, "parser"), [b"\xff\x00binary", "caf\u00e9", "x"]
    for fn in (dc.hgetall_hsetnx_get_or_put,):
        assert [fn(client, w, keys) for w in itertools.chain(words, words)] == [1, 2, 3, 1, 2, 3]


def test_everything_works_with_the_python_parser_forced(lab: Lab) -> None:
    lab.parser_class = PYTHON_PARSER
    if lab.kind != "embedded":
        assert _parser_of(lab.client()) in PYTHON_PARSERS
        assert lab.parser.startswith("Python parser")
    _strategies_work(lab)


def test_the_python_parser_on_a_cluster(cluster_lab: Lab) -> None:
    cluster_lab.parser_class = PYTHON_PARSER
    assert _parser_of(cluster_lab.client()) in PYTHON_PARSERS
    _strategies_work(cluster_lab)


def test_racelab_parser_python_forces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACELAB_PARSER", "python")
    with connect("test_parser", backend="embedded") as lab:
        assert lab.parser_class is PYTHON_PARSER
