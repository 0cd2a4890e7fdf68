"""The schedule stepper: choose the interleaving yourself, one round trip at a time.

A ``Stepper`` holds one forced schedule that is still being written. Its actors are the same
ordinary functions of a client that ``run_schedule`` and ``explore`` take, on the same gated
clients (``helpers.instruments.schedule.ScheduleRun``): each actor waits at its next round trip
until it is named. In plain Python (unit tests, nbval)::

    stepper = Stepper(lab, {"A": limiter, "B": limiter}, setup=one_slot_left, watch=[k],
                      invariant=at_most_one_admitted)
    stepper.step("A")             # A sends its next round trip; returns the TraceRow
    stepper.waiting               # {"A": "INCRBY demo 1", "B": "GET demo"}: what each sends next
    stepper.invariant_holds       # True or False after this step (None: no invariant given)
    stepper.trace                 # the Trace so far (prints as the run_schedule table)
    stepper.explore_from_here()   # every way the schedule can go on, and which break the invariant
    stepper.reset()               # back to the setup state, every actor before its first round trip
    stepper.play("ABAB")          # reset, then those steps; returns the stepper
    stepper.use("Lua")            # swap in a fix given as fixes={"Lua": {"A": lua, "B": lua}}

``fixes`` maps a label to the actors it replaces (the others stay as given). ``use(label)``
swaps them in and resets; ``use(stepper.strategies[0])`` goes back to the actors as given, whose
label is their functions' names ("naive_allow"). With fixes, the widget has a "strategy" menu
and the static picture opens with the strategy in use.

In JupyterLab, a cell whose value is a stepper shows a widget (ipywidgets): one button per
actor ("A: next round trip", its result once it has finished; a clock actor made by
``lease_expires`` gets a button too), Reset, and "Show every schedule", above the trace so far,
what each actor waits to send, and the invariant in words and colour. Where widgets cannot
render (nbval, HTML and PDF handouts), the same cell's output is the static text of the steps
played so far (``str(stepper)``, with an HTML table beside it), so ``stepper.play("ABAB")`` as a
cell's last line gives the text nbval compares. A stored notebook opened in JupyterLab shows that
static picture until the cell runs again. nbconvert's HTML export shows it too when the notebook
holds no widget state (execute with ``--ExecutePreprocessor.store_widget_state=False``); with
state, the export draws the saved widget with JavaScript fetched from a CDN instead.

The invariant, ``invariant(client, results) -> bool``, is the one ``explore`` takes. The stepper
evaluates it right after setup and after every step, on the keys as they are then, with the
results of the actors that have finished so far (an unfinished actor has no entry: write
``results.get("B")``). ``invariant_holds`` is its verdict after the latest step, and
``broken_at`` the first step after which it failed (0: already after setup). An invariant that
only makes sense at the end ("the counter is 2") takes ``final_only=True``: it is evaluated once
every actor has finished, and until then ``invariant_holds`` is None.

``explore_from_here()`` runs ``explore`` on the same actors, setup and keys, keeps the schedules
that begin with the steps taken so far (actors are deterministic, so these are exactly the ways
the current run can go on) and judges each by the invariant at its end, as ``explore`` does.
The explorer resets the same keys, so the stepper then replays its steps to put them back.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import html
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from helpers.errors import RaceLabError
from helpers.instruments.explore import Exploration, explore
from helpers.instruments.invariant import Check, Invariant
from helpers.instruments.schedule import (
    FORCED_RUNNER,
    Actor,
    Clock,
    ScheduleError,
    ScheduleRun,
    Trace,
    TraceRow,
    parse_schedule,
)
from helpers.instruments.spec import RaceSpec

GREEN, RED, GREY = "#1a7f37", "#cf222e", "#6e7781"
# The buttons' own colours (background, text), not the theme's: the theme's "info" teal under
# white text read at 3.4:1, 1.9:1 once disabled. JupyterLab draws a disabled button at
# DISABLED_OPACITY over the page, so the "done" and "control" pairs are chosen to keep 4.5:1
# (WCAG AA) at that opacity too; a disabled "ready" button is redrawn as "done" first.
BUTTON_COLOURS = {
    "ready": ("#0072B2", "#FFFFFF"),  # an actor that can send its next round trip
    "done": ("#F0F0F0", "#000000"),  # an actor that returned (disabled)
    "control": ("#E8E8E8", "#000000"),  # Reset, Show every schedule
}
DISABLED_OPACITY = 0.6  # --jp-widgets-disabled-opacity


class InvariantError(RaceLabError, RuntimeError):
    """The invariant raised instead of returning True or False (the step itself did run)."""


class _Home:
    """The one thread a stepper's runs live on, whichever thread asks for a step.

    Its actors run as a forced schedule's do, as greenlets (so that the threads an actor starts
    are its sub-actors, A1, A2), and a greenlet can only be switched into from the thread that
    made it. A widget's clicks do not all arrive on one thread: ipykernel 7 hands some comm
    messages to a subshell's thread. So every start, step and close of a run is done here, with
    the caller's context variables.
    """

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="racelab-stepper")
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Return fn(*args), called on this home's thread (at once when already there)."""
        if threading.current_thread() is self._thread:
            return fn(*args)
        return self._pool.submit(self._enter, contextvars.copy_context(), fn, args).result()

    def _enter(self, context: contextvars.Context, fn: Callable[..., Any], args: Any) -> Any:
        self._thread = threading.current_thread()
        return context.run(fn, *args)

    def leave(self) -> None:
        """Let the thread go once its queue is done (the stepper is gone)."""
        self._pool.shutdown(wait=False)


