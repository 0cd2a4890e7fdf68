"""`make lab` starts JupyterLab with the suite's defaults: no "news" pop-up over the first outputs.

The defaults live in jupyter-config/labconfig/default_setting_overrides.json, which JupyterLab
reads from every folder of JUPYTER_CONFIG_PATH (the Makefile's lab recipe puts jupyter-config/
first; binder/postBuild copies the file into the Binder environment). They are defaults: a
learner's own settings still win.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "jupyter-config"
OVERRIDES = CONFIG / "labconfig" / "default_setting_overrides.json"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def test_make_lab_puts_the_suites_config_first_on_jupyters_config_path() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (setting,) = re.findall(r"^LAB_CONFIG := (.+)$", makefile, flags=re.M)
    assert setting.startswith('JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config')
    recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert recipe and recipe.group(1).lstrip().startswith("$(LAB_CONFIG) $(VENV)/bin/jupyter lab")


def test_jupyterlab_reads_the_news_setting_and_it_fits_the_schema() -> None:
    # As JupyterLab's server merges its settings defaults, in a process of its own.
    code = (
        "import json; from jupyterlab_server.settings_utils import _get_overrides; "
        "print(json.dumps(_get_overrides('/nonexistent')[0]))"
    )
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(CONFIG))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    overrides = json.loads(done.stdout)[NOTIFICATION]
    assert overrides == {"fetchNews": "false", "checkForUpdates": False}
    schema = Path(sys.prefix, "share", "jupyter", "lab", "schemas", *NOTIFICATION.split(":"))
    jsonschema.validate(overrides, json.loads(schema.with_suffix(".json").read_text()))


def test_binder_installs_the_same_defaults() -> None:
    post_build = (ROOT / "binder" / "postBuild").read_text()
    assert "cp jupyter-config/labconfig/default_setting_overrides.json" in post_build
    assert "/etc/jupyter/labconfig" in post_build
    assert json.loads(OVERRIDES.read_text())[NOTIFICATION]["fetchNews"] == "false"
