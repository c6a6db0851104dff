"""``perfstack run --on-demand`` and ``perfstack capture``: a live training loop armed with
the torch backend, captured twice while it runs on (by its run folder, then by its pid),
each capture a whole report of exactly the steps asked (torch.profiler's steps, py-spy's
samples of them), the job's own report listing the captures; and what cannot be captured
said in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfstack.report.files import load_report
from tests.conftest import ROOT, ctrl_c_reaches, perfstack_env, perfstack_in
from tests.test_attach import _beat, _moves_on, _samplers_of

LOOP = ROOT / "tests" / "workloads" / "live_train.py"


def _armed(folder: Path, timeout_s: float = 120) -> tuple[Path, int]:
    """The run folder of the on-demand run under ``folder`` and its job's pid, once armed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = list(folder.glob(".perfstack/runs/2*/baseline-1/ondemand.json"))
        if found:
            data = json.loads(found[0].read_text("utf-8"))
            return found[0].parent.parent, int(data["pid"])
        time.sleep(0.05)
    raise AssertionError("the on-demand run never armed")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, Path,
                                                                    subprocess.Popen[str]]]:
    """The live loop (each loop marked a step) under ``perfstack run --on-demand --plugins
    torch``, running until the module's last test stops it."""
    folder = tmp_path_factory.mktemp("ondemand")
    beat = folder / "beat"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "--on-demand", "--plugins", "torch",
         str(LOOP), "--", str(beat), "mark"], cwd=folder, env=perfstack_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=ctrl_c_reaches)
    try:
        run, pid = _armed(folder)
        _moves_on(beat, 3, timeout_s=120)
        yield run, pid, beat, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _capture(run: Path, target: str, steps: int) -> tuple[dict[str, object], Path]:
    done = perfstack_in(run.parent.parent.parent, "capture", target, "--steps", str(steps),
                        "-q", timeout=180)
    assert done.code == 0, done.stderr
    where = done.stderr.split("report: ")[1].split("  (")[0].strip()
    path = run.parent.parent.parent / where
    return json.loads(path.read_text("utf-8")), path


def test_two_captures_of_a_running_job_each_of_the_steps_asked(
        job: tuple[Path, int, Path, subprocess.Popen[str]]) -> None:
    """By the run folder, then by the pid: each capture's report has exactly its steps
    (torch.profiler's ProfilerStep ranges, the rider's own count), the loop's functions in
    py-spy's rows (its samples of those steps only), the loop's own command; the job ran on
    through both, and no sampler is left."""
    run, pid, beat, _ = job
    first, first_path = _capture(run, str(run), 6)
    steps_before = _beat(beat)[0]
    second, second_path = _capture(run, str(pid), 4)
    assert first_path.parent.name == "1" and second_path.parent.name == "2"
    for report, asked in ((first, 6), (second, 4)):
        capture = report["environment"]["capture"]  # type: ignore[index]
        assert capture["steps"] == asked == capture["asked"] and "cut" not in capture
        assert len(capture["step_times_s"]) == asked
        metrics = {m["name"]: m for m in report["metrics"]}  # type: ignore[attr-defined]
        torch_steps = metrics["torch_step_time"]
        assert len(torch_steps["samples"]) == asked, torch_steps
        # each step named by its number in the job (ProfilerStep#N), from the first captured
        first = capture["first_step"]
        numbered = [m["sample_steps"] for m in metrics.values() if m.get("sample_steps")]
        assert numbered and all(n == list(range(first, first + asked)) for n in numbered)
        # the torch trace's steps are the rider's: each within 20% of its own clock's
        for ours, theirs in zip(sorted(capture["step_times_s"]),
                                sorted(torch_steps["samples"]), strict=True):
            assert theirs == pytest.approx(ours, rel=0.2), (ours, theirs)
        statuses = {b["name"]: b["status"] for b in report["backends"]}  # type: ignore[attr-defined]
        assert statuses == {"pyspy": "ok", "torch": "ok"}, statuses
        for b in report["backends"]:  # type: ignore[attr-defined]
            for path in b["artifacts"].values():  # found from the report's folder
                assert (first_path.parent / path).is_file() or (
                    second_path.parent / path).is_file(), (b["name"], path)
        python = {r["key"] for r in report["layers"]["python"]}  # type: ignore[index]
        assert any("train_step" in k for k in python), sorted(python)[:10]
        # the recorders' start, stop and writing are outside the sampled steps (each step's
        # mark, Recorder.step, is torch.profiler's own cost inside them)
        # (a function named exactly: torch.profiler's schedule, asked at each step, is a
        # step's own cost, as Recorder.step is)
        assert not {k.split(" (")[0] for k in python} & {
            "Recorder.stop", "Recorder.write", "Recorder.__init__"}, sorted(python)
        assert report["run"]["command"][1] == str(LOOP)  # type: ignore[index]
        assert report["run"]["attached"]["pid"] == pid  # type: ignore[index]
    _moves_on(beat, steps_before)
    assert _samplers_of(pid) == []
    load_report(first_path)  # each a valid report
    load_report(second_path)


