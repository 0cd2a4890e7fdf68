"""What an actor does besides its own client: adopted, made logical, or refused while it runs.

A library called the way its README shows often builds its own redis-py client
(``Redis.from_url(url)``, ``Redis(host=...)``, a module-level pool) and sleeps between retries.
Under a race, none of that may escape the schedule, so while an actor runs (``actor_running``):

* **A client it did not get from the race is adopted.** Every command, pipeline and script call
  of a ``redis.Redis`` that ``Lab.client`` did not make is sent instead through a client of the
  race's lab with that actor's gate (and the foreign client's ``decode_responses``), so its
  round trips are the actor's steps on the lab's server, whatever URL the library was given.
  A library made on the embedded backend never reaches a real server.
* **``time.sleep`` is logical.** No wall time passes (the schedule, not the clock, decides who
  runs next). Each sleep counts towards the actor's spin bound: a retry loop that has slept
  ``spin_bound`` times is stopped (its result is ``SPUN``), and the exploration says how many
  schedules the bound cut.
* **Subscribing is refused.** Pub/sub delivers messages from another connection at a time no
  step decides, so an actor that calls ``pubsub()`` gets ``ActorRefused`` saying so.

Outside an actor, the patched methods do exactly what redis-py and ``time`` do: the check is one
context-variable read. The patches go in the first time a race runs (``install``), never on
import.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, SupportsIndex

import redis

from helpers.errors import RaceLabError

SPUN = "(spin bound)"
DEFAULT_SPIN_BOUND = 20  # sleeps per actor per schedule before a retry loop is cut


class ActorRefused(RaceLabError, RuntimeError):
    """An actor did something a schedule cannot control (subscribe, or talk to no server at all)."""


class SpinBound(BaseException):
    """Raised inside an actor whose retry loop slept more than its bound (BaseException: an
    actor's own ``except Exception`` cannot swallow it)."""


@dataclass
class ActorContext:
    """The actor now running in this thread: its name, where its adopted clients go, its sleeps."""

    name: str
    make_client: Callable[[bool], Any]  # decode_responses -> a gated client of the lab
    release: Callable[[Any], None]
    spin_bound: int = DEFAULT_SPIN_BOUND
    sleeps: int = 0
    adopted: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # id -> (foreign, ours)

    def client_for(self, foreign: Any) -> Any:
        """Return the gated client that speaks for foreign (made on first use)."""
        found = self.adopted.get(id(foreign))
        if found is None:
            decode = bool(foreign.get_encoder().decode_responses)
            found = self.adopted[id(foreign)] = (foreign, self.make_client(decode))
        return found[1]

    def close(self) -> None:
        """Release every adopted client."""
        for _foreign, ours in self.adopted.values():
            self.release(ours)
        self.adopted.clear()


_CURRENT: contextvars.ContextVar[ActorContext | None] = contextvars.ContextVar(
    "racelab_actor", default=None
)
_INSTALL_LOCK = threading.Lock()
_ORIGINAL: dict[str, Any] = {}


def current() -> ActorContext | None:
    """Return the context of the actor running here, or None outside every actor."""
    return _CURRENT.get()


@contextmanager
def actor_running(context: ActorContext) -> Iterator[ActorContext]:
    """Run the block as the actor context describes (adoption, logical sleep, refusals)."""
    install()
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)
        context.close()


def _is_lab_client(client: Any) -> bool:
    """Return True if Lab.client made client (its pool carries the suite's wiring)."""
    pool = getattr(client, "connection_pool", None)
    return pool is not None and "racelab_wiring" in getattr(pool, "connection_kwargs", {})


def install() -> None:
    """Patch redis.Redis and time.sleep once (idempotent); a no-op outside actors afterwards."""
    with _INSTALL_LOCK:
        if _ORIGINAL:
            return
        _ORIGINAL.update(
            execute_command=redis.Redis.execute_command,
            pipeline=redis.Redis.pipeline,
            pubsub=redis.Redis.pubsub,
            sleep=time.sleep,
        )
        redis.Redis.execute_command = _execute_command  # type: ignore[method-assign]
        redis.Redis.pipeline = _pipeline  # type: ignore[method-assign]
        redis.Redis.pubsub = _pubsub  # type: ignore[method-assign]
        time.sleep = _sleep


def _execute_command(self: Any, *args: Any, **options: Any) -> Any:
    context = _CURRENT.get()
    if context is None or _is_lab_client(self):
        return _ORIGINAL["execute_command"](self, *args, **options)
    return context.client_for(self).execute_command(*args, **options)


def _pipeline(self: Any, transaction: bool = True, shard_hint: Any = None) -> Any:
    context = _CURRENT.get()
    if context is None or _is_lab_client(self):
        return _ORIGINAL["pipeline"](self, transaction, shard_hint)
    return context.client_for(self).pipeline(transaction, shard_hint)


def _pubsub(self: Any, **kwargs: Any) -> Any:
    context = _CURRENT.get()
    if context is not None:
        raise ActorRefused(
            f"actor {context.name} subscribes (pubsub): messages arrive on another connection at "
            "a time no step decides, so a schedule cannot control them; explore the part of the "
            "code that sends commands, or run the library under threads (Race.load) instead"
        )
    return _ORIGINAL["pubsub"](self, **kwargs)


def _sleep(seconds: float | SupportsIndex) -> None:
    context = _CURRENT.get()
    if context is None:
        _ORIGINAL["sleep"](seconds)
        return None
    context.sleeps += 1
    if context.sleeps > context.spin_bound:
        raise SpinBound(
            f"actor {context.name} slept {context.sleeps} times in one schedule (spin bound "
            f"{context.spin_bound}): a retry loop that never gets what it waits for"
        )
    return None


__all__ = [
    "DEFAULT_SPIN_BOUND",
    "SPUN",
    "ActorContext",
    "ActorRefused",
    "SpinBound",
    "actor_running",
    "current",
    "install",
]
