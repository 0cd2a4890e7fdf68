"""Concurrent runs: N clients x M calls of one strategy function, each client on its own connection.

``run_clients(lab, fn, clients=8, iterations=100, mode="think", think_s=0.001)`` starts one thread
per client. Each thread gets its own client (``lab.client(mode, think_s)``), waits on a barrier so
that all clients start together, then calls ``fn(client)`` ``iterations`` times: the same function
a forced schedule interleaves and a benchmark times, e.g. ``partial(naive_allow, key=k, limit=100)``.

The client's mode decides the timing (``helpers.backend.modes``): "straight" sends commands as they
are (for measurements); "think" waits ``think_s`` before every round trip, standing in for the
network, which is the window in which other clients' commands arrive; "lockstep" sends every
client's k-th round trip in one round with the others', so a read-then-write race shows on every
run, however busy the machine (the demos that assert a race use it). Every call is recorded as
an ``Op`` in the run's history (start, end, result, status), and each client's round trips,
commands and retries are counted by its connection.

Thread hygiene: every thread is joined before ``run_clients`` returns. An exception in any
client stops the others and is re-raised in the caller; if the run does not finish within
``timeout`` seconds, the clients' connections are closed (which unblocks a thread waiting on
the server), the threads are joined, and :class:`RunTimeout` is raised.

``run_processes`` runs the same experiment with one *process* per client (true parallelism, no
GIL), for real servers only. It forks, so ``fn`` may be defined in a notebook cell; results must
be picklable.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue as queue_module
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from helpers.backend.limits import check_connections
from helpers.backend.modes import (
    ClientStats,
    Lockstep,
    Mode,
    Think,
    client_stats,
    make_modes,
    mode_of,
)
from helpers.errors import RaceLabError
from helpers.instruments import aio
from helpers.instruments.history import FAIL, INFO, OK, Op, Overlap, Span, overlaps
from helpers.instruments.progress import REFRESH_S, progress

_monotonic_ns = time.monotonic_ns
_sleep = time.sleep

Strategy = Callable[[Any], Any]  # fn(client) -> result


class RunTimeout(RaceLabError, TimeoutError):
    """A concurrent run did not finish within its timeout (its clients were stopped)."""


class ConnectionLost(RaceLabError, RuntimeError):
    """A client's connection broke during a run and redis-py opened a new one: counts are not comparable."""


def _check_no_reconnect(result: RunResult) -> None:
    """Raise ConnectionLost if any client reconnected during the run (a restart, a dropped socket)."""
    lost = [i for i, stats in enumerate(result.stats_by_client) if stats.reconnects > 0]
    if lost:
        raise ConnectionLost(
            f"{len(lost)} of {result.clients} clients lost their connection during the run and reconnected "
            f"(did the server restart?): {result.calls} calls completed, but writes may have been lost "
            f"with the old connection, so the counts are not comparable. Run it again."
        )


class ClientProcessError(RaceLabError, RuntimeError):
    """A client process raised; the message carries the child's traceback."""


