"""Hash tags as a real cluster node computes them (CLUSTER KEYSLOT), against redis-py's key_slot.

Notebook 03 and the glossary say: the slot is CRC16 of the part between the first `{` and the next
`}` only if at least one character lies between them; a key with `{}` hashes whole (issue 39).
"""

from __future__ import annotations

from binascii import crc_hqx

import pytest
from redis.crc import key_slot

from helpers.luakit import scratch_server, server_available


def crc16(key: bytes) -> int:
    """Return the CRC16 (XMODEM) of key, the hash Redis Cluster uses."""
    return crc_hqx(key, 0)


KEYS = ["{}:ids", "{}:index", "{dict:cols}:ids", "{dict:cols}:index", "a{b}{c}", "a{}{c}", "{{x}}"]


@pytest.mark.skipif(not server_available(), reason="no redis-server binary")
def test_cluster_keyslot_hashes_the_tag_only_when_it_is_not_empty() -> None:
    with scratch_server("--cluster-enabled", "yes") as server:
        node = server.client(decode_responses=True)
        slots = {key: node.execute_command("CLUSTER", "KEYSLOT", key) for key in KEYS}
    assert slots == {key: key_slot(key.encode()) for key in KEYS}
    assert slots["{}:ids"] == crc16(b"{}:ids") % 16384 != slots["{}:index"]  # hashed whole
    assert slots["{dict:cols}:ids"] == slots["{dict:cols}:index"] == crc16(b"dict:cols") % 16384
    assert slots["a{b}{c}"] == crc16(b"b") % 16384  # the first {...} only
    assert slots["a{}{c}"] == crc16(b"a{}{c}") % 16384  # first { to next } is empty: whole key
    assert slots["{{x}}"] == crc16(b"{x") % 16384  # from the first { to the next }
