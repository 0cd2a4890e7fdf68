"""What an actor does besides its own client: adopted, made logical, or refused while it runs.

A library called the way its README shows often builds its own redis-py client
(``Redis.from_url(url)``, ``Redis(host=...)``, a module-level pool) and sleeps between retries.
Under a race, none of that may escape the schedule, so while an actor runs (``actor_running``):

* **A client it did not get from the race is adopted.** Every command, pipeline and script call
  of a ``redis.Redis`` that ``Lab.client`` did not make is sent instead through a client of the
  race's lab with that actor's gate (and the foreign client's ``decode_responses``), so its
  round trips are the actor's steps. The address the library dials picks the server
  (``helpers.instruments.servers``): the first one is the lab's own server, each further one a
  server of the lab's own making (Redlock's masters stay apart). A library made on the embedded
  backend never reaches a real server.
* **``time.sleep`` is logical.** No wall time passes (the schedule, not the clock, decides who
  runs next); the run's logical clock moves by the time slept (``helpers.instruments.
  logical_time``, which also makes the actor's ``time.time()`` and ``time.monotonic()`` the
  run's). Each sleep counts towards the actor's spin bound: a retry loop that has slept
  ``spin_bound`` times is stopped (its result is ``SPUN``), and the exploration says how many
  schedules the bound cut.
* **An asyncio client is adopted too.** Every command, pipeline and script call of a
  ``redis.asyncio.Redis`` goes, as it is awaited, through the same gated client of the lab
  (``helpers.instruments.aio``): it runs at once and parks the whole actor, event loop and all,
  until its step. An event loop made inside an actor (``asyncio.run``, ``new_event_loop``) is the
  race's ``LabLoop``: no sockets, and its timers (``asyncio.sleep``, timeouts) run on the logical
  clock, each wait counted as a sleep.
* **No socket opens outside the lab.** A connection of a client the race did not make is refused
  (``ActorRefused``) before it connects: an asyncio connection that adoption cannot reach
  (``monitor()``, a cluster or sentinel client, a connection taken from a pool directly: reason
  ``ASYNCIO``), and a synchronous one (``monitor()``, a connection a library takes from a pool
  itself, a ``single_connection_client``: reason ``UNADOPTABLE``). Adopted commands never need one.
* **Subscribing is refused.** Pub/sub delivers messages from another connection at a time no
  step decides, so an actor that calls ``pubsub()`` (of a ``redis`` or a ``redis.asyncio``
  client) gets ``ActorRefused`` saying so.
* **A thread its call starts is its sub-actor.** Under greenlets (the explorer and forced
  schedules: ``ActorContext.spawn`` is set), ``threading.Thread.start`` inside an actor starts no
  OS thread: the thread's ``run`` becomes a sub-actor the run steps like an actor, named after it
  and numbered ("A1", "A2"; ``helpers.instruments.actors``), sending through the actor's clients.
  A thread pool made inside an actor has sub-actors for workers (its queue a ``queue.Queue``, so
  an idle worker parks). A wait on a thread primitive (``threading.Condition.wait``, and so
  ``Event.wait``, futures, ``queue.Queue.get``; ``Thread.join`` of a sub-actor) inside an actor
  that started one parks it (``ActorContext.block``) until a step makes it true, or, with a
  timeout, until the run lets it time out once nothing else can run (counted as a sleep). The
  embedded server's own waits (fakeredis blocking a command inside a granted round trip) stay
  real waits, as they would be on a real server.
* **Other threads may not talk to Redis.** A round trip from a thread that is not an actor's
  own nor its sub-actor (a thread started before the run, or one an actor started under the
  thread runner, where greenlet is missing) is refused with ``ActorRefused`` naming that
  thread: on the actor's gated client (``check_sender``) or any other client (a thread an
  actor started is remembered: ``started_by``). It is never parked under the actor's letter,
  where its reply would be taken for the actor's. The race raises the refusal too, at its next
  step (``ActorContext.refused``).

Every refusal says why in a closed set (``ActorRefused.reason``, a ``Refusal``), so that a caller
need not read its message.

Outside an actor, the patched methods do exactly what redis-py, ``time`` and ``threading`` do: the
check is one context-variable read and one dictionary look-up of the current thread. The patches
go in the first time a race runs (``install``), never on import.
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, SupportsIndex

import redis
import redis.asyncio
import redis.asyncio.connection
import redis.connection

from helpers.backend.connection import LabConnection
from helpers.errors import RaceLabError
from helpers.instruments import logical_time
from helpers.instruments.aio import AdoptedPipeline, LabLoop
from helpers.instruments.servers import UnmappedServer, address_of

try:  # the explorer's runner: an actor is a greenlet of the scheduler's thread
    import greenlet  # type: ignore[import-untyped]  # greenlet ships no type information
except ImportError:  # pragma: no cover - the lock has it
    greenlet = None

SPUN = "(spin bound)"
DEFAULT_SPIN_BOUND = 20  # sleeps per actor per schedule before a retry loop is cut


class Refusal(StrEnum):
    """Why an actor was refused: what it did that no schedule controls."""

    THREAD = "thread"  # a round trip from a thread other than the actor's own
    PUBSUB = "pubsub"  # it subscribed: messages arrive at a time no step decides
    NO_ROUND_TRIP = "no_round_trip"  # it finished without a round trip the race could see
    ASYNCIO = "asyncio"  # an asyncio connection adoption cannot reach (monitor, cluster, ...)
    UNADOPTABLE = "unadoptable"  # a connection of its own that adoption cannot reach
    UNMAPPED = "unmapped"  # a server address the lab cannot give a server of its own


class ActorRefused(RaceLabError, RuntimeError):
    """An actor did something a schedule cannot control; ``reason`` says what (a ``Refusal``)."""

    def __init__(self, message: str, *, reason: Refusal) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return functools.partial(ActorRefused, reason=self.reason), (str(self),)


class SpinBound(BaseException):
    """Raised inside an actor whose retry loop slept more than its bound (BaseException: an
    actor's own ``except Exception`` cannot swallow it)."""


@dataclass
class ActorContext:
    """The actor now running in this thread: its name, where its adopted clients go, its sleeps."""

    name: str
    make_client: Callable[[bool, str], Any]  # decode_responses, address -> a gated client
    release: Callable[[Any], None]
    spin_bound: int = DEFAULT_SPIN_BOUND
    sleeps: int = 0
    adopted: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # id -> (foreign, ours)
    refused: list[ActorRefused] = field(default_factory=list)  # its threads' refusals (the run's)
    # With greenlets (the explorer's runner): a thread its calls start becomes a sub-actor
    # (spawn(run, ended) -> its name), and a wait on a thread primitive parks it (block).
    spawn: Callable[[Callable[[], Any], Callable[[], None]], str] | None = None
    block: Callable[[Callable[[], bool], float | None], bool | None] | None = None
    threads: int = 0  # its sub-actors not ended yet (its clients close after the last)
    spawned: bool = False  # it started a sub-actor: its waits on thread primitives park it
    closing: bool = False

    def client_for(self, foreign: Any) -> Any:
        """Return the gated client that speaks for foreign (made on first use)."""
        found = self.adopted.get(id(foreign))
        if found is None:
            decode = bool(foreign.get_encoder().decode_responses)
            try:
                ours = self.make_client(decode, address_of(foreign))
            except UnmappedServer as exc:
                refused = ActorRefused(f"actor {self.name}: {exc}", reason=Refusal.UNMAPPED)
                self.refused.append(refused)  # raised by the race too, should a library catch it
                raise refused from None
            found = self.adopted[id(foreign)] = (foreign, ours)
        return found[1]

    def close(self) -> None:
        """Release every adopted client, once its last sub-actor has ended."""
        self.closing = True
        if self.threads:
            return  # a sub-actor still sends through them (a pool's bail-out: pottery's)
        for _foreign, ours in self.adopted.values():
            self.release(ours)
        self.adopted.clear()


_CURRENT: contextvars.ContextVar[ActorContext | None] = contextvars.ContextVar(
    "racelab_actor", default=None
)
_INSTALL_LOCK = threading.Lock()
_ORIGINAL: dict[str, Any] = {}
# Each thread an actor started (or a thread it started started) -> that actor's context.
_STARTED: weakref.WeakKeyDictionary[threading.Thread, ActorContext] = weakref.WeakKeyDictionary()
# Each thread that runs as a sub-actor (see _start_sub_actor) -> its name in the run.
_SUB_ACTORS: weakref.WeakKeyDictionary[threading.Thread, str] = weakref.WeakKeyDictionary()


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


def started_by() -> ActorContext | None:
    """Return the context of the actor that started the current thread, or None."""
    return _STARTED.get(threading.current_thread())


def _here() -> str:
    """Return the current thread's name, quoted, with its greenlet's when it is not the main one."""
    name = repr(threading.current_thread().name)
    glet = greenlet.getcurrent() if greenlet is not None else None
    if glet is not None and glet.parent is not None:
        name += f" (greenlet {getattr(glet, '__name__', None) or hex(id(glet))})"
    return name


What = str | Callable[[], str]  # what was sent, or how to say it (only asked when refusing)


def _refuse(actor: str, refused: list[ActorRefused], sent: str) -> ActorRefused:
    """Return the refusal of a round trip sent from a thread not the actor's, noted in refused."""
    exc = ActorRefused(
        f"{sent}: a schedule steps only an actor's own thread, so the round trip is refused "
        f"(parked under {actor}'s letter, its reply would be taken for {actor}'s). A thread an "
        "actor's call starts is stepped as its sub-actor (A1, ...) by explore(), forced "
        "schedules and the stepper; any other thread's work must be an actor of its own",
        reason=Refusal.THREAD,
    )
    refused.append(exc)
    return exc


def _thread_words() -> str:
    """Return 'thread 'name'', with the actor that started it if one did."""
    started = started_by()
    return f"thread {_here()}" + (f", which actor {started.name} started," if started else "")


def check_sender(
    actor: str, thread: threading.Thread | None, glet: Any, refused: list[ActorRefused], what: What
) -> None:
    """Raise ActorRefused unless the caller is the actor's own thread (or greenlet, if glet)."""
    if glet is not None:
        if greenlet.getcurrent() is glet:
            return
        owner = "its own greenlet"
    else:
        if thread is None or threading.current_thread() is thread:
            return
        owner = f"thread {thread.name!r}"
    sent = what() if callable(what) else what
    raise _refuse(
        actor,
        refused,
        f"{_thread_words()} sent {sent} through actor {actor}'s client ({actor} runs in {owner})",
    )


def refuse_if_started(what: What) -> None:
    """Raise ActorRefused if the current thread is one an actor started (see started_by)."""
    context = started_by()
    if context is not None:
        sent = what() if callable(what) else what
        raise _refuse(context.name, context.refused, f"{_thread_words()} sent {sent}")


def _is_lab_client(client: Any) -> bool:
    """Return True if Lab.client made client (its pool carries the suite's wiring)."""
    pool = getattr(client, "connection_pool", None)
    return pool is not None and "racelab_wiring" in getattr(pool, "connection_kwargs", {})


_SYNC = redis.connection.AbstractConnection
_ASYNC = redis.asyncio.connection.AbstractConnection


def install() -> None:
    """Patch redis.Redis, redis-py's connects and time.sleep once (idempotent); a no-op outside
    actors afterwards."""
    with _INSTALL_LOCK:
        if _ORIGINAL:
            return
        _ORIGINAL.update(
            execute_command=redis.Redis.execute_command,
            pipeline=redis.Redis.pipeline,
            pubsub=redis.Redis.pubsub,
            connect=_SYNC.connect_check_health,
            connect_async=_ASYNC.connect_check_health,
            sleep=time.sleep,
            thread_start=threading.Thread.start,
            thread_join=threading.Thread.join,
            condition_wait=threading.Condition.wait,
            pool_init=concurrent.futures.ThreadPoolExecutor.__init__,
            aexecute_command=redis.asyncio.Redis.execute_command,
            apipeline=redis.asyncio.Redis.pipeline,
            apubsub=redis.asyncio.Redis.pubsub,
            ainitialize=redis.asyncio.Redis.initialize,
            new_event_loop=asyncio.events.new_event_loop,
        )
        redis.Redis.execute_command = _execute_command  # type: ignore[method-assign]
        redis.Redis.pipeline = _pipeline  # type: ignore[method-assign]
        redis.Redis.pubsub = _pubsub  # type: ignore[method-assign]
        _SYNC.connect_check_health = _connect  # type: ignore[method-assign]
        _ASYNC.connect_check_health = _connect_async  # type: ignore[method-assign]
        _connect.__wrapped__ = _ORIGINAL["connect"]  # type: ignore[attr-defined]  # inspect.unwrap
        _connect_async.__wrapped__ = _ORIGINAL["connect_async"]  # type: ignore[attr-defined]
        time.sleep = _sleep
        logical_time.replace(_ORIGINAL["sleep"], _sleep)  # from time import sleep, too
        threading.Thread.start = _thread_start  # type: ignore[method-assign]
        threading.Thread.join = _thread_join  # type: ignore[method-assign]
        threading.Condition.wait = _condition_wait  # type: ignore[method-assign]
        concurrent.futures.ThreadPoolExecutor.__init__ = _pool_init  # type: ignore[method-assign]
        _install_asyncio()


def _install_asyncio() -> None:
    """Patch redis.asyncio.Redis and asyncio's new_event_loop (part of install)."""
    aredis = redis.asyncio.Redis
    aredis.execute_command = _aexecute_command  # type: ignore[method-assign]
    aredis.pipeline = _apipeline  # type: ignore[method-assign]
    aredis.pubsub = _pubsub  # type: ignore[method-assign]
    aredis.initialize = _ainitialize  # type: ignore[method-assign]
    asyncio.events.new_event_loop = _new_event_loop
    asyncio.new_event_loop = _new_event_loop


def event_loop() -> LabLoop:
    """Return a new event loop for the actor running here: logical time, sleeps counted."""
    clock = logical_time.current()
    if clock is None:
        raise RuntimeError("event_loop() is for code running inside an actor of a race")
    return LabLoop(clock, _sleep, _refuse_socket)


def _refuse_socket(what: str) -> ActorRefused:
    """Return the refusal of a socket an actor's event loop was asked to open."""
    context = _CURRENT.get() or started_by()
    name = context.name if context is not None else "?"
    exc = ActorRefused(
        f"actor {name}'s event loop was asked to open {what}: an actor's asyncio loop opens no "
        "sockets (its Redis round trips go through the race), so it is refused; send commands "
        "through a redis.asyncio.Redis instead",
        reason=Refusal.ASYNCIO,
    )
    if context is not None:
        context.refused.append(exc)
    return exc


def _new_event_loop() -> asyncio.AbstractEventLoop:
    if _CURRENT.get() is not None and logical_time.current() is not None:
        return event_loop()
    loop: asyncio.AbstractEventLoop = _ORIGINAL["new_event_loop"]()
    return loop


def _thread_start(self: threading.Thread) -> None:
    context = _CURRENT.get()
    if context is not None and context.spawn is not None:
        _start_sub_actor(context, self)
        return
    context = context or started_by()
    if context is not None:
        _STARTED[self] = context  # its round trips are refused (check_sender, refuse_if_started)
    _ORIGINAL["thread_start"](self)


def _start_sub_actor(context: ActorContext, thread: threading.Thread) -> None:
    """Make thread, started inside an actor of a greenlet run, a sub-actor of that actor.

    No OS thread starts: the run steps the thread's run() as its sub-actor. Until that ends,
    the thread is alive (a lock held in its ``_tstate_lock``, which ``is_alive`` and ``join``
    read, as they do a real thread's).
    """
    if thread._started.is_set():  # type: ignore[attr-defined]  # threading's own state
        raise RuntimeError("threads can only be started once")
    alive = _thread.allocate_lock()
    alive.acquire()

    def ended() -> None:
        if alive.locked():
            alive.release()
            context.threads -= 1
            if context.closing and not context.threads:
                context.close()

    context.threads += 1
    context.spawned = True
    thread._tstate_lock = alive  # type: ignore[attr-defined]
    _SUB_ACTORS[thread] = context.spawn(thread.run, ended)  # type: ignore[misc]
    thread._started.set()  # type: ignore[attr-defined]


def _thread_join(self: threading.Thread, timeout: float | None = None) -> None:
    context = _CURRENT.get()
    alive = getattr(self, "_tstate_lock", None)
    if context is not None and context.block is not None and self in _SUB_ACTORS and alive:
        if context.block(lambda: not alive.locked(), timeout) is not None:
            timeout = 0  # its wait is over: what is left, the original does without waiting
    _ORIGINAL["thread_join"](self, timeout)


def _condition_wait(self: threading.Condition, timeout: float | None = None) -> bool:
    """threading.Condition.wait: inside an actor that started threads, a wait that parks it."""
    context = _CURRENT.get()
    if context is None or context.block is None or not context.spawned or _server_side():
        return bool(_ORIGINAL["condition_wait"](self, timeout))
    if not self._is_owned():  # type: ignore[attr-defined]  # as threading's own wait checks
        raise RuntimeError("cannot wait on un-acquired lock")
    waiter = _thread.allocate_lock()
    waiter.acquire()
    self._waiters.append(waiter)  # type: ignore[attr-defined]
    saved = self._release_save()  # type: ignore[attr-defined]
    got = False
    try:
        woken = context.block(lambda: not waiter.locked(), timeout)
        if woken is None:  # not a greenlet of the run: a real wait, as threading's
            got = waiter.acquire(True, -1 if timeout is None else max(timeout, 0))
        else:
            got = woken and waiter.acquire(False)
            if not woken and timeout is not None and timeout > 0:
                _count_sleep(context)  # a wait that timed out: as a sleep, for the spin bound
        return got
    finally:
        self._acquire_restore(saved)  # type: ignore[attr-defined]
        if not got:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)  # type: ignore[attr-defined]


