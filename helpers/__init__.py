"""redis-race-lab helpers: the instruments a notebook uses to run, force and measure a race.

What a learner imports comes from here, e.g. ``from helpers import Race, connect, show``:

* ``connect(notebook)``: the backend in use, as a ``Lab`` (clients, key names, cleanup);
* ``show(fn, "script")``: the full source of a strategy or a lua/ script, highlighted;
* ``Race(lab, actors, setup, watch, invariant)``: one race, given once; ``.run("ABAB")`` forces
  an order, ``.explore()`` tries every order, ``.stepper()`` lets the learner choose, and
  ``.load(clients=8)`` runs it under real threads;
* ``Invariant(name, sentence, check)``: what must hold after a race, said in words;
* ``ActorRefused``: an actor did what no schedule controls (subscribed, or sent nothing the race
  could see); its ``reason`` is a ``Refusal`` (thread, pubsub, no_round_trip, asyncio,
  unadoptable); ``SPUN``: the result of an actor whose retry loop its spin bound cut;
* ``NoVerdict``: an exploration in which every actor raised or did not finish, in every schedule:
  the invariant judged nothing, so there is no count to give;
* ``run_schedule``, ``explore``, ``Stepper``, ``lease_expires``, ``time_passes``,
  ``run_clients``: the instruments a ``Race`` calls, for notebooks that use one of them alone;
  ``EPOCH``: the instant at which the race's own clock starts in every run (an actor's
  ``time.time() - EPOCH.timestamp()`` is how far into the run it is);
* ``plot_timeline``, ``cost_vs_size`` and the other plots; ``lease_span``, ``hold_spans``: the spans it shades
  (``RunResult.overlaps`` finds two clients holding one at once);
* ``count_work``, ``rtt_sweep``, ``relative_cost``: what each strategy costs (exact round trips and
  commands, cost as the network slows, real-server figures relative to the naive version);

The subject of each lesson (the strategies) lives in ``races/`` and in the notebooks, never
here. The plumbing is in ``helpers.backend``, the instruments in ``helpers.instruments``, and
what only the suite's own tests and CI use in ``helpers.tools``. Nothing runs on import.
"""

from typing import TYPE_CHECKING, Any

from helpers.backend.guard import UnsafeCommandError
from helpers.backend.lab import Capabilities, Lab, connect
from helpers.backend.modes import client_stats
from helpers.backend.scripts import lua
from helpers.instruments.adopt import SPUN, ActorRefused, Refusal
from helpers.instruments.explore import NoVerdict, explore
from helpers.instruments.history import hold_spans, lease_span
from helpers.instruments.invariant import Invariant
from helpers.instruments.listing import show
from helpers.instruments.load import repeat_runs, run_clients
from helpers.instruments.logical_time import EPOCH
from helpers.instruments.reference import relative_cost
from helpers.instruments.rtt import rtt_sweep
from helpers.instruments.scenario import Race
from helpers.instruments.schedule import ScheduleRun, lease_expires, run_schedule, time_passes
from helpers.instruments.stepper import Stepper
from helpers.instruments.work import count_work

if TYPE_CHECKING:
    from helpers.instruments.plots import cost_vs_size, plot_timeline
else:

    def __getattr__(name: str) -> Any:
        """Return a plot function, loading the plots (and matplotlib) only when one is asked for:
        a process that draws nothing (a CLI command, a test's child) starts a second sooner."""
        if name in {"cost_vs_size", "plot_timeline"}:
            from helpers.instruments import plots

            return getattr(plots, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EPOCH",
    "SPUN",
    "ActorRefused",
    "Capabilities",
    "Invariant",
    "Lab",
    "NoVerdict",
    "Refusal",
    "Race",
    "ScheduleRun",
    "UnsafeCommandError",
    "client_stats",
    "connect",
    "count_work",
    "explore",
    "hold_spans",
    "lease_expires",
    "time_passes",
    "lease_span",
    "lua",
    "cost_vs_size",
    "plot_timeline",
    "relative_cost",
    "repeat_runs",
    "run_clients",
    "rtt_sweep",
    "run_schedule",
    "show",
    "Stepper",
]
