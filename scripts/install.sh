#!/usr/bin/env bash
# Set up .venv with everything perfstack and its tests need, on a fresh machine or again.
# torch is pinned and installed first, on its own: with 2.13.0 present, the open range in
# the `torch` extra is already satisfied and pip fetches nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."
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
