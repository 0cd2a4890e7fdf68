"""What each fix costs relative to the naive version, at 1 and 8 clients: live or reference figures.

On the embedded backend every timing is Python's (fakeredis and its Lua interpreter run in the
notebook's process), and the ranking it gives is not the one a real server gives: a Lua script
there costs more than two plain commands. So the plot that carries the lesson uses figures
measured on a real Redis >= 8.4 by ``make bench`` (``benchmarks/results/<name>.json``, with
their provenance) when the backend is embedded, and measures live on a real server or cluster:

    costs = relative_cost(lab, ratelimit.REFERENCE)
    costs.plot(); print(costs.table()); costs.ratio("lua", 8)

A ``Workload`` says how a benchmark runs each strategy under load; each race module of
``races/`` declares its own (``REFERENCE``, a ``races.workload.Workload``) beside the very
function objects the notebooks show, and this module never imports ``races``. ``measure_costs``
runs it through ``run_clients`` (threads, straight mode) with the strategies taking turns run by
run, and reports each strategy's time per request divided by the baseline's (above 1: dearer
than the naive version).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import redis

from helpers.backend.lab import Client, Lab
from helpers.backend.namespace import Namespace
from helpers.backend.scripts import delete_library, library_name
from helpers.instruments.measure import Strategy, compare_strategies

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
CLIENTS = (1, 8)
PROVENANCE_FIELDS = (
    "server",
    "server_version",
    "redis_py",
    "hiredis",
    "python",
    "cpu_count",
    "machine",
    "date",
    "command",
    "load_average",
)
FIELDS = (
    "name",
    "title",
    "what",
    "module",
    "baseline",
    "strategies",
    "clients",
    "unit",
    "provenance",
    "parsers",
)
Request = Callable[[redis.Redis], object]  # one request (or reset), given a client
Measured = dict[str, dict[str, dict[str, float]]]  # {figure: {clients: {strategy: x}}}


class Workload(Protocol):
    """What this module reads of a reference workload (races.workload.Workload is one)."""

    @property
    def name(self) -> str:
        """Return the reference file's stem: benchmarks/results/<name>.json."""
        ...

    @property
    def title(self) -> str:
        """Return the plot's title."""
        ...

    @property
    def what(self) -> str:
        """Return what one request does."""
        ...

    @property
    def baseline(self) -> str:
        """Return the label every cost is divided by."""
        ...

    @property
    def strategies(self) -> Mapping[str, Callable[..., Any]]:
        """Return {label: strategy}, in the plot's order."""
        ...

    @property
    def request(self) -> Callable[[Namespace, Callable[..., Any], str], Request]:
        """Return the factory (ns, strategy, label) -> one request."""
        ...

    @property
    def reset(self) -> Callable[[Namespace, Sequence[str]], Request] | None:
        """Return the factory (ns, labels) -> a reset run before each timed run, or None."""
        ...

    @property
    def needs(self) -> Mapping[str, str]:
        """Return {label: capability (an attribute of lab.caps) its strategy needs}."""
        ...

    @property
    def libraries(self) -> tuple[str, ...]:
        """Return the lua/ function libraries a strategy may load (FUNCTION LOAD)."""
        ...


def runnable(workload: Workload, lab: Lab) -> dict[str, Callable[..., Any]]:
    """Return {label: strategy} of the workload's strategies that lab's server can run."""
    return {
        label: fn
        for label, fn in workload.strategies.items()
        if label not in workload.needs or getattr(lab.caps, workload.needs[label])
    }


# --- measuring and loading ---------------------------------------------------------------


def measure_costs(
    lab: Lab,
    workload: Workload,
    clients: Sequence[int] = CLIENTS,
    requests: int = 400,
    repeats: int = 3,
) -> Measured:
    """Return {"ratios", "requests_per_s", "best_requests_per_s", "round_trips", "retries"}.

    Each is {clients: {strategy: x}}. A ratio is the baseline's best requests/s over the
    strategy's: a busy machine only slows a run down, so the fastest of the repeats is the figure
    other load disturbed least (the median is kept beside it).
    """
    fns = runnable(workload, lab)
    requests_of = {n: workload.request(lab.ns, f, n) for n, f in fns.items()}
    reset = workload.reset(lab.ns, list(fns)) if workload.reset else None
    # races/ types its clients as redis.Redis; on a cluster they get a RedisCluster, which answers
    # the same commands, so the requests are handed on as strategies of any lab client.
    strategies = cast(Mapping[str, Strategy], requests_of)
    with _leaving_libraries_as_found(lab, workload.libraries):
        runs = compare_strategies(
            lab, strategies, clients, requests, repeats, reset=cast("Strategy | None", reset)
        )
    out: Measured = {
        "ratios": {},
        "requests_per_s": {},
        "best_requests_per_s": {},
        "round_trips": {},
        "retries": {},
    }
    for n in clients:
        rate = {s: statistics.median(r.throughput for r in runs[s][n]) for s in fns}
        best = {s: max(r.throughput for r in runs[s][n]) for s in fns}
        c = str(n)
        out["requests_per_s"][c] = {s: round(rate[s], 1) for s in fns}
        out["best_requests_per_s"][c] = {s: round(best[s], 1) for s in fns}
        out["ratios"][c] = {s: round(best[workload.baseline] / best[s], 3) for s in fns}
        out["round_trips"][c] = {
            s: round(statistics.median(r.round_trips / r.calls for r in runs[s][n]), 3) for s in fns
        }
        out["retries"][c] = {
            s: round(statistics.median(r.retries / r.calls for r in runs[s][n]), 3) for s in fns
        }
    return out


