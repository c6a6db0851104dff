"""``perfstack attach PID``: a training loop perfstack did not start, measured from outside
with the real py-spy; the loop runs on through the measuring, Ctrl-C and SIGTERM; each reason
the kernel refuses is one line with its fix and exit code 14."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfstack import errors
from perfstack.machine import ptrace
from perfstack.report import Layer
from perfstack.report.files import load_report
from perfstack.run import attached
from tests.conftest import ROOT, ctrl_c_reaches, perfstack_env, perfstack_in

LOOP = ROOT / "tests" / "workloads" / "live_train.py"


def _beat(path: Path) -> tuple[int, float, float]:
    """The loop's heartbeat: steps done, seconds in load_batch, seconds in train_step."""
    steps, loading, training, _ = path.read_text().split()
    return int(steps), float(loading), float(training)


def _moves_on(path: Path, after: int, timeout_s: float = 30.0) -> int:
    """Wait until the loop has done more steps than ``after``; return how many."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            steps = _beat(path)[0]
        except (OSError, ValueError):
            steps = 0
        if steps > after:
            return steps
        time.sleep(0.05)
    raise AssertionError(f"the loop stopped at step {after}")


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """The training loop, started as a user starts it (its own session, not perfstack's
    child), running until the module's tests end."""
    folder = tmp_path_factory.mktemp("live")
    beat = folder / "beat"
    proc = subprocess.Popen([sys.executable, str(LOOP), str(beat)], cwd=folder,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _moves_on(beat, 3, timeout_s=120)
        yield proc.pid, beat
    finally:
        proc.kill()
        proc.wait()


def _samplers_of(pid: int) -> list[str]:
    """py-spy processes still sampling ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"py-spy") and str(pid).encode() in argv:
            found.append(entry.name)
    return found


def test_attach_answers_like_a_run_and_the_loop_runs_on(loop: tuple[int, Path],
                                                        tmp_path: Path) -> None:
    """Two seconds of the live loop: the answer names its hottest own function
    (train_step) and where it waits (load_batch), as the loop's own timing says; the
    header says what was attached to and that no baseline exists; the loop ran on."""
    pid, beat = loop
    done = perfstack_in(tmp_path, "attach", str(pid), "--duration", "2", "-o", "r.json",
                        "--html")
    assert done.code == 0, done.stderr
    before = _beat(beat)[0]
    _moves_on(beat, before)
    assert _samplers_of(pid) == []
    text = done.stdout
    assert text.startswith(f"attached to pid {pid}: $ "), text[:200]
    assert "no baseline run: the profiler's overhead and the unprofiled speed are unknown" \
        in " ".join(text.split())
    assert "Your hottest function: train_step (live_train.py:" in text
    assert "it waits in load_batch (live_train.py:" in " ".join(text.split())
    report = load_report(tmp_path / "r.json")
    for b in report.backends:  # its files found from the report's folder (-o put it there)
        assert b.artifacts and all((tmp_path / p).is_file() for p in b.artifacts.values())
    assert report.run.attached is not None
    assert report.run.attached["pid"] == pid and report.run.attached["ended"] == "running"
    assert report.run.complete and report.run.runs == []
    # the truth, timed by the loop itself: half its time waits in load_batch, half trains
    _, loading, training = _beat(beat)
    assert 0.3 < loading / (loading + training) < 0.7
    html = (tmp_path / "r.html").read_text("utf-8")
    assert f"attached to pid {pid}" in html


def _attach_in_background(pid: int, folder: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "attach", str(pid), "--duration", "120", "-q",
         "-o", "r.json"], cwd=folder, env=perfstack_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=ctrl_c_reaches)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # sampling: py-spy says so in its log
        logs = list(folder.glob(".perfstack/runs/*/pyspy/profile.speedscope.json.log"))
        if logs and b"Sampling process" in logs[0].read_bytes():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("py-spy never began sampling")


@pytest.mark.parametrize(("how", "code"), [("ctrl-c", 130), ("sigterm", 143)])
def test_a_stopped_attach_reports_what_it_measured_and_leaves_the_loop_running(
        loop: tuple[int, Path], tmp_path: Path, how: str, code: int) -> None:
    """Ctrl-C (SIGINT to the terminal's whole process group, py-spy included) or SIGTERM
    (to perfstack alone, which must stop its samplers itself): a report of the seconds
    measured, marked interrupted, no sampler left, the loop running on."""
    pid, beat = loop
    proc = _attach_in_background(pid, tmp_path)
    time.sleep(0.5)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"process {pid} runs on" in err
    data = json.loads((tmp_path / "r.json").read_text("utf-8"))
    assert data["run"]["attached"]["ended"] == "interrupted"
    assert data["run"]["complete"] is False
    assert [b["status"] for b in data["backends"]] == ["ok"]
    assert _samplers_of(pid) == []
    _moves_on(beat, _beat(beat)[0])


def test_what_cannot_be_attached_is_one_line_and_its_own_exit_code(tmp_path: Path) -> None:
    """No such process: 3; not a Python process: 14; a pid that is not a number: 2; and
    nothing is left behind in the runs folder."""
    gone = perfstack_in(tmp_path, "attach", "4194999", "--duration", "1")
    assert gone.code == 3 and gone.stderr.strip() == (
        "perfstack: error: no process 4194999 (ps lists the running ones)")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        other = perfstack_in(tmp_path, "attach", str(sleeper.pid), "--duration", "1")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert other.code == 14, other.stderr
    assert other.stderr.strip() == (f"perfstack: error: process {sleeper.pid} (sleep) is not "
                                    "a Python process: neither its program nor a library it "
                                    "loaded is Python's")
    word = perfstack_in(tmp_path, "attach", "twelve")
    assert word.code == 2 and "'twelve' is not a process id" in word.stderr
    assert not list(tmp_path.glob(".perfstack/runs/2*"))


def test_another_users_process_is_refused_with_the_fix(loop: tuple[int, Path]) -> None:
    """A process of root's, looked at from a process that dropped to nobody (no
    CAP_SYS_PTRACE left, as the kernel clears it on setuid): the real /proc facts, one line
    naming both users and the fix."""
    pid, _ = loop
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            attached.checked(pid)
            said = "allowed"
        except errors.AttachRefused as exc:
            said = str(exc)
        except BaseException as exc:  # anything else, said to the test
            said = f"{type(exc).__name__}: {exc}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        said = fh.read().decode()
    os.waitpid(child, 0)
    assert said.startswith(f"process {pid} belongs to root (uid 0) and perfstack runs as "), said
    assert said.endswith("(uid 65534): run 'perfstack attach' as root (uid 0)"), said


@pytest.mark.parametrize(("facts", "words"), [
    ({"scope": 3}, "ptrace is disabled on this machine (kernel.yama.ptrace_scope=3)"),
    ({"scope": 1}, "kernel.yama.ptrace_scope=1 lets a process attach only to its own "
                   "children"),
    ({"scope": 1, "descendant": True}, None),
    ({"scope": 1, "capable": True}, None),
    ({"scope": 2}, "kernel.yama.ptrace_scope=2 lets only a process with CAP_SYS_PTRACE"),
    ({"scope": 2, "root": True, "me_uid": 0, "target_uid": 0}, "--cap-add SYS_PTRACE"),
    ({"scope": None, "target_uid": 0, "root": True, "me_uid": 0}, None),
    ({"scope": None, "target_uid": 1001}, "process 42 belongs to bob (uid 1001)"),
    ({"scope": None, "target_uid": 1001, "root": True, "me_uid": 0}, "--cap-add SYS_PTRACE"),
    ({"scope": 0}, None),
])
def test_each_kernel_rule_is_its_own_line(facts: dict[str, object], words: str | None) -> None:
    """Yama's scopes, another user's process, a container's root without the capability:
    what the kernel would refuse, decided from the facts alone."""
    given: dict[str, object] = {"me_uid": 1000, "capable": False, "target_uid": 1000,
                                "descendant": False, "pid": 42, "owner": "bob (uid 1001)",
                                "me": "alice (uid 1000)", "root": False, **facts}
    said = ptrace.refusal(**given)  # type: ignore[arg-type]
    if words is None:
        assert said is None
    else:
        assert said is not None and words in said, said


def test_a_process_that_runs_no_python_is_answered_by_where_it_waits(tmp_path: Path) -> None:
    """A hung job or an idle server: py-spy finds no Python code running in any sample (its
    main pass writes a profile of no samples, which perfstack took for py-spy failing: exit
    9, "py-spy wrote no profile"). The answer is where it waits, from the wait pass: the
    whole measured time waiting, in ``wait_for_request``, no share over 100% (the samplers
    run a little longer than the time measured); its GIL pass found the GIL never held,
    which is a pass that ran, not none."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "workloads" /
                                                 "waits_for_work.py")],
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"
        done = perfstack_in(tmp_path, "attach", str(proc.pid), "--duration", "1", "-o",
                            "r.json", env={"COLUMNS": "80"})
        assert proc.poll() is None  # it runs on
    finally:
        proc.kill()
        proc.wait()
    assert done.code == 0, done.stderr
    answer = " ".join(done.stdout.split("Answer", 1)[1].split("Findings", 1)[0].split())
    assert answer.startswith("Waiting-bound: the main thread waits (sleep, I/O, locks, device "
                             "sync) 100% of the wall time (pyspy)."), answer
    report = load_report(tmp_path / "r.json")
    (pyspy,) = report.backends
    assert pyspy.status.value == "ok", pyspy
    # its GIL pass ran too and found the GIL never held: not "no GIL pass"
    assert not any("no GIL pass" in n or "without the GIL pass" in n for n in pyspy.notes)
    waits = [r for r in report.layers[Layer.PYTHON] if r.attrs.get("kind") == "wait"]
    assert waits and waits[0].attrs.get("function") == "wait_for_request", waits
    share = waits[0].values["wait_share"].value
    assert share is not None and 50 < share <= 100, share


