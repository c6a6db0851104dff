"""Reliability under signals, bad paths and bad values (issue 14): SIGTERM and SIGHUP stop a
session as Ctrl-C does (a partial report, nothing left running, exit 128 + the signal); output
paths that are devices are written through, never replaced; paths that collide are refused
before anything runs; NaN is not JSON; a plugin module that does not exist is one line; escape
sequences a workload prints cannot drive the terminal; backend option values are checked when
the command line is parsed. Each of these failed before the change that made it pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from perfstack import history
from perfstack.report.files import read_json, schema_errors
from tests.conftest import (
    WORKLOADS,
    Result,
    assert_one_line_error,
    ctrl_c_reaches,
    perfstack_env,
    perfstack_in,
)


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


_EARLY = """
import os, signal, sys
sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "perfstack")
import perfstack.cli  # the command's first import: from here a signal is recorded
os.kill(os.getpid(), signal.{sig})  # while the rest is still being imported
from perfstack.cli.main import console
sys.argv[1:] = ["run", "--plugins", "resources", "--repeat", "1", "--warmup", "0",
                {workload!r}]
console()
"""


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_a_signal_while_the_command_is_imported_ends_it_cleanly(tmp_path: Path, sig: str,
                                                                code: int) -> None:
    """Issue 70: a SIGTERM 0.15 s after `perfstack run` started killed it by the signal
    (-15), before its handler was in place. From the command's first import a signal is
    recorded; main() then ends at once with its code, having run and written nothing."""
    proc = subprocess.run([sys.executable, "-c", _EARLY.format(
        sig=sig, workload=str(WORKLOADS / "busy.py"))], cwd=tmp_path, env=perfstack_env(),
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.strip() == "perfstack: interrupted before it began: nothing was run"
    assert not (tmp_path / ".perfstack").exists()


def test_a_signal_as_a_run_starts_stops_its_workload(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 70: a SIGHUP 5.5 s into `perfstack run --plugins resources,pyspy --repeat 2`
    left the workload's process running: a signal between a child's start and its watch
    unwound past the code that stops it (the child runs in a session of its own). Here a
    real SIGHUP arrives in that window: the run ends interrupted and its workload is gone."""
    from perfstack import signals
    from perfstack.run.child import process

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    signals.install()
    start = process._Waiter.start

    def start_then_hangup(self: process._Waiter) -> None:
        os.kill(os.getpid(), signal.SIGHUP)  # in the window: the child started, not watched
        start(self)

    monkeypatch.setattr(process._Waiter, "start", start_then_hangup)
    spec = process.ChildSpec([sys.executable, "-c", "import time; time.sleep(60)"],
                             dict(os.environ), str(tmp_path), tmp_path / "run",
                             kill_grace_s=2.0)
    try:
        result = process.run_child(spec)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        signals._received = signals._raised = None
    assert result.exit.status == "interrupted", result.exit
    assert result.wall_s is not None and result.wall_s < 10


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_during_a_backends_collect_stops_the_session(tmp_path: Path,
                                                              sig: signal.Signals,
                                                              code: int) -> None:
    """Issue 70: SIGTERM or SIGHUP while the memray backend read a capture of 3M objects was
    ignored, the run finishing with exit 0. A backend reading for long (holding the GIL)
    is stopped by the signal: the session ends within seconds, its report partial."""
    mark = tmp_path / "collecting"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "-p", "tests.testplugins.slowcollect", "run",
         "--plugins", "slowcollect", "--repeat", "0", "--warmup", "0", "-q", "-o",
         "report.json", str(WORKLOADS / "busy.py")],
        cwd=tmp_path, env=perfstack_env({"SLOW_COLLECT_MARK": str(mark),
                                         "PYTHONPATH": str(Path(__file__).parents[1])}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert mark.exists(), proc.communicate()[1]
    sent = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert time.monotonic() - sent < 10 and "Traceback" not in err
    assert json.loads((tmp_path / "report.json").read_text())["run"]["complete"] is False


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


def _huge(data: object, value: float) -> None:
    """Every measured number of a report's metrics or layers made ``value``."""
    if isinstance(data, dict):
        for key, item in data.items():
            if isinstance(item, float) or (isinstance(item, int) and not isinstance(item, bool)
                                           and key == "value"):
                data[key] = value
            elif key == "samples" and isinstance(item, list):
                data[key] = [value] * len(item)
            else:
                _huge(item, value)
    elif isinstance(data, list):
        for item in data:
            _huge(item, value)


@pytest.mark.parametrize("fixture", ["reports/resnet50.json.gz",
                                     "gpu-runs/recheck/resnet/report.json.gz",
                                     "reports/frameworks/gpt2_steps.json.gz"])
def test_huge_values_are_shown_and_compared_without_overflow(tmp_path: Path,
                                                             fixture: str) -> None:
    """Issue 70: a report holding huge (finite) values made `diff --format json` an internal
    error (70, "intermediate overflow in fsum"), and the HTML's roofline chart another. Sums,
    squares and margins over report values are taken where they cannot overflow: every
    format of show and of diff gives an answer."""
    import gzip

    from tests.conftest import ROOT

    with gzip.open(ROOT / "tests" / "fixtures" / fixture, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    _huge(data["metrics"], 1.7e308)
    _huge(data["layers"], 1.7e308)
    (tmp_path / "huge.json").write_text(json.dumps(data))
    for fmt in ("text", "markdown", "json", "html"):
        result = perfstack_in(tmp_path, "show", "huge.json", "--format", fmt, "-o", f"s.{fmt}")
        assert result.code == 0, (fmt, result.stderr)
        result = perfstack_in(tmp_path, "diff", "huge.json", "huge.json", "--format", fmt,
                              "-o", f"d.{fmt}")
        assert result.code == 0, (fmt, result.stderr)
    json.loads((tmp_path / "d.json").read_text(),
               parse_constant=lambda c: pytest.fail(f"bare {c} in the output"))


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


def test_processes_left_running_in_sessions_of_their_own_are_stopped_and_named(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    left = tmp_path / "left.txt"
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                       "-o", "r.json", str(WORKLOADS / "daemonizes.py"),
                       env={"LEFT_PIDS": str(left)})
    assert result.code == 0, result.stderr
    pids = [int(p) for p in left.read_text().split()]
    assert len(pids) == 2, pids  # one run: a child in its own session and a daemon
    time.sleep(0.3)
    assert not [p for p in pids if _alive(p)], "left running"
    report = json.loads((tmp_path / "r.json").read_text())
    found = next(f for f in report["findings"] if f["rule"] == "run.left-running")
    assert "2 processes" in found["title"]
    assert all(any(f"pid {p}:" in e for e in found["evidence"]) for p in pids), found


def test_what_the_workload_leaves_in_its_group_may_end_by_itself(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    """A spawned multiprocessing child's resource tracker, and a child that tidies up for
    50 ms after its parent exits, stay in the run's process group: they get to end by
    themselves (a SIGKILL at once kept the tidying from happening, and a sweep that found the
    tracker dying named it 'left running'), and nothing is said of them."""
    cleaned = tmp_path / "cleaned.txt"
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                       "-o", "r.json", str(WORKLOADS / "ends_after.py"),
                       env={"CLEANED": str(cleaned)})
    assert result.code == 0, result.stderr
    assert cleaned.read_text() == "cleaned"
    report = json.loads((tmp_path / "r.json").read_text())
    assert not [f for f in report["findings"] if f["rule"] == "run.left-running"], report


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_a_wrapper_that_hides_a_crash_does_not_hide_it_from_the_report(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    """perf stat exits 0 after its child died of SIGSEGV; the workload's own log says so."""
    result = perfstack("run", "--plugins", "perf", "--repeat", "1", "--warmup", "0", "-q",
                       "--keep-going", "-o", "r.json", str(WORKLOADS / "segfault.py"))
    assert result.code == 8, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    perf_run = next(r for r in report["run"]["runs"] if r["id"] == "perf")
    assert perf_run["exit"]["signal_name"] == "SIGSEGV", perf_run["exit"]
    perf = next(b for b in report["backends"] if b["name"] == "perf")
    assert perf["status"] == "crashed"


def test_sweep_keeps_the_settings_done_when_interrupted(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "sweep", "--env", "PERFSTACK_X=1,2,3,4",
         "--repeat", "1", "--warmup", "0", "-q", "--out-dir", "sw", str(WORKLOADS / "busy.py")],
        cwd=tmp_path, env=perfstack_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=ctrl_c_reaches)
    doc = tmp_path / "sw" / "sweep.json"
    deadline = time.monotonic() + 120
    while not doc.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert doc.exists(), "no sweep.json after the first setting"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    data = json.loads(doc.read_text())
    assert data["complete"] is False and 1 <= len(data["settings"]) < 4, data["settings"]
    for entry in data["settings"]:
        assert (doc.parent / entry["report"]).is_file()


def test_a_full_disk_on_stdout_is_exit_7(perfstack: Callable[..., Result],
                                         tmp_path: Path) -> None:
    assert perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                     "-o", "r.json", str(WORKLOADS / "busy.py")).code == 0
    with open("/dev/full", "w", encoding="utf-8") as full:
        proc = subprocess.run([sys.executable, "-m", "perfstack", "show", "r.json"],
                              cwd=tmp_path, env=perfstack_env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "perfstack: error: cannot write the output: No space left on device"]


def test_a_broken_artifact_is_left_out_not_fatal(tiny_report: Path, tmp_path: Path) -> None:
    """A py-spy profile of the right name and the wrong shape: the page and the merged trace
    are written without it, and the page says why."""
    copy = tmp_path / "copy"
    shutil.copytree(tiny_report.parent, copy, symlinks=True)
    report = json.loads((copy / "report.json").read_text())
    pyspy = next(b for b in report["backends"] if b["name"] == "pyspy")
    (copy / pyspy["artifacts"]["speedscope"]).write_text('{"profiles": 5, "shared": {}}')
    for fmt in ("html", "perfetto"):
        proc = perfstack_in(copy, "show", "report.json", "--format", fmt, "-o", f"out.{fmt}")
        assert proc.code == 0, proc.stderr
    assert "not a speedscope profile" in (copy / "out.html").read_text()
    trace = json.loads((copy / "out.perfetto").read_text())
    assert "pyspy" not in trace["metadata"]["backends"]


def test_a_run_whose_every_backend_failed_is_not_a_success(
        perfstack: Callable[..., Result]) -> None:
    result = perfstack("-p", "tests.testplugins.boom", "run", "--plugins", "boom", "--repeat",
                       "1", "--warmup", "0", "-q", "-o", "r.json", str(WORKLOADS / "busy.py"))
    assert result.code == 9, result.stderr
    assert "every backend named with --plugins failed" in result.stderr
    assert json.loads((result.cwd / "r.json").read_text())["backends"][0]["status"] == "failed"


def test_many_runs_in_one_folder_and_a_killed_one(perfstack: Callable[..., Result],
                                                  tmp_path: Path) -> None:
    """Four runs in a row (several start within one second, as the folder names' clock ticks)
    and four at once in one folder: every report valid, every run folder its own, nothing left
    running; then a perfstack killed with SIGKILL mid-run leaves a
    folder without a report, and the next run and diff work with what is on disk."""
    once = ("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
            str(WORKLOADS / "busy.py"))
    for _ in range(4):
        assert perfstack(*once).code == 0
    procs = [subprocess.Popen([sys.executable, "-m", "perfstack", *once], cwd=tmp_path,
                              env=perfstack_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    runs = tmp_path / ".perfstack" / "runs"
    folders = [p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(folders) == 8, sorted(p.name for p in folders)
    for folder in folders:
        assert schema_errors(read_json(folder / "report.json")) == [], folder
    # The one history they all wrote lists each run once, by its own report.
    listed = [os.path.realpath(e.report_path)
              for e in history.runs(tmp_path / ".perfstack" / history.FILE_NAME)]
    assert sorted(listed) == sorted(os.path.realpath(f / "report.json") for f in folders)
    pids = tmp_path / "pids.txt"
    killed = subprocess.Popen([sys.executable, "-m", "perfstack", "run", "--plugins",
                               "resources", "-q", str(WORKLOADS / "hang.py")], cwd=tmp_path,
                              env=perfstack_env({"HANG_PIDS": str(pids)}),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    killed.kill()  # SIGKILL: no handler runs, nothing is cleaned up by perfstack
    killed.wait()
    for pid in (int(p) for p in pids.read_text().split()[:2]):  # what a killed run leaves
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert perfstack(*once).code == 0
    diffed = perfstack("diff")
    assert diffed.code == 0, diffed.stderr  # the two newest runs with a report


def test_a_run_folder_replaced_during_the_run_is_one_line(tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "--plugins", "resources", "--repeat", "1",
         "--warmup", "0", "-q", "--timeout", "60", "--kill-grace", "1", "--out-dir", "out",
         str(WORKLOADS / "hang.py")], cwd=tmp_path, env=perfstack_env({"HANG_PIDS": str(pids)}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(tmp_path / "out")
    (tmp_path / "out").write_text("not a folder")
    os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)  # the workload ends: no timeout
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err
    assert err.strip().splitlines()[-1].startswith("perfstack: error: out: the run folder was "
                                                   "removed or replaced"), err
    assert "Traceback" not in err


@pytest.mark.parametrize(("name", "content", "why"), [
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("digits.json", '{"version": ' + "9" * 5000 + "}", "not valid JSON"),
    ("corrupt.json.gz", None, "not valid JSON"),
])
def test_report_files_that_cannot_be_read_are_exit_4(perfstack: Callable[..., Result],
                                                    tmp_path: Path, name: str,
                                                    content: str | None, why: str) -> None:
    path = tmp_path / name
    if content is None:  # a gzip header, then a body that is not deflate data
        path.write_bytes(bytes.fromhex("1f8b0800000000000003") + b"not deflate data at all")
    else:
        path.write_text(content)
    for command in ("validate", "show"):
        result = perfstack(command, str(path))
        assert_one_line_error(result, 4)
        assert why in result.stderr


_TWICE = """
import os, signal, time
from perfstack.signals import exit_with


def run() -> int:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C while the first is handled
        time.sleep(0.5)
        return 130
    return 0


exit_with(run)
"""


def test_a_second_ctrl_c_while_the_first_is_handled_keeps_its_exit_code() -> None:
    """Issue 57: a second Ctrl-C that came while perfstack handled the first (or as the
    interpreter ended, its handlers put back to the default) killed the process by SIGINT:
    exit -2, not 130. The command line's entry point (``exit_with``) keeps the first one's."""
    import subprocess
    import sys

    from tests.conftest import ctrl_c_reaches, perfstack_env

    done = subprocess.run([sys.executable, "-c", _TWICE], env=perfstack_env(),
                          capture_output=True, text=True, timeout=60, preexec_fn=ctrl_c_reaches)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
