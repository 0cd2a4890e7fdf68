"""First start: clone to JupyterLab answering, with uv bootstrapped into the venv against pip alone.

What a learner with only Python and make does: ``git clone``, then ``make lab``. Each run clones
this checkout's HEAD into a new temporary folder, runs ``make lab`` there with a PATH that has no
``uv`` on it (so the Makefile must bring its own or use pip), and times until JupyterLab answers
``GET /lab`` with 200. Then it stops that JupyterLab (its own process group, by PID) and deletes
the folder. The installers take turns, run by run, after one warm-up run each that fills the
package caches (the figures are for a warm cache; a cold one adds the downloads):

* ``uv-in-venv``: the default without uv on PATH: pip installs the pinned uv wheel, uv the rest;
* ``pip``: ``make lab INSTALLER=pip``, the pip path alone (the default before the uv bootstrap).

Prints each installer's minimum, median and maximum wall time and the load average beside them.
Usage: ``python -m benchmarks first_start [--runs N] [--installers uv-in-venv,pip]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "first-start-benchmark"
ANSWER_LIMIT_S = 300.0


def free_port() -> int:
    """Return a loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def path_without_uv() -> str:
    """Return PATH without any folder that holds a ``uv`` (nor this project's venv)."""
    keep = [
        folder
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not (Path(folder) / "uv").exists() and ".venv" not in Path(folder).parts
    ]
    return os.pathsep.join(keep)


def answers(port: int) -> bool:
    """Return whether JupyterLab on port answers GET /lab with 200."""
    url = f"http://127.0.0.1:{port}/lab?token={TOKEN}"
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - loopback http
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def first_start(installer: str, workdir: Path) -> float:
    """Clone HEAD into workdir, run make lab with installer; return seconds until it answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV", "INSTALLER")}
    env["PATH"] = path_without_uv()
    lab_args = f"--no-browser --port {port} --IdentityProvider.token={TOKEN}"
    started = time.perf_counter()
    subprocess.run(
        ["git", "clone", "--quiet", str(ROOT), str(workdir)], check=True, env=env, timeout=120
    )
    command = ["make", "lab", f"LAB_ARGS={lab_args}"]
    if installer == "pip":
        command.append("INSTALLER=pip")
    log = (workdir.parent / f"{workdir.name}.log").open("w")
    lab = subprocess.Popen(
        command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        while not answers(port):
            if lab.poll() is not None:
                raise RuntimeError(
                    f"make lab ({installer}) exited {lab.returncode}: see {log.name}"
                )
            if time.perf_counter() - started > ANSWER_LIMIT_S:
                raise TimeoutError(f"make lab ({installer}) did not answer in {ANSWER_LIMIT_S} s")
            time.sleep(0.1)
        return time.perf_counter() - started
    finally:
        os.killpg(lab.pid, signal.SIGTERM)  # the group this run started: make and its JupyterLab
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
        log.close()


def main(argv: list[str]) -> int:
    """Time clone -> JupyterLab answering for each installer, interleaved; print the figures."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks first_start", description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="measured runs per installer")
    parser.add_argument("--installers", default="uv-in-venv,pip", help="comma-separated")
    args = parser.parse_args(argv)
    installers = args.installers.split(",")
    times: dict[str, list[float]] = {name: [] for name in installers}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="first-start-") as tmp:
        for run in range(args.runs + 1):  # run 0 warms the package caches and is not counted
            for installer in installers:
                workdir = Path(tmp) / f"{installer}-{run}"
                seconds = first_start(installer, workdir)
                shutil.rmtree(workdir)
                loads.append(os.getloadavg()[0])
                label = "warm-up" if run == 0 else f"run {run}"
                print(f"{installer:>11} {label:>7}: {seconds:5.1f} s (load {loads[-1]:.2f})")
                if run:
                    times[installer].append(seconds)
    print("\nclone -> JupyterLab answering, warm cache, no uv on PATH")
    for installer, figures in times.items():
        print(
            f"  {installer:>11}: min {min(figures):5.1f} s, median {statistics.median(figures):5.1f}"
            f" s, max {max(figures):5.1f} s over {len(figures)} runs"
        )
    print(f"  load average during the runs: {min(loads):.2f} to {max(loads):.2f} (2 cores here)")
    return 0
