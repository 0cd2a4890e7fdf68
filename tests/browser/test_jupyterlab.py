"""What a learner sees: every notebook run through "Run All" in JupyterLab, in a real browser.

nbval checks what the kernel returns; this checks what JupyterLab draws. One JupyterLab serves
the repository on a free loopback port with a random token, on the embedded backend, with
notebook windowing mode ``none`` (JUPYTERLAB_SETTINGS_DIR in a temporary folder) so that every
cell is drawn, off screen too, and the suite's own JupyterLab defaults (jupyter-config/, as
`make lab` passes them): a first start shows no "news" pop-up. Each notebook is copied with its outputs cleared to
``.browser-run/`` (git-ignored; the committed notebook is never touched), opened, run with
Run > Run All Cells, and waited for. Then, in the page:

- no output is an error or stderr (JupyterLab draws both as ``application/vnd.jupyter.stderr``);
- as many images are drawn as the stored notebook holds ``image/png`` outputs (what nbval checks);
- the last code cell (Cleanup) ran: it has an execution count.

A screenshot of the whole notebook goes to ``.browser-screenshots/`` (git-ignored); its path is
printed. Notebook 01's "Try it yourself" stepper is then clicked A, B, A, B: both clients are
admitted and the invariant is marked broken; after Reset and the fix, it stays green.

During 01's Run All, a progress bar (``.racelab-progress``, helpers/instruments/progress.py) must
appear in the threaded-load cell and be gone once the run ends (the kernels get
RACELAB_PROGRESS_AFTER_S=0, so that a load shows its bar however fast this machine runs it).
Then 01's first ``predict`` cell is answered in its radio widget, once wrongly and once rightly,
and its reveal cell run again: it names the wrong choice's misconception, then says "right, you
predicted it". Last, a choice followed by Shift+Enter in the widget (which runs the predict cell
again) is kept: the widget says "committed: (x)" and the reveal judges that choice.

`pytest tests` skips these tests (minutes of work); `make test-browser` and scripts/run-tests.sh
name the folder. The browser is Debian's chromium driven by playwright (its own browser download is not needed).
Without playwright or chromium the tests skip, saying why; RACELAB_REQUIRE_BROWSER=1 (.ci/run)
makes that a failure. RACELAB_CHROMIUM names another browser binary.

axe-core (test_axe.py's pinned copy) also checks notebook 01 as it opens with its stored outputs:
no critical or serious violation in its rendered markdown or its outputs.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from browser_kit import asked_for, browser  # noqa: F401 - fixtures pytest finds by name
from test_axe import axe_source  # noqa: F401 - axe-core's script (npm ci in tests/browser)

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
RUN_DIR = REPO / ".browser-run"
SHOTS = REPO / ".browser-screenshots"
NOTEBOOK_TIMEOUT_S = 600  # per notebook: each runs in about a minute; generous for a busy machine
STEP_TIMEOUT_MS = 60_000  # one stepper click: a round trip on the embedded backend
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"  # the notebook on show
STDERR = f'{NOTEBOOK} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
PROMPTS = f"{NOTEBOOK} .jp-CodeCell .jp-InputArea-prompt"
STEPPER_NOTEBOOK = "01_get_then_incr.ipynb"
PROGRESS = ".racelab-progress"  # helpers.instruments.progress.CSS_CLASS
# Before Run All: record every progress bar the page draws, with the source of its cell.
WATCH_PROGRESS = """() => {
  window.racelabProgress = [];
  const seen = el => {
    const cell = el.closest('.jp-CodeCell');
    const input = cell && cell.querySelector('.jp-InputArea-editor');
    window.racelabProgress.push({text: el.innerText, cell: input ? input.innerText : ''});
  };
  new MutationObserver(changes => {
    for (const change of changes) {
      const nodes = change.type === 'attributes' ? [change.target] : [...change.addedNodes];
      for (const node of nodes) {
        if (node.nodeType !== 1) continue;
        if (node.matches('SELECTOR')) seen(node);
        node.querySelectorAll('SELECTOR').forEach(seen);
      }
    }
  }).observe(document.body, {childList: true, subtree: true, attributes: true,
                             attributeFilter: ['class']});
}""".replace("SELECTOR", PROGRESS)

TIMINGS: dict[str, float] = {}
PAGES: dict[str, Any] = {}  # notebook name -> its page, kept open for the stepper test


def _say(config: pytest.Config, line: str) -> None:
    """Print line in pytest's output (not captured)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)


