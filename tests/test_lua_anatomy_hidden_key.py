"""lua/anatomy_hidden_key.lua: works on one server, fails on a cluster for a key on another node, keeping its first write."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from helpers import Lab


def test_on_one_server_both_keys_are_written(lab: Lab) -> None:
    c = lab.client()
    a, hidden = lab.ns.tagged("a", "declared"), lab.ns.tagged("b", "hidden")
    assert lab.script("anatomy_hidden_key", c)(keys=[a], args=[hidden, "v"]) == "OK"
    assert c.mget(a, hidden) == ["v", "v"]


@pytest.mark.parametrize("hidden", ["victim", "other:{x}:key", "{x}:key", ""])
def test_a_hidden_key_outside_the_callers_namespace_is_refused_and_nothing_written(
    lab: Lab, hidden: str
) -> None:
    c = lab.client()
    a = lab.ns.tagged("a", "declared")
    with pytest.raises(redis.ResponseError, match="anatomy_hidden_key: invalid-arguments: "):
        lab.script("anatomy_hidden_key", c)(keys=[a], args=[hidden, "v"])
    assert c.exists(a) == 0
    assert lab.ns.keys(c) == []


def test_a_declared_key_without_a_hash_tag_is_refused(lab: Lab) -> None:
    c = lab.client()
    with pytest.raises(redis.ResponseError, match="anatomy_hidden_key: invalid-arguments: "):
        lab.script("anatomy_hidden_key", c)(keys=[lab.key("plain")], args=[lab.key("other"), "v"])
    assert lab.ns.keys(c) == []


def test_wrong_argument_count_is_an_error_and_writes_nothing(lab: Lab) -> None:
    c = lab.client()
    with pytest.raises(redis.ResponseError, match="anatomy_hidden_key: invalid-arguments: "):
        lab.script("anatomy_hidden_key", c)(
            keys=[lab.ns.tagged("a", "declared")], args=["only-one"]
        )
    assert lab.ns.keys(c) == []


def _node_port(cluster: RedisCluster, key: str) -> int:
    return cluster.get_node_from_key(key).port


def test_on_a_cluster_a_hidden_key_on_another_node_fails_and_the_first_write_stays(
    cluster_lab: Lab,
) -> None:
    rc = cluster_lab.client()
    a = cluster_lab.ns.tagged("a", "declared")
    hidden = next(
        k
        for k in (cluster_lab.ns.tagged(f"t{i}", "hidden") for i in range(50))
        if _node_port(rc, k) != _node_port(rc, a)
    )
    with pytest.raises(redis.ResponseError, match="non local key"):
        cluster_lab.script("anatomy_hidden_key", rc)(keys=[a], args=[hidden, "v"])
    assert rc.get(a) == "v"
    assert rc.exists(hidden) == 0
