#!/usr/bin/env bash
# The README's test command (`make test`): unit tests on every backend available, then every
# notebook under nbval on the embedded backend and, when a real Redis >= 8.4 is available
# (REDIS_URL, .redis/bin or PATH), again against that real server. Without REDIS_URL the real
# passes run on throwaway servers pre-filled with foreign data: one redis-server, then a 3-node
# cluster.
# RACELAB_REQUIRE_REAL=1 (set by .ci/run) turns a missing real server into a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
NBVAL=(--nbval --nbval-cell-timeout=120 --nbval-sanitize-with notebooks/sanitize.cfg)
status=0

# pytest exits 5 when it collected no test: that must not pass as success.
run() {
    echo; echo "==> $*"; "$@"; local rc=$?
    if [ $rc -eq 5 ]; then echo "run-tests: no tests ran in: $*" >&2; fi
    [ $rc -eq 0 ] || status=1
}

have_real=0
if [ -n "${REDIS_URL:-}" ] || $PY -m helpers find >/dev/null 2>&1; then
    have_real=1
elif [ "${RACELAB_REQUIRE_REAL:-}" = 1 ]; then
    $PY -m helpers find
    echo "run-tests: RACELAB_REQUIRE_REAL=1 and no real Redis >= 8.4 is available (run make redis)" >&2
    exit 1
else
    echo "run-tests: no real Redis >= 8.4 found: real-server tests will be skipped (make redis builds one)."
fi

run $PY -m pytest tests
run env -u REDIS_URL RACELAB_BACKEND=embedded $PY -m pytest "${NBVAL[@]}" notebooks
if [ $have_real = 1 ]; then
    if [ -n "${REDIS_URL:-}" ]; then
        run $PY -m pytest "${NBVAL[@]}" notebooks
    else
        run $PY -m helpers run --shared -- $PY -m pytest "${NBVAL[@]}" notebooks
        # The multi-node story: the same notebooks, unchanged, on a 3-node cluster of real servers.
        run $PY -m helpers run --cluster --shared -- $PY -m pytest "${NBVAL[@]}" notebooks
    fi
fi
echo
if [ $status -eq 0 ]; then echo "run-tests: all passed"; else echo "run-tests: FAILED" >&2; fi
exit $status
