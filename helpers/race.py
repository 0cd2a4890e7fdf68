"""Concurrent runs: N clients x M iterations of a client function, each client on its own connection.

``run_clients(lab, client_fn, clients=8, iterations=100, think_time=0.0)`` starts one thread per
client. Each thread gets its own connection (``lab.client()``), waits on a barrier so that all
clients start together, then calls ``client_fn(ctx)`` ``iterations`` times. ``ctx`` is a
:class:`ClientContext`: ``.client``, ``.client_id``, ``.iteration``, ``.think()``, ``.op(label)``,
``.record(...)``, ``.retry()`` and ``.local`` (a dict private to that client).

Why ``think()``: on the embedded backend every command runs under Python's GIL, and a thread
often keeps the GIL from its GET to its INCR, so the race shows only in some runs. A call to
``time.sleep(0)`` between read and write hands the GIL to another client at exactly the point
where a real network round trip would let another client in. ``think_time=0`` still yields.

Thread hygiene: every thread is joined before ``run_clients`` returns. An exception in any
client stops the others and is re-raised in the caller; if the run does not finish within
``timeout`` seconds, the clients' connections are closed (which unblocks a thread waiting on
the server), the threads are joined, and :class:`RunTimeout` is raised.

``run_processes`` runs the same kind of experiment with one *process* per client (true
parallelism, no GIL), for real servers only. It forks, so ``client_fn`` may be defined in a
notebook cell; outcome values must be picklable.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_monotonic_ns = time.monotonic_ns
_sleep = time.sleep

ClientFn = Callable[["ClientContext"], Any]


class RunTimeout(TimeoutError):
    """A concurrent run did not finish within its timeout (its clients were stopped)."""


class ClientProcessError(RuntimeError):
    """A client process raised; the message carries the child's traceback."""


@dataclass(frozen=True)
class Op:
    """One recorded operation: who, what, when (monotonic ns, invocation to completion), result."""

    client_id: int | str
    label: str
    start_ns: int
    end_ns: int
    result: Any = None

    @property
    def duration_ns(self) -> int:
        """Return end_ns - start_ns."""
        return self.end_ns - self.start_ns


class _OpRecorder:
    """Context manager returned by ClientContext.op(); set ``.result`` inside the block."""

    __slots__ = ("_ctx", "label", "result", "start_ns")

    def __init__(self, ctx: "ClientContext", label: str) -> None:
        self._ctx = ctx
        self.label = label
        self.result: Any = None
        self.start_ns = 0

    def __enter__(self) -> "_OpRecorder":
        self.start_ns = _monotonic_ns()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        end = _monotonic_ns()
        result = self.result if exc is None else f"error: {type(exc).__name__}"
        self._ctx.history.append(Op(self._ctx.client_id, self.label, self.start_ns, end, result))


class ClientContext:
    """What client_fn sees: its own client, its id, the iteration, and recorders."""

    __slots__ = ("client", "client_id", "iteration", "think_time", "retries", "history", "local", "stop")

    def __init__(self, client: Any, client_id: int, think_time: float, stop: Any = None) -> None:
        self.client = client
        self.client_id = client_id
        self.iteration = 0
        self.think_time = think_time
        self.retries = 0
        self.history: list[Op] = []
        self.local: dict[str, Any] = {}
        self.stop = stop  # the run's stop Event: a think() in progress ends when the run is stopped

    def think(self, seconds: float | None = None) -> None:
        """Sleep think_time (or seconds), cut short if the run is stopped; 0 still yields the GIL."""
        delay = self.think_time if seconds is None else seconds
        if delay > 0 and self.stop is not None:
            self.stop.wait(delay)
        else:
            _sleep(delay)

    def op(self, label: str) -> _OpRecorder:
        """Return a context manager that records one operation (start, end, .result) in the history."""
        return _OpRecorder(self, label)

    def record(self, label: str, start_ns: int, end_ns: int, result: Any = None) -> None:
        """Record an operation whose times were taken by the caller (e.g. a lock-holding span)."""
        self.history.append(Op(self.client_id, label, start_ns, end_ns, result))

    def retry(self, n: int = 1) -> None:
        """Count n retries (e.g. a WATCH conflict) for this client."""
        self.retries += n