@dataclass
class RunResult:
    """Everything one concurrent run produced."""

    clients: int
    iterations: int
    outcomes: list[tuple[int, int, Any]] = field(default_factory=list)
    latencies_ns: list[int] = field(default_factory=list)
    history: list[Op] = field(default_factory=list)
    stats_by_client: list[ClientStats] = field(default_factory=list)
    elapsed_s: float = 0.0
    mode: str = "threads"
    client_mode: str = "straight"
    fn: Strategy | None = field(default=None, repr=False)

    @property
    def retries_by_client(self) -> list[int]:
        """Return each client's failed conditional writes (EXEC nil, SET NX/IF* nil)."""
        return [s.retries for s in self.stats_by_client]

    @property
    def retries(self) -> int:
        """Return the total number of failed conditional writes (see helpers.backend.modes)."""
        return sum(self.retries_by_client)

    @property
    def round_trips(self) -> int:
        """Return the round trips all clients made during the calls."""
        return sum(s.round_trips for s in self.stats_by_client)

    @property
    def commands(self) -> int:
        """Return the commands all clients sent during the calls (MULTI and EXEC included)."""
        return sum(s.commands for s in self.stats_by_client)

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

    def spans(self, span_of: Callable[[Op], Span | None]) -> list[Span]:
        """Return span_of(op) for every op of the history that has one (None: no span)."""
        return [span for span in map(span_of, self.history) if span is not None]

    def overlaps(self, span_of: Callable[[Op], Span | None]) -> list[Overlap]:
        """Return every two of those spans, of different clients, that share an interval."""
        return overlaps(self.spans(span_of))

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
        counts = (
            ", ".join(f"{k}={v}" for k, v in ordered)
            if len(ordered) <= 8
            else f"{len(ordered)} distinct outcomes"
        )
        return (
            f"{self.clients} clients x {self.iterations} iterations ({self.mode}, {self.client_mode}): "
            f"{self.calls} calls [{counts}], round trips={self.round_trips}, retries={self.retries}"
        )


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

    def __init__(
        self,
        client_id: int,
        client: Any,
        fn: Strategy,
        iterations: int,
        barrier: threading.Barrier,
        stop: threading.Event,
        errors: list[BaseException],
        barrier_timeout: float,
    ) -> None:
        self.client_id, self.client, self.fn, self.iterations = client_id, client, fn, iterations
        self.barrier, self.stop, self.errors, self.barrier_timeout = (
            barrier,
            stop,
            errors,
            barrier_timeout,
        )
        self.values: list[Any] = []  # iteration i's return value at index i
        self.latencies: list[int] = []
        self.history: list[Op] = []
        self.stats = ClientStats()
        self.first_ns = 0
        self.last_ns = 0

    def run(self) -> None:
        try:
            self._run()
        finally:
            _leave(self.client)  # a lockstep run's other clients stop waiting for this one

    def _run(self) -> None:
        try:
            self.client.ping()  # connect now, so the first timed call does not pay for it
            _arm(self.client)
            before = client_stats(self.client)
            self.barrier.wait(_finite(self.barrier_timeout))
            try:
                self.first_ns, self.last_ns = _timed_loop(
                    self.client_id,
                    self.client,
                    self.fn,
                    self.iterations,
                    self.stop.is_set,
                    self.values,
                    self.latencies,
                    self.history,
                )
            finally:
                self.stats = client_stats(self.client) - before
        except threading.BrokenBarrierError:
            if not self.stop.is_set():  # broken by a timeout, not by another client's failure
                self.errors.append(RunTimeout("the clients did not all reach the start barrier"))
                self.stop.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
            self.errors.append(exc)
            self.stop.set()
            self.barrier.abort()


def _status_of(exc: BaseException) -> str:
    """Return the Jepsen status of a call that raised exc: fail (Redis said no) or info (unknown)."""
    return FAIL if isinstance(exc, redis.ResponseError) else INFO


def _timed_loop(
    client_id: int,
    client: Any,
    fn: Strategy,
    iterations: int,
    stopped: Callable[[], bool],
    values: list[Any],
    latencies: list[int],
    history: list[Op],
) -> tuple[int, int]:
    """Call fn(client) up to iterations times, recording results, ns latencies and Ops; return (first_ns, last_ns).

    The hot loop of the harness, shared by threads and processes: only local names, no locks.
    A call that raises is recorded (status fail or info) and the exception propagates.
    """
    values_append, latencies_append, history_append = (
        values.append,
        latencies.append,
        history.append,
    )
    clock = _monotonic_ns
    label = getattr(getattr(fn, "func", fn), "__name__", "call")
    first = clock()
    for _ in range(iterations):
        if stopped():
            break
        t0 = clock()
        try:
            value = fn(client)
        except BaseException as exc:
            history_append(
                Op(client_id, label, t0, clock(), f"{type(exc).__name__}: {exc}", _status_of(exc))
            )
            raise
        t1 = clock()
        values_append(value)
        latencies_append(t1 - t0)
        history_append(Op(client_id, label, t0, t1, value, OK))
    return first, clock()


def _finite(timeout: float) -> float | None:
    """Return timeout for a wait() call: None (wait as long as it takes) for an infinite one."""
    return None if timeout == float("inf") else timeout