def _server_side() -> bool:
    """Return True when the wait is the embedded server's own (fakeredis blocking a command).

    fakeredis runs inside the round trip that the run granted, and times a blocking command's
    wait by the wall clock: parked as an actor's wait, it became a step or not depending on how
    fast the machine was (a sub-actor's BLPOP that timed out, seen once by the fuzzer under
    load). It is a real wait, as on a real server; the explorer sends such a call only when it
    can be answered, or with its timeout cut to 1 ms (``helpers.instruments.blocking``).
    """
    caller = sys._getframe(2).f_globals.get("__name__", "")
    return str(caller).partition(".")[0] == "fakeredis"


def _pool_init(self: concurrent.futures.ThreadPoolExecutor, *args: Any, **kwargs: Any) -> None:
    _ORIGINAL["pool_init"](self, *args, **kwargs)
    context = _CURRENT.get()
    if context is not None and context.spawn is not None:
        # Its workers are sub-actors: an idle one waits on a queue.Queue, whose wait parks it
        # (a SimpleQueue's would block the run's one thread).
        self._work_queue = queue.Queue()  # type: ignore[assignment]


def _words(args: Sequence[Any]) -> str:
    """Return a command's first two words for an error message."""
    return " ".join(
        a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in args[:2]
    )


def _execute_command(self: Any, *args: Any, **options: Any) -> Any:
    context = _CURRENT.get()
    if context is None:
        refuse_if_started(lambda: _words(args))  # a thread an actor started: nothing escapes
    if context is None or _is_lab_client(self):
        return _ORIGINAL["execute_command"](self, *args, **options)
    return context.client_for(self).execute_command(*args, **options)


