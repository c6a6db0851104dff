#!/usr/bin/env bash
# Build a free-threaded CPython 3.13 (python3.13t, configure --disable-gil) into a cache folder
# and print its path. Built once per machine: a later call finds the cached interpreter, checks
# that it really runs without the GIL, and prints its path at once.
#
# The source comes from Debian's source package python3.13 (suite trixie): only the upstream
# tarball is used, unpacked by hand, so neither dpkg-source nor a change to the machine's apt
# configuration is needed. About 4 minutes on 2 cores.
#
#   scripts/build-free-threaded.sh            # -> $PERFSTACK_CACHE/python3.13t/bin/python3.13t
#   perfstack run --plugins gil --gil-python "$(scripts/build-free-threaded.sh)" workloads/gil_cpu.py
set -euo pipefail
cache=${PERFSTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/perfstack}
prefix="$cache/python3.13t"
exe="$prefix/bin/python3.13t"
suite=${PERFSTACK_FT_SUITE:-trixie}
mirror=${PERFSTACK_FT_MIRROR:-http://deb.debian.org/debian}

works() {
    [ -x "$exe" ] && PYTHON_GIL=0 "$exe" -c 'import sys; sys.exit(sys._is_gil_enabled())' 2>/dev/null
}
if works; then echo "$exe"; exit 0; fi

log() { echo "build-free-threaded: $*" >&2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/perfstack-ft.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/src"
echo "deb-src $mirror $suite main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=-"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
          -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1")
log "fetching the python3.13 source package index from $suite"
apt-get -q "${apt_opts[@]}" update >&2
(cd "$work/src" && apt-get -q "${apt_opts[@]}" source --download-only python3.13 >&2)
orig=$(ls "$work"/src/python3.13_*.orig.tar.* | head -n1)
log "unpacking $(basename "$orig")"
tar -xf "$orig" -C "$work/src"
srcdir=$(find "$work/src" -maxdepth 1 -type d -name 'Python-3.13*' | head -n1)
log "configure --disable-gil and build (a few minutes)"
(cd "$srcdir" && ./configure -q --disable-gil --prefix="$prefix" --without-ensurepip >&2 \
    && make -s -j"$(nproc)" >&2 && make -s altinstall >&2)
if ! works; then
    log "the interpreter built at $exe does not run without the GIL"
    exit 1
fi
echo "$exe"
