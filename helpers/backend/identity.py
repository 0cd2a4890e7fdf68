"""Which server answers: its product and its own version (Valkey reports 7.2.4 as redis_version)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
import redis.cluster

from helpers.backend.capabilities import text

_PRODUCTS = {"redis": "Redis", "valkey": "Valkey"}


@dataclass(frozen=True)
class ServerIdentity:
    """Which server answers: its name ('redis', 'valkey', 'fakeredis') and its own version."""

    name: str
    version: str
    redis_version: str = ""  # what INFO's redis_version says (Valkey reports 7.2.4 there)

    def label(self) -> str:
        """Return e.g. 'Redis 8.6.3', 'Valkey 9.1.2' or 'fakeredis (as Redis 8.4.0)'."""
        if self.name == "fakeredis":
            return f"fakeredis (as Redis {self.version})"
        return f"{_PRODUCTS.get(self.name, self.name)} {self.version}"


def identify(info: dict[str, Any]) -> ServerIdentity:
    """Return the server's identity from INFO server fields (server_name, valkey_version, redis_version)."""
    redis_version = text(info.get("redis_version", ""))
    name = text(
        info.get("server_name") or ("valkey" if "valkey_version" in info else "redis")
    ).lower()
    version = text(info.get(f"{name}_version") or redis_version)
    return ServerIdentity(name=name, version=version, redis_version=redis_version)


def server_identity(
    client: redis.Redis | redis.cluster.RedisCluster,
    embedded_version: tuple[int, ...] | None = None,
) -> ServerIdentity:
    """Return who answers client: from INFO server, or fakeredis at embedded_version (no INFO there)."""
    if embedded_version is not None:
        return ServerIdentity("fakeredis", ".".join(str(p) for p in embedded_version))
    info = client.info("server")
    if isinstance(info, dict) and "redis_version" not in info:  # cluster: one dict per node
        info = next(iter(info.values()))
    return identify(info)