# --- the browser and the server ------------------------------------------------------------


@dataclass
class JupyterLab:
    """A running JupyterLab: its base URL, token and log file."""

    url: str
    token: str
    log: Path
    process: subprocess.Popen = field(repr=False)

    def api(self, method: str, path: str) -> Any:
        """Return the JSON reply of one REST call (None when the reply is empty)."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 30) -> str:
        """Return the last lines of the server's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_settings(settings: Path) -> None:
    """Windowing mode none (every cell drawn, off screen too).

    No news or update pop-up either, but that comes from the suite's own defaults
    (jupyter-config/, as `make lab` passes them), which test_no_news_pop_up_on_a_first_start checks.
    """
    for plugin, values in {
        "notebook-extension/tracker": {"windowingMode": "none", "autoStartDefaultKernel": True},
    }.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def jupyterlab(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """Yield a JupyterLab serving the repository root on the embedded backend."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    _write_settings(tmp / "settings")
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {
        "RACELAB_BACKEND": "embedded",
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "JUPYTER_CONFIG_PATH": str(REPO / "jupyter-config"),  # as `make lab` starts it
        "RACELAB_PROGRESS_AFTER_S": "0",  # every hooked run draws its bar at once
    }
    # every notebook is there from the start, as in notebooks/ (00 lists the suite it finds)
    for stale in RUN_DIR.glob("*.ipynb"):
        stale.unlink()
    for notebook in NOTEBOOKS:
        _fresh_copy(notebook)
    port, token = _free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={REPO}", "--ContentsManager.allow_hidden=True",  # .browser-run/
    ] + (["--allow-root"] if os.geteuid() == 0 else [])  # fmt: skip
    log = tmp / "jupyterlab.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
        )
    lab = JupyterLab(f"http://127.0.0.1:{port}", token, log, process)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited with {process.returncode}:\n{lab.log_tail()}")
            try:
                lab.api("GET", "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within 120 s:\n{lab.log_tail()}")
                time.sleep(0.5)
        yield lab
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- one notebook through Run All ------------------------------------------------------------


def _fresh_copy(notebook: Path) -> Path:
    """Write notebook to .browser-run/ with every output and execution count cleared."""
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("jupytext", None)  # the copy is paired with nothing
    nb["metadata"].pop("widgets", None)
    RUN_DIR.mkdir(exist_ok=True)
    copy = RUN_DIR / notebook.name
    copy.write_text(json.dumps(nb, indent=1))
    return copy


def _stored_images(notebook: Path) -> int:
    """Return how many image/png outputs the committed notebook stores."""
    nb = json.loads(notebook.read_text())
    return sum(
        "image/png" in out.get("data", {})
        for cell in nb["cells"]
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
    )


def _menu(page: Any, menu: str, item: str) -> None:
    """Click menu > item in JupyterLab's menu bar."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


def _screenshot(page: Any, name: str) -> Path:
    """Save the whole notebook (window made as tall as it, up to 16000 px); return the path."""
    SHOTS.mkdir(exist_ok=True)
    path = SHOTS / f"{name}.png"
    height = page.evaluate(
        """() => {
            const scroller = document.querySelector(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
            scroller.scrollTop = 0;
            return scroller.scrollHeight;
        }"""
    )
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": width, "height": min(16_000, height + 200)})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": width, "height": 900})
    return path


def _shut_down_kernel(lab: JupyterLab, path: str) -> None:
    for session in lab.api("GET", "/api/sessions"):
        if session["path"] == path:
            lab.api("DELETE", f"/api/sessions/{session['id']}")


