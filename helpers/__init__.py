"""redis-race-lab helpers: the instruments a notebook uses to run, force and measure a race.

What a learner imports comes from here, e.g. ``from helpers import connect, run_schedule, show``:

* ``connect(notebook)``: the backend in use, as a ``Lab`` (clients, key names, cleanup);
* ``show(fn, "script")``: the full source of a strategy or a lua/ script, highlighted;
* ``run_schedule``, ``explore``, ``lease_expires``: forced interleavings and every interleaving;
* ``run_clients``: the same strategy under real threads;
* ``plot_timeline`` and the other plots;
* ``count_work``, ``rtt_sweep``, ``relative_cost``: what each strategy costs (exact round trips and
  commands, cost as the network slows, real-server figures relative to the naive version);

The subject of each lesson (the strategies) lives in ``races/`` and in the notebooks, never
here. The plumbing is in ``helpers.backend``, the instruments in ``helpers.instruments``, and
what only the suite's own tests and CI use in ``helpers.tools``. Nothing runs on import.
"""

from helpers.backend.guard import UnsafeCommandError
from helpers.backend.lab import Capabilities, Lab, connect
from helpers.backend.modes import client_stats
from helpers.backend.scripts import lua
from helpers.instruments.explore import explore
from helpers.instruments.listing import show
from helpers.instruments.plots import plot_timeline
from helpers.instruments.race import repeat_runs, run_clients
from helpers.instruments.reference import relative_cost
from helpers.instruments.rtt import rtt_sweep
from helpers.instruments.schedule import ScheduleRun, lease_expires, run_schedule
from helpers.instruments.stepper import Stepper
from helpers.instruments.work import count_work

__all__ = [
    "Capabilities",
    "Lab",
    "ScheduleRun",
    "UnsafeCommandError",
    "client_stats",
    "connect",
    "count_work",
    "explore",
    "lease_expires",
    "lua",
    "plot_timeline",
    "relative_cost",
    "repeat_runs",
    "run_clients",
    "rtt_sweep",
    "run_schedule",
    "show",
    "Stepper",
]
