"""The report's run-level figures, from plain data (perfstack.run.assembly): no process started."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfstack.plugin.backend import Collected
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Row, Status
from perfstack.run.assembly import (
    instruction_metric,
    left_running,
    malformed,
    merge_rank,
    overhead,
    status_of,
    wall_metric,
    workload_metrics,
)


def test_the_wall_time_is_the_median_of_the_clean_runs_and_unknown_without_one() -> None:
    m = wall_metric([2.0, 3.0, 2.5])
    assert m.value == 2.5 and m.samples == [2.0, 3.0, 2.5]
    none = wall_metric([])
    assert none.value is None and none.reason == "no baseline run finished cleanly"


def test_instructions_only_when_every_run_was_counted() -> None:
    assert instruction_metric([10, 12, 11])[0].value == 11
    assert instruction_metric([10, None]) == []  # unknown is not zero: no metric at all
    assert instruction_metric([]) == []


def test_the_workload_s_own_metrics_take_the_last_value_of_each_run() -> None:
    runs = [[{"name": "throughput", "value": 1.0, "unit": "x/s", "better": "higher"},
             {"name": "throughput", "value": 2.0, "unit": "x/s", "better": "higher"}],
            [{"name": "throughput", "value": 4.0, "unit": "x/s", "better": "higher"}]]
    (m,) = workload_metrics(runs)
    assert m.samples == [2.0, 4.0] and m.value == 3.0 and m.source == "workload"


def test_overhead_is_against_the_clean_baseline() -> None:
    ratio, why = overhead([2.0, 2.0, 2.0], 3.0, clean=True)
    assert ratio is not None and ratio.ratio == 1.5 and why is None
    assert overhead([], 3.0, clean=True) == (
        None, "no baseline run finished cleanly to compare with")
    assert overhead([2.0], 3.0, clean=False)[0] is None


def test_a_status_says_how_the_run_ended() -> None:
    assert status_of("timeout", False) is Status.TIMEOUT
    assert status_of("interrupted", False) is Status.INTERRUPTED
    assert status_of("exited", True) is Status.OK
    assert status_of("signalled", False) is Status.CRASHED


def test_ranks_are_named_when_there_are_several() -> None:
    part = Collected(rows={Layer.PYTHON: [Row("f (x.py:1)", "f", "b", {"t": Quantity(1.0, "s")},
                                              links={"framework": ["aten::mm"]})]},
                     metrics=[Metric("m", 1.0, "s", "run", "b", Better.LOWER)],
                     artifacts={"log": Path("a.log")}, notes=["hi"])
    merged = Collected()
    merge_rank(merged, part, 1, prefix=True)
    row = merged.rows[Layer.PYTHON][0]
    assert row.key == "rank1:f (x.py:1)" and row.links["framework"] == ["rank1:aten::mm"]
    assert row.attrs["rank"] == 1 and merged.metrics[0].name == "m[rank1]"
    assert "log.rank1" in merged.artifacts and merged.notes == ["rank 1: hi"]


def test_records_that_do_not_fit_the_schema_are_named() -> None:
    bad = Collected(rows={Layer.PYTHON: [Row("", "x", "b", {})]})
    assert malformed(bad) and "python row ''" in malformed(bad)[0]
    assert malformed(Collected(rows={"python": []})) == [  # type: ignore[dict-item]
        "rows under 'python', which is not a perfstack.Layer"]


def test_processes_left_behind_become_one_finding() -> None:
    assert left_running([]) == []
    (f,) = left_running([("baseline-1", ["pid 1: a", "pid 2: b"]), ("torch", ["pid 3: c"])])
    assert isinstance(f, Finding) and f.rule == "run.left-running" and "3 processes" in f.title
    assert f.evidence == ["baseline-1: pid 1: a", "baseline-1: pid 2: b", "torch: pid 3: c"]


def test_the_run_folder_readers_keep_what_is_whole(tmp_path: Path) -> None:
    """The run folder's one reader (perfstack.runfolder.rundir.RunFolder), on files as a killed run
    leaves them: a torn file reads as unknown, never as 0 or as an error."""
    from perfstack.runfolder.filenames import (
        HOOK_ERRORS_FILE,
        METRICS_FILE,
        STARTED_FILE,
        STEPS_FILE,
    )
    from perfstack.runfolder.rundir import RunFolder, WorkloadRun

    run = RunFolder(tmp_path)
    assert run.started() is None and run.steps() is None and run.step_times() == []
    assert run.outcome() == WorkloadRun(None, None, None, [])
    (tmp_path / STARTED_FILE).write_text('{"pid": 12, "start_ns": 34}')
    (tmp_path / STEPS_FILE).write_text('{"steps": "x", "step_times_s": [0.5, "y", 0.25]}')
    assert run.started() == (12, 34) and run.steps() is None
    assert run.outcome() == WorkloadRun(12, 34, None, [0.5, 0.25])
    (tmp_path / STEPS_FILE).write_text('{"steps": 3, "step_times_s": [0.5, 0.2')  # torn
    assert run.steps() is None and run.step_times() == []
    (tmp_path / METRICS_FILE).write_text(
        '{"name": "throughput", "value": 5, "unit": "x/s"}\n{"name": "thr\n'
        '{"name": "bad", "value": NaN}\n')
    assert run.workload_metrics() == [
        {"name": "throughput", "value": 5.0, "unit": "x/s", "better": "higher"}]
    assert run.rank() == run and run.ranks() == []
    # under torchrun: the workload's own files are the lowest rank's, each rank asked by name
    for rank, steps in ((3, 7), (2, 6)):
        (tmp_path / f"rank-{rank}").mkdir()
        (tmp_path / f"rank-{rank}" / STEPS_FILE).write_text(
            f'{{"steps": {steps}, "step_times_s": [1.0]}}')
    (tmp_path / "rank-x").mkdir()
    assert run.ranks() == [2, 3] and run.rank() == run.rank(2)
    assert run.steps() == 6 and run.steps(3) == 7 and run.outcome(3).steps == 7
    assert run.workload_metrics() == []  # rank 2 wrote none
    (tmp_path / "rank-3" / HOOK_ERRORS_FILE).write_text("boom")
    assert run.hook_errors([2, 3]) == [tmp_path / "rank-3" / HOOK_ERRORS_FILE]
    assert run.hook_errors([2]) == []


def test_the_step_time_is_the_baselines_measured_steps() -> None:
    """Under --steps 3 + 2 each run's times start at the script's start: the first three are
    warm-up (the first holds the imports); every measured step of every run is a sample;
    without --steps every time is between two steps; no steps, no metric."""
    from perfstack.run.assembly import step_metric

    [plain] = step_metric([[2.5, 0.1, 0.1, 0.2, 0.1], [2.4, 0.3, 0.1, 0.1, 0.3]], 3, 2)
    assert plain.name == "step_time" and plain.source == "baseline"
    assert plain.samples == [0.2, 0.1, 0.1, 0.3] and plain.value == pytest.approx(0.15)
    assert plain.samples_of == "steps"
    [every] = step_metric([[0.5, 0.1, 0.3]])
    assert every.samples == [0.5, 0.1, 0.3] and every.value == 0.3
    assert step_metric([[], []]) == [] and step_metric([[2.0]], 5, 2) == []