def test_a_process_the_kernel_protects_is_one_line_not_a_failed_sampler(tmp_path: Path) -> None:
    """A non-dumpable process (``prctl(PR_SET_DUMPABLE, 0)``: what setuid programs and some
    services are), looked at by a root without CAP_SYS_PTRACE (``setpriv`` takes it from the
    bounding set, as a container's runtime does): the kernel refuses its program's link and
    py-spy would fail ("Failed to get process executable name", exit 9 before). One line,
    exit 14, and with the capability the same process is measured."""
    import shutil

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("util-linux's setpriv is not on this machine")
    target = subprocess.Popen(
        [sys.executable, "-c", "import ctypes, sys, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, "
         "0); print('ready', flush=True); time.sleep(60)"],
        start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        refused = subprocess.run(
            [setpriv, "--bounding-set=-sys_ptrace", sys.executable, "-m", "perfstack",
             "attach", str(target.pid), "--duration", "1"], cwd=tmp_path,
            env=perfstack_env(), capture_output=True, text=True, timeout=60)
        allowed = perfstack_in(tmp_path, "attach", str(target.pid), "--duration", "1")
    finally:
        target.kill()
        target.wait()
    assert refused.returncode == 14, refused.stderr
    assert refused.stderr.strip() == (
        f"perfstack: error: the kernel refuses to let process {target.pid} (python) be read "
        f"here (/proc/{target.pid}/exe: permission denied), though its user and ptrace's "
        "rules allow it: it is protected (a setuid or non-dumpable program, an init, a "
        "security module's rule; root needs CAP_SYS_PTRACE for such a process), and no "
        "sampler could read it either")
    assert allowed.code == 0, allowed.stderr