def _join_all(threads: list[threading.Thread], deadline: float) -> list[threading.Thread]:
    """Join threads until deadline; return those still alive."""
    for t in threads:
        remaining = deadline - time.monotonic()
        t.join(None if remaining == float("inf") else max(0.0, remaining))  # inf: no time limit
    return [t for t in threads if t.is_alive()]


def _stop_threads(
    threads: list[threading.Thread],
    stop: threading.Event,
    barrier: threading.Barrier,
    redis_clients: list[Any],
    grace: float,
) -> list[threading.Thread]:
    """Ask every thread to stop, unblock their sockets, join; return threads still alive."""
    stop.set()
    barrier.abort()
    for c in redis_clients:
        _disconnect(c)
    return _join_all(threads, time.monotonic() + grace)


def _client_modes(mode: str, think_s: float, stop: Any, clients: int) -> list[Mode]:
    """Return one new Mode per client of a run, unarmed until the start barrier."""
    if mode not in ("straight", "think", "lockstep"):
        raise ValueError(
            f"unknown client mode {mode!r} for a concurrent run: use 'straight', 'think' or "
            f"'lockstep'"
        )
    # connecting (the PING before the barrier) is not a round trip to delay
    return make_modes(mode, clients, think_s, stop, armed=False)


def _arm(client: Any) -> None:
    """Let a think or lockstep client start waiting before its round trips (after it has connected)."""
    mode = mode_of(client)
    if isinstance(mode, (Think, Lockstep)):
        mode.armed = True


def _leave(client: Any) -> None:
    """Tell a lockstep client's rendezvous that this client is done (the others stop waiting for it)."""
    mode = mode_of(client)
    if isinstance(mode, Lockstep):
        mode.rendezvous.leave()


def _check_run(clients: int, iterations: int, mode: str, think_s: float, timeout: float) -> None:
    if clients < 1 or iterations < 0:
        raise ValueError(f"need clients >= 1 and iterations >= 0, got {clients} and {iterations}")
    if (
        not think_s >= 0 or not timeout > 0 or think_s == float("inf")
    ):  # written so that NaN fails too
        raise ValueError(
            f"need a finite think_s >= 0 and timeout > 0 seconds, got {think_s} and {timeout}"
        )
    _client_modes(mode, think_s, None, 1)


class _Fed:
    """One client's calls of a workload: its j-th call is fn(client, row[j])."""

    def __init__(self, fn: Callable[..., Any], row: Sequence[Any]) -> None:
        self.fn, self.func, self._row = (
            fn,
            getattr(fn, "func", fn),
            iter(row),
        )  # func: the Ops' label

    def __call__(self, client: Any) -> Any:
        return self.fn(client, next(self._row))


def workload_shape(inputs: Sequence[Sequence[Any]]) -> tuple[int, int]:
    """Return (clients, iterations) of a workload: one row of inputs per client, all rows as long."""
    lengths = {len(row) for row in inputs}
    if not inputs or len(lengths) != 1:
        raise ValueError("inputs must hold one row per client, every row of the same length")
    return len(inputs), lengths.pop()


