#!/usr/bin/env bash
# Build a free-threaded CPython 3.13 (python3.13t, configure --disable-gil) into a cache folder
# and print its path. Built once per machine: a later call finds the cached interpreter, checks
# that it really runs without the GIL, and prints its path at once. `scripts/install.sh --tests`
# calls it, so the test suite finds it ready.
#
# The source is Debian's source package python3.13 (suite trixie), fetched from the Debian
# archive this machine's apt is already configured with (the mirror it installs packages from;
# PERFSTACK_FT_MIRROR names another): only the upstream tarball is used, unpacked by hand, so
# neither dpkg-source nor a change to the machine's apt configuration is needed. Test modules
# are not built. About 3 minutes on 2 cores.
#
#   scripts/build-free-threaded.sh            # -> $PERFSTACK_CACHE/python3.13t/bin/python3.13t
#   perfstack run --plugins gil --gil-python "$(scripts/build-free-threaded.sh)" workloads/gil_cpu.py
set -euo pipefail
cache=${PERFSTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/perfstack}
prefix="$cache/python3.13t"
exe="$prefix/bin/python3.13t"
suite=${PERFSTACK_FT_SUITE:-trixie}

works() {
    [ -x "$exe" ] && PYTHON_GIL=0 "$exe" -c 'import sys; sys.exit(sys._is_gil_enabled())' 2>/dev/null
}
if works; then echo "$exe"; exit 0; fi

log() { echo "build-free-threaded: $*" >&2; }

# The Debian archive among apt's configured sources: the repository labelled "Debian" (not
# Debian-Security), as apt itself lists its index targets.
configured_mirror() {
    apt-get indextargets --format '$(LABEL) $(REPO_URI)' 2>/dev/null \
        | awk '$1 == "Debian" {print $2; exit}'
}
mirror=${PERFSTACK_FT_MIRROR:-$(configured_mirror)}
if [ -z "$mirror" ] && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 || true  # a new machine's apt has not read its sources yet
    mirror=$(configured_mirror)
fi
if [ -z "$mirror" ]; then
    log "no Debian archive among apt's configured sources: set PERFSTACK_FT_MIRROR to one"
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/perfstack-ft.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/src"
echo "deb-src $mirror $suite main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=-"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
          -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1")
log "fetching the python3.13 source package index of $suite from the configured archive"
apt-get -q "${apt_opts[@]}" update >&2
(cd "$work/src" && apt-get -q "${apt_opts[@]}" source --download-only python3.13 >&2)
orig=$(ls "$work"/src/python3.13_*.orig.tar.* | head -n1)
log "unpacking $(basename "$orig")"
tar -xf "$orig" -C "$work/src"
srcdir=$(find "$work/src" -maxdepth 1 -type d -name 'Python-3.13*' | head -n1)
log "configure --disable-gil and build (a few minutes)"
(cd "$srcdir" && ./configure -q --disable-gil --disable-test-modules --prefix="$prefix" \
        --without-ensurepip >&2 \
    && make -s -j"$(nproc)" >&2 && make -s altinstall >&2)
if ! works; then
    log "the interpreter built at $exe does not run without the GIL"
    exit 1
fi
echo "$exe"
