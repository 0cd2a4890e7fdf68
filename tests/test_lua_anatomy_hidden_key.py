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


def _function_library(source: str, flags: str) -> str:
    """Return anatomy_hidden_key.lua wrapped as the Function racelab_hidden_key (with flags)."""
    return (
        "#!lua name=racelab_hidden_test\n"
        "redis.register_function{function_name = 'racelab_hidden_key', "
        f"flags = {{{flags}}}, callback = function(KEYS, ARGV)\n{source}\nend}}\n"
    )


def test_on_a_cluster_a_shebang_or_a_function_refuses_another_slot_on_the_same_node(
    cluster_lab: Lab, cluster_url: str
) -> None:
    """Without a shebang another slot on the same node is accepted; with one (or in a Function)
    it is refused unless allow-cross-slot-keys; the first write stays in every refusal."""
    from helpers.backend.scripts import lua_source

    source = lua_source("anatomy_hidden_key")
    rc = RedisCluster.from_url(cluster_url, decode_responses=True)
    declared = cluster_lab.ns.tagged("a", "declared")
    node = rc.get_node_from_key(declared)
    hidden = next(
        k
        for k in (cluster_lab.ns.tagged(f"s{i}", "hidden") for i in range(500))
        if rc.get_node_from_key(k).port == node.port and rc.keyslot(k) != rc.keyslot(declared)
    )
    direct = rc.get_redis_connection(node)  # the node itself: the call is not re-routed
    variants = {
        "eval": lambda: direct.eval(source, 1, declared, hidden, "v"),
        "shebang": lambda: direct.eval("#!lua\n" + source, 1, declared, hidden, "v"),
        "shebang+flag": lambda: direct.eval(
            "#!lua flags=allow-cross-slot-keys\n" + source, 1, declared, hidden, "v"
        ),
        "function": lambda: direct.fcall("racelab_hidden_key", 1, declared, hidden, "v"),
    }
    outcomes = {}
    try:
        for name, call in variants.items():
            if name == "function":
                direct.function_load(_function_library(source, ""), replace=True)
            direct.delete(declared)
            direct.delete(hidden)
            try:
                outcomes[name] = (call(), direct.exists(declared), direct.exists(hidden))
            except redis.ResponseError as exc:
                outcomes[name] = (str(exc).split(" script:")[0], direct.exists(declared), 0)
        direct.function_load(_function_library(source, "'allow-cross-slot-keys'"), replace=True)
        direct.delete(declared)
        direct.delete(hidden)
        outcomes["function+flag"] = (variants["function"](), 1, direct.exists(hidden))
    finally:
        if direct.function_list(library="racelab_hidden_test"):
            direct.function_delete("racelab_hidden_test")
        direct.delete(declared)
        direct.delete(hidden)
        rc.close()
    same_slot = "Script attempted to access keys that do not hash to the same slot"
    assert outcomes == {
        "eval": ("OK", 1, 1),
        "shebang": (same_slot, 1, 0),
        "shebang+flag": ("OK", 1, 1),
        "function": (same_slot, 1, 0),
        "function+flag": ("OK", 1, 1),
    }
