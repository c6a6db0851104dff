"""Machine drift is not a change: the probe, the between-session noise and the paired test.

These are the pure parts, tested with plain data built on a real recorded report: how diff
judges two separate sessions whose machine moved, and two interleaved (ab) sides. The real runs
(competing load, perfstack ab on scripts and git revisions) are in test_ab.py.
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import subprocess
import sys

import pytest

from perfstack.analysis.diff import diff
from perfstack.analysis.diff.drift import corrected, machine_drift, run_speed
from perfstack.analysis.stats import compare_paired
from perfstack.machine import counters
from perfstack.report import Better, Metric, Quantity, Report
from perfstack.report.files import load_report
from tests.conftest import ROOT

RECORDED = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")


def session(throughput: list[float], probe_s: list[float],
            instructions: list[int | None] | None = None) -> Report:
    """A recorded report whose baseline runs have these probe times and throughputs."""
    report = copy.deepcopy(RECORDED)
    base = report.run.runs[1]
    report.run.runs = [report.run.runs[0]]
    for i, (rate, probe) in enumerate(zip(throughput, probe_s, strict=True)):
        run = copy.deepcopy(base)
        run.id, run.wall_s = f"baseline-{i + 1}", 10 / rate
        run.probe = {"start": {"python_s": probe, "native_s": 0.0006},
                     "end": {"python_s": probe, "native_s": 0.0006}}
        if instructions is not None:
            run.instructions = Quantity(instructions[i], "count",
                                        None if instructions[i] else "cannot count here")
        report.run.runs.append(run)
    walls = [10 / r for r in throughput]
    report.metrics = [
        Metric("wall_time", statistics.median(walls), "s", "run", "baseline", Better.LOWER,
               samples=walls),
        Metric("throughput", statistics.median(throughput), "steps/s", "run", "workload",
               Better.HIGHER, samples=throughput)]
    report.layers = {layer: [] for layer in report.layers}
    return report


def metric(result: object, name: str) -> object:
    return next(m for m in result.metrics if m.name == name)  # type: ignore[attr-defined]


A = [38.4, 38.6, 38.5, 38.3, 38.7]
FAST = [0.0023, 0.00231, 0.00229, 0.0023, 0.00232]


def test_the_probe_is_the_geometric_mean_of_its_two_measurements() -> None:
    run = copy.deepcopy(RECORDED.run.runs[1])
    run.probe = {"start": {"python_s": 0.002, "native_s": 1e-3},
                 "end": {"python_s": 0.008, "native_s": 1e-3}}
    assert run_speed(run) == pytest.approx(0.004)
    run.probe = None
    assert run_speed(run) is None


def test_drift_that_the_probe_saw_is_not_a_change() -> None:
    """B's machine ran 14% slower and the workload 17% slower: significant within each
    session, but within what the machine moved, and said so; never gated."""
    b = [r / 1.17 for r in A]
    result = diff(session(A, FAST), session(b, [p * 1.14 for p in FAST]))
    assert result.machine.change == pytest.approx(0.14)
    assert "14% slower" in result.machine.describe()
    m = metric(result, "throughput")
    assert m.verdict == "within noise", m  # type: ignore[attr-defined]
    assert "within what the machine moved" in m.reason  # type: ignore[attr-defined]
    assert result.regressions(0.05) == []


def test_drift_the_probe_did_not_see_is_judged_against_the_session_noise() -> None:
    """An 8% move with a steady probe: significant by the t-test, within the 10% band."""
    result = diff(session(A, FAST), session([r / 1.08 for r in A], FAST))
    m = metric(result, "throughput")
    assert m.verdict == "within noise" and "between-session noise" in m.reason, m  # type: ignore[attr-defined]


def test_a_real_change_is_caught_on_a_steady_or_a_slower_machine() -> None:
    """30% more work: a regression on a steady machine, and on one 50% slower (raw +95%)."""
    more = [r / 1.3 for r in A]
    steady = diff(session(A, FAST), session(more, FAST))
    assert metric(steady, "throughput").verdict == "regression"  # type: ignore[attr-defined]
    assert {m.name for m in steady.regressions(0.05)} == {"wall_time", "throughput"}
    loaded = diff(session(A, FAST), session([r / 1.5 for r in more], [p * 1.5 for p in FAST]))
    m = metric(loaded, "throughput")
    assert m.verdict == "regression", m  # type: ignore[attr-defined]
    assert m.corrected_change == pytest.approx(1 / 1.3 - 1, abs=0.01)  # type: ignore[attr-defined]
    same = diff(session(A, FAST), session([r / 1.5 for r in A], [p * 1.5 for p in FAST]))
    assert metric(same, "throughput").verdict == "within noise"  # type: ignore[attr-defined]


def test_a_machine_that_moved_more_than_the_change_cannot_be_judged() -> None:
    """The probe says the machine ran 60% slower, the workload 13% slower: corrected, that
    would be a 39% improvement. The two disagree, so the diff says it cannot tell (never a
    regression nor an improvement) and why; a machine 27% faster can hide a 30% slowdown the
    same way."""
    result = diff(session(A, FAST), session([r / 1.15 for r in A], [p * 1.6 for p in FAST]))
    m = metric(result, "throughput")
    assert m.verdict == "cannot judge" and "perfstack ab" in m.reason, m  # type: ignore[attr-defined]
    hidden = diff(session(A, FAST), session([r / 1.3 * 1.3 * 0.93 for r in A],
                                            [p * 0.727 for p in FAST]))
    assert metric(hidden, "throughput").verdict == "cannot judge"  # type: ignore[attr-defined]
    assert hidden.regressions(0.05) == []


def test_correction_applies_to_times_and_rates_only() -> None:
    assert corrected(0.3, 0.5, "s") == pytest.approx(1.3 / 1.5 - 1)
    assert corrected(-0.35, 0.5, "steps/s") == pytest.approx(0.65 * 1.5 - 1)
    assert corrected(0.3, 0.5, "B") == 0.3
    assert corrected(0.3, None, "s") == 0.3


def test_instruction_counts_say_whether_the_work_changed() -> None:
    same = machine_drift(session(A, FAST, [10**9] * 5), session(A, FAST, [10**9 + 10**5] * 5))
    assert same.instructions_change == pytest.approx(1e-4)
    assert "the same number of instructions" in same.describe()
    unknown = machine_drift(session(A, FAST, [None] * 5), session(A, FAST, [None] * 5))
    assert unknown.instructions_change is None
    assert unknown.instructions_note == "cannot count here"
    assert "instructions not counted" in unknown.describe()


def test_paired_t_test_matches_a_hand_computation() -> None:
    base = [1.0, 1.1, 1.2, 0.9, 1.0]
    new = [1.3, 1.45, 1.5, 1.2, 1.31]
    logs = [math.log(b / a) for a, b in zip(base, new, strict=True)]
    t = statistics.fmean(logs) / (statistics.stdev(logs) / math.sqrt(5))
    result = compare_paired(base, new)
    assert result.statistic == pytest.approx(t)
    assert result.significant and result.test == "paired t-test"
    assert result.change == pytest.approx(math.exp(statistics.fmean(logs)) - 1)
    # Drift common to both runs of a pair cancels: each pair moved together by up to 40%.
    drifting = [1.0, 1.4, 0.8, 1.2, 1.1]
    assert not compare_paired(drifting, [x * 1.005 for x in drifting[:-1]] + [1.1]).significant
    assert compare_paired([1.0], [2.0]).significant is None


def test_interleaved_reports_are_paired_and_skip_the_session_band() -> None:
    """Two sides of one ab session: the paired test decides, with no between-session band."""
    a, b = session(A, FAST), session([r / 1.06 for r in A], FAST)
    a.run.pairing, b.run.pairing = {"id": "x1", "side": "base"}, {"id": "x1", "side": "new"}
    result = diff(a, b)
    m = metric(result, "throughput")
    assert m.test == "paired t-test" and m.verdict == "regression", m  # type: ignore[attr-defined]
    assert result.machine.paired and "interleaved" in result.machine.describe()
    b.run.pairing = {"id": "other", "side": "new"}
    assert metric(diff(a, b), "throughput").test != "paired t-test"  # type: ignore[attr-defined]


def test_a_child_process_is_counted_with_everything_it_starts() -> None:
    """The kernel's counter follows the child's threads: task-clock (a software event this VM
    has) agrees with the OS's CPU time of the whole process."""
    # The child waits for a line on stdin, so all of its work happens after the counter is
    # open; only its start-up (tens of ms, against about a second of work) is not counted.
    code = ("import sys, threading\nsys.stdin.readline()\n"
            "def work():\n    sum(i * i for i in range(4_000_000))\n"
            "threads = [threading.Thread(target=work) for _ in range(2)]\n"
            "[t.start() for t in threads]\nwork()\n[t.join() for t in threads]\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    counter = counters.open_counter(proc.pid, counters.SOFTWARE_TASK_CLOCK)
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    counted = counter.read() / 1e9
    counter.close()
    cpu = usage.ru_utime + usage.ru_stime
    assert 0.85 * cpu < counted <= cpu * 1.02, (counted, cpu)


def test_instructions_are_counted_or_unknown_with_the_reason() -> None:
    """Hardware counters: counted where the machine has them, else an explanation, never 0."""
    proc = subprocess.Popen([sys.executable, "-c", "sum(range(10**6))"])
    try:
        counter = counters.open_counter(proc.pid)
    except counters.CounterUnavailable as exc:
        assert "instructions" in str(exc)
        proc.wait()
        return
    proc.wait()
    assert counter.read() > 10**6
    counter.close()