def test_the_jobs_report_lists_its_captures_and_stopping_it_leaves_nothing(
        job: tuple[Path, int, Path, subprocess.Popen[str]]) -> None:
    """SIGTERM to ``perfstack run`` ends the job as a run's is ended; its report says what
    was armed and each capture made (run after the captures' test: the module's last)."""
    run, pid, _, proc = job
    if not list(run.glob("baseline-1/captures/*/done.json")):
        _capture(run, str(run), 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    report = json.loads((run / "report.json").read_text("utf-8"))
    on_demand = report["environment"]["on_demand"]
    assert on_demand["armed"] == ["torch"]
    made = [c["id"] for c in on_demand["captures"]]
    assert made == sorted(made) and made[0] == 1, on_demand
    assert _samplers_of(pid) == []


def test_what_cannot_be_captured_is_one_line(tmp_path: Path) -> None:
    """A folder with no armed job, a pid no on-demand run has: exit 3; a backend that
    cannot record on demand: exit 2; all before anything is started."""
    nothing = perfstack_in(tmp_path, "capture", str(tmp_path), "--steps", "2")
    assert nothing.code == 3 and nothing.stderr.strip() == (
        f"perfstack: error: {tmp_path}: no job armed by 'perfstack run --on-demand' in this "
        "folder")
    by_pid = perfstack_in(tmp_path, "capture", "4194999", "--steps", "2")
    assert by_pid.code == 3 and "has pid 4194999" in by_pid.stderr
    refused = perfstack_in(tmp_path, "run", "--on-demand", "--plugins", "pyspy",
                           str(LOOP), "--", str(tmp_path / "beat"))
    assert refused.code == 2 and "pyspy cannot record on demand" in refused.stderr
    assert not list(tmp_path.glob(".perfstack/runs/2*"))


def test_a_job_that_marks_no_step_is_not_captured_and_says_why(tmp_path: Path) -> None:
    """Captures begin at a step: a job that never marks one answers within --timeout, in
    one line, and runs on."""
    script = tmp_path / "nosteps.py"
    script.write_text("import time\nimport torch\nwhile True:\n    time.sleep(0.01)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "--on-demand", "--plugins", "torch", "-q",
         str(script)], cwd=tmp_path, env=perfstack_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        run, _ = _armed(tmp_path)
        done = perfstack_in(tmp_path, "capture", str(run), "--steps", "2", "--timeout", "1",
                            "--plugins", "none")
        assert done.code == 2, done.stderr
        assert done.stderr.strip().endswith(
            "no step of the job began the capture (captures begin and end at steps: "
            "perfstack.step() or an optimizer step) within 1 s (--timeout)")
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_a_torchrun_jobs_ranks_are_captured_together_or_as_named(tmp_path: Path) -> None:
    """Two ranks under torchrun, armed in each: a capture of the run folder records both
    ranks' same N steps (each rank's rows and step times named with its rank, torch's and
    the rider's step time agreeing); ``--ranks 1`` records rank 1 alone; the job runs on."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "--on-demand", "--plugins", "torch",
         "--nproc-per-node", "2", "-q", str(LOOP), "--", str(tmp_path / "beat"), "mark"],
        cwd=tmp_path, env=perfstack_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob(".perfstack/runs/2*/baseline-1/rank-*/ondemand.json"))) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the ranks never armed"
            time.sleep(0.05)
        run = next(tmp_path.glob(".perfstack/runs/2*"))
        for rank in (0, 1):
            _moves_on(tmp_path / f"beat.{rank}", 3, timeout_s=120)
        both, _ = _capture(run, str(run), 4)
        assert both["environment"]["capture"]["ranks"] == [0, 1]  # type: ignore[index]
        metrics = {m["name"]: m["value"] for m in both["metrics"]}  # type: ignore[attr-defined]
        for rank in (0, 1):
            ours, torch = metrics[f"step_time[rank{rank}]"], metrics[f"torch_step_time[rank{rank}]"]
            assert torch == pytest.approx(ours, rel=0.2), (rank, ours, torch)
        names = {r["name"] for r in both["layers"]["python"]}  # type: ignore[index]
        for rank in (0, 1):
            assert any(n.startswith(f"[rank {rank}] train_step") for n in names), sorted(names)
        done = perfstack_in(tmp_path, "capture", str(run), "--steps", "3", "--ranks", "1",
                            "-q", "-o", "one.json", timeout=180)
        assert done.code == 0, done.stderr
        alone = json.loads((tmp_path / "one.json").read_text("utf-8"))
        assert alone["environment"]["capture"]["ranks"] == [1]
        assert not any(r["name"].startswith("[rank 0]") for r in alone["layers"]["python"])
        assert proc.poll() is None  # the job ran on
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
