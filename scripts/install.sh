#!/usr/bin/env bash
# Set up .venv with everything perfstack and its tests need, on a fresh machine or again.
# torch is pinned and installed first, on its own: with 2.13.0 present, the open range in
# the `torch` extra is already satisfied and pip fetches nothing more.
#
#   scripts/install.sh           # perfstack and its development tools in .venv
#   scripts/install.sh --tests   # and, once per machine, what the tests use beside it:
#                                # Chromium, PostgreSQL (Debian's packages) and a
#                                # free-threaded CPython built from the configured archive
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0
for arg in "$@"; do
    case "$arg" in
        --tests) tests=1 ;;
        *) echo "usage: scripts/install.sh [--tests]" >&2; exit 2 ;;
    esac
done
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
.venv/bin/python -c 'import torch' 2>/dev/null || "${pip[@]}" install "torch==${TORCH_VERSION:-2.13.0}"
"${pip[@]}" install -e ".[torch,nvml,dev]" "numpy==2.2.*"
# Apache Otava (change points, `perfstack trend`): only its analysis code is used, which needs
# numpy (2.2, as Otava pins) and scipy, both above; its other requirements are clients for
# BigQuery, Slack and Grafana that perfstack never calls, so they are not installed.
.venv/bin/python -c 'import otava.analysis' 2>/dev/null || "${pip[@]}" install --no-deps "apache-otava==0.8.0"
# Byte-compile perfstack's own sources now: where PYTHONDONTWRITEBYTECODE is set (as on these
# machines) nothing else would, and every command would compile them again (~70 ms).
.venv/bin/python -m compileall -q perfstack plugins >/dev/null

if [ "$tests" = 1 ]; then
    # The build is compute, the packages mostly download and unpack: side by side. The build
    # reads apt's configured sources; on a new machine apt reads them first, once.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
            && ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
        apt-get update -qq
    fi
    ft_log=$(mktemp)
    scripts/build-free-threaded.sh >"$ft_log" 2>&1 &
    ft=$!
    trap 'kill "$ft" 2>/dev/null || true; rm -f "$ft_log"' EXIT
    scripts/install-chromium.sh >/dev/null
    scripts/install-postgresql.sh >/dev/null
    # The tests start a Dask scheduler and workers on 127.0.0.1 (perfstack analyze --scheduler),
    # and profile real frameworks (transformers, lightning: pinned, torch already in place).
    .venv/bin/python -c 'import distributed, transformers, lightning' 2>/dev/null \
        || "${pip[@]}" install -e ".[dask,frameworks]"
    if ! wait "$ft"; then
        tail -n 20 "$ft_log" >&2
        echo "install.sh: the free-threaded CPython did not build (log above)" >&2
        exit 1
    fi
    rm -f "$ft_log"
    trap - EXIT
fi
