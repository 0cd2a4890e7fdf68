"""Per-run key namespaces: every key the suite writes lives under its own prefix.

A prefix looks like ``racelab:<notebook>:<run-id>:``, or ``racelab:@<learner>:<notebook>:<run-id>:``
when the run connects as a learner's own ACL user (``python -m helpers acl --learners``): the
learner comes first, so that user's key pattern ``~racelab:@<learner>:*`` is what keeps learners
apart, on the server. ``@`` cannot occur in a notebook name, so the two layouts never overlap.

Cleanup deletes what the run wrote and nothing else: every key name the namespace hands out
(``key``, ``tagged``) is recorded, and where the user may SCAN, a SCAN of the prefix (glob
characters escaped) adds keys a script derived from them. A learner user may not SCAN (it would
list other people's key names): there the record alone is used, and ``python -m helpers sweep``
removes what an abandoned run leaves (``helpers.backend.runs``).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import redis

SUITE_PREFIX = "racelab"
SHARED_USER = "racelab"  # the one ACL user of self-study or a trusted room (python -m helpers acl)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
LEARNER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def escape_glob(text: str) -> str:
    """Return text with Redis glob metacharacters escaped, for SCAN MATCH."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def new_run_id() -> str:
    """Return a short random run id (8 hex digits)."""
    return uuid.uuid4().hex[:8]


def _decodes(client: Any) -> bool:
    """Return True if client decodes replies to str (decode_responses=True)."""
    kwargs = client.get_connection_kwargs() if hasattr(client, "get_connection_kwargs") else {}
    return bool(kwargs.get("decode_responses", False))


@dataclass(frozen=True)
class Namespace:
    """The key prefix of one notebook or test run."""

    notebook: str
    run_id: str = field(default_factory=new_run_id)
    learner: str = ""  # the learner's ACL user name; "" on one's own (self-study) user
    written: set[str] = field(default_factory=set, compare=False, repr=False)

    def __post_init__(self) -> None:
        for part in (self.notebook, self.run_id):
            if not _SAFE_NAME.match(part):
                raise ValueError(f"namespace part {part!r} must be 1-64 of A-Z a-z 0-9 _ . -")
        if self.learner and not LEARNER_NAME.match(self.learner):
            raise ValueError(f"learner name {self.learner!r} must be 1-32 of A-Z a-z 0-9 _ -")

    @property
    def owner(self) -> str:
        """Return the part every key of this learner starts with: 'racelab:' or 'racelab:@<learner>:'."""
        return f"{SUITE_PREFIX}:@{self.learner}:" if self.learner else f"{SUITE_PREFIX}:"

    @property
    def prefix(self) -> str:
        """Return the prefix every key of this run starts with."""
        return f"{self.owner}{self.notebook}:{self.run_id}:"

    def key(self, name: str) -> str:
        """Return the full key for a short name, e.g. key('counter'), and record it for cleanup."""
        full = self.prefix + name
        self.written.add(full)
        return full

    def tagged(self, tag: str, name: str) -> str:
        """Return a key whose cluster slot is set by the hash tag {tag} (keys sharing a tag share a slot)."""
        full = f"{self.prefix}{{{tag}}}:{name}"
        self.written.add(full)
        return full

    def short(self, key: str | bytes) -> str:
        """Return key without this run's prefix, for printing (stable across runs)."""
        text = key.decode() if isinstance(key, bytes) else key
        return text[len(self.prefix) :] if text.startswith(self.prefix) else text

    def owns(self, key: str | bytes) -> bool:
        """Return True if key lies under this run's prefix."""
        text = key.decode(errors="replace") if isinstance(key, bytes) else key
        return text.startswith(self.prefix)

    def keys(self, client: Any) -> list[Any]:
        """Return every key under this prefix, sorted, as the client returns them.

        SCAN of the prefix (all cluster primaries) where the user may SCAN; for a learner user,
        which may not, the recorded keys that exist. Use a client with decode_responses=False
        when keys may not be valid UTF-8.
        """
        found = self._scanned(client)
        if found is None:
            found = [k for k in sorted(self.written) if client.exists(k)]
            found = found if _decodes(client) else [k.encode() for k in found]
        return sorted(found)

    def _scanned(self, client: Any) -> list[Any] | None:
        """Return the keys SCAN finds under the prefix, or None if this user may not SCAN."""
        try:
            return list(client.scan_iter(match=escape_glob(self.prefix) + "*", count=1000))
        except redis.exceptions.NoPermissionError:
            return None

    def cleanup(self, client: Any) -> int:
        """Delete every key under this prefix and nothing else; return how many were deleted."""
        found = self._scanned(client) or []
        keys = {k if isinstance(k, bytes) else k.encode() for k in found}
        keys |= {k.encode() for k in self.written}
        deleted = 0
        for key in sorted(keys):
            if not self.owns(key):  # belt and braces: SCAN MATCH already filtered
                raise AssertionError(f"cleanup found a foreign key {key!r}")
            deleted += client.unlink(key)
        return deleted
