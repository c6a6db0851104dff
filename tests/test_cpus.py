"""Usable CPUs and oversubscription: one definition, and the finding and the sweep agree."""

from __future__ import annotations

import copy

from perfstack.analysis import rules
from perfstack.machine import cpus
from perfstack.report.files import load_report
from perfstack.run.compare import sweep
from tests.conftest import ROOT


def test_usable_cpus_from_a_report_and_from_here() -> None:
    assert cpus.usable_cpus({"cpu": {"affinity": [0, 2, 3], "logical_cpus": 8}}) == 3
    assert cpus.usable_cpus({"cpu": {"logical_cpus": 8}}) == 8
    assert cpus.usable_cpus({"cpu": {}}) is None and cpus.usable_cpus({}) is None
    here = cpus.usable_cpus()
    assert here is not None and here >= 1


def test_threads_per_process_and_processes() -> None:
    assert cpus.oversubscription({"OMP_NUM_THREADS": "2"}, {"intra_op_threads": 2}, 2) is None
    found = cpus.oversubscription({"OMP_NUM_THREADS": "4"}, {"intra_op_threads": 4}, 2)
    assert found is not None and (found.threads, found.cpus) == (4, 2)
    two = cpus.oversubscription({}, {"intra_op_threads": 2}, 2, processes=2)
    assert two is not None and two.threads == 4 and "x 2 processes" in two.describe()
    # Python threads x torch's pool each
    both = cpus.oversubscription({"PERFSTACK_THREADS": "2"}, {"intra_op_threads": 2}, 2)
    assert both is not None and both.per_process == 4
    assert cpus.oversubscription({"OMP_NUM_THREADS": "x"}, None, 2) is None
    assert cpus.oversubscription({"OMP_NUM_THREADS": "64"}, None, None) is None  # CPUs unknown


def test_the_finding_and_the_sweep_count_alike() -> None:
    report = copy.deepcopy(load_report(ROOT / "tests/fixtures/reports/v1-busy.json"))
    report.environment["cpu"] = {"affinity": [0, 1], "logical_cpus": 2}
    report.environment["torch"] = {"intra_op_threads": 4}
    report.environment["threads"] = {"OMP_NUM_THREADS": "4"}
    found = [f for f in rules.perfstack_findings(report) if f.rule == "threads.oversubscribed"]
    assert found and found[0].title == "4 compute threads on 2 CPUs"
    warning = sweep.oversubscription({"OMP_NUM_THREADS": "4"}, report)
    assert warning is not None and found[0].evidence[0] in warning
