"""asyncio actors: a coroutine function of a ``redis.asyncio`` client, stepped as a sync one is.

An actor may be ``async def actor(client)``: the client it is given is a ``redis.asyncio.Redis``
(``LabAsyncClient``) whose every command, pipeline and script call is sent, as it is awaited,
through the actor's own synchronous client of the race. So a round trip of an async actor is a
round trip of that gated client: it parks the whole actor (its thread, or its greenlet with the
event loop inside) until the schedule grants it, and the schedules, the reduction, the faults,
the stepper and threaded load see nothing new. A ``redis.asyncio`` client the actor (or a library
it calls) builds itself is adopted the same way (``helpers.instruments.adopt``).

The actor's coroutine runs on an event loop of its own (``LabLoop``), made for each run inside
the actor: its time is the run's logical clock, and where it would wait for its next timer
(``asyncio.sleep``, ``asyncio.timeout``, ``wait_for``) it moves that clock instead, counted as a
sleep towards the actor's spin bound. It has no sockets: every round trip is the gated client's,
so nothing it runs can dial out. Under threaded load (``run_clients``) the loop is an ordinary
asyncio loop of the worker thread, on wall time.

asyncio keeps "the running loop" (and its async-generator hooks) per thread. Actors that are
greenlets of one thread each run a loop, so ``LoopSlot`` keeps that per-thread state per greenlet:
the scheduler swaps it in and out around every switch into an actor.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.client
import redis.client

from helpers.instruments.logical_time import Reader

_NS = 1_000_000_000
_IDLE_SLICE_S = 0.05  # an idle loop with no timer checks this often for a stop
_CLEANUP_ROUNDS = 20  # loop iterations given to cancelled tasks when an actor stops early


def is_async_actor(fn: Any) -> bool:
    """Return True if fn is a coroutine function (also through functools.partial)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    )


# --- the client an async actor is given, and the pipelines it makes -----------------------------


async def _ready(value: Any) -> Any:
    """Return value, awaited (what an adopted command that already ran returns)."""
    return value


class AdoptedPipeline(redis.asyncio.client.Pipeline):
    """An asyncio pipeline whose round trips are those of a synchronous pipeline of the race."""

    def __init__(self, sync: redis.client.Pipeline) -> None:  # no pool: it never connects
        self._sync = sync
        self.connection = None
        self.is_transaction = bool(vars(sync).get("transaction", True))

    # the state redis.asyncio's own methods read is the synchronous pipeline's
    @property
    def command_stack(self) -> Any:
        return self._sync.command_stack

    @command_stack.setter
    def command_stack(self, value: Any) -> None:
        self._sync.command_stack = value

    @property
    def scripts(self) -> Any:  # async Scripts load the same way as sync ones
        return self._sync.scripts

    @scripts.setter
    def scripts(self, value: Any) -> None:
        self._sync.scripts = value

    @property
    def watching(self) -> bool:
        return bool(self._sync.watching)

    @watching.setter
    def watching(self, value: bool) -> None:
        self._sync.watching = value

    @property
    def explicit_transaction(self) -> bool:
        return bool(self._sync.explicit_transaction)

    @explicit_transaction.setter
    def explicit_transaction(self, value: bool) -> None:
        self._sync.explicit_transaction = value

    def get_encoder(self) -> Any:
        """Return the synchronous pipeline's encoder."""
        return self._sync.get_encoder()

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """Queue a command (return self), or send it now after WATCH (return its awaitable reply)."""
        out = self._sync.execute_command(*args, **kwargs)
        return self if out is self._sync else _ready(out)

    def multi(self) -> None:
        """Start the MULTI block after WATCH."""
        self._sync.multi()

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands as one round trip; return their replies."""
        return self._sync.execute(raise_on_error)

    async def watch(self, *names: Any) -> Any:  # type: ignore[override]
        """WATCH names (one round trip)."""
        return self._sync.watch(*names)

    async def unwatch(self) -> Any:  # type: ignore[override]
        """UNWATCH, if watching."""
        return self._sync.unwatch()

    async def discard(self) -> None:
        """Forget the queued commands (DISCARD)."""
        self._sync.discard()

    async def reset(self) -> None:  # type: ignore[override]
        """Forget everything queued and watched; give the connection back."""
        self._sync.reset()

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """The same as reset."""
        self._sync.reset()


class LabAsyncClient(redis.asyncio.Redis):
    """A ``redis.asyncio.Redis`` whose commands, pipelines and scripts are a sync client's."""

    def __init__(self, sync: Any) -> None:
        super().__init__(decode_responses=bool(sync.get_encoder().decode_responses))
        self.racelab_sync = sync

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Send the command through the synchronous client (one round trip); return its reply."""
        return self.racelab_sync.execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> AdoptedPipeline:
        """Return a pipeline whose round trips are the synchronous client's."""
        return AdoptedPipeline(self.racelab_sync.pipeline(transaction, shard_hint))

    async def initialize(self) -> LabAsyncClient:
        """Return self: there is no connection of its own to take."""
        return self

    def __repr__(self) -> str:
        return f"<LabAsyncClient of {self.racelab_sync!r}>"


def view_of(sync: Any) -> LabAsyncClient:
    """Return the asyncio client that speaks through sync: made once per sync client (about
    2 ms), its asyncio locks new for each run (a lock is bound to the loop it first waited on)."""
    view = getattr(sync, "racelab_async_view", None)
    if view is None:
        view = LabAsyncClient(sync)
        sync.racelab_async_view = view
    view._single_conn_lock, view._usage_lock = asyncio.Lock(), asyncio.Lock()
    view._usage_counter = 0
    return view


