"""The third-party plugin in examples/: pip-installed, found through its entry point, run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, WORKLOADS, Result, backend

EXAMPLE = ROOT / "examples" / "perfstack-tracemalloc"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """pip-install the example project (a real wheel build) into its own folder."""
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", str(target), str(EXAMPLE)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("perfstack_tracemalloc-0.1.0.dist-info"))
    return f"{ROOT}:{target}"


def test_plugins_lists_it_with_its_package(perfstack: Callable[..., Result],
                                           installed: str) -> None:
    """`perfstack plugins` finds it by entry point and names its package and version."""
    result = perfstack("plugins", env={"PYTHONPATH": installed, "COLUMNS": "200"})
    assert result.code == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "tracemalloc" in line)
    assert "perfstack-tracemalloc 0.1.0" in line and "python" in line
    assert "broken" not in result.stdout


def test_run_end_to_end_with_its_finding(perfstack: Callable[..., Result],
                                         installed: str) -> None:
    """Its backend feeds the Python layer, and its rule flags the line that hoards memory."""
    result = perfstack("run", "--plugins", "tracemalloc,resources", "--repeat", "1",
                       "--warmup", "0", "-q", str(WORKLOADS / "hoarder.py"),
                       env={"PYTHONPATH": installed})
    assert result.code == 0, result.stderr
    report = result.report()
    assert backend(report, "tracemalloc")["status"] == "ok"
    assert backend(report, "tracemalloc")["package"] == "perfstack-tracemalloc 0.1.0"
    rows = [r for r in report["layers"]["python"] if r["source"] == "tracemalloc"]
    assert rows[0]["key"].endswith("hoarder.py:5"), rows[:2]
    assert rows[0]["values"]["size"]["value"] >= 4 * 2**20
    found = [f for f in report["findings"] if f["rule"] == "tracemalloc.dominant-site"]
    assert found and "hoarder.py:5" in found[0]["title"]
    peak = next(m for m in report["metrics"] if m["name"] == "traced_memory_peak")
    assert peak["value"] >= 4 * 2**20 and peak["source"] == "tracemalloc"


def test_example_is_lint_clean() -> None:
    """The example is held to the project's own standard."""
    src = str(EXAMPLE / "src")
    for cmd in ([sys.executable, "-m", "ruff", "check", src],
                [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", src]):
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert Path(EXAMPLE / "pyproject.toml").read_text().count("[project.entry-points.perfstack]")
