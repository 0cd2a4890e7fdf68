#!/usr/bin/env bash
# The README's test command (`make test`): unit tests on every backend available, then every
# notebook under nbval on the embedded backend and, when a real Redis >= 8.4 is available
# (REDIS_URL, .redis/bin or PATH), again against that real server. Without REDIS_URL the real
# passes run on throwaway servers pre-filled with foreign data: one redis-server, then a 3-node
# cluster, each as the least-privilege workshop ACL user (`python -m helpers acl`; set on every
# node, the default user locked with a password): what a learner on a shared server has.
# RACELAB_REQUIRE_REAL=1 (set by .ci/run) turns a missing real server into a failure.
# RACELAB_MATRIX=1 adds the backend matrix: every notebook again on Debian's Redis 7.0 and on
# Valkey 9 (scripts/get-other-servers.sh puts them in .redis/), where cells that need what the
# server lacks must skip and say so.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
NBVAL=(--nbval --nbval-cell-timeout=120 --nbval-sanitize-with tests/nbval-sanitize.cfg)
status=0

# A REDIS_URL that does not answer fails here, within 10 s, in one line: not after every test.
PING_REDIS_URL='
import os, re, sys
import redis
url = os.environ["REDIS_URL"]
shown = re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)
try:
    redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3, retry=None).ping()
except Exception as exc:  # whatever went wrong is the one-line reason
    sys.exit(f"REDIS_URL={shown} fails PING (3 s timeout): {type(exc).__name__}: {exc}")
'
if [ -n "${REDIS_URL:-}" ]; then
    why=$(timeout 10 $PY -c "$PING_REDIS_URL" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        [ $rc -eq 124 ] && why="REDIS_URL does not answer PING within 10 s"
        echo "run-tests: ${why##*$'\n'}" >&2
        exit 1
    fi
fi

# pytest exits 5 when it collected no test: that must not pass as success.
run() {
    local began=$SECONDS
    echo; echo "==> $*"; "$@"; local rc=$?
    echo "==> took $((SECONDS - began)) s: $*"
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

# The browser tests and the notebook passes run two at a time (each runs one kernel at a time, so
# about one core): each writes its own log, shown whole when it ends, so outputs do not interleave.
LOGS=build/test-logs
mkdir -p "$LOGS"
running=()  # the jobs started and not yet shown; each writes NAME.rc in $LOGS when it ends
finish() {  # finish NAME: show an ended job's output and count its status
    local name=$1 rc began
    rc=$(cat "$LOGS/$name.rc"); began=$(cat "$LOGS/$name.began")
    echo; echo "==> [$name] ended with status $rc after $((SECONDS - began)) s (beside another); its output ($LOGS/$name.log):"
    cat "$LOGS/$name.log"
    if [ "$rc" -eq 5 ]; then echo "run-tests: no tests ran in: $name" >&2; fi
    [ "$rc" -eq 0 ] || status=1
}
finish_one() {  # wait until one of the running jobs has ended (whichever first); finish it
    local i
    while :; do
        for i in "${!running[@]}"; do
            if [ -f "$LOGS/${running[$i]}.rc" ]; then
                finish "${running[$i]}"; unset "running[$i]"; running=(${running[@]+"${running[@]}"})
                return
            fi
        done
        sleep 1
    done
}
start() {  # start NAME COMMAND...: run it in the background; with two running, first finish one
    local name=$1; shift
    if [ ${#running[@]} -ge 2 ]; then finish_one; fi
    echo; echo "==> [$name] started: $*"
    rm -f "$LOGS/$name.rc"; echo "$SECONDS" >"$LOGS/$name.began"
    ( "$@" >"$LOGS/$name.log" 2>&1; echo $? >"$LOGS/$name.rc" ) &
    running+=("$name")
}

# RACELAB_SKIP_PASSED (set by .ci/run) names the tests that passed in the leg without a Redis
# binary and would run identically here: they are not run twice (tests/run_once.py).
# The unit tests run on every core (pytest-xdist; RACELAB_TEST_WORKERS=1 for one), a test file per
# worker at a time; the slowest are listed at the end.
XDIST=(-n "${RACELAB_TEST_WORKERS:-auto}" --dist loadfile --durations=15)
run $PY -m pytest "${XDIST[@]}" tests ${RACELAB_SKIP_PASSED:+--skip-passed "$RACELAB_SKIP_PASSED"}
# The jobs start longest first (as measured in CI), so that the last two end close together.
# What a learner sees: every notebook through Run All in JupyterLab in chromium (skips, saying
# why, without playwright or chromium; RACELAB_REQUIRE_BROWSER=1 makes that a failure); the
# lesson site and its accessibility (axe-core) are a job of their own.
start browser env -u REDIS_URL RACELAB_BACKEND=embedded $PY -m pytest tests/browser/test_jupyterlab.py
if [ $have_real = 1 ]; then
    if [ -n "${REDIS_URL:-}" ]; then
        start real $PY -m pytest "${NBVAL[@]}" notebooks
    else
        # The multi-node story: the same notebooks, unchanged, on a 3-node cluster of real servers.
        start cluster $PY -m helpers run --cluster --shared -- $PY -m pytest "${NBVAL[@]}" notebooks
        start real $PY -m helpers run --shared -- $PY -m pytest "${NBVAL[@]}" notebooks
    fi
fi
start site env -u REDIS_URL $PY -m pytest tests/browser/test_site.py tests/browser/test_axe.py
# The backend matrix: the notebooks as a learner with only Redis 7.0, or only Valkey, runs them
# (their own throwaway servers use that binary too). Outputs differ where cells skip, so only
# errors and failed asserts count (--nbval-lax).
if [ "${RACELAB_MATRIX:-}" = 1 ]; then
    for binary in .redis/7.0/bin/redis-server .redis/valkey/bin/valkey-server; do
        if [ ! -x "$binary" ]; then
            echo "run-tests: RACELAB_MATRIX=1 but $binary is missing (run scripts/get-other-servers.sh)" >&2
            status=1
            continue
        fi
        start "$(basename "$binary")-$(basename "$(dirname "$(dirname "$binary")")")" \
            $PY -m helpers run --binary "$binary" --shared -- \
            $PY -m pytest --nbval-lax --nbval-cell-timeout=120 notebooks
    done
fi
start embedded env -u REDIS_URL RACELAB_BACKEND=embedded $PY -m pytest "${NBVAL[@]}" notebooks
while [ ${#running[@]} -gt 0 ]; do finish_one; done
wait
echo
if [ $status -eq 0 ]; then echo "run-tests: all passed"; else echo "run-tests: FAILED" >&2; fi
exit $status
