"""The third-party plugin in examples/: pip-installed, found through its entry point, run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import EXAMPLES, ROOT, WORKLOADS, Result, backend, perfstack_in

EXAMPLE, OSKIT = EXAMPLES


@pytest.fixture(scope="module")
def installed(example_plugins: str) -> str:
    """The PYTHONPATH where both example projects are pip-installed (tests/conftest.py)."""
    return example_plugins


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


def test_wrap_and_attach_examples_plainly(perfstack: Callable[..., Result],
                                          installed: str) -> None:
    """The wrapper sees the job's CPU time and memory; the sampler the process's memory; the
    workload's exit code passes through the wrapper."""
    result = perfstack("run", "--plugins", "rusage,rss", "--repeat", "1", "--warmup", "0",
                       "-q", str(WORKLOADS / "hoarder.py"), env={"PYTHONPATH": installed})
    assert result.code == 0, result.stderr
    report = result.report()
    for name in ("rusage", "rss"):
        assert backend(report, name)["status"] == "ok", backend(report, name)
        assert backend(report, name)["package"] == "perfstack-oskit 0.1.0"
    job = next(r for r in report["layers"]["hardware"] if r["source"] == "rusage")
    assert job["values"]["cpu_time"]["value"] > 0.02
    rss = next(r for r in report["layers"]["hardware"] if r["source"] == "rss")
    assert rss["values"]["samples"]["value"] > 3
    # Two measurements of one process's memory, by two means (the kernel's own maximum, and
    # samples every 20 ms that may miss the very top), in two runs: they agree.
    peak, max_rss = rss["values"]["peak"]["value"], job["values"]["max_rss"]["value"]
    assert peak > 8 * 2**20 and 0.7 * max_rss < peak < 1.1 * max_rss, (peak, max_rss)
    assert backend(report, "rss")["primary"] == {"": "peak"}
    failing = perfstack("run", "--plugins", "rusage", "--repeat", "1", "--warmup", "0", "-q",
                        "--keep-going", str(WORKLOADS / "fail_exit.py"),
                        env={"PYTHONPATH": installed})
    runs = failing.report()["run"]["runs"]
    assert next(r for r in runs if r["backend"] == "rusage")["exit"] == next(
        r for r in runs if r["role"] == "baseline")["exit"]


def test_every_kind_of_example_under_torchrun(ddp_job: Result, installed: str) -> None:
    """Under torchrun, the example wrapper (rusage) is collected once for the whole job, with
    no rank; it does not declare per_rank. diff compares it by the value it declared primary.
    (An attached backend per rank is py-spy in the same job, which declares no per_rank
    either: the path the rss example takes, run plainly above; an in-process backend per rank
    is the torch one. The example's own in-process backend, tracemalloc, is run above: under
    torchrun it traces torch's import in every rank, 14 s of a 2-CPU machine.)"""
    report = ddp_job.report()
    assert backend(report, "rusage")["status"] == "ok", backend(report, "rusage")
    rows = [r for layer in report["layers"].values() for r in layer if r["source"] == "rusage"]
    assert len(rows) == 1 and "rank" not in rows[0]["attrs"]
    spy = {r["attrs"]["rank"] for r in report["layers"]["python"] if r["source"] == "pyspy"}
    assert spy == {0, 1}
    latest = ddp_job.cwd / ".perfstack/runs/latest/report.json"
    same = perfstack_in(ddp_job.cwd, "diff", str(latest), str(latest), "--format", "json",
                        env={"PYTHONPATH": installed})
    assert same.code == 0, same.stderr
    compared = {r["source"]: r["by"] for layer in json.loads(same.stdout)["rows"].values()
                for r in layer}
    assert compared["rusage"] == "cpu_time"


def test_example_is_lint_clean() -> None:
    """The examples are held to the project's own standard."""
    for example in (EXAMPLE, OSKIT):
        src = str(example / "src")
        for cmd in ([sys.executable, "-m", "ruff", "check", src],
                    [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports",
                     src]):
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (example / "pyproject.toml").read_text().count(
            "[project.entry-points.perfstack]")
