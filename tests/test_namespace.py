"""Namespaces: keys live under a per-run prefix, and cleanup deletes only those."""

import pytest

from helpers.backend.namespace import Namespace, escape_glob


def test_prefix_has_notebook_and_run_id():
    ns = Namespace("05_demo", "abcd1234")
    assert ns.prefix == "racelab:05_demo:abcd1234:"
    assert ns.key("counter") == "racelab:05_demo:abcd1234:counter"


def test_tagged_key_carries_hash_tag_after_prefix():
    ns = Namespace("nb", "r1")
    assert ns.tagged("dict:names", "ids") == "racelab:nb:r1:{dict:names}:ids"


def test_short_strips_only_own_prefix():
    ns = Namespace("nb", "r1")
    assert ns.short(ns.key("a")) == "a"
    assert ns.short(b"racelab:nb:r1:lock") == "lock"
    assert ns.short("racelab:nb:r2:lock") == "racelab:nb:r2:lock"


@pytest.mark.parametrize("bad", ["", "has space", "a:b", "x*", "{tag}", "é", "a" * 65])
def test_namespace_rejects_unsafe_parts(bad):
    with pytest.raises(ValueError):
        Namespace(bad, "r1")
    with pytest.raises(ValueError):
        Namespace("nb", bad)


def test_run_ids_differ_between_runs():
    assert Namespace("nb").run_id != Namespace("nb").run_id


def test_escape_glob_escapes_every_metacharacter():
    assert escape_glob("a*b?c[d]e\\f") == "a\\*b\\?c\\[d\\]e\\\\f"


def test_cleanup_removes_own_keys_and_nothing_else(lab):
    c = lab.client()
    other = Namespace(lab.ns.notebook, "ffffffff")
    mine = [lab.key("a"), lab.key("b*"), lab.ns.tagged("t", "c")]
    for k in mine:
        c.set(k, 1)
    c.hset(lab.key("h"), "f", "v")
    c.set(other.key("a"), "theirs")
    c.set(lab.ns.prefix.rstrip(":"), "not under the prefix")
    try:
        assert lab.cleanup() == 4
        assert lab.ns.keys(c) == []
        assert c.get(other.key("a")) == "theirs"
        assert c.get(lab.ns.prefix.rstrip(":")) == "not under the prefix"
    finally:
        c.delete(other.key("a"), lab.ns.prefix.rstrip(":"))


def test_cleanup_removes_binary_and_glob_named_keys(lab):
    raw = lab.client(decode_responses=False)
    names = [
        lab.key("").encode() + b"\xff\xfe",
        lab.key("[a-z]*?").encode(),
        lab.key("\\").encode(),
        lab.key("line\nbreak").encode(),
        lab.key(" ").encode(),
    ]
    for name in names:
        raw.set(name, b"\x00")
    assert lab.cleanup() == len(names)
    assert lab.ns.keys(raw) == []


def test_cleanup_on_cluster_reaches_every_node(cluster_lab):
    c = cluster_lab.client()
    keys = [cluster_lab.key(f"k{i}") for i in range(30)]
    for k in keys:
        c.set(k, 1)
    slots = {c.keyslot(k) for k in keys}
    assert len(slots) > 3  # spread over several slots, hence several nodes
    assert cluster_lab.cleanup() == 30
    assert cluster_lab.ns.keys(c) == []


def test_a_learner_comes_first_and_cannot_collide_with_a_notebook():
    ns = Namespace("05_demo", "abcd1234", learner="ann")
    assert ns.prefix == "racelab:@ann:05_demo:abcd1234:"
    assert not Namespace("ann", "05_demo").prefix.startswith(ns.owner)  # '@' is no notebook name
    with pytest.raises(ValueError, match="learner name"):
        Namespace("nb", "r1", learner="a:b")


def test_the_keys_a_namespace_hands_out_are_recorded_for_cleanup():
    import fakeredis

    ns, client = Namespace("nb", "r1", learner="ann"), fakeredis.FakeRedis()
    client.set(ns.key("a"), 1)
    client.set(ns.tagged("t", "b"), 1)
    client.set("racelab:@bob:nb:r1:a", 1)  # somebody else's
    assert ns.written == {ns.key("a"), ns.tagged("t", "b")}
    assert ns.cleanup(client) == 2 and client.exists("racelab:@bob:nb:r1:a") == 1
