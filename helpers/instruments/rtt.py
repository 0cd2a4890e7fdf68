"""What each strategy costs per operation as the network's round-trip time grows.

``rtt_sweep(lab, {name: fn}, rtts_ms=(0, 0.1, 1.0), ops=40)`` calls each ``fn(client)`` on the
lab's own backend through clients that wait ``rtt`` ms before every round trip
(``Lab.client(rtt_ms=...)``): 0 is loopback, 0.1 ms one data centre, 1 ms across zones. The
strategies take turns op by op, each op at every RTT, in an order that rotates, so a burst of
load falls on all of them alike; each cost is a median over ``ops`` operations.

What an operation costs (``cost_ms``) is the work it does plus k x RTT for its k round trips, as
a network with that RTT would charge. The wait is really done (``time.sleep``, which lets other
threads run), but on a busy machine ``time.sleep`` oversleeps by up to a few ms, more for one
strategy than another: an artefact of the emulation, not of a network, so it is reported apart
(``injected_ms``, ``wall_ms``, the table's note) and the nominal k x RTT is charged instead.
The work is measured two ways, by backend:

* real server or cluster: the operation's wall-clock time minus the delay it really waited
  (loopback round trips and the server's own time included);
* embedded: the CPU time of the calling thread, which is where fakeredis runs every command.
  Wall-clock time there would also count the time other processes held the CPU, and on a busy
  machine that inflates a Lua-heavy strategy (fakeredis runs Lua in Python) by more than a
  millisecond now and then; CPU time is the same work whatever else the machine is doing.

Why the ordering at 1 ms is then certain, not lucky: a strategy with fewer round trips is
charged at least 1 ms less per round trip it saves, while the work (Python, fakeredis, Redis
itself) differs between these strategies by a fraction of a millisecond (the 0 ms column shows
it), and each figure is a median over ``ops`` operations, taken in turns.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helpers.backend.lab import Client, Lab
from helpers.backend.modes import mode_of
from helpers.instruments.progress import progress

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Strategy = Callable[[Client], Any]  # given a client of the lab (a cluster's on a cluster)
DEFAULT_RTTS_MS = (0.0, 0.1, 1.0)
RTT_LABELS = {0.0: "loopback", 0.1: "same data centre", 1.0: "cross-zone"}


@dataclass
class RttSweep:
    """Per-operation samples of each strategy at each RTT; medians, table and plot."""

    rtts_ms: tuple[float, ...]
    backend: str
    wall_ns: dict[str, dict[float, list[int]]] = field(default_factory=dict)
    waited_ns: dict[str, dict[float, list[int]]] = field(default_factory=dict)
    trips: dict[str, dict[float, list[int]]] = field(default_factory=dict)
    cpu_ns: dict[str, dict[float, list[int]]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Return the strategy names, in the order given."""
        return list(self.wall_ns)

    @property
    def round_trips(self) -> dict[str, float]:
        """Return {name: median round trips per operation}."""
        return {name: statistics.median(t[self.rtts_ms[0]]) for name, t in self.trips.items()}

    def cost_ms(self, name: str, rtt_ms: float) -> float:
        """Return the median ms per operation of name at rtt_ms, the network at its nominal RTT."""
        return (
            statistics.median(
                work + k * rtt_ms * 1e6
                for work, k in zip(
                    self.work_ns(name, rtt_ms), self.trips[name][rtt_ms], strict=True
                )
            )
            / 1e6
        )

    def work_ns(self, name: str, rtt_ms: float) -> list[int]:
        """Return each operation's work in ns: CPU time on embedded, wall minus waiting otherwise."""
        if self.backend == "embedded":
            return self.cpu_ns[name][rtt_ms]
        return [w - d for w, d in zip(self.wall_ns[name][rtt_ms], self.waited_ns[name][rtt_ms])]

    def wall_ms(self, name: str, rtt_ms: float) -> float:
        """Return the median wall-clock ms per operation, time.sleep's oversleep included."""
        return statistics.median(self.wall_ns[name][rtt_ms]) / 1e6

    def injected_ms(self, name: str, rtt_ms: float) -> float:
        """Return the median network delay really waited per operation of name at rtt_ms (ms)."""
        return statistics.median(self.waited_ns[name][rtt_ms]) / 1e6

    def ranking(self, rtt_ms: float) -> list[str]:
        """Return the names from cheapest to dearest at rtt_ms."""
        return sorted(self.names, key=lambda n: self.cost_ms(n, rtt_ms))

    def dearest(self, rtt_ms: float) -> str:
        """Return the name of the dearest strategy at rtt_ms."""
        return self.ranking(rtt_ms)[-1]

    def order_violations(
        self, rtt_ms: float = 1.0, among: Sequence[str] | None = None
    ) -> list[str]:
        """Return each pair (of `among`, default all) where fewer round trips did not cost less."""
        trips, problems = self.round_trips, []
        names = self.names if among is None else list(among)
        for a in names:
            for b in names:
                if trips[a] < trips[b] and not self.cost_ms(a, rtt_ms) < self.cost_ms(b, rtt_ms):
                    problems.append(
                        f"{a} ({trips[a]:g} round trips, {self.cost_ms(a, rtt_ms):.3f} ms) is not "
                        f"cheaper than {b} ({trips[b]:g}, {self.cost_ms(b, rtt_ms):.3f} ms) "
                        f"at {rtt_ms:g} ms"
                    )
        return problems

    def table(self) -> str:
        """Return a fixed-width table: round trips and median ms per operation at each RTT."""
        width = max(len("strategy"), *(len(n) for n in self.names))
        heads = [f"{r:g} ms RTT" for r in self.rtts_ms]
        lines = [f"{'strategy':<{width}}{'round trips':>13}" + "".join(f"{h:>13}" for h in heads)]
        for name in self.names:
            cells = "".join(f"{self.cost_ms(name, r):>13.3f}" for r in self.rtts_ms)
            lines.append(f"{name:<{width}}{self.round_trips[name]:>13g}{cells}")
        top = max(self.rtts_ms)
        waited = [self.injected_ms(n, top) / max(self.round_trips[n], 1) for n in self.names]
        ops = len(self.wall_ns[self.names[0]][top])
        lines.append(
            f"(median ms per operation over {ops} operations, {self.backend} backend, each round "
            f"trip charged its RTT; at {top:g} ms, time.sleep really waited "
            f"{min(waited):.3f}-{max(waited):.3f} ms per round trip)"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()

    def plot(self, ax: Axes | None = None, title: str | None = None) -> Axes | Figure:
        """Draw ms per operation against RTT on ax and return it; without ax, a new Figure."""
        from helpers.instruments.plots import draw_rtt_sweep, subplots  # (loads matplotlib)

        if ax is not None:
            return draw_rtt_sweep(ax, self, title)
        fig, ax = subplots(figsize=(7, 4.5))
        draw_rtt_sweep(ax, self, title)
        return fig


def rtt_sweep(
    lab: Lab,
    strategies: Mapping[str, Strategy],
    rtts_ms: Sequence[float] = DEFAULT_RTTS_MS,
    ops: int = 40,
    setup: Strategy | None = None,
    warmup: int = 2,
) -> RttSweep:
    """Return an RttSweep of every strategy at every RTT, ``ops`` operations each (see module doc).

    setup(client) runs once first; each fn then runs ``warmup`` untimed times per RTT (scripts
    load, connections open). Strategies must be repeatable: e.g. a limiter with a limit so high
    that every request is admitted, a lock turn that acquires and releases.
    """
    if ops < 1 or not strategies or not rtts_ms:
        raise ValueError("need ops >= 1, at least one strategy and one RTT")
    rtts = tuple(float(r) for r in rtts_ms)
    clients = {r: lab.client(rtt_ms=r) for r in rtts}
    sweep = RttSweep(rtts_ms=rtts, backend=lab.kind)
    names = list(strategies)
    for name in names:
        sweep.wall_ns[name] = {r: [] for r in rtts}
        sweep.waited_ns[name] = {r: [] for r in rtts}
        sweep.trips[name] = {r: [] for r in rtts}
        sweep.cpu_ns[name] = {r: [] for r in rtts}
    try:
        if setup is not None:
            setup(clients[rtts[0]])
        for client in clients.values():
            for fn in strategies.values():
                for _ in range(warmup):
                    fn(client)
        with progress("RTT sweep", ops * len(names) * len(rtts), "calls") as bar:
            for i in range(ops):
                turn = names[i % len(names) :] + names[: i % len(names)]
                for name in turn:
                    for r in rtts[i % len(rtts) :] + rtts[: i % len(rtts)]:
                        _time_one(sweep, name, strategies[name], r, clients[r])
                        bar.advance()
    finally:
        for client in clients.values():
            lab.release(client)
    return sweep


def _time_one(sweep: RttSweep, name: str, fn: Strategy, rtt: float, client: Client) -> None:
    mode = mode_of(client)
    trips, waited = mode.stats.round_trips, mode.delayed_ns
    cpu_started, started = time.thread_time_ns(), time.perf_counter_ns()
    fn(client)
    sweep.wall_ns[name][rtt].append(time.perf_counter_ns() - started)
    sweep.cpu_ns[name][rtt].append(time.thread_time_ns() - cpu_started)
    sweep.waited_ns[name][rtt].append(mode.delayed_ns - waited)
    sweep.trips[name][rtt].append(mode.stats.round_trips - trips)
