"""CPython's garbage collector by phase: timed inside the workload, and the GC finding judged
on the collector's time outside imports (a collection during ``import torch`` is start-up)."""

from __future__ import annotations

import gc
import importlib
import json
import sys
from pathlib import Path

import pytest
from perfstack_plugins import gcphase

from perfstack.report import Better, Metric, Report
from perfstack.report.files import load_report
from tests.conftest import ROOT

#: A real run of rules_zoo.py's tiny ops under perf record (tests/fixtures/reports/README.md),
#: recorded before the phases were timed: perf record put 20% of its samples in the collector.
TINY_OPS = ROOT / "tests/fixtures/reports/rules/tiny_ops.json.gz"


def test_collections_are_timed_by_phase(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A collection inside a module's import is filed under imports; one called by the
    running code, under run; both are written when the workload ends."""
    (tmp_path / "collects_on_import.py").write_text("import gc\nfor _ in range(3):\n"
                                                     "    gc.collect()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    callbacks = list(gc.callbacks)
    finish = gcphase.start({}, str(tmp_path))
    try:
        importlib.import_module("collects_on_import")
        for _ in range(2):
            gc.collect()
    finally:
        finish()
        sys.modules.pop("collects_on_import", None)
    assert gc.callbacks == callbacks  # removed when the workload ends
    data = json.loads((tmp_path / gcphase.RESULT).read_text())
    assert data["imports"]["collections"] >= 3 and data["run"]["collections"] >= 2, data
    assert data["imports"]["seconds"] > 0 and data["run"]["seconds"] > 0
    metrics, notes = gcphase.metrics(tmp_path, "perftop")
    assert {m.name for m in metrics} == {"gc_time_run", "gc_time_imports"}
    assert notes and "during imports" in notes[0]


def test_no_record_is_said_not_zero(tmp_path: Path) -> None:
    metrics, notes = gcphase.metrics(tmp_path, "perftop")
    assert metrics == [] and "unknown" in notes[0]


def _with_phases(report: Report, imports: float, run: float) -> Report:
    report.metrics = [m for m in report.metrics if not m.name.startswith("gc_time_")] + [
        Metric("gc_time_imports", imports, "s", "python", "perftop", Better.LOWER),
        Metric("gc_time_run", run, "s", "python", "perftop", Better.LOWER)]
    return report


def test_collections_during_imports_are_not_a_gc_finding() -> None:
    """perf's 20% in the collector: all of it during imports, no finding (gc.freeze() in the
    loop cannot help start-up); most of it in the run, the finding, with the split as
    evidence; without the phases (older reports), judged on perf's share as before."""
    [before] = gcphase.finding(load_report(TINY_OPS), "perftop")
    assert before.rule == "python.gc" and "outside imports" not in before.title
    assert gcphase.finding(_with_phases(load_report(TINY_OPS), 0.49, 0.0), "perftop") == []
    [found] = gcphase.finding(_with_phases(load_report(TINY_OPS), 0.05, 0.45), "perftop")
    assert "outside imports" in found.title
    assert any("0.450 s outside imports" in e for e in found.evidence), found.evidence
