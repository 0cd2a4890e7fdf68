"""A reference workload: how the benchmarks put one race's strategies under load, as plain data.

Each race module declares its ``REFERENCE`` beside its strategies: the labels the plots show,
each mapped to the very function the notebook shows, and how one request and one reset are
made from a run's key names. ``helpers.instruments.reference`` measures any such declaration
(``relative_cost(lab, ratelimit.REFERENCE)``) without importing ``races``; ``make bench``
writes the figures to ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from races import Namespace

Request = Callable[[redis.Redis], object]  # one request, given a client


@dataclass(frozen=True)
class Workload:
    """One benchmark of a race's strategies: one request per call of request(client)."""

    name: str  # the reference file: benchmarks/results/<name>.json
    title: str  # the plot's title, e.g. "Rate limiter"
    what: str  # what one request does
    baseline: str  # the label every cost is divided by
    strategies: Mapping[str, Callable[..., Any]]  # label -> strategy
    request: Callable[[Namespace, Callable[..., Any], str], Request]  # (ns, fn, label) -> request
    reset: Callable[[Namespace, Sequence[str]], Request] | None = None  # (ns, labels) -> reset
    needs: Mapping[str, str] = field(default_factory=dict)  # label -> capability it needs
    libraries: tuple[str, ...] = ()  # lua/ function libraries a strategy may load