def _close_run(holder: list[ScheduleRun], home: _Home, last: bool = False) -> None:
    """Close the run in holder, if any, on its home thread (last: the Stepper was collected)."""
    while holder:
        home.call(holder.pop().close)
    if last:
        home.leave()


def _strategy_label(actors: Mapping[str, Actor]) -> str:
    """Return the names of the functions behind actors (clocks left out), e.g. 'naive_allow'."""
    names: list[str] = []
    for fn in actors.values():
        if isinstance(fn, Clock):
            continue
        while hasattr(fn, "func"):  # functools.partial
            fn = fn.func
        name = getattr(fn, "__name__", "") or "as given"
        if name not in names:
            names.append(name)
    return " + ".join(names) or "as given"


def _describe_invariant(invariant: Invariant | Check | None) -> str:
    """Return the invariant in words: its docstring's first line, else its name, else ''."""
    if invariant is None:
        return ""
    if isinstance(invariant, Invariant):
        return invariant.says
    doc = (getattr(invariant, "__doc__", None) or "").strip()
    if doc and doc != (type(invariant).__doc__ or "").strip():  # not a partial's or a class's doc
        return doc.splitlines()[0].rstrip(".")
    name = getattr(invariant, "__name__", "")
    return name.replace("_", " ") if name and name != "<lambda>" else ""