@dataclass
class RunResult:
    """Everything one concurrent run produced."""

    clients: int
    iterations: int
    outcomes: list[tuple[int, int, Any]] = field(default_factory=list)
    latencies_ns: list[int] = field(default_factory=list)
    history: list[Op] = field(default_factory=list)
    retries_by_client: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    mode: str = "threads"

    @property
    def retries(self) -> int:
        """Return the total number of retries reported with ctx.retry()."""
        return sum(self.retries_by_client)

    @property
    def calls(self) -> int:
        """Return how many client_fn calls completed."""
        return len(self.outcomes)

    @property
    def throughput(self) -> float:
        """Return completed client_fn calls per second of wall time."""
        return self.calls / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def count(self, value: Any) -> int:
        """Return how many calls returned value."""
        return sum(1 for _, _, v in self.outcomes if v == value)

    def counts(self) -> dict[Any, int]:
        """Return {outcome value: number of calls}."""
        return dict(Counter(v for _, _, v in self.outcomes))

    def ops(self, label: str | None = None) -> list[Op]:
        """Return the recorded operations (with that label), ordered by start time."""
        return [o for o in self.history if label is None or o.label == label]

    def op_latencies_ns(self, label: str | None = None) -> list[int]:
        """Return the durations of recorded operations (with that label)."""
        return [o.end_ns - o.start_ns for o in self.ops(label)]

    def summary(self) -> str:
        """Return a one-line description: clients, calls, outcome counts, retries."""
        found = self.counts()
        try:
            ordered = sorted(found.items())
        except TypeError:  # outcomes of mixed types
            ordered = sorted(found.items(), key=lambda kv: str(kv[0]))
        counts = (", ".join(f"{k}={v}" for k, v in ordered) if len(ordered) <= 8
                  else f"{len(ordered)} distinct outcomes")
        return (f"{self.clients} clients x {self.iterations} iterations ({self.mode}): "
                f"{self.calls} calls [{counts}], retries={self.retries}")


# What closing a connection that another thread is using may raise: an OSError from a real
# socket, or ValueError ("generator already executing") from a fakeredis socket whose reply
# parser is running in that thread. That thread then ends at its next stop check instead.
_BUSY_CONNECTION_ERRORS = (OSError, ValueError)


def _release(lab: Any, client: Any) -> None:
    """Close a client handed out by lab.client(), and let the lab forget it (a busy one is left to its thread)."""
    try:
        lab.release(client)
    except _BUSY_CONNECTION_ERRORS:
        return  # only after a RunTimeout that reports the thread as not stopped


def _disconnect(client: Any) -> None:
    """Close every socket of client, including those in use (wakes a thread blocked on a read)."""
    for part in (getattr(client, "connection_pool", None), getattr(client, "connection", None)):
        if part is None:
            continue
        try:
            part.disconnect()
        except _BUSY_CONNECTION_ERRORS:
            continue  # in use by its thread right now: the stop event ends that thread


class _Worker:
    """One client thread's loop; results are kept in its own lists (no shared locks per op)."""

    def __init__(self, ctx: ClientContext, fn: ClientFn, iterations: int, barrier: threading.Barrier,
                 stop: threading.Event, errors: list[BaseException], prepare: ClientFn | None,
                 barrier_timeout: float) -> None:
        self.ctx, self.fn, self.iterations = ctx, fn, iterations
        self.barrier, self.stop, self.errors = barrier, stop, errors
        self.prepare, self.barrier_timeout = prepare, barrier_timeout
        self.values: list[Any] = []  # iteration i's return value at index i
        self.latencies: list[int] = []
        self.first_ns = 0
        self.last_ns = 0

    def run(self) -> None:
        try:
            self.ctx.client.ping()  # connect now, so the first timed call does not pay for it
            if self.prepare is not None:
                self.prepare(self.ctx)
            self.barrier.wait(self.barrier_timeout)
            self._loop()
        except threading.BrokenBarrierError:
            if not self.stop.is_set():  # broken by a timeout, not by another client's failure
                self.errors.append(RunTimeout("the clients did not all reach the start barrier"))
                self.stop.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
            self.errors.append(exc)
            self.stop.set()
            self.barrier.abort()

    def _loop(self) -> None:
        # Each thread appends to its own lists, merged after every thread is joined.
        self.first_ns, self.last_ns = _timed_loop(self.ctx, self.fn, self.iterations, self.stop.is_set,
                                                  self.values, self.latencies)


def _timed_loop(ctx: ClientContext, fn: ClientFn, iterations: int, stopped: Callable[[], bool],
                values: list[Any], latencies: list[int]) -> tuple[int, int]:
    """Call fn(ctx) up to iterations times, appending results and ns latencies; return (first_ns, last_ns).

    The hot loop of the harness, shared by threads and processes: only local names, no locks,
    no per-call objects but the caller's.
    """
    values_append, latencies_append = values.append, latencies.append
    clock = _monotonic_ns
    first = clock()
    for i in range(iterations):
        if stopped():
            break
        ctx.iteration = i
        t0 = clock()
        value = fn(ctx)
        t1 = clock()
        values_append(value)
        latencies_append(t1 - t0)
    return first, clock()


