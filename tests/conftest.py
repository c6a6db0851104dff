"""Shared test helpers: run the real CLI in a subprocess, and validate every report it writes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from perfstack.pluginmanager import Plugins, load_plugins
from perfstack.reportfile import read_json, schema_errors

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "tests" / "workloads"


@dataclass
class Result:
    """A finished perfstack command."""

    code: int
    stdout: str
    stderr: str
    cwd: Path

    def report(self, path: str | Path | None = None) -> dict[str, Any]:
        """Return the report it wrote (default: the latest run's), checked against the schema."""
        target = Path(path) if path else self.cwd / ".perfstack/runs/latest/report.json"
        if not target.is_absolute():
            target = self.cwd / target
        data: dict[str, Any] = read_json(target)
        assert schema_errors(data) == [], schema_errors(data)
        return data


def perfstack_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Return the environment for a perfstack subprocess: test plugins importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra or {})}
    env.pop("PERFSTACK_PLUGINS", None)
    return env


@pytest.fixture
def perfstack(tmp_path: Path) -> Callable[..., Result]:
    """Run ``perfstack ARGS`` in a fresh folder; return its exit code and output."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
        proc = subprocess.run([sys.executable, "-m", "perfstack", *args], cwd=tmp_path,
                              env=perfstack_env(env), capture_output=True, text=True,
                              timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr, tmp_path)

    return run


@pytest.fixture
def plugins() -> Plugins:
    """A fresh plugin manager, as perfstack loads it (entry points included)."""
    return load_plugins()


def backend(report: dict[str, Any], name: str) -> dict[str, Any]:
    """Return the named backend's entry of a report."""
    found = [b for b in report["backends"] if b["name"] == name]
    assert found, f"no backend {name} in {[b['name'] for b in report['backends']]}"
    return found[0]


def assert_one_line_error(result: Result, code: int) -> None:
    """Bad input: the given exit code, one line on stderr, no traceback, nothing on stdout."""
    assert result.code == code, (result.code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("perfstack: error: "), lines
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="session")
def free_threaded_python() -> str:
    """A free-threaded CPython 3.13 (built once per machine by scripts/build-free-threaded.sh).

    The first call on a fresh machine downloads Debian's python3.13 source and builds it
    (a few minutes on 2 cores); later calls reuse the cache and return at once.
    """
    proc = subprocess.run([str(ROOT / "scripts" / "build-free-threaded.sh")],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = proc.stdout.strip().splitlines()[-1]
    assert Path(path).is_file(), proc.stdout
    return path


#: The backends of the shared tiny_mlp report: every one that runs on a machine with no GPU.
TINY_PLUGINS = "torch,pyspy,perftop,perf,onednn,resources"


@pytest.fixture(scope="session")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real report of the bundled tiny_mlp workload, profiled by six backends (the torch
    one with Python stacks, so ops link to their functions), with its HTML page beside it
    (report.html); shared by the tests that read a whole report. Returns the report's path."""
    cwd = tmp_path_factory.mktemp("tiny")
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", TINY_PLUGINS,
         "--torch-stack", "--html", "-o", "report.json", str(ROOT / "workloads/tiny_mlp.py"),
         "--", "--num-batches", "40"],
        cwd=cwd, env=perfstack_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd / "report.json"


@pytest.fixture(scope="session")
def chromium() -> str:
    """A headless Chromium and its chromedriver (Debian's packages, installed once per machine
    when root, by scripts/install-chromium.sh); returns the browser's path."""
    proc = subprocess.run([str(ROOT / "scripts" / "install-chromium.sh")], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]
