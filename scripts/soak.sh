#!/usr/bin/env bash
# `make soak`: the races the notebooks promise, on a machine whose every core is busy.
#
# Starts one busy loop per core (each bounded by `timeout`, and all stopped when this script
# ends, by their own process ids), then runs SOAK_RUNS times (default 10):
#   - notebooks 01-03 under nbval on the embedded backend,
#   - the same notebooks on a throwaway real server (python -m helpers run --shared),
#   - the race tests (SOAK_TESTS; their `lab` fixture covers embedded and real).
# Prints how many runs of each passed. Not part of CI: it takes a long time on purpose.
#
# Environment:
#   SOAK_RUNS        runs of each (default 10)
#   SOAK_NOTEBOOKS   notebooks to run (default notebooks/0[1-3]_*.ipynb)
#   SOAK_TESTS       race test files (default: the race, lock, rate-limit and dictionary tests)
#   SOAK_BUSY        busy loops (default: one per core, nproc)
#   SOAK_LOG         folder for each run's output (default: a new temporary folder)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
NBVAL=(--nbval --nbval-cell-timeout=300 --nbval-sanitize-with tests/nbval-sanitize.cfg)
RUNS="${SOAK_RUNS:-10}"
read -r -a NOTEBOOKS <<< "${SOAK_NOTEBOOKS:-$(echo notebooks/0[1-3]_*.ipynb)}"
read -r -a TESTS <<< "${SOAK_TESTS:-tests/test_load.py tests/test_races_locks.py tests/test_races_ratelimit.py tests/test_races_dictionary.py}"
BUSY="${SOAK_BUSY:-$(nproc)}"
LOG="${SOAK_LOG:-$(mktemp -d /tmp/racelab-soak.XXXXXX)}"
mkdir -p "$LOG"

busy_pids=()
stop_busy() {
    for pid in "${busy_pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
}
trap stop_busy EXIT
for _ in $(seq "$BUSY"); do
    timeout 14400 sh -c 'while :; do :; done' &  # at most 4 hours, even if this script is killed
    busy_pids+=($!)
done
echo "soak: $BUSY busy loops (pids ${busy_pids[*]}), $RUNS runs, logs in $LOG"

declare -A passed=([embedded]=0 [real]=0 [tests]=0)
for run in $(seq "$RUNS"); do
    env -u REDIS_URL RACELAB_BACKEND=embedded $PY -m pytest -q "${NBVAL[@]}" "${NOTEBOOKS[@]}" \
        > "$LOG/embedded-$run.log" 2>&1 && passed[embedded]=$(( passed[embedded] + 1 ))
    $PY -m helpers run --shared -- $PY -m pytest -q "${NBVAL[@]}" "${NOTEBOOKS[@]}" \
        > "$LOG/real-$run.log" 2>&1 && passed[real]=$(( passed[real] + 1 ))
    $PY -m pytest -q "${TESTS[@]}" > "$LOG/tests-$run.log" 2>&1 && passed[tests]=$(( passed[tests] + 1 ))
    echo "soak: run $run/$RUNS: $(uptime | sed 's/.*load average: //') load;" \
         "passed so far: notebooks embedded ${passed[embedded]}, real ${passed[real]}, race tests ${passed[tests]}"
done

total=$(( passed[embedded] + passed[real] + passed[tests] ))
echo "soak: notebooks 01-03 on embedded ${passed[embedded]}/$RUNS, on real ${passed[real]}/$RUNS;" \
     "race tests ${passed[tests]}/$RUNS (failed runs: see $LOG)"
echo "soak: $total passed, $(( 3 * RUNS - total )) failed"
[ $total -eq $(( 3 * RUNS )) ]
