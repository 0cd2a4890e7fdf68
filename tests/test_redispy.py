"""helpers.backend.redispy: every private redis-py name the suite uses still means what it did.

When one of these fails, redis-py changed something the suite relies on; the message names it,
and helpers/backend/redispy.py is the only file to adapt.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import redis
import redis._parsers
import redis.cluster
import redis.connection

from helpers.backend import redispy
from helpers.backend.connection import TRANSPORTS, LabConnection


def test_the_two_parsers_are_redis_py_s_own_and_the_default_is_one_of_them() -> None:
    for parser in (redispy.HIREDIS_PARSER, redispy.PYTHON_PARSER):
        assert issubclass(parser, redis._parsers.BaseParser), parser
    assert redis.connection.DefaultParser in (redispy.HIREDIS_PARSER, redispy.PYTHON_PARSER)
    assert "parser_class" in inspect.signature(redis.connection.AbstractConnection).parameters


def _call_keywords(function: object, callee: str) -> dict[str, str]:
    """Return {keyword: source of its value} of the call of callee inside function's source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in (callee, "cls"):
            return {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
    raise AssertionError(f"no call of {callee} in {function}")


def test_cluster_pipeline_passes_what_redis_cluster_pipeline_passes() -> None:
    theirs = _call_keywords(redis.cluster.RedisCluster.pipeline, "ClusterPipeline")
    ours = {
        k: v.replace("client.", "self.")
        for k, v in _call_keywords(redispy.cluster_pipeline, "cls").items()
    }
    assert ours == theirs, (
        "RedisCluster.pipeline() now builds its ClusterPipeline differently; "
        "update helpers/backend/redispy.py:cluster_pipeline"
    )


def test_the_private_cluster_attributes_are_still_set_by_redis_cluster() -> None:
    source = inspect.getsource(redis.cluster.RedisCluster.__init__)
    for name in ("self._lock =", "self._event_dispatcher ="):
        assert name in source, f"RedisCluster.__init__ no longer sets {name.split()[0]}"


def test_every_method_lab_connection_hooks_exists_on_every_transport() -> None:
    hooked = {
        name
        for name, value in vars(LabConnection).items()
        if callable(value) and not name.startswith("_")
    }
    assert {"on_connect_check_health", "send_packed_command", "read_response"} <= hooked
    for base in TRANSPORTS:
        for name in hooked:
            assert callable(getattr(base, name, None)), f"redis.{base.__name__} has no {name}"
    # The handshake is on_connect_check_health: connect_check_health calls it.
    assert "on_connect_check_health" in inspect.getsource(  # redis-py's, under adopt's guard
        inspect.unwrap(redis.connection.AbstractConnection.connect_check_health)
    )


def test_redis_py_still_chooses_tls_and_unix_classes_from_the_url() -> None:
    assert redis.connection.parse_url("rediss://h")["connection_class"] is redis.SSLConnection
    assert (
        redis.connection.parse_url("unix:///s")["connection_class"]
        is redis.UnixDomainSocketConnection
    )
    assert "connection_class" not in redis.connection.parse_url("redis://h")
