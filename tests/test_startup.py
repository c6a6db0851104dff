"""The CLI's start-up path stays light: no torch for --help, show, validate or plugins."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _imported(args: list[str], cwd, whole: bool = False) -> set[str]:
    """The top-level packages (``whole``: the full module names) a command imports."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "perfstack", *args],
                          capture_output=True, text=True, cwd=cwd)
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name if whole else name.split(".")[0])
    return names


@pytest.mark.parametrize("args", [["--help"], ["plugins"], ["run", "--help"]])
def test_commands_do_not_import_torch(args):
    assert "torch" not in _imported(args, ROOT)


def test_show_does_not_import_torch(tmp_path):
    """Reading a report of a torch run (a recorded real one: ops, a trace) needs no torch."""
    recorded = ROOT / "tests/fixtures/reports/resnet50.json.gz"
    proc = subprocess.run([sys.executable, "-m", "perfstack", "show", str(recorded)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "torch_step_time" in proc.stdout, proc.stderr
    assert "torch" not in _imported(["show", str(recorded)], tmp_path)
    assert "torch" not in _imported(["validate", str(recorded)], tmp_path)
    # Nor what only measuring the machine's ceilings needs (issue 55: on a fresh clone,
    # `show` of a small report took 120 ms with them, 107 ms without; 240 modules, 198).
    shown = _imported(["show", str(recorded)], tmp_path, whole=True)
    unneeded = {"importlib.metadata", "hashlib", "subprocess"} & shown
    assert not unneeded, sorted(unneeded)


def test_version():
    out = subprocess.run([sys.executable, "-m", "perfstack", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("perfstack ")
