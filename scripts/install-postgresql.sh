#!/usr/bin/env bash
# Make PostgreSQL's server programs (initdb, pg_ctl, postgres) available for the history tests,
# which start a throwaway server of their own in a temporary folder: Debian's postgresql
# package, installed with apt-get when this user is root. Prints the folder of the programs.
# Nothing is downloaded outside the distribution's own packages.
set -euo pipefail
find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true; }
bin=$(find_bin)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "no PostgreSQL server programs, and cannot install them (needs root and apt-get):" \
             "apt-get install postgresql" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql >&2
    bin=$(find_bin)
fi
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "postgresql did not install" >&2; exit 1; }
echo "$bin"