def _open(browser: Any, lab: JupyterLab, copy: Path) -> Any:
    """Open copy in a new page and return it once its kernel is idle."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.set_default_timeout(120_000)
    relative = copy.relative_to(REPO).as_posix()
    # a workspace of its own, reset: no tab of an earlier notebook is restored beside it
    workspace = f"{copy.stem}-{secrets.token_hex(4)}"
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{relative}?reset&token={lab.token}")
    page.wait_for_selector(f"{NOTEBOOK} .jp-Cell")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator")
    # a kernel is started, and idle (a "Select Kernel" dialog would mean none was started)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
                 .some(e => /\\| Idle$/.test(e.textContent.trim()))"""
    )
    # the file browser folds away: the notebook gets the width (and the screenshots)
    open_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if open_tab.count():
        open_tab.click()
    return page


def test_no_news_pop_up_on_a_first_start(browser: Any, jupyterlab: JupyterLab) -> None:
    # A fresh user settings folder, so this is a first start: only the suite's defaults say no.
    page = _open(browser, jupyterlab, _fresh_copy(NOTEBOOKS[0]))
    try:
        page.wait_for_timeout(5000)  # the question comes a moment after the page is ready
        toasts = page.evaluate(
            "() => [...document.querySelectorAll('.Toastify__toast')].map(e => e.innerText)"
        )
        assert not [t for t in toasts if "news" in t.lower()], toasts
    finally:
        page.close()


# axe-core over what the suite puts on the page: rendered markdown and the cells' outputs (the
# editors, toolbars and panels around them are JupyterLab's own, and have known violations)
AXE_CONTENT = """async () => {
  const scope = {include: [[".jp-MarkdownOutput"], [".jp-OutputArea-output"]]};
  const result = await axe.run(scope, {resultTypes: ["violations"]});
  return {passed: result.passes.map(r => r.id), violations: result.violations.map(v => ({
    id: v.id, impact: v.impact, nodes: v.nodes.length, first: v.nodes[0].target.join(" ")}))};
}"""


def test_notebook_01_with_its_outputs_has_no_serious_axe_violation(
    browser: Any, jupyterlab: JupyterLab, axe_source: str
) -> None:
    notebook = next(p for p in NOTEBOOKS if p.name.startswith("01_"))
    RUN_DIR.mkdir(exist_ok=True)
    copy = RUN_DIR / f"axe_{notebook.name}"  # the stored outputs, as a learner first sees them
    nb = json.loads(notebook.read_text())
    nb["metadata"].pop("jupytext", None)
    copy.write_text(json.dumps(nb, indent=1))
    page = _open(browser, jupyterlab, copy)
    try:
        assert page.locator(f"{NOTEBOOK} .jp-OutputArea-output").count() > 10
        page.add_script_tag(content=axe_source)
        found = page.evaluate(AXE_CONTENT)
    finally:
        page.close()
        copy.unlink()
    assert {"link-name", "list"} <= set(found["passed"]), found["passed"]  # it looked
    failing = [v for v in found["violations"] if v["impact"] in ("critical", "serious")]
    assert not failing, failing


def _run_all(browser: Any, lab: JupyterLab, notebook: Path) -> tuple[Any, float, list[str]]:
    """Open a fresh copy of notebook, Run All; return its page, the seconds taken, the problems."""
    page = _open(browser, lab, _fresh_copy(notebook))
    page.evaluate(WATCH_PROGRESS)
    started = time.monotonic()
    _menu(page, "Run", "Run All Cells")
    page.wait_for_function(
        """prompts => {
            const p = [...document.querySelectorAll(prompts)].map(e => e.textContent);
            return p.length > 0 && !p.some(t => t.includes('*')) && /\\d/.test(p[0]);
        }""",
        arg=PROMPTS,
        timeout=NOTEBOOK_TIMEOUT_S * 1000,
        polling=500,
    )
    page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]')
    seconds = time.monotonic() - started
    page.wait_for_timeout(1000)  # let the last outputs (images, widgets) draw

    problems = [
        f"error or stderr output:\n{text[:1500]}" for text in page.locator(STDERR).all_inner_texts()
    ]
    prompts = page.locator(PROMPTS).all_inner_texts()
    if not re.search(r"\d", prompts[-1]):
        problems.append(f"the last code cell (Cleanup) did not run: its prompt is {prompts[-1]!r}")
    not_run = [i for i, p in enumerate(prompts) if not re.search(r"\d", p)]
    if not_run:
        problems.append(f"code cells {not_run} (0-based among code cells) did not run")
    drawn = page.evaluate(
        """images => [...document.querySelectorAll(images)]
               .filter(img => img.complete && img.naturalWidth > 0).length""",
        f"{NOTEBOOK} .jp-OutputArea-output img",
    )
    expected = _stored_images(notebook)
    if drawn != expected:
        problems.append(f"{drawn} images drawn, the stored notebook holds {expected}")
    left = page.locator(f"{NOTEBOOK} {PROGRESS}").count()
    if left:
        problems.append(f"{left} progress bars are still drawn after the run ended")
    return page, seconds, problems