class Stepper:
    """A forced schedule written one step at a time, by a learner's clicks or by step() calls."""

    def __init__(
        self,
        lab: Any,
        actors: Mapping[str, Actor],
        setup: Callable[[Any], Any] | None = None,
        watch: Sequence[str] = (),
        reset: Sequence[str] | None = None,
        invariant: Invariant | Check | None = None,
        final_only: bool = False,
        fixes: Mapping[str, Mapping[str, Actor]] | None = None,
    ) -> None:
        if invariant is not None and not callable(invariant):
            raise TypeError("invariant must be a function (client, results) -> bool")
        self.lab, self.actors, self.setup = lab, dict(actors), setup
        self.given, self.fixes = dict(actors), {k: dict(v) for k, v in (fixes or {}).items()}
        for label, swap in self.fixes.items():
            if not swap or set(swap) - set(actors):
                raise ValueError(
                    f"fix {label!r} must replace some of the actors {', '.join(actors)}, "
                    f"got {', '.join(swap) or 'none'}"
                )
        self.strategy = _strategy_label(self.given)
        if self.strategy in self.fixes:
            raise ValueError(f"a fix is labelled {self.strategy!r}, like the actors as given")
        self.watch = list(watch)
        self.reset_keys = list(reset) if reset is not None else None
        self.invariant, self.final_only = invariant, final_only
        self.invariant_text = _describe_invariant(invariant)
        self._holder: list[ScheduleRun] = []
        self._home = _Home()  # the thread its runs' greenlets live on
        self._finalizer = weakref.finalize(self, _close_run, self._holder, self._home, True)
        self._finalizer.atexit = False  # nothing to do at exit: the interpreter is going
        self._verdicts: list[bool | None] = []
        self._explored: Exploration | None = None
        self._view: _StepperView | None = None
        try:
            self._start()
        except BaseException:  # e.g. the invariant raised after setup: stop the actors started
            _close_run(self._holder, self._home)
            raise

    # --- the run -----------------------------------------------------------------------------

    @property
    def _run(self) -> ScheduleRun:
        if not self._holder:
            raise ScheduleError("this stepper is closed (reset() starts it again)")
        return self._holder[0]

    def _start(self) -> None:
        """Close the current run, if any, and start a new one from setup (step 0 judged)."""
        _close_run(self._holder, self._home)
        self._verdicts, self._explored = [], None
        spec = RaceSpec(
            self.lab,
            self.actors,
            self.setup,
            tuple(self.watch),
            None if self.reset_keys is None else tuple(self.reset_keys),
        )
        # as a forced schedule does: the threads an actor starts are its sub-actors
        self._holder.append(self._home.call(partial(ScheduleRun, spec, runner=FORCED_RUNNER)))
        self._judge()

    def _judge(self) -> None:
        """Append the invariant's verdict on the current state (None: none given, or not yet)."""
        run = self._run
        if self.invariant is None or (self.final_only and run.runnable):
            self._verdicts.append(None)
            return
        try:
            ok = self.invariant(run.observer, dict(run.results))
        except Exception as exc:
            self._verdicts.append(None)  # the step ran: keep one verdict per step
            raise InvariantError(
                f"the invariant raised {type(exc).__name__}: {exc} after step {len(run.rows)} "
                f"(finished so far: {', '.join(run.results) or 'nobody'}; an invariant "
                f"checked after every step sees only finished actors' results: use "
                f"results.get(name), or Stepper(..., final_only=True))"
            ) from exc
        if not isinstance(ok, bool):
            self._verdicts.append(None)
            raise TypeError(f"invariant must return a bool, got {ok!r}")
        self._verdicts.append(None if self.nothing_happened else ok)

    @property
    def nothing_happened(self) -> bool:
        """Return True when every client has finished and each one raised or crashed: no verdict."""
        run = self._run
        clients = [n for n, fn in self.actors.items() if not isinstance(fn, Clock)]
        return (
            bool(clients)
            and not run.runnable
            and not any(
                n in run.results and not isinstance(run.results[n], BaseException) for n in clients
            )
        )

    def step(self, name: str) -> TraceRow:
        """Let actor name send its next round trip (and run up to the one after); return its row."""
        try:
            row = self._home.call(self._run.step, name)
            self._explored = None
            self._judge()
        finally:
            self._changed()
        return row

    def reset(self) -> None:
        """Start again from setup: keys reset, every actor before its first round trip."""
        try:
            self._start()
        finally:
            self._changed()

    @property
    def strategies(self) -> list[str]:
        """Return the labels use() takes: the actors as given first, then each fix."""
        return [_strategy_label(self.given), *self.fixes]

    def use(self, label: str) -> Stepper:
        """Swap in the fix called label (or the actors as given: strategies[0]), reset; return self."""
        if label not in self.strategies:
            raise ValueError(f"no strategy {label!r}: choose one of {', '.join(self.strategies)}")
        self.actors = self.given | self.fixes.get(label, {})
        self.strategy = label
        self.reset()
        return self

    def play(self, schedule: str | Sequence[str]) -> Stepper:
        """Reset, then run schedule's steps ('ABAB' or ['A', 'B', ...]); return the stepper."""
        self.reset()
        for name in parse_schedule(schedule):
            self.step(name)
        return self

    def close(self) -> None:
        """Stop the actors (their connections are closed); the widget stays, its Reset starts again."""
        _close_run(self._holder, self._home)
        self._changed()

    def __enter__(self) -> Stepper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- what the run shows ------------------------------------------------------------------

    @property
    def trace(self) -> Trace:
        """Return the Trace of the steps taken so far."""
        return self._run.trace()

    @property
    def steps(self) -> list[str]:
        """Return the actors named so far, in order (the schedule written so far)."""
        return list(self._run.names)

    @property
    def waiting(self) -> dict[str, str]:
        """Return {actor: the round trip it sends when next named} for every unfinished actor."""
        return self._run.waiting_on()

    @property
    def unfinished(self) -> list[str]:
        """Return the actors that still have a step to run."""
        return self._run.unfinished

    @property
    def finished(self) -> bool:
        """Return True when every actor has finished (or waits forever for a blocking call)."""
        return not self._run.runnable

    @property
    def results(self) -> dict[str, Any]:
        """Return {actor: result} for the actors that have finished."""
        return self._run.results

    @property
    def invariant_holds(self) -> bool | None:
        """Return the invariant's verdict after the latest step (None: none given, or final_only and unfinished)."""
        return self._verdicts[-1]

    @property
    def verdicts(self) -> list[bool | None]:
        """Return the invariant's verdict after setup (index 0) and after each step."""
        return list(self._verdicts)

    @property
    def broken_at(self) -> int | None:
        """Return the first step after which the invariant failed (0: after setup), or None."""
        return next((i for i, ok in enumerate(self._verdicts) if ok is False), None)

    def invariant_words(self) -> str:
        """Return the invariant's verdict as a sentence."""
        what = f"invariant ({self.invariant_text})" if self.invariant_text else "invariant"
        ok, now = self.invariant_holds, len(self._verdicts) - 1
        when = f"after step {now}" if now else "after setup"
        if self.invariant is None:
            return "no invariant given"
        if ok is None and self.nothing_happened:
            return f"{what}: no verdict, every client raised or did not finish"
        if ok is None:
            return f"{what}: checked once every client has finished"
        if ok:
            earlier = (
                f" (it was broken after step {self.broken_at})"
                if self.broken_at is not None
                else ""
            )
            return f"{what}: holds {when}{earlier}"
        first = f" (first broken after step {self.broken_at})" if self.broken_at != now else ""
        return f"{what}: BROKEN {when}{first}"

    def _waiting_lines(self) -> list[str]:
        waiting = self.waiting
        if not waiting:
            return ["nobody: every client has finished"]
        return [f"{name} -> {command}" for name, command in waiting.items()]

    def _split(self, schedule: str) -> list[str]:
        """Return an explored schedule's text as actor names (inverse of schedule_text)."""
        return list(schedule) if all(len(n) == 1 for n in self.actors) else schedule.split()

    # --- every continuation ----------------------------------------------------------------------

    def explore_from_here(self, max_schedules: int | None = None) -> Exploration:
        """Return the Exploration of every complete schedule that begins with the steps taken so far."""
        if self.invariant is None:
            raise ValueError(
                "explore_from_here needs an invariant: Stepper(..., invariant=fn(client, results))"
            )
        prefix, before = self.steps, str(self.trace)
        # the explorer resets the same keys: this run is replayed after
        _close_run(self._holder, self._home)
        try:
            everything = explore(
                self.lab,
                self.actors,
                self.invariant,
                setup=self.setup,
                watch=self.watch,
                reset=self.reset_keys,
                max_schedules=max_schedules,
                reduce=False,  # every schedule: those that begin with the steps taken are kept
            )
        finally:
            self._replay(prefix)
        if str(self.trace) != before:
            raise RuntimeError(
                "replaying the steps taken gave another trace: the actors are not deterministic"
            )
        here = [o for o in everything.outcomes if self._split(o.schedule)[: len(prefix)] == prefix]
        self._explored = Exploration(
            here, {}, everything.clients, everything.actors, everything.replay
        )
        self._changed()
        return self._explored

    def _replay(self, prefix: Sequence[str]) -> None:
        self._start()
        for name in prefix:
            self._home.call(self._run.step, name)
            self._judge()

    def _explored_lines(self) -> list[str]:
        found, n = self._explored, len(self.steps)
        if found is None:
            return []
        here = (
            "".join(self.steps) if all(len(a) == 1 for a in self.actors) else " ".join(self.steps)
        )
        head = (
            f"every schedule from here ({here or 'the start'}): {found.bad_count} of {found.total} "
            f"break the invariant"
        )
        return [head] + [
            f"  {'BROKEN' if not o.ok else 'ok':<6}  {self._mark(o.schedule, n)}  {o.result_text}"
            for o in found.outcomes
        ]

    def _mark(self, schedule: str, n: int) -> str:
        """Return schedule with the steps taken so far and the continuation apart: 'AB|AB'."""
        names = self._split(schedule)
        sep = "" if all(len(a) == 1 for a in self.actors) else " "
        return sep.join(names[:n]) + "|" + sep.join(names[n:]) if n else sep.join(names)

    # --- static text and HTML ------------------------------------------------------------------

    def text(self) -> str:
        """Return the static picture: the trace so far (with a verdict column), who waits, the invariant."""
        lines = str(self.trace).splitlines()
        if self.invariant is not None:  # header, rule, setup row, one row per step, results
            body = lines[:-1]
            width = max(len(line) for line in body)
            marks = ["" if ok is None else "ok" if ok else "BROKEN" for ok in self._verdicts]
            body[0] = f"{body[0]:<{width}}  invariant"
            body[1] = "-" * len(body[0])
            body[2:] = [f"{line:<{width}}  {mark}".rstrip() for line, mark in zip(body[2:], marks)]
            lines = body + lines[-1:]
        waiting = self._waiting_lines()
        lines.append(f"waiting: {waiting[0]}")
        lines += [f"         {w}" for w in waiting[1:]]
        lines.append(self.invariant_words())
        if self.fixes:
            lines.insert(0, f"strategy: {self.strategy}")
        return "\n".join(lines + self._explored_lines())

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def html(self) -> str:
        """Return the same picture as an HTML fragment (a table, the waiting list, the verdict in colour)."""
        trace = self.trace
        cell = 'style="text-align:left;padding:1px 8px;line-height:1.3;font-family:monospace"'
        servers = ["server"] if trace.servers else []  # the race dialed several servers
        head = ["step", "client", *servers, "command", "reply", "state after"] + (
            ["invariant"] if self.invariant else []
        )
        rows = [f"<tr>{''.join(f'<th {cell}>{h}</th>' for h in head)}</tr>"]
        setup_row = TraceRow(0, "", "(setup)", "", trace.initial_state)
        for i, row in enumerate([setup_row, *trace.rows]):
            where = [row.server] if servers else []
            values = [str(row.step) if i else "", row.client, *where, row.command, row.reply]
            values.append(row.state)
            tds = "".join(f"<td {cell}>{html.escape(v)}</td>" for v in values)
            if self.invariant is not None:
                ok = self._verdicts[i]
                colour, word = (
                    (GREY, "") if ok is None else (GREEN, "ok") if ok else (RED, "BROKEN")
                )
                tds += (
                    f'<td {cell}><span style="color:{colour};font-weight:bold">{word}</span></td>'
                )
            rows.append(f"<tr>{tds}</tr>")
        results = "  ".join(f"{n} -> {t}" for n, t in trace.result_text.items())
        waiting = "<br>&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;".join(
            html.escape(w) for w in self._waiting_lines()
        )
        ok = self.invariant_holds
        colour = GREY if ok is None else GREEN if ok else RED
        parts = [
            f"<table>{''.join(rows)}</table>",
            f'<div style="font-family:monospace;line-height:1.3">results: {html.escape(results)}<br>'
            f"waiting: {waiting}</div>",
            f'<div style="color:{colour};font-weight:bold">{html.escape(self.invariant_words())}</div>',
        ]
        if self.fixes:
            parts.insert(0, f"<div><b>strategy: {html.escape(self.strategy)}</b></div>")
        explored = self._explored_lines()
        if explored and self._explored is not None:
            items = "".join(
                f'<li style="font-family:monospace;color:{GREEN if o.ok else RED}">'
                f"{'ok' if o.ok else 'BROKEN'} {html.escape(self._mark(o.schedule, len(self.steps)))} "
                f"{html.escape(o.result_text)}</li>"
                for o in self._explored.outcomes
            )
            parts.append(f"<div><b>{html.escape(explored[0])}</b><ul>{items}</ul></div>")
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """Return the widget view (when ipywidgets is installed) with the static text and HTML beside it."""
        bundle: dict[str, Any] = {"text/plain": self.text(), "text/html": self.html()}
        try:
            view = self.widget()
        except ImportError:  # no ipywidgets: the static picture alone
            return bundle
        widget_view = view._repr_mimebundle_() or {}
        key = "application/vnd.jupyter.widget-view+json"
        if key in widget_view:
            bundle[key] = widget_view[key]
        return bundle

    # --- the widget ----------------------------------------------------------------------------

    def widget(self) -> Any:
        """Return the ipywidgets box: a button per actor, Reset, Show every schedule, the picture."""
        if self._view is None:
            self._view = _StepperView(self)
        return self._view.box

    def _changed(self) -> None:
        if self._view is not None:
            self._view.refresh()