def _pipeline(self: Any, transaction: bool = True, shard_hint: Any = None) -> Any:
    context = _CURRENT.get()
    if context is None:
        refuse_if_started("a pipeline")
    if context is None or _is_lab_client(self):
        return _ORIGINAL["pipeline"](self, transaction, shard_hint)
    return context.client_for(self).pipeline(transaction, shard_hint)


def _pubsub(self: Any, **kwargs: Any) -> Any:
    context = _CURRENT.get()
    aio = isinstance(self, redis.asyncio.Redis)
    if context is not None:
        raise ActorRefused(
            f"actor {context.name} subscribes (pubsub{' of an asyncio client' if aio else ''}): "
            "messages arrive on another connection at a time no step decides, so a schedule "
            "cannot control them; explore the part of the code that sends commands, or run the "
            "library under threads (Race.load) instead",
            reason=Refusal.PUBSUB,
        )
    return _ORIGINAL["apubsub" if aio else "pubsub"](self, **kwargs)


async def _aexecute_command(self: Any, *args: Any, **options: Any) -> Any:
    context = _CURRENT.get()
    if context is None:
        refuse_if_started(lambda: _words(args))
        return await _ORIGINAL["aexecute_command"](self, *args, **options)
    return context.client_for(self).execute_command(*args, **options)  # parks the whole actor


