"""Per-run key namespaces: every key the suite writes lives under its own prefix.

A prefix looks like ``racelab:<notebook>:<run-id>:``, or ``racelab:@<learner>:<notebook>:<run-id>:``
when the run connects as a learner's own ACL user (``python -m helpers acl --learners``): the
learner comes first, so that user's key pattern ``~racelab:@<learner>:*`` is what keeps learners
apart, on the server. ``@`` cannot occur in a notebook name, so the two layouts never overlap.

A run also owns the keys a library derives from its names (``owns``): python-redis-lock given
``lab.key("job")`` writes ``lock:racelab:...:job`` and ``lock-signal:racelab:...:job``, pottery
``redlock:racelab:...``, limits ``LIMITS:LIMITER/racelab:...``. Such a key is the library's own
prefix (its *head*: ``library_head``), then the run's prefix: a head is 1 to ``LIBRARY_HEAD_MAX``
(32) of A-Z a-z 0-9 and ``_ . : / { } -``, ends in one of those separators, and has no ``racelab``
in it (in any case), so another run's key (which starts with ``racelab:``, or has ``racelab:``
after its own head) is never owned by this one. The ACL users allow the same keys
(``helpers.tools.acl``): a learner's user has one key pattern per head length, which is why a head
has a bound.

Cleanup deletes what the run wrote and nothing else: every key name the namespace hands out
(``key``, ``tagged``), and every key a Lab client sends that the run owns (``record``), are
recorded, and where the user may SCAN, a SCAN for the prefix anywhere in a name (glob characters
escaped), kept to the keys the run owns, adds keys a script derived from them. A learner user may
not SCAN (it would list other people's key names): there the record alone is used, and
``python -m helpers sweep`` removes what an abandoned run leaves (``helpers.backend.runs``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

SUITE_PREFIX = "racelab"
SHARED_USER = "racelab"  # the one ACL user of self-study or a trusted room (python -m helpers acl)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
LEARNER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
# A library's own key prefix before the run's (lock:, lock-signal:, LIMITS:{LIMITER/): 1 to
# LIBRARY_HEAD_MAX of these characters, the last a separator (so that no head is a part of the
# word "racelab:"). No '@' among them: a learner's ACL patterns rely on it (helpers.tools.acl).
LIBRARY_HEAD_MAX = 32
HEAD_SEPARATORS = "-_.:/{}"
_LIBRARY_HEAD = re.compile(
    rf"[A-Za-z0-9{re.escape(HEAD_SEPARATORS)}]{{0,{LIBRARY_HEAD_MAX - 1}}}[{re.escape(HEAD_SEPARATORS)}]"
)


def library_head(key: str | bytes, prefix: str) -> str | None:
    """Return what comes before prefix in key: '' if key starts with it, a library's head
    ('lock:' of 'lock:racelab:...'), or None if key has prefix nowhere or after anything else."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    at = text.find(prefix)
    if at <= 0:
        return None if at < 0 else ""
    head = text[:at]
    if _LIBRARY_HEAD.fullmatch(head) and SUITE_PREFIX not in head.lower():
        return head
    return None


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
        """Return key without this run's prefix, for printing (stable across runs): 'lock:job'
        for a library's 'lock:racelab:...:job'."""
        text = key.decode() if isinstance(key, bytes) else key
        head = library_head(text, self.prefix)
        return text if head is None else head + text[len(head) + len(self.prefix) :]

    def owns(self, key: str | bytes) -> bool:
        """Return True if key is this run's: it starts with the prefix, or is a library's head
        and then the prefix (lock:racelab:...; module docstring)."""
        return library_head(key, self.prefix) is not None

    def record(self, args: Iterable[Any]) -> None:
        """Record for cleanup every argument of a command that is a key name this run owns.

        Lab clients call it with each command they send, so the keys a library derives from the
        run's names (lock:racelab:...) are cleaned up where the user may not SCAN. A value that
        looks like such a name is recorded too: cleanup UNLINKs it, as a key of this run, if it exists.
        """
        prefix = self.prefix
        needle = prefix.encode()
        for arg in args:
            if isinstance(arg, str):
                if prefix in arg and self.owns(arg):
                    self.written.add(arg)
            elif isinstance(arg, (bytes, bytearray, memoryview)):
                raw = bytes(arg)
                if needle in raw and self.owns(raw):
                    self.written.add(raw.decode("utf-8", "surrogateescape"))

    def keys(self, client: Any) -> list[Any]:
        """Return every key this run owns (its prefix's, and libraries' lock:<prefix>...), sorted,
        as the client returns them.

        SCAN for the prefix anywhere in a name (all cluster primaries) where the user may SCAN,
        kept to what ``owns``; for a learner user, which may not, the recorded keys that exist.
        Use a client with decode_responses=False when keys may not be valid UTF-8.
        """
        found = self._scanned(client)
        if found is None:
            found = [k for k in sorted(self.written) if client.exists(k)]
            found = found if _decodes(client) else [_encoded(k) for k in found]
        return sorted(found)

    def _scanned(self, client: Any) -> list[Any] | None:
        """Return the keys SCAN finds that this run owns, or None if this user may not SCAN."""
        try:
            found = client.scan_iter(match="*" + escape_glob(self.prefix) + "*", count=1000)
            return [k for k in found if self.owns(k)]  # not a look-alike with another head
        except redis.exceptions.NoPermissionError:
            return None

    def cleanup(self, client: Any) -> int:
        """Delete every key this run owns and nothing else; return how many were deleted."""
        found = self._scanned(client) or []
        keys = {k if isinstance(k, bytes) else _encoded(k) for k in found}
        keys |= {_encoded(k) for k in self.written}
        deleted = 0
        for key in sorted(keys):
            if not self.owns(key):  # belt and braces: only owned names are kept or recorded
                raise AssertionError(f"cleanup found a foreign key {key!r}")
            deleted += client.unlink(key)
        return deleted


def _encoded(key: str) -> bytes:
    """Return a recorded key name as the bytes it was sent as (a binary name kept as surrogates)."""
    return key.encode("utf-8", "surrogateescape")
