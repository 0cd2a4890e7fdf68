#!/usr/bin/env bash
# Put redis-server, redis-cli and redis-benchmark (>= 8.4, built with TLS) into .redis/bin.
#
# Debian 12 ships Redis 7.0, which lacks SET IFEQ/IFNE/IFDEQ/IFDNE, DELEX and DIGEST, and no
# Python or npm package ships Redis >= 8.4. Debian's "experimental" suite carries the source
# package `redis` (8.6.x), whose orig tarball bundles its dependencies and builds on Debian 12's
# gcc with `make MALLOC=libc`. We fetch that source with `apt-get source --download-only`,
# through a private sources list built from the mirror already configured on this machine,
# so nothing under /etc/apt changes and no host name is written in this repository.
# The backend matrix's other servers (Debian's Redis 7.0, Valkey 9) come from
# scripts/get-other-servers.sh instead.
#
# Environment:
#   REDIS_MIN_VERSION  lowest acceptable version (default 8.4.0)
#   REDIS_CACHE_DIR    where built binaries are cached (default: ~/.cache/redis-race-lab when
#                      CI is set, so repeated CI runs on one machine do not rebuild; else none)
#
# The build has TLS (BUILD_TLS=yes, Debian's libssl-dev), so tests can reach a throwaway server
# through rediss://. A binary without TLS (built by an older version of this script, in .redis/bin
# or in the cache) does not count as built: it is rebuilt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST="$ROOT/.redis/bin"
MIN="${REDIS_MIN_VERSION:-8.4.0}"
if [ -n "${CI:-}" ]; then
    CACHE="${REDIS_CACHE_DIR:-$HOME/.cache/redis-race-lab}"
else
    CACHE="${REDIS_CACHE_DIR:-}"
fi

die() { echo "get-redis: ERROR: $*" >&2; exit 1; }

# version_of BINARY -> prints e.g. 8.6.3, or nothing when the binary does not run.
version_of() {
    "$1" --version 2>/dev/null | sed -n 's/.*v=\([0-9][0-9.]*\).*/\1/p'
}

# at_least A B -> true when version A >= version B.
at_least() {
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

# has_tls BINARY -> true when the binary was built with TLS (it links OpenSSL's libssl).
# grep reads all of ldd's output: with -q it would stop at the match, ldd would die of SIGPIPE on
# its next line, and pipefail would call the pipeline failed (1 time in 6 here on a busy machine).
has_tls() {
    ldd "$1" 2>/dev/null | grep 'libssl\.so' >/dev/null
}

good_pair_in() {
    local dir="$1" v
    [ -x "$dir/redis-server" ] && [ -x "$dir/redis-cli" ] && [ -x "$dir/redis-benchmark" ] || return 1
    v=$(version_of "$dir/redis-server")
    [ -n "$v" ] && at_least "$v" "$MIN" && has_tls "$dir/redis-server"
}

report() {
    echo "get-redis: $DEST/redis-server is version $(version_of "$DEST/redis-server") (need >= $MIN)"
}

if good_pair_in "$DEST"; then
    echo "get-redis: already built, skipping."
    report
    exit 0
fi
[ -x "$DEST/redis-server" ] && echo "get-redis: $DEST/redis-server has no TLS (or is too old): rebuilding."

mkdir -p "$DEST"
if [ -n "$CACHE" ] && good_pair_in "$CACHE/bin"; then
    cp "$CACHE/bin/redis-server" "$CACHE/bin/redis-cli" "$CACHE/bin/redis-benchmark" "$DEST/"
    echo "get-redis: copied from cache $CACHE/bin."
    report
    exit 0
fi

# What this build needs; elsewhere docs/setup.md says how to get a Redis >= 8.4 (or do without).
SETUP="see docs/setup.md for your system (the notebooks run without Redis: embedded backend, recordings)"
command -v apt-get >/dev/null || die "apt-get not found: this script builds from Debian's source package. Install Redis >= $MIN another way and put redis-server and redis-cli in $DEST or on PATH; $SETUP."
command -v dpkg-source >/dev/null || die "dpkg-source not found (Debian package dpkg-dev); run: apt-get install dpkg-dev, or $SETUP."
command -v make >/dev/null && command -v cc >/dev/null || die "make and a C compiler are needed to build Redis (apt-get install build-essential), or $SETUP."
[ -e /usr/include/openssl/ssl.h ] || die "OpenSSL's headers are needed to build Redis with TLS (Debian package libssl-dev); run: apt-get install libssl-dev, or $SETUP."

# The mirror URI already configured on this machine (deb822 first, then one-line format).
mirror=""
if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list ]; then
    mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || die "no Debian mirror is configured in /etc/apt; cannot fetch the Redis source; $SETUP."