def _apipeline(self: Any, transaction: bool = True, shard_hint: Any = None) -> Any:
    context = _CURRENT.get()
    if context is None:
        refuse_if_started("a pipeline")
        return _ORIGINAL["apipeline"](self, transaction, shard_hint)
    return AdoptedPipeline(context.client_for(self).pipeline(transaction, shard_hint))


async def _ainitialize(self: Any) -> Any:
    if _CURRENT.get() is None:
        return await _ORIGINAL["ainitialize"](self)
    return self  # a single_connection_client adopted: no connection of its own is taken


def _address(connection: Any) -> str:
    """Return where a redis-py connection would go: host:port, or a socket path."""
    path = getattr(connection, "path", None)
    return path or f"{getattr(connection, 'host', '?')}:{getattr(connection, 'port', '?')}"


def _refuse_connect(connection: Any, reason: Refusal) -> ActorRefused | None:
    """Return the refusal of a connect from inside an actor (or a thread it started), noted in
    its run's refusals; None outside every actor."""
    context = _CURRENT.get() or started_by()
    if context is None:
        return None
    where = _address(connection)
    if reason is Refusal.ASYNCIO:
        what = (
            f"actor {context.name} opens an asyncio connection of its own (redis.asyncio, to "
            f"{where}) that the race cannot adopt (monitor(), a cluster or sentinel client, a "
            "connection taken from a pool directly), so it is refused before its socket opens; "
            "send commands, pipelines and scripts through a redis.asyncio.Redis instead"
        )
    else:
        what = (
            f"actor {context.name} opens a connection of its own to {where} that the race cannot "
            "adopt (monitor(), a connection taken from a pool directly, or a "
            "single_connection_client), so it is refused before its socket opens; build the "
            "client without it, or pass the actor's client to the library"
        )
    exc = ActorRefused(what, reason=reason)
    context.refused.append(exc)  # raised by the race too, should the library swallow it
    return exc