def _join_all(threads: list[threading.Thread], deadline: float) -> list[threading.Thread]:
    """Join threads until deadline; return those still alive."""
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


def _stop_threads(threads: list[threading.Thread], stop: threading.Event, barrier: threading.Barrier,
                  redis_clients: list[Any], grace: float) -> list[threading.Thread]:
    """Ask every thread to stop, unblock their sockets, join; return threads still alive."""
    stop.set()
    barrier.abort()
    for c in redis_clients:
        _disconnect(c)
    return _join_all(threads, time.monotonic() + grace)


def run_clients(lab: Any, client_fn: ClientFn, clients: int = 8, iterations: int = 100,
                think_time: float = 0.0, timeout: float = 60.0, prepare: ClientFn | None = None,
                decode_responses: bool = True) -> RunResult:
    """Return the RunResult of `clients` threads each calling client_fn(ctx) `iterations` times.

    prepare(ctx), if given, runs once per client before the start barrier (e.g. to cache a
    Script in ctx.local). Re-raises the first exception of any client; raises RunTimeout after
    `timeout` seconds. No thread outlives the call.
    """
    if clients < 1 or iterations < 0:
        raise ValueError(f"need clients >= 1 and iterations >= 0, got {clients} and {iterations}")
    if not think_time >= 0 or not timeout > 0:  # written so that NaN fails too
        raise ValueError(f"need think_time >= 0 and timeout > 0 seconds, got {think_time} and {timeout}")
    redis_clients: list[Any] = []
    try:
        for _ in range(clients):
            redis_clients.append(lab.client(decode_responses=decode_responses))
    except BaseException:
        for c in redis_clients:
            _release(lab, c)
        raise
    barrier = threading.Barrier(clients)
    stop = threading.Event()
    errors: list[BaseException] = []
    workers = [_Worker(ClientContext(c, i, think_time, stop), client_fn, iterations, barrier, stop, errors,
                       prepare, timeout) for i, c in enumerate(redis_clients)]
    threads = [threading.Thread(target=w.run, name=f"racelab-client-{w.ctx.client_id}", daemon=True)
               for w in workers]
    try:
        try:
            for t in threads:
                t.start()
            alive = _join_all(threads, time.monotonic() + timeout)
        except BaseException:  # KeyboardInterrupt in a notebook: still stop and join every thread
            _stop_threads(threads, stop, barrier, redis_clients, grace=5.0)
            raise
        if alive:
            still = _stop_threads(alive, stop, barrier, redis_clients, grace=5.0)
            raise RunTimeout(f"{len(alive)} of {clients} clients did not finish within {timeout}s"
                             + (f"; {len(still)} could not be stopped" if still else "; all stopped"))
        if errors:
            first = errors[0]
            if len(errors) > 1:
                first.add_note(f"({len(errors) - 1} other client(s) also failed)")
            raise first
    finally:
        for c in redis_clients:
            _release(lab, c)
    return _collect_threads(workers, clients, iterations)


def _collect_threads(workers: list[_Worker], clients: int, iterations: int) -> RunResult:
    result = RunResult(clients=clients, iterations=iterations, mode="threads")
    for w in workers:
        result.outcomes.extend((w.ctx.client_id, i, v) for i, v in enumerate(w.values))
        result.latencies_ns.extend(w.latencies)
        result.history.extend(w.ctx.history)
        result.retries_by_client.append(w.ctx.retries)
    result.history.sort(key=lambda o: (o.start_ns, o.client_id))
    starts = [w.first_ns for w in workers if w.first_ns]
    ends = [w.last_ns for w in workers if w.last_ns]
    result.elapsed_s = (max(ends) - min(starts)) / 1e9 if starts and ends else 0.0
    return result


def repeat_runs(lab: Any, client_fn: ClientFn, runs: int = 5,
                reset: Callable[[Any], None] | None = None,
                metric: Callable[[RunResult, Any], Any] | None = None,
                runner: Callable[..., RunResult] | None = None, **run_kwargs: Any) -> list[Any]:
    """Return one value per run: metric(result, client) (default: the RunResult itself).

    reset(client) runs before each run (e.g. delete the counter) and metric(result, client)
    after it, both with one extra client of the lab. runner is run_clients (default) or
    run_processes; run_kwargs go to it.
    """
    runner = runner or run_clients
    observer = lab.client()
    try:
        values = []
        for _ in range(runs):
            if reset is not None:
                reset(observer)
            result = runner(lab, client_fn, **run_kwargs)
            values.append(metric(result, observer) if metric is not None else result)
        return values
    finally:
        _release(lab, observer)