WORK=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/cache/archives/partial" "$WORK/src"
{
    echo "deb-src [trusted=yes] $mirror experimental main"
    echo "deb-src [trusted=yes] $mirror sid main"
} > "$WORK/sources.list"
APT_OPTS=(-o "Dir::Etc::SourceList=$WORK/sources.list" -o "Dir::Etc::SourceParts=-"
          -o "Dir::State::Lists=$WORK/lists" -o "Dir::Cache=$WORK/cache"
          -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1")

echo "get-redis: reading the source index of Debian experimental and sid ..."
apt-get "${APT_OPTS[@]}" update -qq >"$WORK/update.log" 2>&1 || { cat "$WORK/update.log" >&2; die "apt-get update of the private source list failed (Debian experimental/sid are not reachable from this mirror); $SETUP."; }

# Every version of source package `redis` known to the private lists, newest first.
versions=$(apt-cache "${APT_OPTS[@]}" showsrc redis 2>/dev/null | awk '/^Package: /{p=$2} /^Version: /{if (p=="redis") print $2}' | sort -Vr | uniq)
chosen=""
for v in $versions; do
    upstream=${v#*:}; upstream=${upstream%%-*}; upstream=${upstream%%+*}
    if at_least "$upstream" "$MIN"; then chosen=$v; break; fi
done
[ -n "$chosen" ] || die "no Debian source of redis >= $MIN found (saw: ${versions:-none}). Install Redis >= $MIN yourself and put redis-server and redis-cli in $DEST."
echo "get-redis: fetching source package redis=$chosen ..."
( cd "$WORK/src" && apt-get "${APT_OPTS[@]}" source --download-only -qq "redis=$chosen" ) \
    || die "apt-get source redis=$chosen failed."

orig=$(ls "$WORK"/src/redis_*.orig.tar.* 2>/dev/null | head -n1)
[ -n "$orig" ] || die "the source package has no orig tarball."
mkdir -p "$WORK/build"
tar -xf "$orig" -C "$WORK/build" --strip-components=1
echo "get-redis: building redis-server, redis-cli and redis-benchmark (about a minute on 2 cores) ..."
# Two make calls, not one: naming several targets in one parallel make races on the
# dependency build's settings file ("make[3]: *** [Makefile:189: clean] Error 2", seen here).
# A parallel build failed once here with no error in its last 40 lines (a busy machine); make
# resumes where it stopped, so one serial retry finishes it, and shows the real error if any.
build() {
    ( cd "$WORK/build" && make -j"$1" MALLOC=libc BUILD_TLS=yes redis-server \
                       && make -j"$1" MALLOC=libc BUILD_TLS=yes redis-cli redis-benchmark )
}
if ! build "$(nproc)" >"$WORK/build.log" 2>&1; then
    echo "get-redis: the parallel build stopped; retrying serially ..."
    build 1 >"$WORK/build-serial.log" 2>&1 \
        || { grep -n -i -m 20 'error' "$WORK/build.log" "$WORK/build-serial.log" >&2
             tail -n 40 "$WORK/build-serial.log" >&2
             die "the Redis build failed (its errors and last lines above)."; }
fi

cp "$WORK/build/src/redis-server" "$WORK/build/src/redis-cli" "$WORK/build/src/redis-benchmark" "$DEST/"
good_pair_in "$DEST" || die "the built redis-server is not usable: version $(version_of "$DEST/redis-server") (need >= $MIN), TLS $(has_tls "$DEST/redis-server" && echo linked || echo 'not linked')"
if [ -n "$CACHE" ]; then
    mkdir -p "$CACHE/bin"
    cp "$DEST/redis-server" "$DEST/redis-cli" "$DEST/redis-benchmark" "$CACHE/bin/"
fi
report