def _connect(self: Any, *args: Any, **kwargs: Any) -> Any:
    if not isinstance(self, LabConnection):
        refused = _refuse_connect(self, Refusal.UNADOPTABLE)
        if refused is not None:
            raise refused
    return _ORIGINAL["connect"](self, *args, **kwargs)


async def _connect_async(self: Any, *args: Any, **kwargs: Any) -> Any:
    refused = _refuse_connect(self, Refusal.ASYNCIO)
    if refused is not None:
        raise refused
    return await _ORIGINAL["connect_async"](self, *args, **kwargs)


def _sleep(seconds: float | SupportsIndex) -> None:
    context = _CURRENT.get()
    if context is None:
        _ORIGINAL["sleep"](seconds)
        return None
    _count_sleep(context)
    logical_time.advance(float(seconds))
    return None


def _count_sleep(context: ActorContext) -> None:
    """Count one sleep (or timed-out wait) of the actor; SpinBound past its spin bound."""
    context.sleeps += 1
    if context.sleeps > context.spin_bound:
        raise SpinBound(
            f"actor {context.name} slept {context.sleeps} times in one schedule (spin bound "
            f"{context.spin_bound}): a retry loop that never gets what it waits for"
        )


__all__ = [
    "DEFAULT_SPIN_BOUND",
    "SPUN",
    "ActorContext",
    "ActorRefused",
    "Refusal",
    "SpinBound",
    "actor_running",
    "check_sender",
    "current",
    "event_loop",
    "install",
    "refuse_if_started",
    "started_by",
]
