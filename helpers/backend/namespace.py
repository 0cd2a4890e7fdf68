"""Per-run key namespaces: every key the suite writes lives under its own prefix.

A prefix looks like ``racelab:<notebook>:<run-id>:``. Cleanup SCANs for that prefix only
(glob characters escaped) and UNLINKs what it finds, so a run can never delete a key it did
not create, even on a shared server full of other people's data.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

SUITE_PREFIX = "racelab"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def escape_glob(text: str) -> str:
    """Return text with Redis glob metacharacters escaped, for SCAN MATCH."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def new_run_id() -> str:
    """Return a short random run id (8 hex digits)."""
    return uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class Namespace:
    """The key prefix of one notebook or test run."""

    notebook: str
    run_id: str = field(default_factory=new_run_id)

    def __post_init__(self) -> None:
        for part in (self.notebook, self.run_id):
            if not _SAFE_NAME.match(part):
                raise ValueError(f"namespace part {part!r} must be 1-64 of A-Z a-z 0-9 _ . -")

    @property
    def prefix(self) -> str:
        """Return the prefix every key of this run starts with."""
        return f"{SUITE_PREFIX}:{self.notebook}:{self.run_id}:"

    def key(self, name: str) -> str:
        """Return the full key for a short name, e.g. key('counter')."""
        return self.prefix + name

    def tagged(self, tag: str, name: str) -> str:
        """Return a key whose cluster slot is set by the hash tag {tag} (keys sharing a tag share a slot)."""
        return f"{self.prefix}{{{tag}}}:{name}"

    def short(self, key: str | bytes) -> str:
        """Return key without this run's prefix, for printing (stable across runs)."""
        text = key.decode() if isinstance(key, bytes) else key
        return text[len(self.prefix) :] if text.startswith(self.prefix) else text

    def owns(self, key: str | bytes) -> bool:
        """Return True if key lies under this run's prefix."""
        text = key.decode(errors="replace") if isinstance(key, bytes) else key
        return text.startswith(self.prefix)

    def keys(self, client: Any) -> list[Any]:
        """Return every key under this prefix (SCAN, all cluster primaries), sorted, as the client returns them.

        Use a client with decode_responses=False when keys may not be valid UTF-8.
        """
        return sorted(client.scan_iter(match=escape_glob(self.prefix) + "*", count=1000))

    def cleanup(self, client: Any) -> int:
        """Delete every key under this prefix and nothing else; return how many were deleted."""
        deleted = 0
        for key in self.keys(client):
            if not self.owns(key):  # belt and braces: SCAN MATCH already filtered
                raise AssertionError(f"cleanup found a foreign key {key!r}")
            deleted += client.unlink(key)
        return deleted
