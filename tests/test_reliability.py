"""What must never happen: lost results, half-written reports, leaked processes, tracebacks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, WORKLOADS, backend, ctrl_c_reaches, perfstack_env

ONCE = ("--repeat", "1", "--warmup", "0")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_sigsegv_is_reported_as_a_crash_with_its_python_stack(perfstack):
    result = perfstack("-p", "tests.testplugins.probe", "run", *ONCE, "--plugins",
                       "resources,probe", str(WORKLOADS / "segfault.py"))
    assert result.code == 8, result.stderr
    report = result.report()
    run = report["run"]["runs"][0]
    assert run["exit"]["status"] == "signalled" and run["exit"]["signal_name"] == "SIGSEGV"
    assert "Segmentation fault" in run["python_stack"]
    assert "call_into_broken_extension" in run["python_stack"]
    # A backend of its own run would crash too and profile the crash: not run, and why.
    probe = backend(report, "probe")
    assert probe["status"] == "skipped" and "--keep-going" in probe["reason"], probe
    assert "baseline-1: SIGSEGV" in probe["reason"] or "SIGSEGV" in probe["reason"], probe
    assert [r["id"] for r in report["run"]["runs"]] == ["baseline-1"]
    assert backend(report, "resources")["status"] == "crashed"
    # dynamo rides along unasked and found no compile in the crashed run: not in the report
    # (it read 'crashed', with no reason); a backend asked for that reads the baseline says
    # which run failed
    assert "dynamo" not in [b["name"] for b in report["backends"]]
    assert report["layers"]["hardware"], "resources' partial counts are kept"
    crash = next(f for f in report["findings"] if f["rule"] == "run.crashed")
    assert "SIGSEGV" in crash["title"] and crash["severity"] == "critical"
    assert any("call_into_broken_extension" in line for line in crash["evidence"])
    # --keep-going runs it anyway: its own run crashed too; it says so, and the other
    # backend's rows are kept.
    going = perfstack("-p", "tests.testplugins.probe", "run", *ONCE, "--keep-going",
                      "--plugins", "resources,probe", "-o", "going.json",
                      str(WORKLOADS / "segfault.py"))
    assert going.code == 8, going.stderr
    kept = going.report("going.json")
    assert backend(kept, "probe")["status"] in ("crashed", "failed")
    assert kept["layers"]["hardware"]


def test_hang_is_stopped_at_the_timeout_with_its_whole_group(perfstack, tmp_path):
    pids = tmp_path / "pids"
    start = time.monotonic()
    result = perfstack("run", *ONCE, "--timeout", "1.5", "--kill-grace", "1",
                       str(WORKLOADS / "hang.py"), env={"HANG_PIDS": str(pids)})
    assert time.monotonic() - start < 30
    assert result.code == 8, result.stderr
    report = result.report()
    run = report["run"]["runs"][0]
    assert run["exit"]["status"] == "timeout"
    assert 1.5 <= run["wall_s"] < 10
    assert "wait_forever_for_a_lock" in run["python_stack"]  # where it was stuck
    # The sampler's run came first and hung: no baseline run was made for resources to read.
    assert run["id"] == "pyspy" and len(report["run"]["runs"]) == 1
    resources = backend(report, "resources")
    assert resources["status"] == "skipped" and "none was made" in resources["reason"]
    assert any(f["rule"] == "run.timeout" for f in report["findings"])
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid), f"process {pid} of the hung workload survived"


def test_the_answer_so_far_says_a_hang_however_few_samples_it_gave() -> None:
    """A first run that hung on a cold machine gave its sampler a few samples, too few for a
    hottest function: the answer so far says the hang (it said nothing, and the hang test
    failed on a cold start, 2 of 13 runs)."""
    from perfstack.cli.progress import early_answer
    from perfstack.report import Finding, Report, RunInfo

    report = Report(run=RunInfo(["python", "hang.py"], "/tmp", "2026-01-01T00:00:00Z", 3.0,
                                "0.1.0", 1, 0, 3.0, False, []), environment={}, backends=[])
    assert early_answer(lambda: report) == []  # nothing measured, nothing failed: silent
    report.findings = [Finding("run.timeout", "the workload hung: stopped at the 3 s timeout",
                               "run", "critical", [], "find where it waits", "perfstack")]
    assert early_answer(lambda: report) == [
        "The workload failed: the workload hung: stopped at the 3 s timeout."]


def test_a_hang_under_the_first_sampler_waits_out_the_timeout_once(perfstack, tmp_path):
    """The sampler's run comes first; when it hangs, the warm-up, the baseline and the other
    backends are not made (each would wait out the timeout again): one run, its stack, the
    hang said in the answer so far and in the report, each backend saying why it did not
    run; --keep-going makes them anyway."""
    pids = tmp_path / "pids"
    result = perfstack("run", "--plugins", "pyspy,perf,resources", "--timeout", "3",
                       "--kill-grace", "1", str(WORKLOADS / "hang.py"),
                       env={"HANG_PIDS": str(pids)})
    assert result.code == 8, result.stderr
    report = result.report()
    assert [r["id"] for r in report["run"]["runs"]] == ["pyspy"]
    assert report["run"]["runs"][0]["exit"]["status"] == "timeout"
    assert backend(report, "pyspy")["status"] == "timeout"
    perf = backend(report, "perf")
    assert perf["status"] == "skipped" and "in its first run" in perf["reason"], perf
    assert "--keep-going" in perf["reason"]
    assert "so far (pyspy in" in result.stderr and "warmup-1" not in result.stderr
    assert "the workload hung" in result.stdout
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid), f"process {pid} of the hung workload survived"


def test_ctrl_c_stops_children_and_writes_a_partial_report(tmp_path):
    pids = tmp_path / "pids"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "-p", "tests.testplugins.probe", "run", *ONCE,
         "--plugins", "resources,probe", str(WORKLOADS / "hang.py")],
        cwd=tmp_path, env=perfstack_env({"HANG_PIDS": str(pids)}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches)
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids.exists(), "the workload never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "partial" in err and "Traceback" not in err
    from tests.conftest import Result

    report = Result(proc.returncode, out, err, tmp_path).report()
    assert report["run"]["complete"] is False
    assert report["run"]["runs"][0]["exit"]["status"] == "interrupted"
    assert backend(report, "probe")["status"] == "skipped"
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid)


def test_a_backend_that_raises_is_failed_and_the_others_go_on(perfstack):
    result = perfstack("-p", "tests.testplugins.boom", "-p", "tests.testplugins.probe", "run",
                       *ONCE, "--plugins", "boom,probe,resources", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    boom = backend(report, "boom")
    assert boom["status"] == "failed"
    assert "ValueError: boom: cannot parse my own output" in boom["traceback"]
    assert "boom" in boom["reason"]
    assert backend(report, "probe")["status"] == "ok"
    assert backend(report, "resources")["status"] == "ok"
    assert report["layers"]["python"] and report["layers"]["hardware"]


def test_a_backend_that_raises_in_any_call_is_recorded_and_the_session_goes_on(perfstack):
    """Each call the driver makes into a backend, raising: run_count (one run, as if it had
    not asked), launch (failed, with the traceback, and no run made), attach and an
    attachment's stop (the run and collect go on; the error fails the backend, every error
    kept). The other backends and the report are whole."""
    result = perfstack("-p", "tests.testplugins.faulty", "run", *ONCE, "--plugins",
                       "faulty_launch,faulty_attach,faulty_stop,resources",
                       str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    launch = backend(report, "faulty_launch")
    assert launch["status"] == "failed" and launch["reason"] == "launch() raised"
    assert "RuntimeError: faulty: launch failed" in launch["traceback"]
    attach = backend(report, "faulty_attach")
    assert attach["status"] == "failed", attach
    assert "attach() raised:" in attach["traceback"] and "faulty: attach failed" in attach[
        "traceback"]
    stop = backend(report, "faulty_stop")
    assert stop["status"] == "failed", stop
    # Both of its runs were made and each attachment's stop was tried.
    assert stop["traceback"].count("stopping its attachment raised:") == 2
    ran = [r["id"] for r in report["run"]["runs"]]
    assert ran == ["baseline-1", "faulty_attach", "faulty_stop", "faulty_stop/run-2"], ran
    # The progress counted what was planned and made: run_count raising is one run.
    assert "run 4 of 4, faulty_stop/run-2" in result.stderr, result.stderr
    assert backend(report, "resources")["status"] == "ok"


def test_malformed_records_are_refused_not_written(perfstack):
    result = perfstack("-p", "tests.testplugins.malformed", "run", *ONCE, "--plugins",
                       "malformed,resources", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    bad = backend(report, "malformed")
    assert bad["status"] == "failed" and "malformed records" in bad["reason"]
    assert all(r["source"] != "malformed" for r in report["layers"]["hardware"])


def test_a_broken_rule_becomes_a_finding(perfstack):
    result = perfstack("-p", "tests.testplugins.bad_rule", "run", *ONCE, "--plugins",
                       "resources", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    error = next(f for f in report["findings"] if f["rule"] == "perfstack.plugin-error")
    assert error["source"] == "tests.testplugins.bad_rule"
    assert any("KeyError" in line for line in error["evidence"])


def test_a_plugin_that_cannot_import_is_listed_not_fatal(perfstack):
    result = perfstack("-p", "tests.testplugins.broken_import", "plugins")
    assert result.code == 0, result.stderr
    assert "resources" in result.stdout
    text = " ".join(result.stdout.split())  # wrapped to the terminal
    assert "broken_import is broken" in text
    assert "needs a library that is not installed" in text


def test_a_workload_that_exits_non_zero(perfstack):
    result = perfstack("run", *ONCE, "--plugins", "resources", str(WORKLOADS / "fail_exit.py"))
    assert result.code == 8
    report = result.report()
    run = report["run"]["runs"][0]
    assert run["exit"]["code"] == 1
    stderr = (result.cwd / ".perfstack/runs/latest" / run["stderr"]).read_text()
    assert "RuntimeError: config file missing" in stderr
    assert "RuntimeError: config file missing" in run["stderr_tail"]
    exited = next(f for f in report["findings"] if f["rule"] == "run.exited")
    assert any("config file missing" in line for line in exited["evidence"])


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    from perfstack.report.files import write_json_atomic

    target = tmp_path / "report.json"
    target.write_text('{"old": true}')
    with pytest.raises(TypeError):
        write_json_atomic(target, {"not json": object()})
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left over


def test_the_bootstrap_imports_nothing_heavy_into_the_workload():
    # The bootstrap module itself must be importable without the driver's heavy modules.
    code = ("import sys, perfstack.inprocess.bootstrap; bad = {'torch', 'rich', 'pluggy', "
            "'jsonschema', 'pyperf'} & set(sys.modules); print(sorted(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == "[]"


def test_a_crash_is_the_answer_and_the_backends_do_not_repeat_it(perfstack):
    """A workload that raises at its fourth step: the first screen leads with the exception and
    the workload's own line that raised it. It ran twice: under the sampler, whose run comes
    first (the answer-first order), and once without a profiler, which shows the failure is
    the workload's; no repeats, no other backend's run, and each says why it did not run."""
    result = perfstack("run", "--plugins", "pyspy,perf,resources", str(WORKLOADS /
                                                                        "raises_at_step.py"),
                       env={"COLUMNS": "80"})
    assert result.code == 8, result.stderr
    answer = result.stdout[result.stdout.index("Answer"):result.stdout.index("Findings")]
    flat = " ".join(answer.split())
    assert "The workload failed: the workload raised RuntimeError: mat1 and mat2 shapes" in flat
    assert "raises_at_step.py:7 in step" in flat, flat
    report = result.report()
    assert [r["id"] for r in report["run"]["runs"]] == ["pyspy", "warmup-1"]
    spy = backend(report, "pyspy")
    assert spy["status"] == "crashed" and "exit 1" in spy["reason"], spy
    entry = backend(report, "perf")
    assert entry["status"] == "skipped" and "--keep-going" in entry["reason"], entry
    assert "warmup-1: exit 1" in result.stderr and "baseline-1" not in result.stderr
    # the skip's fix is read whole at 80 columns (a note takes two lines before it is cut)
    notes = result.stdout[result.stdout.index("\nBackends"):]
    assert "--keep-going runs every backend anyway" in " ".join(notes.split()), notes


def test_a_forked_child_ends_at_sigterm_as_without_perfstack(tmp_path: Path) -> None:
    """The bootstrap's SIGTERM handler (a clean exit for the workload's own process) is not a
    forked child's: a multiprocessing pool's worker that inherited it raised SystemExit where
    Pool.terminate() signalled it and now and then never ended, and the workload hung
    waiting for it. A child gets the default back; a handler the workload set stays."""
    script = tmp_path / "forks.py"
    script.write_text(
        "import os, signal, sys\n"
        "def said():\n"
        "    h = signal.getsignal(signal.SIGTERM)\n"
        "    return 'default' if h == signal.SIG_DFL else getattr(h, '__name__', str(h))\n"
        "def child():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        print('child', said(), flush=True)\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "print('parent', said(), flush=True)\n"
        "child()\n"
        "def mine(signum, frame):\n"
        "    raise SystemExit(3)\n"
        "signal.signal(signal.SIGTERM, mine)\n"
        "child()\n")
    out = subprocess.run([sys.executable, "-m", "perfstack.inprocess.bootstrap", str(script)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env=perfstack_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["parent _on_sigterm", "child default", "child mine"]