def progress_seen(page: Any) -> list[dict[str, str]]:
    """Return the progress bars drawn since Run All: their text and their cell's source."""
    return page.evaluate("() => window.racelabProgress || []")


def _close(page: Any, lab: JupyterLab, notebook: Path) -> None:
    page.close()
    _shut_down_kernel(lab, (RUN_DIR / notebook.name).relative_to(REPO).as_posix())


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_run_all_shows_no_error(
    notebook: Path, browser: Any, jupyterlab: JupyterLab, request: pytest.FixtureRequest
) -> None:
    page, seconds, problems = _run_all(browser, jupyterlab, notebook)
    keep = not problems and notebook.name == STEPPER_NOTEBOOK
    try:
        TIMINGS[notebook.stem] = seconds
        shot = _screenshot(page, notebook.stem)
        _say(request.config, f"\n{notebook.stem}: Run All took {seconds:.1f} s; screenshot {shot}")
        assert not problems, f"{notebook.name} in JupyterLab ({shot}):\n" + "\n".join(problems)
        if notebook.name == STEPPER_NOTEBOOK:
            bars = progress_seen(page)
            _say(request.config, f"{notebook.stem}: {len(bars)} progress bars drawn")
            loads = [b for b in bars if ".load(" in b["cell"] and "threaded load" in b["text"]]
            assert loads, (
                f"no progress bar of a threaded load was drawn during Run All of {notebook.name}"
                f" (bars seen: {[b['text'][:60] for b in bars][:10]})"
            )
        if keep:
            PAGES[notebook.name] = page
    finally:
        if not keep:
            _close(page, jupyterlab, notebook)


# --- the stepper, clicked --------------------------------------------------------------------

NEXT = "{}: next round trip"


def _stepper_widgets(page: Any) -> Any:
    """Return the outputs that hold a stepper widget (an "A: next round trip" or Reset button)."""
    return page.locator(f"{NOTEBOOK} .jp-OutputArea-output").filter(
        has=page.locator(
            "button.widget-button", has_text=re.compile(r"^(Reset|A: next round trip)$")
        )
    )


def _rows(widget: Any) -> int:
    return widget.locator("table tr").count()


def _click(widget: Any, label: str) -> None:
    """Click the widget's button label and wait until the trace has one more row."""
    before = _rows(widget)
    widget.locator("button.widget-button", has_text=re.compile(f"^{re.escape(label)}$")).click()
    widget.locator("table tr").nth(before).wait_for(timeout=STEP_TIMEOUT_MS)


def _enabled(widget: Any, label: str) -> bool:
    button = widget.locator("button.widget-button", has_text=re.compile(f"^{re.escape(label)}$"))
    return button.count() > 0 and button.first.is_enabled()


def _reset(widget: Any) -> None:
    widget.locator("button.widget-button", has_text=re.compile("^Reset$")).click()
    widget.page.wait_for_function(
        "w => w.querySelectorAll('table tr').length === 2",  # header and setup only
        arg=widget.element_handle(),
        timeout=STEP_TIMEOUT_MS,
    )


def _verdict(widget: Any) -> tuple[str, str]:
    """Return the invariant's sentence and its colour (CSS rgb) as the widget draws them."""
    verdict = widget.locator("div", has_text=re.compile(r"^(invariant|no invariant)")).last
    return verdict.inner_text(), verdict.evaluate("e => getComputedStyle(e).color")


RED_CSS, GREEN_CSS = "rgb(207, 34, 46)", "rgb(26, 127, 55)"  # stepper.RED, stepper.GREEN