def _loaded(client: Client, library: str) -> bool:
    """Return True if FUNCTION LIST shows library (on any node of a cluster)."""
    reply = client.function_list(library=library)
    return any(reply.values()) if isinstance(reply, dict) else bool(reply)


@contextmanager
def _leaving_libraries_as_found(lab: Lab, names: Sequence[str]) -> Iterator[None]:
    """Delete, afterwards, each lua/ library of names that a strategy loaded and was not there."""
    if not names or not lab.caps.functions:
        yield
        return
    client = lab.client()
    try:
        missing = [n for n in names if not _loaded(client, library_name(n))]
        yield
        for name in missing:
            delete_library(client, name)
    finally:
        lab.release(client)


@dataclass(frozen=True)
class CostFigures:
    """Each strategy's cost relative to the baseline at each client count, and where it comes from."""

    name: str
    title: str
    baseline: str
    ratios: dict[str, dict[str, float]]  # {clients: {strategy: time per request / baseline's}}
    source: str  # "reference" or "live"
    provenance: str
    parser: str = ""

    @property
    def names(self) -> list[str]:
        """Return the strategies, in the benchmark's order."""
        return list(next(iter(self.ratios.values())))

    def ratio(self, strategy: str, clients: int) -> float:
        """Return strategy's time per request divided by the baseline's, at `clients` clients."""
        return self.ratios[str(clients)][strategy]

    def table(self) -> str:
        """Return a fixed-width table: one row per strategy, one column per client count."""
        counts = list(self.ratios)
        width = max(len("strategy"), *(len(n) for n in self.names))
        lines = [f"{'strategy':<{width}}" + "".join(f"{c + ' client(s)':>14}" for c in counts)]
        for name in self.names:
            lines.append(
                f"{name:<{width}}" + "".join(f"{self.ratio(name, int(c)):>13.2f}x" for c in counts)
            )
        lines.append(f"(time per request relative to {self.baseline}; {self.provenance})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()

    def plot(self, ax: Axes | None = None) -> Axes | Figure:
        """Draw the relative costs on ax and return it; without ax, return a new Figure (alt text)."""
        from helpers.instruments.plots import draw_relative_costs, subplots  # (loads matplotlib)

        if ax is not None:
            return draw_relative_costs(ax, self)
        fig, ax = subplots(figsize=(8, 4.5))
        draw_relative_costs(ax, self)
        return fig


def reference_path(name: str) -> Path:
    """Return benchmarks/results/<name>.json."""
    return RESULTS_DIR / f"{name}.json"


def load_reference(name: str) -> dict[str, Any]:
    """Return the parsed reference file of benchmark name (FileNotFoundError if none is committed)."""
    return json.loads(reference_path(name).read_text())


def provenance_text(data: Mapping[str, Any]) -> str:
    """Return e.g. 'reference: Redis 8.6.3, redis-py 8.1.0, hiredis 3.5.0, 2 CPUs, 2026-12-01'."""
    p = data["provenance"]
    return (
        f"reference: {p['server']}, redis-py {p['redis_py']}, hiredis {p['hiredis']}, "
        f"{p['cpu_count']} CPUs ({p['machine']}), {p['date'][:10]}, load {p['load_average'][0]}"
    )


def reference(name: str, parser: str | None = None) -> CostFigures:
    """Return the committed reference figures of benchmark name (parser 'hiredis' or 'python')."""
    data = load_reference(name)
    parser = parser or ("hiredis" if "hiredis" in data["parsers"] else "python")
    return CostFigures(
        name=name,
        title=data["title"],
        baseline=data["baseline"],
        ratios=data["parsers"][parser]["ratios"],
        source="reference",
        provenance=provenance_text(data) + f", {parser} parser",
        parser=parser,
    )


def relative_cost(
    lab: Lab, workload: Workload, source: str | None = None, requests: int = 200, repeats: int = 2
) -> CostFigures:
    """Return the cost figures of a workload: its reference on embedded, else measured live.

    Live, each strategy runs ``repeats`` timed runs of ``requests`` requests (after a warm-up run)
    at 1 and 8 clients: a few seconds on a quiet machine, well within a notebook cell's limit on a
    busy one. ``make bench`` measures the same workloads longer.
    """
    if isinstance(workload, str):  # the name it took before issue 22
        raise TypeError(
            f"relative_cost takes a race's workload, e.g. ratelimit.REFERENCE, not {workload!r}"
        )
    source = source or ("reference" if lab.kind == "embedded" else "live")
    if source == "reference":
        return reference(workload.name, "hiredis" if "hiredis" in lab.parser else None)
    measured = measure_costs(lab, workload, CLIENTS, requests, repeats)
    return CostFigures(
        name=workload.name,
        title=workload.title,
        baseline=workload.baseline,
        ratios=measured["ratios"],
        source="live",
        provenance=f"live: {lab.server.label()} ({lab.kind}), {lab.parser}",
        parser=lab.parser,
    )
