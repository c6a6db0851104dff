"""``perfstack run --steps N --warmup-steps K``: every run ends cleanly after K+N steps, the
backends measure the N, the overhead is per step, and a workload with no steps gets one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import WORKLOADS, Result, assert_one_line_error, backend, overhead_of


def _steps_of(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / "workload-steps.json").read_text())
    return data


def test_a_long_job_ends_after_its_steps(perfstack: Callable[..., Result]) -> None:
    """100,000 optimizer steps asked; the torch run ends after 3 + 20, cleanly, the script's
    finally run; torch records exactly the 20. (The baseline's own step time and the
    overheads of measured steps are read from the shared torchrun job, which has a
    baseline; py-spy's runs, on a loop with no torch, below.)"""
    result = perfstack("run", "--steps", "20", "--warmup-steps", "3", "--plugins", "torch",
                       "--repeat", "0", "--warmup", "0", "--timeout", "120",
                       str(WORKLOADS / "long_train.py"), timeout=300)
    assert result.code == 0, result.stderr
    report = result.report()
    assert report["run"]["steps"] == {"warmup": 3, "measured": 20}
    run_dir = result.cwd / ".perfstack" / "runs" / "latest"
    [record] = report["run"]["runs"]
    assert record["exit"]["status"] == "exited" and record["exit"]["code"] == 0, record
    steps = _steps_of(run_dir / "torch")
    assert steps["steps"] == 23 and steps["limit"] == 23, steps
    # The 23rd optimizer step ran; perfstack ended the run in its post-step hook, before the
    # loop counted it.
    assert "finally: 22 steps done" in (run_dir / "torch" / "stdout.log").read_text()
    step = next(m for m in report["metrics"] if m["name"] == "torch_step_time")
    assert len(step["samples"]) == 20
    # Each a whole step, its optimizer step in it: the profiler warmed up in the last warm-up
    # step, not in the first measured one (which left 19 and a sliver of the teardown).
    [trace] = (run_dir / "torch").glob("*.pt.trace.json")
    events = json.loads(trace.read_text("utf-8"))["traceEvents"]
    assert sum(str(e.get("name", "")).startswith("Optimizer.step#") for e in events) == 20
    assert backend(report, "torch")["status"] == "ok", backend(report, "torch")
    assert "3 warm-up + 20 measured steps" in result.stdout
    assert "perfstack: run 1 of 1, torch: exit 0" in result.stderr


def test_a_samplers_several_runs_each_end_after_the_steps(
        perfstack: Callable[..., Result]) -> None:
    """A loop of 100,000 perfstack.step() steps under py-spy with its GIL pass in a run of
    its own (--pyspy-gil-run: a backend's several runs, run_count): every run ends after
    3 + 20, cleanly, the script's finally run, and py-spy attaches at each run's window."""
    result = perfstack("run", "--steps", "20", "--warmup-steps", "3", "--plugins", "pyspy",
                       "--pyspy-gil-run", "--repeat", "0", "--warmup", "0", "--timeout", "120",
                       str(WORKLOADS / "long_loop.py"), timeout=300)
    assert result.code == 0, result.stderr
    report = result.report()
    run_dir = result.cwd / ".perfstack" / "runs" / "latest"
    assert [r["id"] for r in report["run"]["runs"]] == ["pyspy", "pyspy/run-2"]
    for record in report["run"]["runs"]:
        assert record["exit"]["status"] == "exited" and record["exit"]["code"] == 0, record
        folder = run_dir / record["id"]
        steps = _steps_of(folder)
        assert steps["steps"] == 23 and steps["limit"] == 23, (record["id"], steps)
        # perfstack ended the run in the 23rd step's perfstack.step(), before the loop
        # printed: the loop had counted it.
        assert "finally: 23 steps done" in (folder / "stdout.log").read_text()
    assert backend(report, "pyspy")["status"] == "ok", backend(report, "pyspy")
    assert (run_dir / "pyspy" / "workload-window.json").is_file()
    assert any("measured steps" in n for n in backend(report, "pyspy")["notes"])
    # py-spy's GIL pass had a run of its own, bounded and windowed alike.
    assert (run_dir / "pyspy" / "run-2" / "workload-window.json").is_file()
    # Progress, one line per finished run when stderr is not a terminal.
    assert "perfstack: run 1 of 2, pyspy: exit 0" in result.stderr
    assert "perfstack: run 2 of 2, pyspy/run-2: exit 0" in result.stderr


def test_no_steps_is_one_line(perfstack: Callable[..., Result]) -> None:
    result = perfstack("run", "--steps", "5", "--plugins", "resources", "--repeat", "1",
                       "--warmup", "0", "-q", str(WORKLOADS / "busy.py"))
    assert result.code == 2
    assert result.stderr.strip().splitlines()[-1].startswith(
        "perfstack: error: --steps 5: the workload marked no steps")
    assert_one_line_error(perfstack("run", "--warmup-steps", "2", str(WORKLOADS / "busy.py")), 2)
    assert_one_line_error(perfstack("run", "--steps", "0", str(WORKLOADS / "busy.py")), 2)


def test_every_rank_stops_at_the_same_step(ddp_job: Result) -> None:
    """Two gloo ranks marking steps with perfstack.step(): each stops after 2 + 4, in the
    baseline and in every profiled run."""
    run_dir = ddp_job.cwd / ".perfstack" / "runs" / "latest"
    for run in ("baseline-1", "torch", "pyspy"):
        for rank in (0, 1):
            assert _steps_of(run_dir / run / f"rank-{rank}")["steps"] == 6, (run, rank)
    report = ddp_job.report()
    for rank in (0, 1):
        step = next(m for m in report["metrics"] if m["name"] == f"torch_step_time[rank{rank}]")
        assert len(step["samples"]) == 4
        # The baseline's own: its 4 measured steps, not the warm-up ones nor the imports.
        plain = next(m for m in report["metrics"] if m["name"] == f"step_time[rank{rank}]")
        assert len(plain["samples"]) == 4 and max(plain["samples"]) < 1.0, plain
    # Each profiler's overhead compares measured steps with the baseline's measured steps;
    # where other programs' load moved between the runs there is none, and the note says so
    # (the suite beside other work: the verdict is the code's, not the machine's).
    for name in ("torch", "pyspy"):
        overhead = overhead_of(backend(report, name))
        if overhead is not None:
            assert overhead["basis"] == "step" and overhead["baseline_n"] == 4, (name, overhead)


def test_a_training_thread_s_steps_end_the_run(perfstack: Callable[..., Result]) -> None:
    """A loop that steps in a worker thread while the main thread joins it (it never ended
    before: its steps were ignored, the main thread waited): its steps count, the main thread
    is ended where it waits, and a thread blocked for ever gets a bounded wait and a line."""
    result = perfstack("run", "--steps", "3", "--warmup-steps", "1", "--plugins", "resources",
                       "--repeat", "1", "--warmup", "0", "-q", "--timeout", "60",
                       str(WORKLOADS / "thread_steps.py"), timeout=120)
    assert result.code == 0, result.stderr
    folder = result.cwd / ".perfstack" / "runs" / "latest" / "baseline-1"
    steps = _steps_of(folder)
    assert steps["steps"] == 4 and len(steps["step_times_s"]) == 4, steps
    assert "trained" not in (folder / "stdout.log").read_text()  # the join was ended
    stderr = (folder / "stderr.log").read_text()
    assert "Traceback" not in stderr  # the thread the limit ended ends quietly
    assert "1 of its threads still ran 2 s later" in stderr and "feeder" in stderr, stderr


def test_a_batch_with_an_optimizer_step_and_perfstack_step_is_one_step(
        perfstack: Callable[..., Result]) -> None:
    """opt.step() and perfstack.step() in every batch: the first batch is one step, not two,
    so --steps 3 --warmup-steps 1 ends the run after 4 batches; one duration and one
    resident-memory figure a step, the durations from the first step on (--steps)."""
    result = perfstack("run", "--steps", "3", "--warmup-steps", "1", "--plugins", "resources",
                       "--repeat", "1", "--warmup", "0", "-q",
                       str(WORKLOADS / "both_steps.py"), timeout=120)
    assert result.code == 0, result.stderr
    folder = result.cwd / ".perfstack" / "runs" / "latest" / "baseline-1"
    marks = _steps_of(folder)
    assert marks["steps"] == 4
    assert len(marks["step_times_s"]) == len(marks["step_rss_bytes"]) == 4
    assert marks["first_timed_step"] == 1
    # The 4th step ended the run in perfstack.step(), after the loop counted its batch.
    assert "finished 4 batches" in (folder / "stdout.log").read_text()


def test_forked_workers_steps_do_not_count(perfstack: Callable[..., Result]) -> None:
    """Forked pool workers calling perfstack.step(): the run ends after the main process's own
    1 + 3 steps, cleanly (a worker ending itself there hung the pool)."""
    result = perfstack("run", "--steps", "3", "--warmup-steps", "1", "--plugins", "resources",
                       "--repeat", "1", "--warmup", "0", "-q", "--timeout", "60",
                       str(WORKLOADS / "forked_steps.py"), timeout=120)
    assert result.code == 0, result.stderr
    folder = result.cwd / ".perfstack" / "runs" / "latest" / "baseline-1"
    assert _steps_of(folder)["steps"] == 4
    assert "finished 4 batches" in (folder / "stdout.log").read_text()


def test_steps_that_never_ran_are_not_stated(perfstack: Callable[..., Result],
                                              tmp_path: Path) -> None:
    """A workload that makes 7 steps under --steps 10: the header says the workload ended
    first and at how many steps, never "each run ended after 2 warm-up + 10 measured steps";
    every run record keeps the steps it reached."""
    script = tmp_path / "seven.py"
    script.write_text("import perfstack\nfor _ in range(7):\n    perfstack.step()\n")
    result = perfstack("run", "--steps", "10", "--warmup-steps", "2", "--plugins", "resources",
                       "--repeat", "2", "--warmup", "0", str(script), env={"COLUMNS": "100"})
    assert result.code == 0, result.stderr
    report = result.report()
    assert [r["steps"] for r in report["run"]["runs"]] == [7, 7], report["run"]["runs"]
    assert "each run ended after" not in result.stdout
    assert ("--steps asked for 2 warm-up + 10 measured steps, but the workload ended first in "
            "2 runs (7 steps)") in " ".join(result.stdout.split()), result.stdout[:800]