def click_through_stepper(page: Any, name: str) -> list[str]:
    """Click the stepper A, B, A, B, then the fix; return the problems seen (screenshots saved)."""
    widgets = _stepper_widgets(page)
    if widgets.count() == 0:
        return [
            f"{name} shows no stepper widget after Run All (issue 18: a 'Try it yourself' cell "
            f"displaying a Stepper with actors A and B)"
        ]
    naive = widgets.first
    naive.scroll_into_view_if_needed()
    problems = []
    _reset(naive)
    for actor in "ABAB":
        _click(naive, NEXT.format(actor))
    text = naive.inner_text()
    if not (re.search(r"\bA -> True\b", text) and re.search(r"\bB -> True\b", text)):
        problems.append(f"after A, B, A, B the trace does not show both clients admitted:\n{text}")
    words, colour = _verdict(naive)
    if "BROKEN" not in words or colour != RED_CSS:
        problems.append(
            f"after A, B, A, B the invariant is not marked broken: {words!r} in {colour}"
        )
    shot = SHOTS / f"{Path(name).stem}-stepper-naive.png"
    naive.screenshot(path=str(shot))

    menu = naive.locator(".widget-dropdown select")
    if menu.count():
        _reset(naive)
        fixes = menu.locator("option").all_inner_texts()[1:]
        fixed = naive
    elif widgets.count() > 1:
        fixes, fixed = ["(the second stepper)"], widgets.nth(1)
    else:
        return problems + [
            f"{name}'s stepper has no fix to swap in: give it fixes={{...}} (a strategy menu) "
            f"or show a second stepper with the fix"
        ]
    for fix in fixes:
        if menu.count():
            menu.select_option(label=fix)
            page.wait_for_function(
                "([w, fix]) => w.innerText.includes('strategy: ' + fix)",
                arg=[fixed.element_handle(), fix],
                timeout=STEP_TIMEOUT_MS,
            )
        _reset(fixed)
        turn = itertools.cycle("AB")
        for _ in range(20):  # A, B, A, B ... skipping an actor that has finished
            pending = [a for a in "AB" if _enabled(fixed, NEXT.format(a))]
            if not pending:
                break
            actor = next(turn)
            _click(fixed, NEXT.format(actor if actor in pending else pending[0]))
            words, colour = _verdict(fixed)
            if "BROKEN" in words or colour != GREEN_CSS:
                problems.append(f"with {fix} the invariant turned {words!r} in {colour}")
                break
        fixed.locator("button.widget-button", has_text="Show every schedule").click()
        found = fixed.locator("b", has_text="every schedule from here")
        found.wait_for(timeout=STEP_TIMEOUT_MS)
        if not re.search(r": 0 of \d+ break the invariant", found.inner_text()):
            problems.append(f"with {fix}, {found.inner_text()}")
        shot = SHOTS / f"{Path(name).stem}-stepper-fix.png"
        fixed.screenshot(path=str(shot))
    return problems


def test_stepper_clicks_break_the_naive_limiter_and_the_fix_holds(
    browser: Any, jupyterlab: JupyterLab, request: pytest.FixtureRequest
) -> None:
    notebook = REPO / "notebooks" / STEPPER_NOTEBOOK
    page = PAGES.pop(notebook.name, None)
    if page is None:
        page, _, problems = _run_all(browser, jupyterlab, notebook)
        assert not problems, f"{notebook.name} in JupyterLab:\n" + "\n".join(problems)
    try:
        problems = click_through_stepper(page, notebook.name)
        _say(request.config, f"\nstepper screenshots: {sorted(SHOTS.glob('*-stepper-*.png'))}")
        assert not problems, "\n".join(problems)
    except BaseException:
        _close(page, jupyterlab, notebook)
        raise
    PAGES[notebook.name] = page  # the prediction test answers in the same run


# --- a prediction, answered in its widget ----------------------------------------------------

PREDICT_CALL = re.compile(r"""^\s*predict\(\s*["']([^"']+)["']\s*\)\s*$""")
ANSWER = re.compile(r"the answer is \((\w+)\)")


