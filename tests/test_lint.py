"""The code stays ruff-clean and mypy-clean (strict), as the style guide asks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(ROOT / ".venv/bin")) or shutil.which(name)
    assert found, f"{name} is not installed: run scripts/install.sh"
    return found


def test_ruff_clean():
    proc = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _mypy_cache() -> Path:
    """mypy's cache for this machine, not this checkout: a fresh clone checked on a machine
    that checked another before reads it (its entries are matched by the files' hashes) and
    takes 1.5 s, not 17 s cold; it is only a cache, made again when it does not match."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfstack-tests" / f"mypy-{sys.version_info[0]}.{sys.version_info[1]}"


def test_mypy_clean():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(_mypy_cache())],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