# --- the loop an actor runs on ---------------------------------------------------------------


class LabLoop(asyncio.BaseEventLoop):
    """An event loop without sockets whose time is a run's logical clock.

    ``wait(seconds)`` is called where the loop would wait for its next timer: it moves the clock
    (and counts a sleep). A socket it is asked to open is refused: ``refuse(what)`` returns the
    exception to raise. Nothing scheduled and nothing ready: it waits (wall time) for another
    thread's ``call_soon_threadsafe``; the run's watchdog ends an actor stuck there.
    """

    def __init__(
        self,
        clock: Reader,
        wait: Callable[[float], None],
        refuse: Callable[[str], BaseException],
    ) -> None:
        super().__init__()
        self._clock, self._wait, self._refuse = clock, wait, refuse
        self._woken = threading.Event()
        self._selector = self  # what BaseEventLoop._run_once waits on: select() below
        self.stopping_early = False  # cleaning up after an actor stopped: no time passes
        # A step's "duration" is the other actors' sleeps (the run's clock), never slowness:
        # asyncio's debug mode must not report it as a slow callback.
        self.slow_callback_duration = float("inf")

    def time(self) -> float:
        """Return the run's logical monotonic time, in seconds."""
        return self._clock.monotonic_ns() / _NS

    def select(self, timeout: float | None) -> list[Any]:
        """Move the clock to the next timer (no wall time passes); there are never events."""
        if self._woken.is_set() or timeout == 0:
            self._woken.clear()
        elif timeout is None:  # only another thread can wake it; in slices, so that the
            while not self._woken.wait(_IDLE_SLICE_S):  # run can stop a stuck actor's thread
                pass
            self._woken.clear()
        elif self.stopping_early:
            self._clock.advance(timeout)  # unwinding: timers still come due, no sleep is counted
        else:
            try:
                self._wait(timeout)
            except BaseException:  # the spin bound: the loop unwinds without counting sleeps
                self.stopping_early = True
                raise
        return []

    def _process_events(self, event_list: list[Any]) -> None:
        """No sockets: no events."""

    def _write_to_self(self) -> None:
        self._woken.set()

    async def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse: an actor's loop opens no sockets (its Redis round trips are the race's)."""
        where = ":".join(str(a) for a in args[1:3] if a is not None) or kwargs.get("sock", "?")
        raise self._refuse(f"a connection to {where}")

    async def create_unix_connection(self, *args: Any, **kwargs: Any) -> Any:
        """Refuse, as create_connection."""
        raise self._refuse(f"a connection to {kwargs.get('path') or args[1:2] or '?'}")


def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    """Return what coro returns, run on loop; on the way out its other tasks are cancelled and
    the loop closed (a stopped actor leaves no pending task to complain at exit)."""
    try:
        return loop.run_until_complete(coro)
    finally:
        _wind_down(loop)
        if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
            coro.close()


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel loop's tasks, give them a few iterations to unwind, then close it quietly."""
    if isinstance(loop, LabLoop):
        loop.stopping_early = True
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    for _ in range(_CLEANUP_ROUNDS):
        if all(t.done() for t in tasks):
            break
        loop.call_soon(loop.stop)
        try:
            loop.run_forever()
        except BaseException:  # noqa: BLE001, S112 - a task's cleanup that raised: it is ending
            continue
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" at exit
    loop.set_exception_handler(lambda _loop, _context: None)  # a task that would not end
    loop.close()


def run_actor(fn: Callable[..., Any], client: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """Return what the async actor fn returns, given the asyncio view of client, run on loop."""
    return run_on(loop, fn(view_of(client)))


# --- threaded load -----------------------------------------------------------------------------


class _ThreadLoop:
    """One worker thread's ordinary event loop, closed when the thread lets it go."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        self.loop.close()


_THREAD = threading.local()


def sync_actor(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Return a synchronous actor that runs async fn on its thread's event loop (threaded load)."""

    @functools.wraps(fn)
    def call(client: Any, *args: Any) -> Any:
        holder = getattr(_THREAD, "loop", None)
        if holder is None:
            holder = _THREAD.loop = _ThreadLoop()
        return holder.loop.run_until_complete(fn(view_of(client), *args))

    return call


# --- the per-thread asyncio state, per greenlet -------------------------------------------------


class LoopSlot:
    """asyncio's per-thread state (the running loop, async-generator hooks) for one greenlet."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hooks: tuple[Any, Any] = (None, None)

    def swap(self) -> None:
        """Exchange the thread's state with the slot's (once on entry, once on the way back)."""
        loop, hooks = asyncio.events._get_running_loop(), sys.get_asyncgen_hooks()
        if loop is self.loop and hooks == self.hooks:  # (a tuple: either side compares so)
            return  # the same on both sides (a synchronous actor, the usual case): nothing moves
        asyncio.events._set_running_loop(self.loop)
        sys.set_asyncgen_hooks(*self.hooks)
        self.loop, self.hooks = loop, tuple(hooks)  # type: ignore[assignment]


__all__ = [
    "AdoptedPipeline",
    "LabAsyncClient",
    "LabLoop",
    "LoopSlot",
    "is_async_actor",
    "run_actor",
    "run_on",
    "sync_actor",
    "view_of",
]