def run_clients(
    lab: Any,
    fn: Strategy,
    clients: int = 8,
    iterations: int = 100,
    mode: str = "straight",
    think_s: float = 0.0,
    timeout: float = 60.0,
    decode_responses: bool = True,
    inputs: Sequence[Sequence[Any]] | None = None,
) -> RunResult:
    """Return the RunResult of `clients` threads each calling fn(client) `iterations` times.

    Each thread has its own client in the given mode ("straight"; "think": wait think_s before
    every round trip; "lockstep": round trips in rounds with the other clients). Re-raises the first exception of any client; raises RunTimeout after
    `timeout` seconds. No thread outlives the call. With a workload ``inputs`` (one row per
    client), client i's j-th call is fn(client, inputs[i][j]), and clients and iterations are
    the workload's shape; outcome (i, j, value) answers inputs[i][j]. An ``async def`` fn is
    given the asyncio view of its thread's client and run on that thread's event loop.
    """
    if aio.is_async_actor(fn):
        fn = aio.sync_actor(fn)
    if inputs is not None:
        clients, iterations = workload_shape(inputs)
    _check_run(clients, iterations, mode, think_s, timeout)
    check_connections(lab, clients, f"run_clients(clients={clients})")
    stop = threading.Event()
    redis_clients: list[Any] = []
    try:
        for client_mode in _client_modes(mode, think_s, stop, clients):
            redis_clients.append(lab.client(mode=client_mode, decode_responses=decode_responses))
    except BaseException:
        for c in redis_clients:
            _release(lab, c)
        raise
    barrier = threading.Barrier(clients)
    errors: list[BaseException] = []
    workers = [
        _Worker(
            i,
            c,
            fn if inputs is None else _Fed(fn, inputs[i]),
            iterations,
            barrier,
            stop,
            errors,
            timeout,
        )
        for i, c in enumerate(redis_clients)
    ]
    threads = [
        threading.Thread(target=w.run, name=f"racelab-client-{w.client_id}", daemon=True)
        for w in workers
    ]
    try:
        try:
            with progress(
                f"threaded load, {clients} clients", clients * iterations, "calls"
            ) as bar:
                for t in threads:
                    t.start()
                alive = bar.join(
                    threads, time.monotonic() + timeout, lambda: sum(len(w.values) for w in workers)
                )
        except BaseException:  # KeyboardInterrupt in a notebook: still stop and join every thread
            _stop_threads(threads, stop, barrier, redis_clients, grace=5.0)
            raise
        if alive:
            still = _stop_threads(alive, stop, barrier, redis_clients, grace=5.0)
            raise RunTimeout(
                f"{len(alive)} of {clients} clients did not finish within {timeout}s"
                + (f"; {len(still)} could not be stopped" if still else "; all stopped")
            )
        if errors:
            first = errors[0]
            if len(errors) > 1:
                first.add_note(f"({len(errors) - 1} other client(s) also failed)")
            raise first
    finally:
        for c in redis_clients:
            _release(lab, c)
    result = _collect_threads(workers, clients, iterations, mode, fn)
    _check_no_reconnect(result)
    return result


def _collect_threads(
    workers: list[_Worker], clients: int, iterations: int, mode: str, fn: Strategy
) -> RunResult:
    result = RunResult(
        clients=clients, iterations=iterations, mode="threads", client_mode=mode, fn=fn
    )
    for w in workers:
        result.outcomes.extend((w.client_id, i, v) for i, v in enumerate(w.values))
        result.latencies_ns.extend(w.latencies)
        result.history.extend(w.history)
        result.stats_by_client.append(w.stats)
    result.history.sort(key=lambda o: (o.start_ns, o.client_id))
    starts = [w.first_ns for w in workers if w.first_ns]
    ends = [w.last_ns for w in workers if w.last_ns]
    result.elapsed_s = (max(ends) - min(starts)) / 1e9 if starts and ends else 0.0
    return result


def repeat_runs(
    lab: Any,
    fn: Strategy,
    runs: int = 5,
    reset: Callable[[Any], None] | None = None,
    metric: Callable[[RunResult, Any], Any] | None = None,
    runner: Callable[..., RunResult] | None = None,
    **run_kwargs: Any,
) -> list[Any]:
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
            result = runner(lab, fn, **run_kwargs)
            values.append(metric(result, observer) if metric is not None else result)
        return values
    finally:
        _release(lab, observer)


# ---------------------------------------------------------------- processes


