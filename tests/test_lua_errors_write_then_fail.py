"""lua/errors_write_then_fail.lua: the first write stays when the second command fails (no rollback)."""

from __future__ import annotations

import pytest
import redis

from helpers import Lab


def test_both_writes_happen_when_nothing_fails(lab: Lab) -> None:
    c = lab.client()
    order, counter = lab.ns.tagged("o", "order"), lab.ns.tagged("o", "count")
    assert lab.script("errors_write_then_fail", c)(keys=[order, counter], args=["book"]) == 1
    assert c.mget(order, counter) == ["book", "1"]


@pytest.mark.parametrize("bad", ["text", "hash"])
def test_a_failing_incr_raises_and_the_order_written_before_it_stays(lab: Lab, bad: str) -> None:
    c = lab.client()
    order, counter = lab.ns.tagged("o", "order"), lab.ns.tagged("o", "count")
    if bad == "text":
        c.set(counter, "many")
    else:
        c.hset(counter, "f", "v")
    with pytest.raises(redis.ResponseError):
        lab.script("errors_write_then_fail", c)(keys=[order, counter], args=["book"])
    assert c.get(order) == "book"


def test_wrong_key_count_writes_nothing(lab: Lab) -> None:
    c = lab.client()
    with pytest.raises(redis.ResponseError, match="errors_write_then_fail: invalid-arguments: "):
        lab.script("errors_write_then_fail", c)(keys=[lab.key("o")], args=["book"])
    assert lab.ns.keys(c) == []
