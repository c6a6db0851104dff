"""The code stays ruff-clean and mypy-clean (strict), as the style guide asks."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conftest import ROOT


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(ROOT / ".venv/bin")) or shutil.which(name)
    assert found, f"{name} is not installed: run scripts/install.sh"
    return found


def test_ruff_clean():
    proc = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_clean():
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