def _process_main(
    lab: Any,
    fn: Strategy,
    cid: int,
    iterations: int,
    mode: str,
    think_s: float,
    barrier: Any,
    stop: Any,
    queue: Any,
    barrier_timeout: float,
    decode_responses: bool,
) -> None:
    """Body of one client process: connect, wait for the others, loop, send results back."""
    try:
        client = lab.client(
            mode=_client_modes(mode, think_s, stop, 1)[0], decode_responses=decode_responses
        )
        client.ping()
        _arm(client)
        before = client_stats(client)
        barrier.wait(_finite(barrier_timeout))
        values: list[Any] = []
        latencies: list[int] = []
        history: list[Op] = []
        first, last = _timed_loop(
            cid, client, fn, iterations, stop.is_set, values, latencies, history
        )
        message = (
            "ok",
            cid,
            values,
            latencies,
            history,
            client_stats(client) - before,
            first,
            last,
        )
        try:
            pickle.dumps(message)
        except Exception as exc:  # noqa: BLE001 - reported with what could not be sent
            raise ClientProcessError(
                f"client {cid}'s results cannot be sent to the parent: "
                f"{type(exc).__name__}: {exc} (return picklable values)"
            ) from exc
        queue.put(message)
    except threading.BrokenBarrierError:
        queue.put(("aborted", cid, "start barrier broken"))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
        stop.set()
        barrier.abort()
        queue.put(("error", cid, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def run_processes(
    lab: Any,
    fn: Strategy,
    clients: int = 8,
    iterations: int = 100,
    mode: str = "straight",
    think_s: float = 0.0,
    timeout: float = 60.0,
    decode_responses: bool = True,
) -> RunResult:
    """Return the RunResult of `clients` forked processes each calling fn(client) `iterations` times.

    Real servers only (the embedded server lives inside this process). Raises ClientProcessError
    with the child's traceback if a client fails, RunTimeout after `timeout` seconds; every
    process is joined (or killed) before the call returns.
    """
    if lab.kind == "embedded":
        raise ValueError(
            "run_processes needs a real server: the embedded backend lives in this "
            "process, so other processes cannot reach it. Use run_clients."
        )
    if mode == "lockstep":
        raise ValueError(
            "lockstep rounds are kept between threads: use run_clients for mode='lockstep'"
        )
    if aio.is_async_actor(fn):  # each process runs it on its own event loop, as run_clients
        fn = aio.sync_actor(fn)
    _check_run(clients, iterations, mode, think_s, timeout)
    check_connections(lab, clients, f"run_processes(clients={clients})")
    mp = multiprocessing.get_context("fork")
    barrier, stop, queue = mp.Barrier(clients), mp.Event(), mp.Queue()
    procs = [
        mp.Process(
            target=_process_main,
            name=f"racelab-client-{cid}",
            daemon=True,
            args=(
                lab,
                fn,
                cid,
                iterations,
                mode,
                think_s,
                barrier,
                stop,
                queue,
                timeout,
                decode_responses,
            ),
        )
        for cid in range(clients)
    ]
    messages: list[tuple[Any, ...]] = []
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that fork() in a multi-threaded process (a Jupyter kernel) may
            # deadlock the child; the child only uses its own new socket and the queue.
            warnings.filterwarnings(
                "ignore",
                message=r".*use of fork\(\) may lead to deadlocks",
                category=DeprecationWarning,
            )
            for p in procs:
                p.start()
        deadline = time.monotonic() + timeout
        with progress(f"process load, {clients} clients", clients, "clients done") as bar:
            while len(messages) < clients:
                bar.update(len(messages))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RunTimeout(
                        f"{clients - len(messages)} of {clients} client processes did not "
                        f"finish within {timeout}s; they were killed"
                    )
                try:
                    messages.append(queue.get(timeout=min(remaining, REFRESH_S)))
                except queue_module.Empty:
                    if all(not p.is_alive() for p in procs) and queue.empty():
                        raise ClientProcessError(
                            f"{clients - len(messages)} client process(es) exited without a "
                            f"result (exit codes {[p.exitcode for p in procs]})"
                        ) from None
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
    result = _collect_processes(messages, clients, iterations, mode, fn)
    _check_no_reconnect(result)
    return result


def _collect_processes(
    messages: list[tuple[Any, ...]], clients: int, iterations: int, mode: str, fn: Strategy
) -> RunResult:
    result = RunResult(
        clients=clients, iterations=iterations, mode="processes", client_mode=mode, fn=fn
    )
    oks = sorted((m for m in messages if m[0] == "ok"), key=lambda m: m[1])
    for _, cid, values, latencies, history, stats, _first, _last in oks:
        result.outcomes.extend((cid, i, v) for i, v in enumerate(values))
        result.latencies_ns.extend(latencies)
        result.history.extend(history)
        result.stats_by_client.append(stats)
    result.history.sort(key=lambda o: (o.start_ns, o.client_id))
    if oks:
        result.elapsed_s = (max(m[7] for m in oks) - min(m[6] for m in oks)) / 1e9
    return result
