"""A busy machine is measured, not guessed: runs that competed with other programs for the
CPUs say so first, and the profilers are not blamed for the slowdown.

The plain-data tests give a recorded report the machine's load its runs would have recorded;
the live one starts two busy loops beside a real run, as the issue's busy machine was made.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfstack.analysis import rules
from perfstack.analysis.view import build
from perfstack.render.words.common import answer_lines
from perfstack.report import Overhead, Report, Status, order_findings
from perfstack.report.files import load_report
from tests.conftest import ROOT, perfstack_env

RECORDED = load_report(ROOT / "tests/fixtures/reports/ab_mlp/base.json.gz")
QUIET = {"others_cpus": 0.02, "steal": 0.0, "cpus": 2}
BUSY = {"others_cpus": 1.4, "steal": 0.0, "cpus": 2}


def _with_load(busy_ids: set[str]) -> Report:
    report = copy.deepcopy(RECORDED)
    for r in report.run.runs:
        r.machine_load = dict(BUSY if r.id in busy_ids else QUIET)
    return report


def _answer(report: Report) -> list[str]:
    report.findings = order_findings([*rules.perfstack_findings(report)])
    return answer_lines(build(report))


def test_a_busy_machine_leads_the_answer() -> None:
    baselines = {r.id for r in RECORDED.run.runs if r.role == "baseline"}
    report = _with_load(baselines)
    found = [f for f in rules.perfstack_findings(report) if f.rule == "run.busy-machine"]
    assert len(found) == 1, found
    busy = found[0]
    assert busy.severity == "critical"
    assert busy.title == (f"the machine was busy: other programs kept up to 1.4 CPUs busy "
                          f"during {len(baselines)} of {len(report.run.runs)} runs")
    assert "OMP_NUM_THREADS=1" in busy.action
    answer = _answer(report)
    assert answer[0].startswith("The machine was busy: other programs kept up to 1.4 CPUs"), \
        answer
    assert "not the workload's alone" in answer[0]


def test_a_quiet_machine_says_nothing_of_it() -> None:
    report = _with_load(set())
    assert not [f for f in rules.perfstack_findings(report) if f.rule == "run.busy-machine"]
    assert not _answer(report)[0].startswith("The machine was busy")


def test_a_crash_still_comes_before_a_busy_machine() -> None:
    report = _with_load({r.id for r in RECORDED.run.runs})
    from perfstack.report import Finding

    crash = Finding("run.crashed", "the workload raised RuntimeError", "run", "critical",
                    [], "fix it", "perfstack")
    ordered = order_findings([*rules.perfstack_findings(report), crash])
    assert [f.rule for f in ordered[:2]] == ["run.crashed", "run.busy-machine"]


def test_the_profilers_are_not_blamed_for_other_programs() -> None:
    """A backend whose run other programs slowed is not 'slowed the workload 5x'; nor is any
    backend when the baseline runs themselves competed (no overhead can be stated)."""
    report = copy.deepcopy(RECORDED)
    backend = next(b for b in report.backends if b.status == Status.OK and b.run)
    backend.overhead = Overhead(5.0, 1.0, 0.01, 5)
    for r in report.run.runs:
        r.machine_load = dict(QUIET)

    def blamed(rep: Report) -> list[str]:
        return [f.title for f in rules.perfstack_findings(rep) if f.rule == "run.high-overhead"]

    assert blamed(report) == [f"{backend.name} slowed the workload 5.00x"]
    own = next(r for r in report.run.runs if r.id == backend.run)
    own.machine_load = dict(BUSY)
    assert blamed(report) == []
    own.machine_load = dict(QUIET)
    for r in report.run.runs:
        if r.role == "baseline":
            r.machine_load = dict(BUSY)
    assert blamed(report) == []


def test_a_run_beside_two_busy_loops_says_the_machine_was_busy(tmp_path: Path) -> None:
    """Live: two busy loops on this 2-CPU machine, each in a session of its own, beside a
    real run: every run recorded the other programs, and the first screen says so first."""
    script = tmp_path / "work.py"
    script.write_text("total = 0\nfor i in range(3_000_000):\n    total += i % 7\n")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             start_new_session=True) for _ in range(2)]
    try:
        proc = subprocess.run([sys.executable, "-m", "perfstack", "run", "--plugins",
                               "resources", "--repeat", "2", "--warmup", "0", "-o", "r.json",
                               str(script)], cwd=tmp_path, capture_output=True, text=True,
                              env=perfstack_env({"COLUMNS": "80", "PERFSTACK_HISTORY": "off"}),
                              timeout=300)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    loads = [r["machine_load"]["others_cpus"] for r in data["run"]["runs"]]
    assert loads and min(loads) > 0.5, loads
    answer = next(ln for ln in proc.stdout.splitlines()
                  if ln.strip().startswith("The machine was"))
    assert "other programs kept up to" in answer, proc.stdout[:1500]


def test_a_diff_of_busy_runs_says_so_under_its_headline() -> None:
    from perfstack.analysis.diff import diff
    from perfstack.render.diff import render_markdown, render_text

    new = load_report(ROOT / "tests/fixtures/reports/ab_mlp/new.json.gz")
    base = _with_load({r.id for r in RECORDED.run.runs if r.role == "baseline"})
    quiet = diff(_with_load(set()), new)
    assert quiet.lead is not None and quiet.lead.busy is None
    d = diff(base, new)
    assert d.lead is not None and d.lead.busy is not None
    assert d.lead.busy.startswith("the machine was busy: other programs kept up to 1.4 CPUs")
    text = render_text(d, width=100).splitlines()
    assert text[4].startswith("the machine was busy"), text[:8]
    assert "**the machine was busy" in render_markdown(d)


def test_openmp_spinning_is_measured_beside_the_busy_machine() -> None:
    """On a busy machine, what torch's OpenMP pool took is evidence of its own: its part of
    the wall time where a sampler measured the budget (perf's split of the native part), its
    part of the CPU time where perf alone did; nothing where neither ran."""
    from perfstack.report import Better, Metric

    tiny = load_report(ROOT / "tests/fixtures/reports/rules/tiny_ops.json.gz")
    for r in tiny.run.runs:
        r.machine_load = dict(BUSY)
    tiny.metrics.append(Metric("split.openmp", 40.0, "%", "kernel", "perftop", Better.NEITHER))
    [busy] = [f for f in rules.perfstack_findings(tiny) if f.rule == "run.busy-machine"]
    spun = [e for e in busy.evidence if "OpenMP" in e]
    assert len(spun) == 1 and "of the wall time (pyspy + perftop)" in spun[0], busy.evidence
    tiny.metrics = [m for m in tiny.metrics if not m.name.startswith("budget.")]
    [busy] = [f for f in rules.perfstack_findings(tiny) if f.rule == "run.busy-machine"]
    assert any("40% of the CPU time outside the interpreter (perftop)" in e
               for e in busy.evidence), busy.evidence
    [plain] = [f for f in rules.perfstack_findings(_with_load({r.id for r in RECORDED.run.runs}))
               if f.rule == "run.busy-machine"]
    assert not any("OpenMP" in e for e in plain.evidence)


def _outcome(tmp: Path, label: str, wall: float, others: float) -> Any:
    from perfstack.plugin.backend import Outcome
    from perfstack.report import ExitInfo, RunRecord

    record = RunRecord(label, "baseline" if label.startswith("baseline") else "backend",
                       None, ["python", "w.py"], "", wall, ExitInfo("exited", 0),
                       machine_load={"others_cpus": others, "steal": 0.0, "cpus": 2})
    return Outcome(record, tmp, None, None)


def test_an_overhead_the_load_explains_is_unknown(tmp_path: Path) -> None:
    """A drifting load: the baseline ran while other programs kept 1.5 CPUs busy, a
    backend's run on a quiet machine: '0.36x' was printed as the profiler's overhead. It is
    unknown, and says why; a run faster than a profiler can make it is unknown too."""
    from perfstack.run.baseline import overhead

    busy = [_outcome(tmp_path, f"baseline-{i}", 10.0 + i / 10, 1.5) for i in range(3)]
    quiet = _outcome(tmp_path, "torch", 3.6, 0.0)
    found, why = overhead(quiet, busy, 3, None)
    assert found is None and why is not None and why.startswith("unknown (the load changed)")
    steady = [_outcome(tmp_path, f"baseline-{i}", 10.0 + i / 10, 0.0) for i in range(3)]
    found, why = overhead(quiet, steady, 3, None)
    assert found is None and why is not None and "faster than a profiler can make it" in why
    found, why = overhead(_outcome(tmp_path, "torch", 13.0, 0.1), steady, 3, None)
    assert found is not None and why is None and found.ratio == pytest.approx(1.3, abs=0.02)
