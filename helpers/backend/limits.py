"""What one learner's calls may take of a server the suite does not own: connections, value sizes.

Redis cannot cap the connections of one user, and it resets the connection, without a word, of a
client that sends an argument over ``proto-max-bulk-len``. So on a server the suite does not own
the suite bounds what its own API opens and sends, with the figures of the recommended settings
(``helpers.tools.acl.server_settings``):

* ``CONNECTIONS_PER_LEARNER``: a learner's share of ``maxclients``. ``run_clients`` (so
  ``Race.load``), ``run_processes`` and ``explore`` refuse a call that would open more
  (``TooManyConnections``), before opening any;
* ``MAX_BULK_BYTES``: ``proto-max-bulk-len``. A Lab client's connection refuses a command with a
  longer argument before it is sent (``ValueTooLarge``).

On the embedded backend and on a server the suite started, neither applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helpers.errors import RaceLabError

CONNECTIONS_PER_LEARNER = 64  # 03's optional 50-worker load, a notebook's clients, a restart
MAX_BULK_BYTES = 16 * 2**20  # proto-max-bulk-len 16mb
_MAX_BULK_TEXT = "16mb"


class TooManyConnections(RaceLabError, ValueError):
    """One call would open more connections than a learner's share of a shared server's maxclients."""


class ValueTooLarge(RaceLabError, ValueError):
    """A command argument is longer than proto-max-bulk-len: the server would reset the connection."""


def connection_share(lab: Any) -> int | None:
    """Return how many connections one call may open on lab's server, None for no bound."""
    return None if lab.kind == "embedded" or lab.owns_server else CONNECTIONS_PER_LEARNER


def check_connections(lab: Any, count: int, call: str) -> None:
    """Raise TooManyConnections if call would open more than lab's share of connections."""
    share = connection_share(lab)
    if share is not None and count > share:
        raise TooManyConnections(
            f"{call} would open {count} connections; on a server the suite does not own one call "
            f"may open at most {share}, a learner's share of maxclients "
            "(python -m helpers acl --learners prints it)"
        )


def _size(arg: Any) -> int:
    """Return how many bytes arg takes on the wire (a lower bound for a str is its length)."""
    if isinstance(arg, bytes | bytearray):
        return len(arg)
    if isinstance(arg, memoryview):
        return arg.nbytes
    if isinstance(arg, str):
        return len(arg) if len(arg) * 4 <= MAX_BULK_BYTES else len(arg.encode("utf-8", "replace"))
    return 0  # a number: a few bytes


def check_bulk(args: Sequence[Any]) -> None:
    """Raise ValueTooLarge if an argument of the command is longer than proto-max-bulk-len."""
    for arg in args:
        size = _size(arg)
        if size > MAX_BULK_BYTES:
            raise ValueTooLarge(
                f"refusing to send a {size:,}-byte argument: over proto-max-bulk-len "
                f"({_MAX_BULK_TEXT}, {MAX_BULK_BYTES:,} bytes), where the server would reset "
                "the connection; keep each value under it"
            )