class _StepperView:
    """The widget of one Stepper: buttons that call its methods, and an HTML picture of its state."""

    def __init__(self, stepper: Stepper) -> None:
        # imported only when a widget is asked for; ipywidgets ships no type information
        import ipywidgets as w  # type: ignore[import-untyped]

        self.stepper = stepper
        self.buttons = {name: w.Button(layout=w.Layout(width="auto")) for name in stepper.actors}
        for name, button in self.buttons.items():
            button.on_click(lambda _button, name=name: self._do(lambda: self.stepper.step(name)))
        self.reset_button = w.Button(
            description="Reset", icon="undo", layout=w.Layout(width="auto")
        )
        self.reset_button.on_click(lambda _button: self._do(self.stepper.reset))
        self.explore_button = w.Button(
            description="Show every schedule",
            layout=w.Layout(width="auto"),
            tooltip="run every way the schedule can go on from here",
        )
        self.explore_button.on_click(lambda _button: self._explore())
        self.picture = w.HTML()
        self.error = w.HTML()
        _paint(self.reset_button, "control")
        _paint(self.explore_button, "control")
        controls = [*self.buttons.values(), self.reset_button, self.explore_button]
        if stepper.fixes:
            self.strategy = w.Dropdown(
                options=stepper.strategies,
                value=stepper.strategy,
                description="strategy:",
                layout=w.Layout(width="auto"),
            )
            self.strategy.observe(self._choose, names="value")
            controls.append(self.strategy)
        self.box = w.VBox(
            [w.HBox(controls, layout=w.Layout(flex_flow="row wrap")), self.error, self.picture]
        )
        self.refresh()

    def _do(self, action: Callable[[], Any]) -> None:
        """Run a button's action; show what went wrong in red instead of losing it in the log."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - a click has no caller: the widget is where it is shown
            self.error.value = (
                f'<div style="color:{RED};font-family:monospace">'
                f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</div>"
            )
            self.refresh(keep_error=True)

    def _choose(self, change: dict[str, Any]) -> None:
        """Swap in the strategy chosen in the menu (nothing when it is already in use)."""
        if change["new"] != self.stepper.strategy:
            self._do(lambda: self.stepper.use(change["new"]))

    def _explore(self) -> None:
        self.explore_button.description, self.explore_button.disabled = "Exploring...", True
        try:
            self._do(self.stepper.explore_from_here)
        finally:
            self.explore_button.description, self.explore_button.disabled = (
                "Show every schedule",
                False,
            )

    def refresh(self, keep_error: bool = False) -> None:
        """Redraw the buttons and the picture from the stepper's state."""
        if not keep_error:
            self.error.value = ""
        if not self.stepper._holder:  # closed: the last picture stays, Reset starts again
            for button in [*self.buttons.values(), self.explore_button]:
                _paint(button, "done")
                button.disabled = True
            self.error.value = (
                f'<div style="color:{GREY}">this stepper is closed (its connections too): '
                f"Reset starts it again</div>"
            )
            return
        run = self.stepper._run
        waiting, results = run.waiting_on(), run.trace().result_text
        stuck = set(waiting) - set(run.runnable)  # in a blocking call nothing can answer yet
        if self.stepper.fixes and self.strategy.value != self.stepper.strategy:
            self.strategy.value = self.stepper.strategy  # use() called from Python
        for name, button in self.buttons.items():
            if name in stuck:
                button.description, button.tooltip = f"{name}: waiting", f"waits in {waiting[name]}"
                button.disabled = True
                _paint(button, "done")
            elif name in waiting:
                fn = self.stepper.actors[name]
                label = (
                    waiting[name].removeprefix("(clock) ")
                    if isinstance(fn, Clock)
                    else "next round trip"
                )
                button.description, button.tooltip = f"{name}: {label}", f"sends {waiting[name]}"
                button.disabled = False
                _paint(button, "ready")
            else:
                button.description = f"{name} returned {results[name]}"
                button.tooltip = "finished"
                button.disabled = True
                _paint(button, "done")
        self.picture.value = (  # on white whatever the theme: its colours are chosen for white
            f'<div style="background:#FFFFFF;color:#000000;padding:4px">{self.stepper.html()}</div>'
        )


def _paint(button: Any, kind: str) -> None:
    """Give button the BUTTON_COLOURS of kind (background and text), whatever the theme."""
    button.button_style = ""
    button.style.button_color, button.style.text_color = BUTTON_COLOURS[kind]
