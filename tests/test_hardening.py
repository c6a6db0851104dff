"""Reliability under signals, bad paths and bad values (issue 14): SIGTERM and SIGHUP stop a
session as Ctrl-C does (a partial report, nothing left running, exit 128 + the signal); output
paths that are devices are written through, never replaced; paths that collide are refused
before anything runs; NaN is not JSON; a plugin module that does not exist is one line; escape
sequences a workload prints cannot drive the terminal; backend option values are checked when
the command line is parsed. Each of these failed before the change that made it pass.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import WORKLOADS, Result, assert_one_line_error, perfstack_env


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not running
    with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
        return fh.read().split(") ")[1].split()[0] != "Z"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_termination_signal_writes_the_partial_report_and_stops_everything(
        tmp_path: Path, sig: signal.Signals, code: int) -> None:
    pids = tmp_path / "pids.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "--plugins", "resources", "--repeat", "2",
         "--warmup", "0", "-q", "-o", "report.json", str(WORKLOADS / "hang.py")],
        cwd=tmp_path, env=perfstack_env({"HANG_PIDS": str(pids)}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids.exists(), "the workload never started"
    workload, child = (int(p) for p in pids.read_text().split()[:2])
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["complete"] is False
    baseline = next(r for r in report["run"]["runs"] if r["role"] == "baseline")
    assert baseline["exit"]["status"] == "interrupted", baseline["exit"]
    time.sleep(0.5)
    assert not _alive(workload) and not _alive(child), "the workload was left running"


def test_output_onto_a_device_writes_through_it(perfstack: Callable[..., Result],
                                                tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                     "-o", str(report), str(WORKLOADS / "busy.py")).code == 0
    null = tmp_path / "FAKE_DEVNULL"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a second /dev/null
    shown = perfstack("show", str(report), "-o", str(null))
    assert shown.code == 0, shown.stderr
    assert stat.S_ISCHR(null.stat().st_mode), "the device was replaced by a file"
    full = perfstack("show", str(report), "-o", "/dev/full")
    assert_one_line_error(full, 7)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_colliding_output_paths_are_refused_before_running(perfstack: Callable[..., Result],
                                                           tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text((WORKLOADS / "busy.py").read_text())
    before = script.read_text()
    result = perfstack("run", "--plugins", "resources", "-o", str(script), str(script))
    assert_one_line_error(result, 2)
    assert "the workload script" in result.stderr and script.read_text() == before
    same = perfstack("run", "--plugins", "resources", "--html", "x.html", "-o", "x.html",
                     str(script))
    assert_one_line_error(same, 2)
    assert not (tmp_path / ".perfstack").exists()  # nothing ran


def test_nan_and_infinity_are_not_json(perfstack: Callable[..., Result],
                                       tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert perfstack("run", "--plugins", "resources", "--repeat", "2", "--warmup", "0", "-q",
                     "-o", str(report), str(WORKLOADS / "busy.py")).code == 0
    data = json.loads(report.read_text())
    data["metrics"][0]["samples"][0] = float("nan")
    data["metrics"][0]["value"] = float("inf")
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(data))  # Python writes the bare NaN and Infinity tokens
    for args in (("validate", str(bad)), ("show", str(bad)),
                 ("diff", str(report), str(bad), "--fail-on-regression", "5%")):
        result = perfstack(*args)
        assert_one_line_error(result, 4)
        assert "NaN" in result.stderr or "Infinity" in result.stderr
    out = perfstack("diff", str(report), str(report), "--format", "json")
    assert out.code == 0
    json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in the output"))


def test_a_plugin_module_that_does_not_exist_is_one_line(
        perfstack: Callable[..., Result]) -> None:
    result = perfstack("-p", "no_such_plugin_module", "run", "--plugins", "resources",
                       str(WORKLOADS / "busy.py"))
    assert_one_line_error(result, 6)
    assert "no_such_plugin_module" in result.stderr


def test_escape_sequences_from_the_workload_cannot_drive_the_terminal(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    script = tmp_path / "noisy.py"
    script.write_text('print("\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H hello \\x1b[31mred")\n')
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0",
                       str(script))
    assert result.code == 0, result.stderr
    assert "\x1b]" not in result.stdout and "\x1b[2J" not in result.stdout
    assert "\x1b[H" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b]0;pwned" in result.stdout  # shown, visibly
    shown = perfstack("show")
    assert "\x1b[2J" not in shown.stdout and "\\x1b[2J" in shown.stdout


@pytest.mark.parametrize(("option", "why"), [
    (("--pyspy-rate", "-5"), "at least 1"),
    (("--gil-threads", "0,-1,abc"), "counts like 1,2,4"),
    (("--perf-events", "nosuchevent"), "perf cannot count"),
    (("--torch-active", "0"), "at least 1"),
    (("--nvml-period", "0.001"), "at least 0.02"),
])
def test_backend_options_are_checked_before_anything_runs(
        perfstack: Callable[..., Result], option: tuple[str, str], why: str) -> None:
    result = perfstack("run", "--plugins", "pyspy,gil,perf,torch,nvml", *option,
                       str(WORKLOADS / "busy.py"))
    assert_one_line_error(result, 2)
    assert why in result.stderr and option[0] in result.stderr
    assert not (result.cwd / ".perfstack").exists()  # nothing ran
