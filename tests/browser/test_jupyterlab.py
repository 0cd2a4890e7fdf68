"""What a learner sees: every notebook run through "Run All" in JupyterLab, in a real browser.

nbval checks what the kernel returns; this checks what JupyterLab draws. One JupyterLab serves
the repository on a free loopback port with a random token, on the embedded backend, with
notebook windowing mode ``none`` (JUPYTERLAB_SETTINGS_DIR in a temporary folder) so that every
cell is drawn, off screen too. Each notebook is copied with its outputs cleared to
``.browser-run/`` (git-ignored; the committed notebook is never touched), opened, run with
Run > Run All Cells, and waited for. Then, in the page:

- no output is an error or stderr (JupyterLab draws both as ``application/vnd.jupyter.stderr``);
- as many images are drawn as the stored notebook holds ``image/png`` outputs (what nbval checks);
- the last code cell (Cleanup) ran: it has an execution count.

A screenshot of the whole notebook goes to ``.browser-screenshots/`` (git-ignored); its path is
printed. Notebook 01's "Try it yourself" stepper is then clicked A, B, A, B: both clients are
admitted and the invariant is marked broken; after Reset and the fix, it stays green.

The browser is Debian's chromium driven by playwright (its own browser download is not needed).
Without playwright or chromium the tests skip, saying why; RACELAB_REQUIRE_BROWSER=1 (.ci/run)
makes that a failure. RACELAB_CHROMIUM names another browser binary.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
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

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
RUN_DIR = REPO / ".browser-run"
SHOTS = REPO / ".browser-screenshots"
REQUIRE = os.environ.get("RACELAB_REQUIRE_BROWSER") == "1"
CHROMIUM = os.environ.get("RACELAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
NOTEBOOK_TIMEOUT_S = 600  # per notebook: each runs in about a minute; generous for a busy machine
STEP_TIMEOUT_MS = 60_000  # one stepper click: a round trip on the embedded backend
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
STEPPER_NOTEBOOK = "01_get_then_incr.ipynb"

TIMINGS: dict[str, float] = {}
PAGES: dict[str, Any] = {}  # notebook name -> its page, kept open for the stepper test


def _no_browser(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"RACELAB_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(f"no browser: {reason}")


def _say(config: pytest.Config, line: str) -> None:
    """Print line in pytest's output (not captured)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)


# --- the browser and the server ------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Yield Debian's chromium, launched headless by playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser(
            "playwright is not installed (pip install -e '.[test]', or pip install playwright)"
        )
    if not Path(CHROMIUM).is_file():
        _no_browser(
            f"no chromium at {CHROMIUM} (apt-get install chromium, or set RACELAB_CHROMIUM)"
        )
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        except Exception as exc:  # any launch failure is the one-line reason
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _no_browser(f"chromium at {CHROMIUM} did not start: {first}")
        try:
            yield chromium
        finally:
            chromium.close()


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
    """Windowing mode none (every cell drawn, off screen too); no news or update pop-ups."""
    for plugin, values in {
        "notebook-extension/tracker": {"windowingMode": "none", "autoStartDefaultKernel": True},
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
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
    }
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
    page.goto(f"{lab.url}/lab/tree/{relative}?token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_run_all_shows_no_error(
    notebook: Path, browser: Any, jupyterlab: JupyterLab, request: pytest.FixtureRequest
) -> None:
    copy = _fresh_copy(notebook)
    page = _open(browser, jupyterlab, copy)
    keep = False
    try:
        started = time.monotonic()
        _menu(page, "Run", "Run All Cells")
        page.wait_for_function(
            """() => {
                const p = [...document.querySelectorAll(
                    '.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')].map(e => e.textContent);
                return p.length > 0 && !p.some(t => t.includes('*')) && /\\d/.test(p[0]);
            }""",
            timeout=NOTEBOOK_TIMEOUT_S * 1000,
            polling=500,
        )
        page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]')
        TIMINGS[notebook.stem] = time.monotonic() - started
        page.wait_for_timeout(1000)  # let the last outputs (images, widgets) draw
        shot = _screenshot(page, notebook.stem)
        _say(
            request.config,
            f"\n{notebook.stem}: Run All took {TIMINGS[notebook.stem]:.1f} s; screenshot {shot}",
        )

        problems = []
        stderr = page.locator(STDERR).all_inner_texts()
        problems += [f"error or stderr output:\n{text[:1500]}" for text in stderr]
        prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        if not re.search(r"\d", prompts[-1]):
            problems.append(
                f"the last code cell (Cleanup) did not run: its prompt is {prompts[-1]!r}"
            )
        not_run = [i for i, p in enumerate(prompts) if not re.search(r"\d", p)]
        if not_run:
            problems.append(f"code cells {not_run} (0-based among code cells) did not run")
        drawn = page.evaluate(
            """() => [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output img')]
                   .filter(img => img.complete && img.naturalWidth > 0).length"""
        )
        expected = _stored_images(notebook)
        if drawn != expected:
            problems.append(f"{drawn} images drawn, the stored notebook holds {expected}")
        assert not problems, f"{notebook.name} in JupyterLab ({shot}):\n" + "\n".join(problems)
        keep = notebook.name == STEPPER_NOTEBOOK
        if keep:
            PAGES[notebook.name] = page
    finally:
        if not keep:
            page.close()
            _shut_down_kernel(jupyterlab, copy.relative_to(REPO).as_posix())