# ---------------------------------------------------------------- processes

def _process_main(lab: Any, fn: ClientFn, cid: int, iterations: int, think_time: float,
                  barrier: Any, stop: Any, queue: Any, prepare: ClientFn | None,
                  barrier_timeout: float, decode_responses: bool) -> None:
    """Body of one client process: connect, wait for the others, loop, send results back."""
    try:
        client = lab.client(decode_responses=decode_responses)
        client.ping()
        ctx = ClientContext(client, cid, think_time, stop)
        if prepare is not None:
            prepare(ctx)
        barrier.wait(barrier_timeout)
        values: list[Any] = []
        latencies: list[int] = []
        first, last = _timed_loop(ctx, fn, iterations, stop.is_set, values, latencies)
        queue.put(("ok", cid, values, latencies, ctx.history, ctx.retries, first, last))
    except threading.BrokenBarrierError:
        queue.put(("aborted", cid, "start barrier broken"))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
        stop.set()
        barrier.abort()
        queue.put(("error", cid, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def run_processes(lab: Any, client_fn: ClientFn, clients: int = 8, iterations: int = 100,
                  think_time: float = 0.0, timeout: float = 60.0, prepare: ClientFn | None = None,
                  decode_responses: bool = True) -> RunResult:
    """Return the RunResult of `clients` forked processes each calling client_fn(ctx) `iterations` times.

    Real servers only (the embedded server lives inside this process). Raises ClientProcessError
    with the child's traceback if a client fails, RunTimeout after `timeout` seconds; every
    process is joined (or killed) before the call returns.
    """
    if lab.kind == "embedded":
        raise ValueError("run_processes needs a real server: the embedded backend lives in this "
                         "process, so other processes cannot reach it. Use run_clients.")
    if clients < 1 or iterations < 0:
        raise ValueError(f"need clients >= 1 and iterations >= 0, got {clients} and {iterations}")
    if not think_time >= 0 or not timeout > 0:  # written so that NaN fails too
        raise ValueError(f"need think_time >= 0 and timeout > 0 seconds, got {think_time} and {timeout}")
    mp = multiprocessing.get_context("fork")
    barrier, stop, queue = mp.Barrier(clients), mp.Event(), mp.Queue()
    procs = [mp.Process(target=_process_main, name=f"racelab-client-{cid}", daemon=True,
                        args=(lab, client_fn, cid, iterations, think_time, barrier, stop, queue,
                              prepare, timeout, decode_responses))
             for cid in range(clients)]
    messages: list[tuple[Any, ...]] = []
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that fork() in a multi-threaded process (a Jupyter kernel) may
            # deadlock the child; the child only uses its own new socket and the queue.
            warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                                    category=DeprecationWarning)
            for p in procs:
                p.start()
        deadline = time.monotonic() + timeout
        while len(messages) < clients:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RunTimeout(f"{clients - len(messages)} of {clients} client processes did not "
                                 f"finish within {timeout}s; they were killed")
            try:
                messages.append(queue.get(timeout=min(remaining, 0.5)))
            except queue_module.Empty:
                if all(not p.is_alive() for p in procs) and queue.empty():
                    raise ClientProcessError(
                        f"{clients - len(messages)} client process(es) exited without a result "
                        f"(exit codes {[p.exitcode for p in procs]})") from None
    finally:
        stop.set()
        for p in procs:
            p.join(2.0 if messages and len(messages) == clients else 0.5)
            if p.is_alive():
                p.kill()
                p.join(5.0)
        queue.close()
        queue.join_thread()
    failures = [m for m in messages if m[0] == "error"]
    if failures:
        raise ClientProcessError(f"client {failures[0][1]} failed:\n{failures[0][2]}")
    return _collect_processes(messages, clients, iterations)


def _collect_processes(messages: list[tuple[Any, ...]], clients: int, iterations: int) -> RunResult:
    result = RunResult(clients=clients, iterations=iterations, mode="processes")
    oks = sorted((m for m in messages if m[0] == "ok"), key=lambda m: m[1])
    for _, cid, values, latencies, history, retries, _first, _last in oks:
        result.outcomes.extend((cid, i, v) for i, v in enumerate(values))
        result.latencies_ns.extend(latencies)
        result.history.extend(history)
        result.retries_by_client.append(retries)
    result.history.sort(key=lambda o: (o.start_ns, o.client_id))
    if oks:
        result.elapsed_s = (max(m[7] for m in oks) - min(m[6] for m in oks)) / 1e9
    return result
