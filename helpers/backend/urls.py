"""Redis URLs: checked before use, and printed without their password.

Every scheme redis-py accepts works: ``redis://`` (TCP), ``rediss://`` (TLS) and ``unix://``
(a socket path). redis-py itself lets some mistakes through silently: a database that is not a
number (``redis://host/x`` connects to database 0) or port 0 (it connects to 6379). Here they are
``MalformedURL``, a one-line error naming the URL with its password redacted.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.connection import parse_url

from helpers.errors import RaceLabError

SCHEMES = ("redis", "rediss", "unix")
_DB_PATH = re.compile(r"/?(\d*)/?")
_PASSWORD_QUERY = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


class MalformedURL(RaceLabError, ValueError):
    """A Redis URL that redis-py would refuse, or would read as something else than it says."""


def redacted(url: str) -> str:
    """Return url without its password: 'redis://user:***@host', 'redis://***@host' (the only part)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min([i for i in (rest.find(c) for c in "/?#") if i >= 0] or [len(rest)])
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if colon else f"***@{hostport}"
    tail = _PASSWORD_QUERY.sub(r"\1***", tail)
    return f"{scheme}{sep}{netloc}{tail}"


def _refuse(url: str, why: str) -> MalformedURL:
    return MalformedURL(f"malformed Redis URL {redacted(url)}: {why}")


def url_options(url: str) -> dict[str, Any]:
    """Return redis-py's connection options for url (parse_url); MalformedURL if it is not a clean one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _refuse(url, str(exc)) from None
    if parts.scheme not in SCHEMES:
        raise _refuse(url, f"the scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    if parts.scheme == "unix":
        if not unquote(parts.path):
            raise _refuse(url, "a unix:// URL needs a socket path (unix:///path/to/redis.sock)")
    else:
        if port == 0 or (port is None and parts.netloc.rsplit("@", 1)[-1].endswith(":0")):
            raise _refuse(url, "port 0 is no port (1-65535)")
        db = _DB_PATH.fullmatch(unquote(parts.path))
        if db is None:
            raise _refuse(url, f"the database {parts.path.strip('/')!r} is not a number")
    try:
        return parse_url(url)
    except ValueError as exc:
        raise _refuse(url, str(exc)) from None