def first_prediction(notebook: Path) -> tuple[int, int, str]:
    """Return (cell index of the first predict cell, of its reveal cell, the prediction's name)."""
    cells = json.loads(notebook.read_text())["cells"]
    for i, cell in enumerate(cells):
        found = PREDICT_CALL.match("".join(cell["source"]))
        if cell["cell_type"] != "code" or "predict" not in cell["metadata"].get("tags", []):
            continue
        if found is None:
            continue
        for j in range(i + 1, len(cells)):
            if f'reveal("{found[1]}"' in "".join(cells[j]["source"]):
                return i, j, found[1]
    pytest.fail(
        f'{notebook.name} has no cell tagged predict whose source is predict("<name>") with a '
        'reveal("<name>", ...) after it (issue 23: fit-01 adds them)',
        pytrace=False,
    )


def _rerun(cell: Any, wait_for: str) -> str:
    """Run cell again (selected, Shift+Enter); return its output once it contains wait_for."""
    cell.locator(".jp-InputPrompt").click()
    cell.page.keyboard.press("Shift+Enter")
    output = cell.locator(".jp-OutputArea-output", has_text=wait_for)
    output.first.wait_for(timeout=STEP_TIMEOUT_MS)
    return cell.locator(".jp-OutputArea").inner_text()


def _choose(cell: Any, key: str) -> None:
    """Click the radio button of choice key in a predict cell's widget."""
    choices = cell.locator(".racelab-predict-choices label", has_text=f"({key}) ")
    assert choices.count() == 1, f"no radio button ({key}) in the predict cell"
    choices.first.click()
    cell.page.wait_for_timeout(500)  # the choice reaches the kernel before the next cell runs


def test_a_prediction_answered_wrongly_then_rightly(
    browser: Any, jupyterlab: JupyterLab, request: pytest.FixtureRequest
) -> None:
    from exercises import load_all
    from exercises.predict import PREDICTIONS

    notebook = REPO / "notebooks" / STEPPER_NOTEBOOK
    asked_at, revealed_at, name = first_prediction(notebook)
    load_all()
    choices = PREDICTIONS[name].choices
    page = PAGES.pop(notebook.name, None)
    if page is None:
        page, _, problems = _run_all(browser, jupyterlab, notebook)
        assert not problems, f"{notebook.name} in JupyterLab:\n" + "\n".join(problems)
    try:
        cells = page.locator(f"{NOTEBOOK} .jp-Cell")
        asked, revealed = cells.nth(asked_at), cells.nth(revealed_at)
        asked.scroll_into_view_if_needed()
        first = revealed.locator(".jp-OutputArea").inner_text()
        assert "You made no choice" in first, f"before any choice the reveal said:\n{first}"
        right = ANSWER.search(first)
        assert right is not None and right[1] in choices, f"no answer in the reveal:\n{first}"
        wrong = next(k for k, c in choices.items() if k != right[1] and c.misconception)
        _choose(asked, wrong)
        said = _rerun(revealed, f"You chose ({wrong})")
        assert f'the misconception "{choices[wrong].misconception}"' in said, said
        _choose(asked, right[1])
        said = _rerun(revealed, f"You chose ({right[1]})")
        assert "right, you predicted it" in said, said
        revealed.screenshot(path=str(SHOTS / f"{notebook.stem}-prediction.png"))
        # Shift+Enter with the focus still in the widget runs the predict cell again (issue 38):
        # the choice survives, the widget says so, and the reveal judges it
        _choose(asked, wrong)
        prompt = asked.locator(".jp-InputPrompt")
        before = prompt.inner_text()
        asked.page.keyboard.press("Shift+Enter")
        asked.page.wait_for_function(
            "([el, old]) => el.innerText !== old && !el.innerText.includes('*')",
            arg=[prompt.element_handle(), before],
            timeout=STEP_TIMEOUT_MS,
        )  # the predict cell ran again: its prompt has a new execution count
        committed = asked.locator(".racelab-predict-committed", has_text=f"committed: ({wrong})")
        committed.first.wait_for(timeout=STEP_TIMEOUT_MS)
        said = _rerun(revealed, f"You chose ({wrong})")
        assert f'the misconception "{choices[wrong].misconception}"' in said, said
        _say(
            request.config,
            f"\n{name}: wrong ({wrong}) and right ({right[1]}) answers revealed; after "
            "Shift+Enter in the widget the choice was kept",
        )
    finally:
        _close(page, jupyterlab, notebook)
